// Tasks and queues (#/tasks?queue=default&state=Dead&name=work): the queues with depth by
// state and limits (editable, admin), pause and resume; tasks by state with filters, dead
// letters with their last error; retry, cancel or discard one or a selection.

import { h, replace } from './dom.js';
import { call, can, read } from './api.js';
import { problemBox, problemText, note } from './problem.js';
import { timeEl } from './time.js';
import { badge, TASK_STATES } from './status.js';
import { idWithCopy } from './copy.js';
import { jsonInline } from './json.js';
import { confirmAction } from './dialog.js';
import { apiCallPanel } from './apicall.js';
import { emptyState, enqueueCommands } from './empty.js';
import { navigate, taskRoute, withQuery } from './url.js';
import { queueTable } from './queues.js';
import { setAllBoxes, showSelectAll } from './selection.js';

let trail = { key: null, cursors: [''] };
let lastAction = null;

/** Which actions each state allows (the server has the last word). */
export const ALLOWED = {
  retry: new Set(['Dead', 'Cancelled']),
  cancel: new Set(['Scheduled', 'Available', 'Running', 'Retrying']),
  discard: new Set(['Completed', 'Dead', 'Cancelled']),
};

export async function render(root, route) {
  route.title('Tasks & queues');
  const p = route.params;
  const filters = { queue: p.get('queue') || '', state: p.get('state') || '', name: p.get('name') || '', limit: p.get('limit') || '' };
  const cursor = p.get('cursor') || '';
  const key = JSON.stringify(filters);
  if (trail.key !== key) trail = { key, cursors: [''] };
  if (!trail.cursors.includes(cursor)) trail.cursors.push(cursor);

  const actionArea = h('div', { 'data-testid': 'action-result' });
  const queuesCard = h('section', { class: 'card', 'data-testid': 'queues', 'aria-labelledby': 'q-title' }, h('h2', { id: 'q-title' }, 'Queues'), h('p', { class: 'loading' }, 'Loading…'));
  const tasksCard = h('section', { class: 'card', 'data-testid': 'tasks', 'aria-labelledby': 't-title' });
  const reload = () => navigate(route.path + (p.toString() ? '?' + p.toString() : ''));
  replace(root,
    h('header', { class: 'page-head' }, h('h1', {}, 'Tasks & queues'),
      h('div', { class: 'page-actions' }, h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'refresh', onclick: reload }, 'Refresh'))),
    actionArea, queuesCard, tasksCard);

  const showResult = (result) => {
    replace(actionArea,
      result.error ? problemBox(result.error) : null,
      result.calls && result.calls.length ? apiCallPanel(result.calls, { summary: result.summary, onDismiss: () => replace(actionArea) }) : null);
  };
  if (lastAction) {
    showResult(lastAction);
    lastAction = null;
  }

  let queues = [];
  async function loadQueues() {
    try {
      queues = await read('queues_list', [], { signal: route.signal });
      replace(queuesCard, h('header', { class: 'card-head' }, h('h2', { id: 'q-title' }, 'Queues'),
        can('admin') ? null : h('span', { class: 'muted small' }, 'Pausing and limits need the admin scope')),
      queues.length
        ? queueTable(queues, {
          selected: filters.queue,
          onAction: (result) => {
            showResult(result);
            loadQueues();
          },
        })
        : emptyState({ title: 'No queues yet.', text: 'A queue appears with its first task. Enqueue one:', commands: enqueueCommands() }));
    } catch (e) {
      replace(queuesCard, h('h2', { id: 'q-title' }, 'Queues'), problemBox(e));
    }
  }

  await Promise.all([loadQueues(), loadTasks()]);

  async function loadTasks() {
    const stateTabs = h('nav', { class: 'state-tabs', 'aria-label': 'Task state', 'data-testid': 'state-tabs' },
      [['', 'All'], ...TASK_STATES.map((s) => [s, s === 'Dead' ? 'Dead letters' : s])].map(([s, label]) => h('a', {
        href: '#' + withQuery('/tasks', { ...filters, state: s }),
        class: `state-tab${s === 'Dead' ? ' dead' : ''}`,
        'aria-current': filters.state === s ? 'page' : null,
        'data-testid': `state-tab-${s || 'all'}`,
      }, label)));
    const form = filterForm(filters);
    const results = h('div', { 'data-testid': 'tasks-results', 'aria-live': 'polite' }, h('p', { class: 'loading' }, 'Loading…'));
    replace(tasksCard, h('h2', { id: 't-title' }, filters.state === 'Dead' ? 'Dead letters' : 'Tasks'), stateTabs, form, results);
    try {
      const { items, next, notice } = await listTasks(filters, cursor, route.signal);
      replace(results, notice ? note(notice, { 'data-testid': 'tasks-note' }) : null, taskTable(items, filters, cursor, next, route, reload));
    } catch (e) {
      replace(results, problemBox(e));
    }
  }
}

/** A page of tasks, newest first: `cursor` is the id the page starts below (`before`), and
 * one more than a page is asked for to know whether an older page exists. */
