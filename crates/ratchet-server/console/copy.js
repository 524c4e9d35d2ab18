// Ids and commands copied with one click: navigator.clipboard, or a hidden textarea where it
// is unavailable (plain HTTP on another host, or a browser that refuses).

import { h } from './dom.js';

export async function copyText(text) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // Refused (no focus, no permission): fall back below.
  }
  const area = h('textarea', { 'aria-hidden': 'true', class: 'offscreen', readonly: true });
  area.value = text;
  document.body.appendChild(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** A small button copying `text`; it says "Copied" for a moment. */
export function copyButton(text, what = 'id') {
  const button = h('button', {
    type: 'button',
    class: 'copy',
    'data-testid': 'copy',
    'data-copy': text,
    title: `Copy ${what}`,
    'aria-label': `Copy ${what} ${text}`,
  }, h('span', { 'aria-hidden': 'true', class: 'copy-icon' }));
  button.addEventListener('click', async (e) => {
    e.preventDefault();
    e.stopPropagation();
    const ok = await copyText(text);
    button.classList.add(ok ? 'copied' : 'copy-failed');
    button.title = ok ? 'Copied' : 'Could not copy: select the text instead';
    setTimeout(() => {
      button.classList.remove('copied', 'copy-failed');
      button.title = `Copy ${what}`;
    }, 1500);
  });
  return button;
}

/** An id shown in monospace with its copy button; a link when `href` is given. */
export function idWithCopy(id, href, attrs = {}) {
  const text = String(id);
  const label = href
    ? h('a', { href, class: 'mono', ...attrs }, text)
    : h('span', { class: 'mono', ...attrs }, text);
  return h('span', { class: 'id-copy' }, label, copyButton(text));
}
