// One task (#/tasks/<id>): state, attempts and the last error, input, output, metadata;
// retry, cancel or discard, each confirmed and followed by the API call it made. An
// unfinished task is read again every 2 seconds.

import { h, replace } from './dom.js';
import { ApiError, call, can, read } from './api.js';
import { problemBox } from './problem.js';
import { timeEl, duration, toDate } from './time.js';
import { badge } from './status.js';
import { copyButton } from './copy.js';
import { jsonBlock } from './json.js';
import { confirmAction } from './dialog.js';
import { apiCallPanel } from './apicall.js';
import { withQuery } from './url.js';
import { ALLOWED } from './tasks.js';

const POLL_MS = 2000;
const UNFINISHED = new Set(['Scheduled', 'Available', 'Running', 'Retrying']);

export async function render(root, route) {
  const id = route.id;
  route.title(`Task ${id}`);
  const head = h('header', { class: 'page-head' });
  const actionArea = h('div', { 'data-testid': 'action-result' });
  const body = h('div', { class: 'stack', 'data-testid': 'task-detail' }, h('p', { class: 'loading' }, 'Loading…'));
  replace(root,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/tasks' }, 'Tasks & queues'), h('span', { 'aria-hidden': 'true' }, ' / '), h('span', { class: 'mono' }, `Task ${id}`)),
    head, actionArea, body);

  let task = null;
  let gone = false;
  let polling = false;
  try {
    task = await read('tasks_show', [id], { signal: route.signal });
  } catch (e) {
    replace(body, problemBox(e), e instanceof ApiError && e.status === 404 ? h('p', {}, 'No task has this id: it may have been discarded. ', h('a', { href: '#/tasks' }, 'Back to the tasks'), '.') : null);
    return;
  }
  draw();
  poll();

  function poll() {
    if (polling || route.signal.aborted || gone || !UNFINISHED.has(task.state)) return;
    polling = true;
    setTimeout(async () => {
      polling = false;
      if (route.signal.aborted) return;
      try {
        const fresh = await read('tasks_show', [id], { signal: route.signal });
        if (JSON.stringify(fresh) !== JSON.stringify(task)) {
          task = fresh;
          draw();
        }
      } catch (e) {
        replace(actionArea, problemBox(e));
        return;
      }
      poll();
    }, POLL_MS);
  }

  function draw() {
    const t = task;
    const writer = can('write');
    const admin = can('admin');
    const finished = toDate(t.finished_at);
    replace(head,
      h('div', { class: 'title-block' },
        h('h1', {}, 'Task ', h('span', { class: 'mono', 'data-testid': 'task-id' }, String(t.id)), copyButton(String(t.id))),
        h('p', { class: 'subtitle' }, badge(t.state, { 'data-testid': 'task-state' }), ' ', h('span', { 'data-testid': 'task-name' }, t.name), ' on ',
          h('a', { href: '#' + withQuery('/tasks', { queue: t.queue }) }, t.queue))),
      writer && !gone ? h('div', { class: 'page-actions', 'data-testid': 'task-actions' },
        h('button', { type: 'button', class: 'btn', 'data-testid': 'action-retry', disabled: !ALLOWED.retry.has(t.state), title: 'Run it again with a fresh budget of attempts (dead or cancelled tasks)', onclick: () => act('retry') }, 'Retry…'),
        h('button', { type: 'button', class: 'btn', 'data-testid': 'action-cancel', disabled: !ALLOWED.cancel.has(t.state), title: 'Cancel a waiting or running task', onclick: () => act('cancel') }, 'Cancel…'),
        admin ? h('button', { type: 'button', class: 'btn btn-danger', 'data-testid': 'action-discard', disabled: !ALLOWED.discard.has(t.state), title: 'Remove a finished task for good', onclick: () => act('discard') }, 'Discard…') : null) : null);

    const row = (label, value, testid) => [h('dt', {}, label), h('dd', { 'data-testid': testid || null }, value)];
    const created = toDate(t.created_at);
    replace(body,
      h('section', { class: 'card summary' }, h('dl', { class: 'kv summary-grid' },
        row('State', badge(t.state)),
        row('Attempts', `${t.attempt} of ${t.max_attempts}`, 'task-attempts'),
        row('Priority', String(t.priority)),
        row('Unique key', t.unique_key ? h('code', {}, t.unique_key) : h('span', { class: 'muted' }, '—')),
        row('Created', timeEl(t.created_at)),
        row(finished ? 'Finished' : UNFINISHED.has(t.state) ? 'Runs next' : 'Run at', timeEl(finished ? t.finished_at : t.run_at, { ago: !finished })),
        row(finished ? 'Took' : 'Waiting for', created ? duration(((finished || new Date()).getTime()) - created.getTime()) : '—'))),
      h('section', { class: 'card', 'aria-label': 'Attempts', 'data-testid': 'task-attempt-history' },
        h('h2', {}, 'Attempts'),
        attempts(t)),
      h('div', { class: 'grid-2' },
        h('section', { class: 'card' }, h('h2', {}, 'Input'), jsonBlock(t.input, { testid: 'task-input', label: 'input' })),
        h('section', { class: 'card' }, h('h2', {}, t.error ? 'Last error' : 'Output'),
          t.error ? jsonBlock(t.error, { testid: 'task-error', label: 'error' })
            : t.output === null || t.output === undefined ? h('p', { class: 'muted', 'data-testid': 'task-output' }, finished ? 'No output.' : 'Not finished yet.')
              : jsonBlock(t.output, { testid: 'task-output', label: 'output' }))),
      t.metadata !== null && t.metadata !== undefined
        ? h('section', { class: 'card' }, h('h2', {}, 'Metadata'), jsonBlock(t.metadata, { testid: 'task-metadata', label: 'metadata' }))
        : null);
  }

  function attempts(t) {
    const items = [];
    for (let n = 1; n <= t.attempt; n++) {
      const lastOne = n === t.attempt;
      let status;
      let text;
      if (!lastOne) {
        status = 'Retrying';
        text = 'Failed; retried';
      } else if (t.state === 'Completed') {
        status = 'Completed';
        text = 'Succeeded';
      } else if (t.state === 'Dead') {
        status = 'Dead';
        text = 'Failed: no attempts left';
      } else if (t.state === 'Retrying') {
        status = 'Retrying';
        text = 'Failed; next attempt';
      } else if (t.state === 'Running') {
        status = 'Running';
        text = 'Running';
      } else if (t.state === 'Cancelled') {
        status = 'Cancelled';
        text = 'Cancelled';
      } else {
        status = 'Scheduled';
        text = 'Waiting';
      }
      items.push(h('li', { class: 'attempt', 'data-testid': 'task-attempt', 'data-attempt': n },
        h('span', { class: 'attempt-n' }, `#${n}`), badge(status), ' ', text,
        lastOne && t.error && t.state !== 'Completed' ? h('p', { class: 'error-line' }, h('strong', {}, t.error.kind), ': ', t.error.message) : null,
        lastOne && (t.state === 'Retrying' || t.state === 'Scheduled') ? h('span', { class: 'muted small' }, ' · at ', timeEl(t.run_at, { ago: true })) : null));
    }
    if (!items.length) return h('p', { class: 'muted' }, 'Not attempted yet.');
    return [
      h('ol', { class: 'attempts' }, items),
      t.attempt > 1 ? h('p', { class: 'muted small' }, 'The store keeps the last attempt\'s error; earlier attempts failed before it was retried.') : null,
    ];
  }

  async function act(action) {
    const verb = { retry: 'Retry', cancel: 'Cancel', discard: 'Discard' }[action];
    const ok = await confirmAction({
      title: `${verb} task ${id}?`,
      body: h('p', {}, {
        retry: 'It runs again with a fresh budget of attempts.',
        cancel: 'A waiting task is cancelled at once; a running one when its worker next hears from the store.',
        discard: 'It is removed for good, with its input, output and error. This cannot be undone.',
      }[action]),
      confirmLabel: `${verb} task`,
      danger: action !== 'retry',
      testid: `confirm-${action}`,
    });
    if (!ok) return;
    try {
      const r = await call(`tasks_${action}`, [id]);
      const outcome = r.data && r.data.outcome;
      replace(actionArea, apiCallPanel([r.call], {
        summary: `${verb}: ${outcome === 'requested' ? 'requested (the worker stops it when it next hears from the store)' : 'done'}.`,
        onDismiss: () => replace(actionArea),
      }));
      if (action === 'discard') {
        gone = true;
        draw();
        replace(body, h('p', { class: 'empty-inline', 'data-testid': 'task-discarded' }, 'The task was discarded. ', h('a', { href: '#/tasks' }, 'Back to the tasks'), '.'));
        return;
      }
      task = await read('tasks_show', [id], { signal: route.signal });
      draw();
      poll();
    } catch (e) {
      replace(actionArea, problemBox(e), e.call ? apiCallPanel([e.call], { onDismiss: () => replace(actionArea) }) : null);
    }
  }
}
