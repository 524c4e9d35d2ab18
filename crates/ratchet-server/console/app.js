// The console's shell: sign-in, the theme, keyboard shortcuts and the hash router. Each page
// is a module with `render(root, route)`; `route.signal` aborts when the page is left, which
// stops its requests, streams and timers.

import { h, replace } from './dom.js';
import { ApiError, onUnauthorized, session, setToken, token, whoami } from './api.js';
import { problemBox } from './problem.js';
import * as overview from './overview.js';
import * as instances from './instances.js';
import * as instance from './instance.js';
import * as tasks from './tasks.js';
import * as task from './task.js';
import * as schedules from './schedules.js';
import * as schedule from './schedule.js';
import * as events from './events.js';

const ROUTES = [
  { pattern: /^\/?$/, page: overview, nav: 'overview' },
  { pattern: /^\/overview$/, page: overview, nav: 'overview' },
  { pattern: /^\/instances$/, page: instances, nav: 'instances' },
  { pattern: /^\/instances\/(.+)$/, page: instance, nav: 'instances' },
  { pattern: /^\/tasks$/, page: tasks, nav: 'tasks' },
  { pattern: /^\/tasks\/([^/]+)$/, page: task, nav: 'tasks' },
  { pattern: /^\/schedules$/, page: schedules, nav: 'schedules' },
  { pattern: /^\/schedules\/(.+)$/, page: schedule, nav: 'schedules' },
  { pattern: /^\/events$/, page: events, nav: 'events' },
];

const main = document.getElementById('main');
let current = null;
let locked = false;

/** The current hash as `{path, params}`. */
export function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const at = raw.indexOf('?');
  const path = at < 0 ? raw : raw.slice(0, at);
  const params = new URLSearchParams(at < 0 ? '' : raw.slice(at + 1));
  return { path: path.startsWith('/') ? path : '/' + path, params };
}

async function render() {
  if (current) current.controller.abort();
  const controller = new AbortController();
  const { path, params } = parseHash();
  current = { controller };
  if (locked) return;
  const route = ROUTES.find((r) => r.pattern.test(path));
  for (const a of document.querySelectorAll('.nav-links a')) {
    if (route && a.dataset.route === route.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const root = h('div', { class: 'page', 'data-page': route ? route.nav : 'not-found' });
  replace(main, root);
  if (!route) {
    document.title = 'Not found · Ratchet';
    replace(root, h('header', { class: 'page-head' }, h('h1', {}, 'Not found')),
      h('p', {}, 'No page at ', h('code', {}, path), '. ', h('a', { href: '#/' }, 'Go to the overview'), '.'));
    return;
  }
  const match = path.match(route.pattern);
  const ctx = {
    path,
    params,
    id: match[1] ? safeDecode(match[1]) : null,
    signal: controller.signal,
    title(text) {
      document.title = `${text} · Ratchet`;
    },
  };
  try {
    await route.page.render(root, ctx);
  } catch (e) {
    if (controller.signal.aborted) return;
    if (!(e instanceof ApiError)) console.warn(e);
    root.appendChild(problemBox(e));
  }
}

function safeDecode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

// Sign-in ------------------------------------------------------------------------------

function showSession() {
  const info = document.querySelector('[data-testid=session]');
  const out = document.querySelector('[data-testid=sign-out]');
  if (session.auth && !locked) {
    info.hidden = false;
    replace(info, 'Token scope: ', h('strong', { 'data-testid': 'scopes' }, session.scopes.join(', ') || 'none'));
    out.hidden = !token();
  } else if (!locked) {
    info.hidden = false;
    replace(info, h('span', { 'data-testid': 'scopes', title: 'This server asks for no token' }, 'Auth off · full access'));
    out.hidden = true;
  } else {
    info.hidden = true;
    out.hidden = true;
  }
}

function showLogin(message) {
  locked = true;
  if (current) current.controller.abort();
  document.body.classList.add('locked');
  document.title = 'Sign in · Ratchet';
  showSession();
  const input = h('input', {
    id: 'login-token',
    type: 'password',
    name: 'token',
    autocomplete: 'current-password',
    required: true,
    placeholder: 'rt_…',
    'data-testid': 'login-token',
  });
  const error = h('div', { 'data-testid': 'login-error', 'aria-live': 'assertive' });
  if (message) error.appendChild(problemBox(message, { testid: 'login-problem' }));
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'login-submit' }, 'Sign in');
  const form = h('form', { class: 'login card', 'data-testid': 'login-form', 'aria-labelledby': 'login-title' },
    h('h1', { id: 'login-title' }, 'Sign in to Ratchet'),
    h('p', { class: 'muted' }, 'This server asks for a bearer token. It is kept in this tab only (session storage) and sent with each request.'),
    h('label', { for: 'login-token' }, 'Token'),
    input,
    error,
    submit,
    h('p', { class: 'muted small' }, 'Create one with ', h('code', {}, 'ratchet tokens create --name console --scope read'),
      ' (', h('code', {}, 'write'), ' to act on work, ', h('code', {}, 'admin'), ' for queues).'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    submit.disabled = true;
    setToken(input.value.trim());
    try {
      const outcome = await whoami();
      if (outcome === 'login') {
        setToken(null);
        replace(error, problemBox(new ApiError(401, { title: 'Token refused', detail: 'The server does not know this token, or it was revoked.' })));
        submit.disabled = false;
        input.focus();
        input.select();
        return;
      }
      unlock();
    } catch (err) {
      setToken(null);
      replace(error, problemBox(err));
      submit.disabled = false;
    }
  });
  replace(main, h('div', { class: 'page page-login' }, form));
  input.focus();
}

