// API errors shown plainly: the problem's title and detail, its status and type, the field
// at fault and the request that failed.

import { h } from './dom.js';

/** An alert box for `error` (an ApiError, or any Error). */
export function problemBox(error, { testid = 'problem' } = {}) {
  const p = error && error.problem ? error.problem : { title: 'Something went wrong', detail: String(error && error.message || error) };
  const type = p.type ? String(p.type).replace('urn:ratchet:problem:', '') : null;
  const call = error && error.call;
  return h('div', { class: 'problem', role: 'alert', 'data-testid': testid },
    h('p', { class: 'problem-title' },
      h('strong', { 'data-testid': 'problem-title' }, p.title || 'Error'),
      error && error.status ? h('span', { class: 'problem-status' }, ` ${error.status}${type ? ' · ' + type : ''}`) : null),
    p.detail ? h('p', { class: 'problem-detail', 'data-testid': 'problem-detail' }, p.detail) : null,
    p.field ? h('p', { class: 'problem-extra' }, 'Field: ', h('code', {}, p.field)) : null,
    p.limit !== undefined && p.limit !== null ? h('p', { class: 'problem-extra' }, `Limit: ${p.limit}`) : null,
    Array.isArray(p.errors) && p.errors.length
      ? h('ul', { class: 'problem-extra' }, p.errors.map((e) => h('li', {}, `line ${e.line}, column ${e.column}: ${e.message}`)))
      : null,
    call ? h('p', { class: 'problem-extra muted' }, h('code', {}, `${call.method} ${call.path}`)) : null);
}

/** A short one-line text for an error, for per-item outcomes of a batch. */
export function problemText(error) {
  const p = error && error.problem;
  if (!p) return String(error && error.message || error);
  return `${error.status || ''} ${p.title}${p.detail ? ': ' + p.detail : ''}`.trim();
}

/** A note (not an error): something this server does not offer, said calmly. */
export function note(text, attrs = {}) {
  return h('p', { class: 'note', role: 'note', ...attrs }, text);
}
