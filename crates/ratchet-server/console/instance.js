// One instance (#/instances/<id>?view=timeline|graph): status, input, output or error, custom
// status, parent and children; the history as a timeline or as the graph; signal, cancel,
// terminate and restart, each confirmed and followed by the API call it made. While the
// instance runs the page follows /v1/instances/<id>/stream, or polls every 2 s without it.

import { h, replace } from './dom.js';
import { ApiError, call, can, pathOf, read } from './api.js';
import { follow } from './sse.js';
import { problemBox } from './problem.js';
import { timeEl, duration, toDate } from './time.js';
import { badge, FINISHED } from './status.js';
import { copyButton } from './copy.js';
import { jsonBlock, jsonEditor } from './json.js';
import { confirmAction, openDialog } from './dialog.js';
import { apiCallPanel } from './apicall.js';
import { timelineView } from './timeline.js';
import { graphView, loadGraph, swapGraph } from './graph.js';
import { instanceRoute, replaceUrl, withQuery } from './url.js';

const POLL_MS = 2000;

export async function render(root, route) {
  const id = route.id;
  route.title(id);
  const signal = route.signal;
  const state = {
    inst: null,
    records: [],
    keys: new Set(),
    open: new Set(),
    view: route.params.get('view') === 'graph' ? 'graph' : 'timeline',
    live: null,
    stream: null,
    polling: false,
    graphLoaded: false,
    graphBusy: false,
    graphStale: false,
    drawQueued: false,
  };

  const head = h('header', { class: 'page-head instance-head' });
  const actionArea = h('div', { class: 'action-area', 'data-testid': 'action-result' });
  const summary = h('section', { class: 'card summary', 'data-testid': 'instance-summary', 'aria-label': 'Summary' });
  const io = h('div', { class: 'grid-2 io', 'data-testid': 'instance-io' });
  const liveState = h('span', { class: 'live-state', 'data-testid': 'live-state', 'aria-live': 'polite' });
  const tabTimeline = h('button', { type: 'button', role: 'tab', id: 'tab-timeline', 'aria-controls': 'panel-history', 'data-testid': 'tab-timeline' }, 'Timeline');
  const tabGraph = h('button', { type: 'button', role: 'tab', id: 'tab-graph', 'aria-controls': 'panel-history', 'data-testid': 'tab-graph' }, 'Graph');
  const panel = h('div', { role: 'tabpanel', id: 'panel-history', class: 'tab-panel', 'data-testid': 'history-panel' });
  const tabs = h('section', { class: 'card history-card', 'aria-label': 'History' },
    h('div', { class: 'tabs-row' },
      h('div', { role: 'tablist', class: 'tabs', 'aria-label': 'History view' }, tabTimeline, tabGraph),
      h('span', { class: 'spacer' }), liveState),
    panel);

  replace(root,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/instances' }, 'Instances'), h('span', { 'aria-hidden': 'true' }, ' / '), h('span', { class: 'mono' }, id)),
    head, actionArea, summary, io, tabs);
  replace(summary, h('p', { class: 'loading' }, 'Loading…'));

  // Tabs: arrow keys move between them, as the ARIA pattern asks.
  const select = (view, focus = false) => {
    state.view = view;
    replaceUrl(withQuery(instanceRoute(id), { view: view === 'graph' ? 'graph' : '' }));
    drawTabs();
    drawPanel();
    if (focus) (view === 'graph' ? tabGraph : tabTimeline).focus();
  };
  tabTimeline.addEventListener('click', () => select('timeline'));
  tabGraph.addEventListener('click', () => select('graph'));
  for (const tab of [tabTimeline, tabGraph]) {
    tab.addEventListener('keydown', (e) => {
      if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
        e.preventDefault();
        select(state.view === 'graph' ? 'timeline' : 'graph', true);
      }
    });
  }

  // Loading ----------------------------------------------------------------------------

  try {
    state.inst = await read('instances_show', [id], { signal });
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) {
      replace(summary, problemBox(e), h('p', {}, 'No instance has this id (it may have been purged). ', h('a', { href: '#/instances' }, 'Back to the instances'), '.'));
      tabs.hidden = true;
      return;
    }
    throw e;
  }
  try {
    await catchUp();
  } catch (e) {
    replace(panel, problemBox(e));
  }
  draw();
  if (!finished()) startLive();
  else setLive('finished');

  function finished() {
    return FINISHED.has(state.inst.status);
  }

  function addRecords(items) {
    let added = false;
    for (const r of items) {
      const key = `${r.execution}.${r.seq}`;
      if (state.keys.has(key)) continue;
      state.keys.add(key);
      state.records.push(r);
      added = true;
    }
    if (added) {
      state.records.sort((a, b) => a.execution - b.execution || a.seq - b.seq);
      state.graphStale = true;
    }
    return added;
  }

  /** Reads the history after the last record known, a page at a time. */
  async function catchUp() {
    let after = state.records.length ? `${state.records[state.records.length - 1].execution}.${state.records[state.records.length - 1].seq}` : undefined;
    for (;;) {
      const page = await read('instances_history', [id], { query: { after, limit: 1000 }, signal });
      addRecords(page.items || []);
      if (!page.next) return;
      after = page.next;
    }
  }

  async function reloadAll() {
    state.records = [];
    state.keys = new Set();
    state.inst = await read('instances_show', [id], { signal });
    await catchUp();
    state.graphStale = true;
    draw();
  }

  // Live -------------------------------------------------------------------------------

  function setLive(mode, detail) {
    state.live = mode;
    liveState.dataset.state = mode;
    const text = {
      live: 'Live',
      polling: `Polling every ${POLL_MS / 1000} s`,
      reconnecting: 'Reconnecting…',
      finished: '',
      error: `Live updates stopped: ${detail || ''}`,
    }[mode];
    replace(liveState, mode === 'live' || mode === 'polling' ? h('span', { class: 'pulse', 'aria-hidden': 'true' }) : null, text);
    liveState.title = mode === 'polling' ? 'The live stream could not be opened (a proxy may block it): the page asks again every 2 seconds' : '';
  }

  function startLive() {
    setLive('reconnecting');
    state.stream = follow(pathOf('instances_stream', id), {
      signal,
      onOpen() {
        setLive('live');
        // Records appended between the first read and the stream's start.
        catchUp().then(scheduleDraw, () => {});
      },
      onState(s) {
        if (s === 'reconnecting' && state.live === 'live') setLive('reconnecting');
      },
      onMessage(m) {
        let data = null;
        try {
          data = m.data ? JSON.parse(m.data) : null;
        } catch {
          return;
        }
        if (m.event === 'instance' && data) {
          const restarted = state.inst && data.created_at !== state.inst.created_at;
          state.inst = data;
          if (restarted) reloadAll().catch(() => {});
          scheduleDraw();
        } else if ((m.event === 'history' || m.event === null || m.event === 'message') && data && data.event) {
          if (addRecords([data])) scheduleDraw();
        } else if (m.event === 'end') {
          state.stream.close();
          state.stream = null;
          refresh().then(() => setLive('finished'), () => setLive('finished'));
        }
      },
      onError(error) {
        state.stream = null;
        startPolling();
      },
    });
  }

  function startPolling() {
    if (state.polling) return;
    state.polling = true;
    setLive('polling');
    const tick = async () => {
      if (signal.aborted) return;
      try {
        await refresh();
        if (state.live === 'error') setLive('polling');
      } catch (e) {
        setLive('error', e.problem ? e.problem.title : e.message);
      }
      if (signal.aborted) return;
      if (finished()) {
        state.polling = false;
        setLive('finished');
        return;
      }
      setTimeout(tick, POLL_MS);
    };
    setTimeout(tick, POLL_MS);
  }

  /** Reads the instance and any new history; reloads all of it after a restart. */
  async function refresh() {
    const fresh = await read('instances_show', [id], { signal });
    // history_len counts the current execution's events; the records hold every execution.
    const known = state.records.filter((r) => r.execution === fresh.execution).length;
    const restarted = fresh.created_at !== state.inst.created_at || fresh.execution < state.inst.execution || fresh.history_len < known;
    const changed = restarted || fresh.updated_at !== state.inst.updated_at || fresh.history_len !== known || fresh.status !== state.inst.status;
    state.inst = fresh;
    if (restarted) {
      state.records = [];
      state.keys = new Set();
    }
    if (changed) {
      await catchUp();
      scheduleDraw();
    }
  }

  // Drawing ----------------------------------------------------------------------------

  function scheduleDraw() {
    if (state.drawQueued) return;
    state.drawQueued = true;
    requestAnimationFrame(() => {
      state.drawQueued = false;
      if (!signal.aborted) draw();
    });
  }

  function draw() {
    drawHead();
    drawSummary();
    drawIo();
    drawTabs();
    drawPanel();
  }

  function drawHead() {
    const i = state.inst;
    const writer = can('write');
    const done = finished();
    replace(head,
      h('div', { class: 'title-block' },
        h('h1', { class: 'instance-title' }, h('span', { class: 'mono', 'data-testid': 'instance-id' }, i.id), copyButton(i.id)),
        h('p', { class: 'subtitle' }, badge(i.status, { 'data-testid': 'instance-status' }), ' ',
          h('span', { 'data-testid': 'instance-name' }, i.name), i.version ? h('span', { class: 'muted' }, ` v${i.version}`) : null)),
      writer ? h('div', { class: 'page-actions', 'data-testid': 'instance-actions' },
        h('button', { type: 'button', class: 'btn', 'data-testid': 'action-signal', disabled: done, title: done ? 'It has finished' : 'Raise a signal', onclick: signalDialog }, 'Signal…'),
        h('button', { type: 'button', class: 'btn', 'data-testid': 'action-cancel', disabled: done, title: done ? 'It has finished' : 'Ask it to cancel', onclick: () => stop('cancel') }, 'Cancel…'),
        h('button', { type: 'button', class: 'btn btn-danger', 'data-testid': 'action-terminate', disabled: done, title: done ? 'It has finished' : 'Stop it at once', onclick: () => stop('terminate') }, 'Terminate…'),
        h('button', { type: 'button', class: 'btn', 'data-testid': 'action-restart', disabled: !done, title: done ? 'Start afresh with its name and input' : 'Only a finished instance can be restarted', onclick: restart }, 'Restart…')) : null);
  }

  function drawSummary() {
    const i = state.inst;
    const created = toDate(i.created_at);
    const ended = toDate(i.finished_at);
    const children = childrenOf(state.records);
    const row = (label, value, testid) => [h('dt', {}, label), h('dd', { 'data-testid': testid || null }, value)];
    replace(summary, h('dl', { class: 'kv summary-grid' },
      row('Status', badge(i.status)),
      row('Custom status', i.custom_status === null || i.custom_status === undefined
        ? h('span', { class: 'muted' }, '—')
        : h('code', { class: 'mono' }, typeof i.custom_status === 'string' ? i.custom_status : JSON.stringify(i.custom_status)), 'instance-custom-status'),
      row('Created', timeEl(i.created_at)),
      row(ended ? 'Finished' : 'Updated', timeEl(ended ? i.finished_at : i.updated_at)),
      row(ended ? 'Took' : 'Running for', created ? duration((ended || new Date()).getTime() - created.getTime()) : '—'),
      row('Execution', `${i.execution}${i.execution > 0 ? ' (continued as new)' : ''}`),
      row('History', `${i.history_len} events`),
      row('Parent', i.parent
        ? h('span', {}, h('a', { href: '#' + instanceRoute(i.parent.instance), class: 'mono', 'data-testid': 'instance-parent-link' }, i.parent.instance), h('span', { class: 'muted small' }, ` step #${i.parent.seq}`))
        : h('span', { class: 'muted' }, '—'), 'instance-parent'),
      row('Children', children.length
        ? h('ul', { class: 'children' }, children.map((c) => h('li', {},
          h('a', { href: '#' + instanceRoute(c.instance), class: 'mono', 'data-testid': 'instance-child-link' }, c.instance), ' ',
          h('span', { class: 'muted small' }, c.name), ' ', badge(c.status))))
        : h('span', { class: 'muted' }, '—'), 'instance-children')));
  }

  function drawIo() {
    const i = state.inst;
    const out = i.error
      ? h('section', { class: 'card io-error', 'aria-label': 'Error' }, h('h2', {}, 'Error'),
        h('p', { class: 'error-line', 'data-testid': 'instance-error' }, h('strong', {}, i.error.kind || 'Error'), ': ', i.error.message || ''),
        jsonBlock(i.error, { label: 'error' }))
      : h('section', { class: 'card', 'aria-label': 'Output' }, h('h2', {}, 'Output'),
        i.output === null || i.output === undefined
          ? h('p', { class: 'muted', 'data-testid': 'instance-output' }, finished() ? 'No output.' : 'Not finished yet.')
          : jsonBlock(i.output, { testid: 'instance-output', label: 'output' }));
    replace(io,
      h('section', { class: 'card', 'aria-label': 'Input' }, h('h2', {}, 'Input'), jsonBlock(i.input, { testid: 'instance-input', label: 'input' })),
      out);
  }

  function drawTabs() {
    tabTimeline.setAttribute('aria-selected', String(state.view === 'timeline'));
    tabGraph.setAttribute('aria-selected', String(state.view === 'graph'));
    tabTimeline.tabIndex = state.view === 'timeline' ? 0 : -1;
    tabGraph.tabIndex = state.view === 'graph' ? 0 : -1;
    panel.setAttribute('aria-labelledby', state.view === 'graph' ? 'tab-graph' : 'tab-timeline');
  }

  function drawPanel() {
    if (state.view === 'timeline') {
      state.graphLoaded = false;
      replace(panel, timelineView(state.records, state.inst, state.open));
    } else {
      drawGraph();
    }
  }

  async function drawGraph() {
    if (state.graphLoaded && !state.graphStale) return;
    if (state.graphBusy) return;
    state.graphBusy = true;
    const first = !state.graphLoaded;
    if (first) replace(panel, h('p', { class: 'loading' }, 'Drawing the graph…'));
    try {
      state.graphStale = false;
      const { svg, text } = await loadGraph(id, signal);
      if (state.view !== 'graph') return;
      if (first || !swapGraph(panel, svg)) replace(panel, graphView(svg, text, id));
      state.graphLoaded = true;
    } catch (e) {
      if (state.view === 'graph') replace(panel, problemBox(e));
    } finally {
      state.graphBusy = false;
    }
    // Changes that arrived while drawing: draw again, at most every 2 seconds.
    if (state.graphStale && state.view === 'graph' && !signal.aborted) setTimeout(() => drawGraph(), POLL_MS);
  }

  // Actions ----------------------------------------------------------------------------

  function showCalls(calls, summaryText, error) {
    replace(actionArea,
      error ? problemBox(error) : null,
      apiCallPanel(calls, { summary: summaryText, onDismiss: () => replace(actionArea) }));
  }

  async function afterAction() {
    try {
      await refresh();
    } catch (e) {
      replace(actionArea, problemBox(e));
    }
    draw();
    if (!finished() && !state.stream && !state.polling) startLive();
  }

  function signalDialog() {
    const known = [...new Set(state.records.filter((r) => r.event && r.event.type === 'SignalReceived').map((r) => r.event.name))];
    const name = h('input', { id: 'signal-name', required: true, autocomplete: 'off', list: 'signal-names', placeholder: 'delivered', 'data-testid': 'signal-name' });
    const dedup = h('input', { id: 'signal-dedup', autocomplete: 'off', placeholder: 'Optional: raise at most once per id', 'data-testid': 'signal-dedup' });
    const send = h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'signal-send', disabled: true }, 'Send signal');
    const editor = jsonEditor({ value: null, id: 'signal-payload', testid: 'signal-payload', rows: 8, onChange: () => update() });
    editor.textarea.value = '';
    const problem = h('div', { 'data-testid': 'signal-problem' });
    function update() {
      send.disabled = !editor.valid() || name.value.trim() === '';
    }
    name.addEventListener('input', update);
    const d = openDialog({
      title: `Signal ${id}`,
      testid: 'signal-dialog',
      wide: true,
      closeLabel: 'Cancel',
      content: [
        h('div', { class: 'field' }, h('label', { for: 'signal-name' }, 'Name'), name,
          h('datalist', { id: 'signal-names' }, known.map((n) => h('option', { value: n })))),
        h('div', { class: 'field' }, h('label', { for: 'signal-payload' }, 'Payload (JSON)'), editor.el),
        h('div', { class: 'field' }, h('label', { for: 'signal-dedup' }, 'Dedup id'), dedup),
        problem,
      ],
      actions: [send],
    });
    name.focus();
    d.dialog.querySelector('form').addEventListener('submit', async (e) => {
      e.preventDefault();
      editor.check();
      update();
      if (send.disabled) return;
      send.disabled = true;
      const body = { name: name.value.trim(), payload: editor.value() };
      if (dedup.value.trim()) body.dedup_id = dedup.value.trim();
      try {
        const r = await call('instances_signal', [id], { body });
        d.close();
        showCalls([r.call], r.data && r.data.raised === false
          ? 'Not raised: a signal with this dedup id was raised before.'
          : `Signal ${body.name} raised.`);
        afterAction();
      } catch (err) {
        replace(problem, problemBox(err));
        send.disabled = false;
      }
    });
  }

  async function stop(action) {
    const reason = h('input', { id: 'stop-reason', autocomplete: 'off', placeholder: 'Optional', 'data-testid': 'stop-reason' });
    const ok = await confirmAction({
      title: `${action === 'cancel' ? 'Cancel' : 'Terminate'} ${id}?`,
      body: h('p', {}, action === 'cancel'
        ? 'It is asked to cancel: its pending steps fail with Cancelled, and its code may clean up (compensate) before it ends.'
        : 'It stops at once, running no more of its code: no clean-up runs. This cannot be undone.'),
      fields: h('div', { class: 'field' }, h('label', { for: 'stop-reason' }, 'Reason'), reason),
      collect: () => ({ reason: reason.value.trim() }),
      confirmLabel: action === 'cancel' ? 'Cancel instance' : 'Terminate instance',
      danger: true,
      testid: `confirm-${action}`,
    });
    if (!ok) return;
    const body = ok.reason ? { reason: ok.reason } : {};
    try {
      const r = await call(`instances_${action}`, [id], { body });
      showCalls([r.call], action === 'cancel' ? 'Cancellation requested.' : 'Terminated.');
    } catch (e) {
      showCalls(e.call ? [e.call] : [], null, e);
    }
    afterAction();
  }

  async function restart() {
    const ok = await confirmAction({
      title: `Restart ${id}?`,
      body: h('p', {}, `It starts afresh under the same id, with its name (${state.inst.name}) and input. Its current history is replaced by the new run's.`),
      confirmLabel: 'Restart instance',
      testid: 'confirm-restart',
    });
    if (!ok) return;
    try {
      const r = await call('instances_restart', [id]);
      showCalls([r.call], 'Restarted.');
      await reloadAll();
      if (!finished() && !state.stream && !state.polling) startLive();
    } catch (e) {
      showCalls(e.call ? [e.call] : [], null, e);
    }
  }
}

/** Children started by sub-orchestration steps, with their outcome as the history says. */
function childrenOf(records) {
  const bySeq = new Map();
  for (const r of records) {
    const e = r.event || {};
    if (e.type === 'SubOrchestrationScheduled') bySeq.set(`${r.execution}:${e.seq}`, { instance: e.instance, name: e.name, status: 'Running' });
    if (e.type === 'SubOrchestrationCompleted' && bySeq.has(`${r.execution}:${e.seq}`)) bySeq.get(`${r.execution}:${e.seq}`).status = 'Completed';
    if (e.type === 'SubOrchestrationFailed' && bySeq.has(`${r.execution}:${e.seq}`)) bySeq.get(`${r.execution}:${e.seq}`).status = 'Failed';
  }
  return [...bySeq.values()];
}
