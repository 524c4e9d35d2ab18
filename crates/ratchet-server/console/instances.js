// Instances (#/instances?status=Failed&name=order&since=1h&id_prefix=o-&cursor=...): the
// list filtered by status, name, time range, id prefix and custom status; keyset pages
// (`cursor`), a remembered trail of cursors for "previous"; rows selected for a bulk cancel
// or terminate, each confirmed.

import { h, replace } from './dom.js';
import { call, can, eachLimited, read } from './api.js';
import { problemBox, problemText, note } from './problem.js';
import { timeEl, duration, toDate, RANGES, fromLocalInput, toLocalInput } from './time.js';
import { badge, INSTANCE_STATUSES, FINISHED } from './status.js';
import { idWithCopy } from './copy.js';
import { jsonInline } from './json.js';
import { confirmAction } from './dialog.js';
import { apiCallPanel } from './apicall.js';
import { emptyState, startCommands } from './empty.js';
import { instanceRoute, navigate, withQuery } from './url.js';
import { setAllBoxes, showSelectAll } from './selection.js';

const FILTERS = ['status', 'name', 'id_prefix', 'custom_status', 'since', 'created_after', 'created_before', 'limit'];

/** Cursors of the pages visited with the current filters, in order ('' is the first page). */
let trail = { key: null, cursors: [''] };
/** The result of the last bulk action, shown once after the list reloads. */
let lastAction = null;
/** The registry's orchestration names, for the name filter's suggestions. */
let knownNames = null;

export async function render(root, route) {
  route.title('Instances');
  const params = route.params;
  const filters = {};
  for (const k of FILTERS) filters[k] = params.get(k) || '';
  const cursor = params.get('cursor') || '';
  const key = JSON.stringify(filters);
  if (trail.key !== key) trail = { key, cursors: [''] };
  if (!trail.cursors.includes(cursor)) trail.cursors.push(cursor);

  const results = h('section', { class: 'card', 'data-testid': 'instances-results', 'aria-label': 'Instances', 'aria-busy': 'true' }, h('p', { class: 'loading' }, 'Loading…'));
  const actionArea = h('div', { 'data-testid': 'action-result' });
  replace(root,
    h('header', { class: 'page-head' }, h('h1', {}, 'Instances'),
      h('div', { class: 'page-actions' }, h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'refresh', onclick: () => navigate(route.path + currentQuery(params)) }, 'Refresh'))),
    filterForm(filters),
    actionArea,
    results);

  if (lastAction) {
    const shown = lastAction;
    lastAction = null;
    if (shown.error) actionArea.appendChild(problemBox(shown.error));
    if (shown.calls && shown.calls.length) {
      actionArea.appendChild(apiCallPanel(shown.calls, { summary: shown.summary, onDismiss: () => replace(actionArea) }));
    }
  }

  try {
    const { items, next, notice } = await load(filters, cursor, route.signal);
    results.setAttribute('aria-busy', 'false');
    replace(results, notice ? note(notice, { 'data-testid': 'instances-note' }) : null,
      table(items, filters, cursor, next, route));
  } catch (e) {
    results.setAttribute('aria-busy', 'false');
    replace(results, problemBox(e));
  }
}

function currentQuery(params) {
  const text = params.toString();
  return text ? '?' + text : '';
}

/** The list query of `filters` for the API. */
function apiQuery(filters, cursor) {
  const q = {
    status: filters.status,
    name: filters.name,
    custom_status: filters.custom_status,
    created_after: filters.created_after,
    created_before: filters.created_before,
    limit: filters.limit || 50,
    cursor,
  };
  if (filters.since && RANGES[filters.since]) {
    q.created_after = new Date(Date.now() - RANGES[filters.since]).toISOString();
  }
  return q;
}

async function load(filters, cursor, signal) {
  const query = { ...apiQuery(filters, cursor), id_prefix: filters.id_prefix };
  const page = await read('instances_list', [], { query, signal });
  return { items: page.items || [], next: page.next || null };
}

