// Console routes: hash URLs with their filters in the query string, so every view can be
// bookmarked and shared (`#/instances?status=Failed&name=order`).

/** The route of one instance. */
export function instanceRoute(id) {
  return '/instances/' + encodeURIComponent(id);
}

/** The route of one task. */
export function taskRoute(id) {
  return '/tasks/' + encodeURIComponent(String(id));
}

/** A route with a query string built from `params` (empty values left out). */
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '' && v !== false) q.set(k, String(v));
  }
  const text = q.toString();
  return text ? `${path}?${text}` : path;
}

/** Goes to a route (the page renders anew). */
export function navigate(route) {
  const hash = '#' + route;
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}

/** Changes the URL to `route` without rendering the page again (a view's state). */
export function replaceUrl(route) {
  history.replaceState(history.state, '', '#' + route);
}

/** The query parameters as a plain object. */
export function paramsObject(params) {
  const out = {};
  for (const [k, v] of params) out[k] = v;
  return out;
}
