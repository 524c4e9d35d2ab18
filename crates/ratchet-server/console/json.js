// JSON shown (indented, coloured, copyable) and edited (a textarea validated as you type).

import { h } from './dom.js';
import { copyButton } from './copy.js';

const TOKEN = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false)\b|\b(null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;

/** Pretty JSON in a <pre>, coloured by token, with a copy button. */
export function jsonBlock(value, { testid, label = 'JSON' } = {}) {
  const text = value === undefined ? 'null' : JSON.stringify(value, null, 2);
  const pre = h('pre', { class: 'json', tabindex: '0', 'data-testid': testid || null, 'aria-label': label });
  let last = 0;
  for (const m of text.matchAll(TOKEN)) {
    if (m.index > last) pre.appendChild(document.createTextNode(text.slice(last, m.index)));
    let cls;
    if (m[1]) cls = m[2] ? 'j-key' : 'j-str';
    else if (m[3]) cls = 'j-bool';
    else if (m[4]) cls = 'j-null';
    else cls = 'j-num';
    pre.appendChild(h('span', { class: cls }, m[1] && m[2] ? m[1] : m[0]));
    if (m[1] && m[2]) pre.appendChild(document.createTextNode(m[2]));
    last = m.index + m[0].length;
  }
  if (last < text.length) pre.appendChild(document.createTextNode(text.slice(last)));
  return h('div', { class: 'json-wrap' }, pre, copyButton(text, label));
}

/** A value in one short line, for table cells. */
export function jsonInline(value, max = 80) {
  if (value === undefined || value === null) return '';
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > max ? text.slice(0, max - 1) + '…' : text;
}

/**
 * A JSON editor: a textarea whose text is checked as it changes. `onChange(valid)` is
 * called after each check. Answers `{el, textarea, valid(), value()}`.
 */
export function jsonEditor({ value = null, id, label = 'JSON', testid = 'json-editor', rows = 8, onChange } = {}) {
  const textarea = h('textarea', {
    id,
    class: 'json-input mono',
    rows,
    spellcheck: 'false',
    autocomplete: 'off',
    'data-testid': testid,
    'aria-describedby': id ? `${id}-status` : null,
  });
  textarea.value = value === undefined ? '' : JSON.stringify(value, null, 2);
  const status = h('p', { class: 'json-status', id: id ? `${id}-status` : null, 'data-testid': `${testid}-status`, 'aria-live': 'polite' });
  let parsed = { ok: true, value };

  function check() {
    const text = textarea.value.trim();
    if (text === '') {
      parsed = { ok: true, value: null };
      status.textContent = 'Empty: sends null';
      status.className = 'json-status ok';
    } else {
      try {
        parsed = { ok: true, value: JSON.parse(text) };
        status.textContent = 'Valid JSON';
        status.className = 'json-status ok';
      } catch (e) {
        parsed = { ok: false, error: e.message };
        status.textContent = `Invalid JSON: ${e.message}`;
        status.className = 'json-status bad';
      }
    }
    textarea.setAttribute('aria-invalid', parsed.ok ? 'false' : 'true');
    onChange && onChange(parsed.ok);
  }
  textarea.addEventListener('input', check);
  // Tab inserts two spaces (Esc then Tab leaves the field, as in other editors).
  let escaped = false;
  textarea.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      escaped = true;
      return;
    }
    if (e.key === 'Tab' && !e.shiftKey && !escaped) {
      e.preventDefault();
      const { selectionStart: a, selectionEnd: b } = textarea;
      textarea.setRangeText('  ', a, b, 'end');
      check();
    }
    escaped = false;
  });
  queueMicrotask(check);
  return {
    el: h('div', { class: 'json-editor' }, textarea, status),
    textarea,
    valid: () => parsed.ok,
    value: () => parsed.value,
    check,
  };
}