async function listTasks(filters, cursor, signal) {
  const limit = Number(filters.limit || 100);
  const query = { queue: filters.queue, state: filters.state, name: filters.name, limit: limit + 1 };
  if (cursor) query.before = cursor;
  const data = await read('tasks_list', [], { query, signal });
  const items = Array.isArray(data) ? data.slice(0, limit) : [];
  const next = data.length > limit && items.length ? String(items[items.length - 1].id) : null;
  return { items, next, notice: null };
}

function filterForm(filters) {
  const form = h('form', { class: 'filters inline', role: 'search', 'aria-label': 'Filter tasks', 'data-testid': 'tasks-filters' },
    h('div', { class: 'filter-row' },
      h('div', { class: 'field' }, h('label', { for: 't-queue' }, 'Queue'),
        h('input', { id: 't-queue', name: 'queue', value: filters.queue, placeholder: 'Any', 'data-testid': 'filter-queue', autocomplete: 'off' })),
      h('div', { class: 'field' }, h('label', { for: 't-name' }, 'Name'),
        h('input', { id: 't-name', name: 'name', value: filters.name, placeholder: 'Any', 'data-testid': 'filter-name', 'data-slash': '', autocomplete: 'off' })),
      h('div', { class: 'field' }, h('label', { for: 't-limit' }, 'Per page'),
        h('select', { id: 't-limit', name: 'limit', 'data-testid': 'filter-limit' },
          ['50', '100', '250', '1000'].map((n) => h('option', { value: n, selected: (filters.limit || '100') === n }, n)))),
      h('div', { class: 'filter-buttons' },
        h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'filter-apply' }, 'Apply'),
        h('button', { type: 'button', class: 'btn', 'data-testid': 'filter-clear', onclick: () => navigate(withQuery('/tasks', { state: filters.state })) }, 'Clear'))));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const d = new FormData(form);
    navigate(withQuery('/tasks', {
      queue: String(d.get('queue') || '').trim(),
      name: String(d.get('name') || '').trim(),
      state: filters.state,
      limit: d.get('limit') === '100' ? '' : d.get('limit'),
    }));
  });
  return form;
}

