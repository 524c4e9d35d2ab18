// Server-Sent Events read with fetch(), since EventSource cannot send the bearer header:
// a small parser of the text/event-stream format over a ReadableStream, reconnecting with
// Last-Event-ID as a browser would.

import { ApiError, authHeaders, pathWith } from './api.js';

/**
 * Follows `path` (with `query`). Calls `onMessage({event, data, id})` for each message,
 * `onOpen()` when connected, `onState(state)` with 'open', 'reconnecting' or 'closed', and
 * `onError(error)` when it gives up: at once for 401, 403, 404 and 4xx answers (an older
 * server without the route answers 404), never for dropped connections, which it retries.
 * Answers `{close()}`; `signal` aborting closes it too.
 */
export function follow(path, { query, onMessage, onOpen, onState, onError, signal, lastEventId } = {}) {
  const controller = new AbortController();
  const stop = () => controller.abort();
  signal?.addEventListener('abort', stop, { once: true });
  let lastId = lastEventId ?? null;
  let retryMs = 2000;
  let closed = false;

  const state = (s) => onState && onState(s);

  async function connect() {
    while (!closed && !controller.signal.aborted) {
      let response;
      try {
        const headers = authHeaders({ Accept: 'text/event-stream' });
        if (lastId !== null) headers['Last-Event-ID'] = String(lastId);
        response = await fetch(pathWith(path, query), { headers, signal: controller.signal, cache: 'no-store' });
      } catch (e) {
        if (controller.signal.aborted) return;
        state('reconnecting');
        await sleep(retryMs, controller.signal);
        continue;
      }
      if (!response.ok) {
        let problem;
        try {
          problem = await response.json();
        } catch {
          problem = { title: `HTTP ${response.status}` };
        }
        const retryable = response.status === 429 || response.status >= 500;
        if (!retryable) {
          closed = true;
          state('closed');
          onError && onError(new ApiError(response.status, { title: problem.title || `HTTP ${response.status}`, detail: problem.detail || '', ...problem }, { method: 'GET', path: pathWith(path, query), status: response.status }));
          return;
        }
        state('reconnecting');
        await sleep(retryMs, controller.signal);
        continue;
      }
      state('open');
      onOpen && onOpen();
      try {
        await read(response.body, (message) => {
          if (message.id !== null) lastId = message.id;
          if (message.retry !== null) retryMs = message.retry;
          onMessage && onMessage(message);
        });
      } catch (e) {
        if (controller.signal.aborted) return;
      }
      if (closed || controller.signal.aborted) return;
      // The server ended the stream or the connection dropped: resume after the last id.
      state('reconnecting');
      await sleep(retryMs, controller.signal);
    }
  }

  connect();
  return {
    close() {
      closed = true;
      stop();
      state('closed');
    },
    get lastId() {
      return lastId;
    },
  };
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
}

/** Reads an event stream body, calling `emit` for each complete message. */
async function read(body, emit) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let message = fresh();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let at;
    // Lines end with \n, \r\n or \r; a lone \r at the end may be half of \r\n, so wait.
    while ((at = buffer.search(/\r\n|\n|\r(?!$)/)) >= 0) {
      const line = buffer.slice(0, at);
      buffer = buffer.slice(at + (buffer.startsWith('\r\n', at) ? 2 : 1));
      if (line === '') {
        if (message.data !== null || message.event !== null) {
          emit(message);
        }
        message = fresh();
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? '' : line.slice(colon + 1);
      if (val.startsWith(' ')) val = val.slice(1);
      if (field === 'data') message.data = message.data === null ? val : message.data + '\n' + val;
      else if (field === 'event') message.event = val;
      else if (field === 'id') message.id = val;
      else if (field === 'retry' && /^\d+$/.test(val)) message.retry = Number(val);
    }
  }
}

function fresh() {
  return { event: null, data: null, id: null, retry: null };
}
