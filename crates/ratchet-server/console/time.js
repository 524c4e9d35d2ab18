// Times in the viewer's time zone, with the exact UTC time on hover; durations and ages.

import { h } from './dom.js';

// The calendar Ratchet stores and shows: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z.
const FIRST_MS = -62135596800000;
const LAST_MS = 253402300799999;

/**
 * A Date from an RFC 3339 string or milliseconds since the epoch (null when absent or not a
 * time). A time outside the calendar (a history written by an older version) becomes the
 * nearest end of it, so no formatting below throws.
 */
export function toDate(value) {
  if (value === null || value === undefined || value === '') return null;
  const ms = typeof value === 'number' ? value : new Date(String(value)).getTime();
  if (Number.isNaN(ms)) return null;
  return new Date(Math.min(LAST_MS, Math.max(FIRST_MS, ms)));
}

const sameDay = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const sameYear = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
const full = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });

/** The local time, shorter when it is today or this year. */
export function localText(date) {
  if (!date || Number.isNaN(date.getTime())) return '—';
  const now = new Date();
  if (date.toDateString() === now.toDateString()) return sameDay.format(date);
  if (date.getFullYear() === now.getFullYear()) return sameYear.format(date);
  return full.format(date);
}

/** The exact UTC time: `2026-05-01 12:00:00.123 UTC`. */
export function utcText(date) {
  if (!date || Number.isNaN(date.getTime())) return '—';
  return date.toISOString().replace('T', ' ').replace('Z', ' UTC');
}

/** A <time> element: local time shown, exact UTC in its title; '—' when absent. */
export function timeEl(value, { ago: withAgo = false } = {}) {
  const date = toDate(value);
  if (!date) return h('span', { class: 'muted' }, '—');
  const text = localText(date) + (withAgo ? ` (${ago(date)})` : '');
  return h('time', { datetime: date.toISOString(), title: utcText(date) }, text);
}

/** A duration in words: `850 ms`, `3.2 s`, `4 m 12 s`, `2 h 3 m`, `3 d 4 h`. */
export function duration(ms) {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m ${Math.round(s % 60)} s`;
  const hours = Math.floor(m / 60);
  if (hours < 24) return `${hours} h ${m % 60} m`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

/** How long ago: `12 s ago`, `3 m ago`, `in 5 m` for the future. */
export function ago(date) {
  const ms = Date.now() - date.getTime();
  if (Math.abs(ms) < 1500) return 'just now';
  return ms >= 0 ? `${duration(ms)} ago` : `in ${duration(-ms)}`;
}

/** An RFC 3339 string from a datetime-local input's value (local time), or '' if empty. */
export function fromLocalInput(value) {
  if (!value) return '';
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

/** A datetime-local input's value for an RFC 3339 string. */
export function toLocalInput(value) {
  const d = toDate(value);
  if (!d) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** Relative ranges a filter may name (`since=1h`), in milliseconds. */
export const RANGES = { '15m': 15 * 60e3, '1h': 3600e3, '6h': 6 * 3600e3, '24h': 24 * 3600e3, '7d': 7 * 24 * 3600e3 };
