// Building DOM nodes without a framework: h('tag', {attrs}, ...children).

const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * Creates an HTML element. `attrs` keys: `class`, `text`, `on<event>` (listener), `dataset`
 * entries as `data-*`, boolean properties (`disabled`, `checked`, `hidden`, `open`,
 * `selected`, `required`), `value`, and any other attribute. Children may be strings,
 * numbers, nodes, arrays of them, or null/false (skipped).
 */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** Creates an SVG element, with the same conventions as `h`. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

const PROPERTIES = new Set(['disabled', 'checked', 'hidden', 'open', 'selected', 'required',
  'value', 'indeterminate', 'multiple', 'readOnly']);

function build(el, attrs, children) {
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false && !PROPERTIES.has(key)) continue;
      if (key === 'text') {
        el.textContent = String(value);
      } else if (key.startsWith('on') && typeof value === 'function') {
        el.addEventListener(key.slice(2).toLowerCase(), value);
      } else if (PROPERTIES.has(key)) {
        el[key] = value;
      } else if (key === 'style' && typeof value === 'object') {
        Object.assign(el.style, value);
      } else {
        el.setAttribute(key, value === true ? '' : String(value));
      }
    }
  }
  append(el, children);
  return el;
}

/** Appends children (strings, nodes, nested arrays; null and false are skipped). */
export function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) {
      append(el, child);
    } else if (child instanceof Node) {
      el.appendChild(child);
    } else {
      el.appendChild(document.createTextNode(String(child)));
    }
  }
  return el;
}

/** Replaces every child of `el` with `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** A hash link to a console route (`#/instances/x`). */
export function link(route, text, attrs = {}) {
  return h('a', { href: '#' + route, ...attrs }, text);
}
