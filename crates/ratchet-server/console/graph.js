// The instance graph: GET /v1/instances/{id}/graph.svg fetched with the bearer header (an
// <img> could not send it) and inlined. Its stylesheet is scoped to the graph so it cannot
// restyle the page, its dark rules follow the console's theme toggle, and its links to
// children (/v1/instances/<child>) become console routes.

import { h, replace } from './dom.js';
import { call } from './api.js';
import { instanceRoute } from './url.js';

let counter = 0;

/** Fetches and inlines the graph of instance `id`. Answers the element to show. */
export async function loadGraph(id, signal) {
  const { data } = await call('instances_graph', [id], { text: true, signal });
  return { svg: inline(data), text: data };
}

/** Parses standalone SVG text into a safe, scoped element of this document. */
export function inline(text) {
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const root = doc.documentElement;
  if (!root || root.nodeName !== 'svg' || doc.getElementsByTagName('parsererror').length) {
    throw new Error('The server answered a graph that is not SVG.');
  }
  const scope = `graph-${++counter}`;
  // Nothing active: no scripts, no foreign HTML, no event handlers, no links out.
  for (const el of [...root.querySelectorAll('script, foreignObject, iframe')]) el.remove();
  for (const el of root.querySelectorAll('*')) {
    for (const attr of [...el.attributes]) {
      if (/^on/i.test(attr.name)) el.removeAttribute(attr.name);
    }
  }
  for (const a of root.querySelectorAll('a')) {
    const href = a.getAttribute('href') || a.getAttributeNS('http://www.w3.org/1999/xlink', 'href') || '';
    a.removeAttributeNS('http://www.w3.org/1999/xlink', 'href');
    const m = href.match(/^\/v1\/instances\/([^?#]+)$/);
    if (m) {
      let child = m[1];
      try {
        child = decodeURIComponent(child);
      } catch {
        // Not percent-encoded: the id as written.
      }
      a.setAttribute('href', '#' + instanceRoute(child));
      a.setAttribute('data-testid', 'graph-child-link');
      a.setAttribute('data-instance-id', child);
      a.setAttribute('class', 'graph-link');
    } else {
      a.removeAttribute('href');
    }
  }
  // Ids made unique so two graphs (or the page) cannot clash.
  for (const el of root.querySelectorAll('[id]')) {
    const old = el.getAttribute('id');
    const fresh = `${scope}-${old}`;
    el.setAttribute('id', fresh);
    for (const user of root.querySelectorAll(`[marker-end="url(#${CSS.escape(old)})"]`)) user.setAttribute('marker-end', `url(#${fresh})`);
    for (const user of root.querySelectorAll(`[marker-start="url(#${CSS.escape(old)})"]`)) user.setAttribute('marker-start', `url(#${fresh})`);
  }
  for (const style of root.querySelectorAll('style')) {
    style.textContent = scopeCss(style.textContent, `svg.${scope}`);
  }
  root.classList.add(scope);
  root.setAttribute('role', 'img');
  root.setAttribute('aria-label', 'Graph of this instance');
  root.setAttribute('data-testid', 'graph-svg');
  return document.importNode(root, true);
}

/**
 * Prefixes every selector of `css` with `scope`. Rules under `prefers-color-scheme: dark`
 * apply when the console is dark: by the system preference unless the toggle says light,
 * or by the toggle. The added parts weigh nothing (:where), so the graph's own order and
 * specificity still decide between its rules.
 */
export function scopeCss(css, scope) {
  let out = '';
  let i = 0;
  while (i < css.length) {
    const open = css.indexOf('{', i);
    if (open < 0) break;
    const head = css.slice(i, open).trim();
    let depth = 1;
    let j = open + 1;
    while (j < css.length && depth) {
      if (css[j] === '{') depth++;
      else if (css[j] === '}') depth--;
      j++;
    }
    const body = css.slice(open + 1, j - 1);
    if (head.startsWith('@media')) {
      if (/prefers-color-scheme\s*:\s*dark/.test(head)) {
        out += `${head}{${scopeRules(body, `:where(:root:not([data-theme=light])) ${scope}`)}}\n`;
        out += scopeRules(body, `:where(:root[data-theme=dark]) ${scope}`);
      } else {
        out += `${head}{${scopeRules(body, scope)}}\n`;
      }
    } else if (head.startsWith('@')) {
      out += `${head}{${body}}\n`;
    } else {
      out += `${prefix(head, scope)}{${body}}\n`;
    }
    i = j;
  }
  return out;
}

function scopeRules(css, scope) {
  let out = '';
  const re = /([^{}]+)\{([^{}]*)\}/g;
  let m;
  while ((m = re.exec(css))) out += `${prefix(m[1].trim(), scope)}{${m[2]}}\n`;
  return out;
}

function prefix(selectors, scope) {
  return selectors.split(',').map((sel) => {
    const s = sel.trim();
    if (s === 'svg' || s === ':root') return scope;
    return `${scope} ${s}`;
  }).join(',');
}

/** The graph view: toolbar (fit, download), legend, and the SVG in a scrolling frame. */
export function graphView(svg, text, name) {
  const frame = h('div', { class: 'graph-frame', 'data-testid': 'graph', tabindex: '0', 'aria-label': 'Graph (scrolls)' }, svg);
  const natural = Number(svg.getAttribute('width')) || null;
  let fit = false;
  const fitButton = h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'graph-fit', 'aria-pressed': 'false' }, 'Fit to width');
  const apply = () => {
    frame.classList.toggle('fit', fit);
    fitButton.setAttribute('aria-pressed', String(fit));
    fitButton.textContent = fit ? 'Actual size' : 'Fit to width';
  };
  fitButton.addEventListener('click', () => {
    fit = !fit;
    apply();
  });
  const download = h('button', {
    type: 'button',
    class: 'btn btn-small',
    'data-testid': 'graph-download',
    onclick: () => {
      const url = URL.createObjectURL(new Blob([text], { type: 'image/svg+xml' }));
      const a = h('a', { href: url, download: `${name}.svg` });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    },
  }, 'Download SVG');
  apply();
  return h('div', { class: 'graph-view' },
    h('div', { class: 'toolbar' },
      h('ul', { class: 'legend' },
        ['completed', 'running', 'failed', 'pending', 'skipped'].map((st) => h('li', {}, h('span', { class: `swatch swatch-${st}` }), st))),
      h('span', { class: 'spacer' }),
      natural ? fitButton : null,
      download),
    frame);
}

/** Replaces the graph shown in `container`, keeping its scroll position and fit mode. */
export function swapGraph(container, svg) {
  const frame = container.querySelector('.graph-frame');
  if (!frame) return false;
  const { scrollLeft, scrollTop } = frame;
  replace(frame, svg);
  frame.scrollLeft = scrollLeft;
  frame.scrollTop = scrollTop;
  return true;
}