function taskTable(items, filters, cursor, next, route, reload) {
  const index = trail.cursors.indexOf(cursor);
  const prev = index > 0 ? trail.cursors[index - 1] : null;
  const pager = (cursor || next) ? h('nav', { class: 'pager', 'aria-label': 'Pages', 'data-testid': 'pager' },
    h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'page-first', disabled: !cursor, onclick: () => navigate(withQuery('/tasks', filters)) }, '« Newest'),
    h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'page-prev', disabled: prev === null, onclick: () => navigate(withQuery('/tasks', { ...filters, cursor: prev })) }, '‹ Newer'),
    h('button', {
      type: 'button',
      class: 'btn btn-small',
      'data-testid': 'page-next',
      disabled: !next,
      onclick: () => {
        trail.cursors = trail.cursors.slice(0, index + 1).concat(next);
        navigate(withQuery('/tasks', { ...filters, cursor: next }));
      },
    }, 'Older ›')) : null;

  if (!items.length) {
    if (filters.state === 'Dead' && !filters.queue && !filters.name) {
      return emptyState({ title: 'No dead letters.', text: 'A task that fails every attempt it is allowed lands here, to be retried or discarded.' });
    }
    if (filters.queue || filters.state || filters.name || cursor) {
      return [emptyState({ title: 'No tasks match these filters.', text: 'Try another state or queue.' }), pager];
    }
    return emptyState({ title: 'No tasks yet.', text: 'Enqueue one from the command line or over HTTP:', commands: enqueueCommands() });
  }

  const writer = can('write');
  const admin = can('admin');
  const selectable = writer;
  const selected = new Set();
  const count = h('span', { 'data-testid': 'selection-count' });
  const buttons = {
    retry: writer ? h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'bulk-retry', onclick: () => bulk('retry') }, 'Retry…') : null,
    cancel: writer ? h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'bulk-cancel', onclick: () => bulk('cancel') }, 'Cancel…') : null,
    discard: admin ? h('button', { type: 'button', class: 'btn btn-small btn-danger', 'data-testid': 'bulk-discard', onclick: () => bulk('discard') }, 'Discard…') : null,
  };
  const bar = h('div', { class: 'bulk-bar', 'data-testid': 'bulk-bar', hidden: true, role: 'region', 'aria-label': 'Selection' },
    count, buttons.retry, buttons.cancel, buttons.discard,
    h('button', { type: 'button', class: 'link-btn', 'data-testid': 'bulk-clear', onclick: () => setAll(false) }, 'Clear selection'));
  const boxes = [];
  const selectAll = selectable ? h('input', { type: 'checkbox', 'aria-label': 'Select every task on this page', 'data-testid': 'select-all', onchange: (e) => setAll(e.target.checked) }) : null;
  const byId = new Map(items.map((t) => [String(t.id), t]));

  function update() {
    bar.hidden = selected.size === 0;
    count.textContent = `${selected.size} selected`;
    for (const [action, button] of Object.entries(buttons)) {
      if (!button) continue;
      const n = [...selected].filter((id) => ALLOWED[action].has(byId.get(id).state)).length;
      button.disabled = n === 0;
      button.title = n === 0 ? `None of the selected tasks can be ${action === 'retry' ? 'retried' : action === 'cancel' ? 'cancelled' : 'discarded'} in its state` : '';
    }
    showSelectAll(selectAll, selected, items.length);
  }
  function setAll(on) {
    setAllBoxes(boxes, selected, on);
    update();
  }

  async function bulk(action) {
    const ids = [...selected].filter((id) => ALLOWED[action].has(byId.get(id).state));
    const skipped = selected.size - ids.length;
    const verb = { retry: 'Retry', cancel: 'Cancel', discard: 'Discard' }[action];
    const ok = await confirmAction({
      title: `${verb} ${ids.length} task${ids.length === 1 ? '' : 's'}?`,
      body: [
        h('p', {}, {
          retry: 'Each runs again with a fresh budget of attempts.',
          cancel: 'Waiting tasks are cancelled at once; running ones when their worker next hears from the store.',
          discard: 'Each is removed for good, with its input, output and error. This cannot be undone.',
        }[action]),
        skipped ? h('p', { class: 'warn' }, `${skipped} selected task${skipped === 1 ? ' is' : 's are'} left out: not possible in ${skipped === 1 ? 'its' : 'their'} state.`) : null,
        h('p', { class: 'mono small' }, ids.slice(0, 30).join(', ') + (ids.length > 30 ? ` … and ${ids.length - 30} more` : '')),
      ],
      confirmLabel: `${verb} ${ids.length}`,
      danger: action !== 'retry',
      testid: `confirm-bulk-${action}`,
    });
    if (!ok) return;
    try {
      const r = await call(`tasks_act_many_${action}`, [], { body: { ids: ids.map(Number) } });
      const outcomes = Array.isArray(r.data) ? r.data : [];
      const failed = outcomes.filter((o) => o.problem);
      lastAction = {
        calls: [r.call],
        summary: h('span', {}, `${outcomes.length - failed.length} of ${ids.length} ${action === 'retry' ? 'retried' : action === 'cancel' ? 'cancelled' : 'discarded'}.`,
          failed.length ? h('ul', { class: 'bad', 'data-testid': 'bulk-failures' }, failed.map((o) => h('li', {}, `Task ${o.id}: ${o.problem.title}${o.problem.detail ? ': ' + o.problem.detail : ''}`))) : null),
      };
    } catch (e) {
      lastAction = { error: e, calls: e.call ? [e.call] : [], summary: problemText(e) };
    }
    reload();
  }

  const dead = filters.state === 'Dead';
  const rows = items.map((t) => {
    const box = selectable ? h('input', {
      type: 'checkbox',
      value: String(t.id),
      'aria-label': `Select task ${t.id}`,
      'data-testid': 'select-row',
      onchange: (e) => {
        if (e.target.checked) selected.add(String(t.id));
        else selected.delete(String(t.id));
        e.target.closest('tr').classList.toggle('selected', e.target.checked);
        update();
      },
    }) : null;
    if (box) boxes.push(box);
    return h('tr', { 'data-testid': 'task-row', 'data-task-id': t.id, 'data-state': t.state },
      selectable ? h('td', { class: 'select-col' }, box) : null,
      h('td', {}, idWithCopy(t.id, '#' + taskRoute(t.id), { 'data-testid': 'task-link' })),
      h('td', {}, t.name),
      h('td', {}, h('a', { href: '#' + withQuery('/tasks', { queue: t.queue, state: filters.state }), class: 'chip' }, t.queue)),
      h('td', {}, badge(t.state)),
      h('td', { class: 'num', title: `Attempt ${t.attempt} of ${t.max_attempts}` }, `${t.attempt} / ${t.max_attempts}`),
      dead ? null : h('td', { class: 'num' }, String(t.priority)),
      h('td', {}, timeEl(t.created_at)),
      h('td', {}, t.finished_at ? timeEl(t.finished_at) : h('span', { title: 'Runs next at' }, timeEl(t.run_at))),
      h('td', { class: 'small error-cell' }, t.error
        ? h('span', { 'data-testid': 'task-error', title: `${t.error.kind}: ${t.error.message}` }, h('strong', {}, t.error.kind), ' ', jsonInline(t.error.message, dead ? 120 : 60))
        : ''));
  });

  return [
    selectable ? bar : null,
    h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-testid': 'tasks-table' },
      h('thead', {}, h('tr', {},
        selectable ? h('th', { class: 'select-col' }, selectAll) : null,
        h('th', {}, 'Task'), h('th', {}, 'Name'), h('th', {}, 'Queue'), h('th', {}, 'State'),
        h('th', { class: 'num' }, 'Attempts'), dead ? null : h('th', { class: 'num' }, 'Priority'),
        h('th', {}, 'Created'), h('th', {}, 'Finished / next run'), h('th', {}, dead ? 'Last error' : 'Error'))),
      h('tbody', {}, rows))),
    pager,
  ];
}