function filterForm(filters) {
  const statuses = new Set(filters.status ? filters.status.split(',') : []);
  const custom = Boolean(filters.created_after || filters.created_before) && !filters.since;
  const since = h('select', { id: 'f-since', name: 'since', 'data-testid': 'filter-since' },
    h('option', { value: '', selected: !filters.since && !custom }, 'Any time'),
    Object.keys(RANGES).map((r) => h('option', { value: r, selected: filters.since === r }, `Last ${r.replace('m', ' min').replace('h', ' h').replace('d', ' days')}`)),
    h('option', { value: 'custom', selected: custom }, 'Between…'));
  const after = h('input', { id: 'f-after', type: 'datetime-local', name: 'created_after', value: toLocalInput(filters.created_after), 'data-testid': 'filter-created-after' });
  const before = h('input', { id: 'f-before', type: 'datetime-local', name: 'created_before', value: toLocalInput(filters.created_before), 'data-testid': 'filter-created-before' });
  const range = h('div', { class: 'field range', hidden: !custom },
    h('label', { for: 'f-after' }, 'Created after'), after,
    h('label', { for: 'f-before' }, 'and before'), before);
  since.addEventListener('change', () => { range.hidden = since.value !== 'custom'; });
  const names = h('datalist', { id: 'f-names' });
  loadNames(names);

  const form = h('form', { class: 'filters card', role: 'search', 'aria-label': 'Filter instances', 'data-testid': 'instances-filters' },
    h('fieldset', { class: 'status-chips', 'data-testid': 'filter-status' },
      h('legend', { class: 'sr-only' }, 'Status'),
      INSTANCE_STATUSES.map((st) => h('label', { class: `chip-toggle status-${st.toLowerCase()}` },
        h('input', { type: 'checkbox', name: 'status', value: st, checked: statuses.has(st), 'data-testid': `filter-status-${st}` }),
        h('span', {}, st === 'ContinuedAsNew' ? 'Continued' : st)))),
    h('div', { class: 'filter-row' },
      h('div', { class: 'field' }, h('label', { for: 'f-id' }, 'Id prefix'),
        h('input', { id: 'f-id', name: 'id_prefix', value: filters.id_prefix, placeholder: 'order-', 'data-testid': 'filter-id-prefix', 'data-slash': '', autocomplete: 'off', spellcheck: 'false' })),
      h('div', { class: 'field' }, h('label', { for: 'f-name' }, 'Name'),
        h('input', { id: 'f-name', name: 'name', value: filters.name, list: 'f-names', placeholder: 'Any', 'data-testid': 'filter-name', autocomplete: 'off' }), names),
      h('div', { class: 'field' }, h('label', { for: 'f-custom' }, 'Custom status'),
        h('input', { id: 'f-custom', name: 'custom_status', value: filters.custom_status, placeholder: 'awaiting-delivery', 'data-testid': 'filter-custom-status', autocomplete: 'off' })),
      h('div', { class: 'field' }, h('label', { for: 'f-since' }, 'Created'), since),
      h('div', { class: 'field' }, h('label', { for: 'f-limit' }, 'Per page'),
        h('select', { id: 'f-limit', name: 'limit', 'data-testid': 'filter-limit' },
          ['25', '50', '100', '250'].map((n) => h('option', { value: n, selected: (filters.limit || '50') === n }, n)))),
      h('div', { class: 'filter-buttons' },
        h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'filter-apply' }, 'Apply'),
        h('button', { type: 'button', class: 'btn', 'data-testid': 'filter-clear', onclick: () => navigate('/instances') }, 'Clear'))),
    range);

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const data = new FormData(form);
    const sinceValue = data.get('since');
    const next = {
      status: data.getAll('status').join(','),
      name: String(data.get('name') || '').trim(),
      id_prefix: String(data.get('id_prefix') || '').trim(),
      custom_status: String(data.get('custom_status') || '').trim(),
      since: sinceValue && sinceValue !== 'custom' ? sinceValue : '',
      created_after: sinceValue === 'custom' ? fromLocalInput(data.get('created_after')) : '',
      created_before: sinceValue === 'custom' ? fromLocalInput(data.get('created_before')) : '',
      limit: data.get('limit') === '50' ? '' : data.get('limit'),
    };
    navigate(withQuery('/instances', next));
  });
  // Status chips apply at once, as one expects of toggles.
  form.querySelector('.status-chips').addEventListener('change', () => form.requestSubmit());
  return form;
}

