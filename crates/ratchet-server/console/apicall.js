// After an action, the API calls it made (method, path, body, status) and the same as a
// curl command, so an operator can script what they just did.

import { h } from './dom.js';
import { session } from './api.js';
import { copyButton } from './copy.js';

function shellQuote(text) {
  return `'${String(text).replace(/'/g, `'\\''`)}'`;
}

/** The curl command equivalent to `call` (the token left as $RATCHET_TOKEN, never shown). */
export function curl(call) {
  const parts = ['curl -s'];
  if (call.method !== 'GET') parts.push(`-X ${call.method}`);
  parts.push(shellQuote(location.origin + call.path));
  if (session.auth) parts.push('-H "Authorization: Bearer $RATCHET_TOKEN"');
  if (call.body !== undefined) {
    parts.push("-H 'content-type: application/json'");
    parts.push(`-d ${shellQuote(JSON.stringify(call.body))}`);
  }
  return parts.join(' ');
}

/**
 * A panel listing `calls` (each `{method, path, body, status}`), with `summary` above them.
 * Many calls of one action (a bulk cancel) are listed compactly, the first with its curl.
 */
export function apiCallPanel(calls, { summary = null, onDismiss = null } = {}) {
  const list = calls.filter(Boolean);
  const first = list[0];
  const ok = list.every((c) => c.status && c.status < 400);
  return h('section', { class: `api-call ${ok ? 'ok' : 'bad'}`, 'data-testid': 'api-call', 'aria-label': 'API call made' },
    h('header', { class: 'api-call-head' },
      h('h3', {}, list.length > 1 ? `The ${list.length} API calls made` : 'The API call made'),
      onDismiss ? h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Dismiss', title: 'Dismiss', onclick: onDismiss }, '×') : null),
    summary ? h('p', { class: 'api-call-summary', 'data-testid': 'api-call-summary' }, summary) : null,
    h('ul', { class: 'api-call-list' }, list.slice(0, 50).map((c) =>
      h('li', {},
        h('code', { class: 'mono', 'data-testid': 'api-call-request' },
          h('span', { class: 'method' }, c.method), ' ', c.path,
          c.body !== undefined ? h('span', { class: 'muted' }, ' ' + JSON.stringify(c.body)) : null),
        ' → ',
        h('span', { class: `http-status ${c.status && c.status < 400 ? 'ok' : 'bad'}`, 'data-testid': 'api-call-status' }, c.status ? String(c.status) : 'no answer')))),
    list.length > 50 ? h('p', { class: 'muted' }, `… and ${list.length - 50} more`) : null,
    first ? h('div', { class: 'curl' },
      h('code', { class: 'mono', 'data-testid': 'api-call-curl' }, curl(first)),
      copyButton(curl(first), 'curl command')) : null);
}
