// Modal dialogs on the native <dialog> element: Esc closes them, focus stays inside, and
// the element that opened one gets focus back.

import { h } from './dom.js';
import { jsonBlock } from './json.js';

/**
 * Opens a modal dialog. `content` is a node or array; `actions` are buttons placed in its
 * footer (a Close button is always added). Answers `{dialog, close(result), closed}` where
 * `closed` resolves with the result given to `close` (undefined on Esc or Close).
 */
export function openDialog({ title, content, actions = [], testid = 'dialog', wide = false, closeLabel = 'Close' }) {
  const opener = document.activeElement;
  const heading = h('h2', { class: 'dialog-title', id: `dlg-${Math.random().toString(36).slice(2)}` }, title);
  let result;
  const dialog = h('dialog', {
    class: `dialog${wide ? ' wide' : ''}`,
    'data-testid': testid,
    'aria-labelledby': heading.id,
  });
  const closeButton = h('button', { type: 'button', class: 'btn', 'data-testid': 'dialog-close', onclick: () => close() }, closeLabel);
  const form = h('form', { method: 'dialog', class: 'dialog-body', onsubmit: (e) => e.preventDefault() },
    h('header', { class: 'dialog-head' }, heading,
      h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Close', title: 'Close (Esc)', onclick: () => close() }, '×')),
    h('div', { class: 'dialog-content' }, content),
    h('footer', { class: 'dialog-actions' }, closeButton, actions));
  dialog.appendChild(form);
  let resolve;
  const closed = new Promise((r) => { resolve = r; });
  dialog.addEventListener('close', () => {
    dialog.remove();
    resolve(result);
    if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
  });
  // A click on the backdrop (outside the form) closes it, as Esc does.
  dialog.addEventListener('mousedown', (e) => {
    if (e.target === dialog) {
      const r = dialog.getBoundingClientRect();
      const inside = e.clientX >= r.left && e.clientX <= r.right && e.clientY >= r.top && e.clientY <= r.bottom;
      if (!inside) close();
    }
  });
  document.body.appendChild(dialog);
  dialog.showModal();
  function close(value) {
    result = value;
    if (dialog.open) dialog.close();
  }
  return { dialog, close, closed };
}

/**
 * Asks to confirm an action. `body` explains it; `fields` (nodes) may gather more input,
 * read by `collect()` when confirmed. Answers the collected value (or true), or null when
 * dismissed.
 */
export function confirmAction({ title, body, confirmLabel = 'Confirm', danger = false, fields = null, collect = null, testid = 'confirm-dialog', valid = null }) {
  const confirm = h('button', {
    type: 'submit',
    class: `btn ${danger ? 'btn-danger' : 'btn-primary'}`,
    'data-testid': 'confirm',
  }, confirmLabel);
  const d = openDialog({ title, content: [h('div', { class: 'confirm-body' }, body), fields], actions: [confirm], testid, closeLabel: 'Cancel' });
  d.dialog.querySelector('[data-testid=dialog-close]').setAttribute('data-testid', 'confirm-cancel');
  if (valid) {
    const update = () => { confirm.disabled = !valid(); };
    d.dialog.addEventListener('input', update);
    update();
  }
  d.dialog.querySelector('form').addEventListener('submit', (e) => {
    e.preventDefault();
    if (confirm.disabled) return;
    d.close(collect ? collect() : true);
  });
  // Focus the first field, or the confirm button, so Enter confirms and Esc dismisses.
  const first = d.dialog.querySelector('.confirm-body input, .confirm-body textarea, .dialog-content input, .dialog-content textarea');
  (first || confirm).focus();
  return d.closed.then((r) => (r === undefined ? null : r));
}

/** Shows a value as JSON in a dialog. */
export function showJson(title, value, { testid = 'json-dialog', extra = null } = {}) {
  return openDialog({ title, content: [extra, jsonBlock(value, { testid: 'json-dialog-body' })], testid, wide: true });
}