async function loadNames(datalist) {
  if (!knownNames) {
    try {
      const r = await read('system_registry', []);
      knownNames = (r.orchestrations || []).map((o) => o.name);
    } catch {
      knownNames = [];
    }
  }
  replace(datalist, knownNames.map((n) => h('option', { value: n })));
}

function table(items, filters, cursor, next, route) {
  const filtered = FILTERS.some((k) => filters[k] && k !== 'limit');
  const index = trail.cursors.indexOf(cursor);
  const prev = index > 0 ? trail.cursors[index - 1] : null;
  const base = {};
  for (const k of FILTERS) base[k] = filters[k];
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages', 'data-testid': 'pager' },
    h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'page-first', disabled: !cursor, onclick: () => navigate(withQuery('/instances', base)) }, '« Newest'),
    h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'page-prev', disabled: prev === null, onclick: () => navigate(withQuery('/instances', { ...base, cursor: prev })) }, '‹ Newer'),
    h('span', { class: 'muted small', 'data-testid': 'page-info' }, items.length ? `${items.length} shown${index > 0 ? `, page ${index + 1}` : ''}` : ''),
    h('button', {
      type: 'button',
      class: 'btn btn-small',
      'data-testid': 'page-next',
      disabled: !next,
      onclick: () => {
        trail.cursors = trail.cursors.slice(0, index + 1).concat(next);
        navigate(withQuery('/instances', { ...base, cursor: next }));
      },
    }, 'Older ›'));

  if (!items.length) {
    return [
      filtered || cursor
        ? emptyState({ title: 'No instances match these filters.', text: 'Widen them, or clear them to see every instance.', testid: 'empty-state' })
        : emptyState({ title: 'No instances yet.', text: 'Start one from the command line or over HTTP:', commands: startCommands(), testid: 'empty-state' }),
      cursor ? pager : null,
    ];
  }

  const writer = can('write');
  const selected = new Set();
  const count = h('span', { 'data-testid': 'selection-count' }, '');
  const bulkCancel = h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'bulk-cancel', onclick: () => bulk('cancel') }, 'Cancel…');
  const bulkTerminate = h('button', { type: 'button', class: 'btn btn-small btn-danger', 'data-testid': 'bulk-terminate', onclick: () => bulk('terminate') }, 'Terminate…');
  const bulkBar = h('div', { class: 'bulk-bar', 'data-testid': 'bulk-bar', hidden: true, role: 'region', 'aria-label': 'Selection' },
    count, bulkCancel, bulkTerminate,
    h('button', { type: 'button', class: 'link-btn', 'data-testid': 'bulk-clear', onclick: () => setAll(false) }, 'Clear selection'));
  const selectAll = writer ? h('input', { type: 'checkbox', 'aria-label': 'Select every instance on this page', 'data-testid': 'select-all', onchange: (e) => setAll(e.target.checked) }) : null;
  const boxes = [];

  function update() {
    bulkBar.hidden = selected.size === 0;
    count.textContent = `${selected.size} selected`;
    showSelectAll(selectAll, selected, items.length);
  }
  function setAll(on) {
    setAllBoxes(boxes, selected, on);
    update();
  }

  async function bulk(action) {
    const ids = [...selected];
    const running = ids.filter((id) => {
      const i = items.find((x) => x.id === id);
      return i && !FINISHED.has(i.status);
    });
    const reason = h('input', { id: 'bulk-reason', type: 'text', placeholder: 'Optional', 'data-testid': 'bulk-reason' });
    const ok = await confirmAction({
      title: `${action === 'cancel' ? 'Cancel' : 'Terminate'} ${ids.length} instance${ids.length === 1 ? '' : 's'}?`,
      body: [
        h('p', {}, action === 'cancel'
          ? 'Each is asked to cancel: its pending steps fail with Cancelled and its code may clean up.'
          : 'Each stops at once, running no more of its code. This cannot be undone.'),
        running.length < ids.length ? h('p', { class: 'warn' }, `${ids.length - running.length} of them already finished: the server will refuse those.`) : null,
        h('ul', { class: 'id-list' }, ids.slice(0, 12).map((id) => h('li', { class: 'mono' }, id)), ids.length > 12 ? h('li', { class: 'muted' }, `… and ${ids.length - 12} more`) : null),
      ],
      fields: h('div', { class: 'field' }, h('label', { for: 'bulk-reason' }, 'Reason'), reason),
      collect: () => ({ reason: reason.value.trim() }),
      confirmLabel: action === 'cancel' ? `Cancel ${ids.length}` : `Terminate ${ids.length}`,
      danger: true,
      testid: `confirm-bulk-${action}`,
    });
    if (!ok) return;
    bulkCancel.disabled = bulkTerminate.disabled = true;
    const body = ok.reason ? { reason: ok.reason } : {};
    const results = await eachLimited(ids, 4, (id) => call(`instances_${action}`, [id], { body }));
    const calls = results.map((r) => (r.ok ? r.value.call : r.error.call));
    const failed = results.map((r, i) => (r.ok ? null : `${ids[i]}: ${problemText(r.error)}`)).filter(Boolean);
    const done = results.length - failed.length;
    lastAction = {
      calls,
      summary: h('span', {},
        `${done} of ${ids.length} ${action === 'cancel' ? 'asked to cancel' : 'terminated'}.`,
        failed.length ? h('ul', { class: 'bad', 'data-testid': 'bulk-failures' }, failed.map((f) => h('li', {}, f))) : null),
    };
    navigate(route.path + currentQuery(route.params));
  }

  const rows = items.map((i) => {
    const box = writer ? h('input', {
      type: 'checkbox',
      value: i.id,
      'aria-label': `Select ${i.id}`,
      'data-testid': 'select-row',
      onchange: (e) => {
        if (e.target.checked) selected.add(i.id);
        else selected.delete(i.id);
        e.target.closest('tr').classList.toggle('selected', e.target.checked);
        update();
      },
    }) : null;
    if (box) boxes.push(box);
    const start = toDate(i.created_at);
    const end = toDate(i.finished_at);
    return h('tr', { 'data-testid': 'instance-row', 'data-instance-id': i.id, 'data-status': i.status },
      writer ? h('td', { class: 'select-col' }, box) : null,
      h('td', {}, idWithCopy(i.id, '#' + instanceRoute(i.id), { 'data-testid': 'instance-link' })),
      h('td', {}, i.name, i.version ? h('span', { class: 'muted small' }, ` v${i.version}`) : null),
      h('td', {}, badge(i.status)),
      h('td', { class: 'small', title: i.custom_status === null || i.custom_status === undefined ? '' : JSON.stringify(i.custom_status) }, jsonInline(i.custom_status, 40)),
      h('td', {}, timeEl(i.created_at)),
      h('td', {}, timeEl(i.finished_at)),
      h('td', { class: 'num' }, start ? duration((end || new Date()).getTime() - start.getTime()) : '—'),
      h('td', { class: 'small error-cell' }, i.error ? h('span', { title: `${i.error.kind}: ${i.error.message}` }, h('strong', {}, i.error.kind), ' ', jsonInline(i.error.message, 60)) : ''));
  });

  return [
    writer ? bulkBar : null,
    h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-testid': 'instances-table' },
      h('thead', {}, h('tr', {},
        writer ? h('th', { class: 'select-col' }, selectAll) : null,
        h('th', {}, 'Instance'), h('th', {}, 'Name'), h('th', {}, 'Status'), h('th', {}, 'Custom status'),
        h('th', {}, 'Created'), h('th', {}, 'Finished'), h('th', { class: 'num' }, 'Duration'), h('th', {}, 'Error'))),
      h('tbody', {}, rows))),
    pager,
  ];
}