function unlock() {
  locked = false;
  document.body.classList.remove('locked');
  showSession();
  render();
}

onUnauthorized((error) => {
  if (locked) return;
  setToken(null);
  showLogin(new ApiError(401, { title: 'Signed out', detail: error.problem.detail || 'The server refused the token: sign in again.' }));
});

document.querySelector('[data-testid=sign-out]').addEventListener('click', () => {
  setToken(null);
  session.scopes = [];
  showLogin(null);
});

// Theme --------------------------------------------------------------------------------

const THEME_KEY = 'ratchet.console.theme';
const THEMES = ['system', 'light', 'dark'];

function storedTheme() {
  try {
    const t = localStorage.getItem(THEME_KEY);
    return THEMES.includes(t) ? t : 'system';
  } catch {
    return 'system';
  }
}

function applyTheme(theme) {
  window.ratchetTheme(theme);
  const button = document.querySelector('[data-testid=theme-toggle]');
  button.textContent = `Theme: ${theme}`;
  button.dataset.theme = theme;
  button.setAttribute('aria-label', `Theme: ${theme}. Switch to ${THEMES[(THEMES.indexOf(theme) + 1) % 3]}`);
}

document.querySelector('[data-testid=theme-toggle]').addEventListener('click', () => {
  const next = THEMES[(THEMES.indexOf(storedTheme()) + 1) % THEMES.length];
  try {
    if (next === 'system') localStorage.removeItem(THEME_KEY);
    else localStorage.setItem(THEME_KEY, next);
  } catch {
    // Not stored: it lasts until the page reloads.
  }
  applyTheme(next);
});

// Keyboard -----------------------------------------------------------------------------

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
}

document.addEventListener('keydown', (e) => {
  if (e.defaultPrevented || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === '/' && !typing(e.target) && !document.querySelector('dialog[open]')) {
    const field = main.querySelector('[data-slash]');
    if (field) {
      e.preventDefault();
      field.focus();
      if (typeof field.select === 'function') field.select();
    }
  }
});

// Start --------------------------------------------------------------------------------

window.addEventListener('hashchange', render);

window.addEventListener('unhandledrejection', (e) => {
  // An API error nobody caught is still shown, never lost.
  if (e.reason instanceof ApiError) {
    e.preventDefault();
    toast(problemBox(e.reason));
  }
});

/** Shows a transient message (a node) in the corner. */
export function toast(node, ms = 8000) {
  const region = document.querySelector('[data-testid=toasts]');
  const item = h('div', { class: 'toast', 'data-testid': 'toast' }, node,
    h('button', { type: 'button', class: 'icon-btn', 'aria-label': 'Dismiss', onclick: () => item.remove() }, '×'));
  region.appendChild(item);
  setTimeout(() => item.remove(), ms);
}

async function start() {
  applyTheme(storedTheme());
  let outcome;
  try {
    outcome = await whoami();
  } catch (e) {
    replace(main, h('div', { class: 'page' }, h('header', { class: 'page-head' }, h('h1', {}, 'Ratchet')), problemBox(e)));
    return;
  }
  if (outcome === 'login') {
    setToken(null);
    showLogin(null);
    return;
  }
  showSession();
  render();
}

start();
