// The public HTTP API (/v1/...) with the session's bearer token; every error becomes an
// ApiError carrying the problem+json body, so pages can show its title and detail.

import { ROUTES } from './routes.js';

const TOKEN_KEY = 'ratchet.console.token';

/** What the console knows of who is signed in. */
export const session = {
  /** Whether the server asks for tokens (null until known). */
  auth: null,
  /** Scopes of the token (or every scope when auth is off). */
  scopes: [],
};

/** Called when any request answers 401 (set by the app: it shows the login form). */
let unauthorized = () => {};

export function onUnauthorized(handler) {
  unauthorized = handler;
}

export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setToken(value) {
  try {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage may be disabled; the token then lasts as long as the page.
  }
}

const LEVELS = { read: 1, write: 2, admin: 3 };

/** Whether the session may do what `scope` allows (each scope includes the ones before it). */
export function can(scope) {
  const level = Math.max(0, ...session.scopes.map((s) => LEVELS[s] || 0));
  return level >= (LEVELS[scope] || 99);
}

/** An API error: `status` (0 when the server could not be reached) and the problem body. */
export class ApiError extends Error {
  constructor(status, problem, call) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.name = 'ApiError';
    this.status = status;
    this.problem = problem;
    this.call = call;
  }
}

/** A promise that never settles: what an aborted request resolves to, so callers need no
 * special case for navigation away (nothing is left to update). */
const NEVER = new Promise(() => {});

/** Builds `path?query` from an object (empty values left out). */
export function pathWith(path, query) {
  if (!query) return path;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const text = q.toString();
  return text ? `${path}?${text}` : path;
}

/** The headers every request carries. */
export function authHeaders(extra = {}) {
  const headers = { ...extra };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  return headers;
}

/**
 * Calls the API. Answers `{status, data, call}` where `call` records what was sent
 * (`method`, `path`, `body`, `status`) so pages can show it as a script would send it.
 * Throws ApiError for any status from 400; never settles when `signal` aborts.
 */
export async function request(method, path, { query, body, signal, text = false, quiet401 = false } = {}) {
  const url = pathWith(path, query);
  const call = { method, path: url, body: body === undefined ? undefined : body, status: null };
  const headers = authHeaders({ Accept: text ? '*/*' : 'application/json' });
  const init = { method, headers, signal, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch (e) {
    if (signal?.aborted || e.name === 'AbortError') return NEVER;
    throw new ApiError(0, {
      title: 'The server could not be reached',
      detail: `${method} ${url}: ${e.message}. Is \`ratchet server\` running?`,
    }, call);
  }
  call.status = response.status;
  let raw;
  try {
    raw = await response.text();
  } catch (e) {
    if (signal?.aborted || e.name === 'AbortError') return NEVER;
    throw new ApiError(response.status, { title: 'The answer was cut off', detail: e.message }, call);
  }
  if (!response.ok) {
    const problem = parseProblem(response.status, raw);
    const error = new ApiError(response.status, problem, call);
    if (response.status === 401 && !quiet401) unauthorized(error);
    throw error;
  }
  if (text) return { status: response.status, data: raw, call, headers: response.headers };
  let data = null;
  if (raw) {
    try {
      data = JSON.parse(raw);
    } catch {
      throw new ApiError(response.status, {
        title: 'The answer is not JSON',
        detail: `${method} ${url} answered ${raw.slice(0, 200)}`,
      }, call);
    }
  }
  call.response = data;
  return { status: response.status, data, call, headers: response.headers };
}

function parseProblem(status, raw) {
  try {
    const body = JSON.parse(raw);
    if (body && typeof body === 'object') {
      return { title: body.title || `HTTP ${status}`, detail: body.detail || '', ...body };
    }
  } catch {
    // Not problem+json (a proxy's page, say): show its text.
  }
  return { title: `HTTP ${status}`, detail: (raw || '').replace(/<[^>]+>/g, ' ').trim().slice(0, 300) };
}

/**
 * The path of an API operation (its OpenAPI `operationId`), its `{…}` segments filled in
 * order. The routes are the server's own table (`routes.js`, written from `ratchet-api`), so
 * the console spells no path itself.
 */
export function pathOf(operation, ...segments) {
  const found = ROUTES[operation];
  if (!found) throw new Error(`the API has no operation ${operation}`);
  let i = 0;
  return found[1].replace(/\{[^}]+\}/g, () => encodeURIComponent(String(segments[i++] ?? '')));
}

/** Calls an API operation by name, as `request` does (`{status, data, call}`). */
export function call(operation, segments = [], opts = {}) {
  const found = ROUTES[operation];
  if (!found) throw new Error(`the API has no operation ${operation}`);
  return request(found[0], pathOf(operation, ...segments), opts);
}

/** Calls an API operation by name; answers its data. */
export const read = (operation, segments, opts) => call(operation, segments, opts).then((r) => r.data);

/**
 * What the server says of the session (`GET /v1/whoami`, open to requests without a token).
 * Sets `session` and answers 'ok', or 'login' when a token is needed (none stored, or the
 * stored one refused).
 */
export async function whoami() {
  try {
    const { data } = await call('system_whoami', [], { quiet401: true });
    session.auth = Boolean(data.auth);
    session.scopes = Array.isArray(data.scopes) ? data.scopes : [];
    return session.auth && !token() ? 'login' : 'ok';
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      session.auth = true;
      session.scopes = [];
      return 'login';
    }
    throw e;
  }
}

/** Runs `fn` over `items` with at most `limit` at once; answers the results in order. */
export async function eachLimited(items, limit, fn) {
  const results = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      try {
        results[i] = { ok: true, value: await fn(items[i], i) };
      } catch (error) {
        results[i] = { ok: false, error };
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

