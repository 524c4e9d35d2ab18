// One schedule (#/schedules/<name>): its spec, policies and progress, its next ticks, its latest
// fires with the runs they started; pause (with a note), resume, trigger now, backfill a range
// and delete, each confirmed and followed by the API call it made. Read again every 2 seconds.

import { h, replace } from './dom.js';
import { ApiError, call, can, read } from './api.js';
import { problemBox } from './problem.js';
import { timeEl, duration, fromLocalInput, toLocalInput } from './time.js';
import { badge } from './status.js';
import { copyButton, idWithCopy } from './copy.js';
import { jsonBlock } from './json.js';
import { confirmAction } from './dialog.js';
import { apiCallPanel } from './apicall.js';
import { navigate } from './url.js';
import { actionInput, actionText, rememberAction, runRoute, stateBadge } from './schedules.js';

const POLL_MS = 2000;
const UPCOMING = 5;
const RECENT = 10;

export async function render(root, route) {
  const name = route.id;
  route.title(`Schedule ${name}`);
  const head = h('header', { class: 'page-head' });
  const actionArea = h('div', { class: 'action-area', 'data-testid': 'action-result' });
  const body = h('div', { class: 'stack', 'data-testid': 'schedule-detail' }, h('p', { class: 'loading' }, 'Loading…'));
  replace(root,
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/schedules' }, 'Schedules'), h('span', { 'aria-hidden': 'true' }, ' / '), h('span', {}, name)),
    head, actionArea, body);

  let described = null;
  let shown = '';
  let gone = false;
  const load = () => read('schedules_describe', [name], { query: { upcoming: UPCOMING, recent: RECENT }, signal: route.signal });
  try {
    described = await load();
  } catch (e) {
    replace(body, problemBox(e), e instanceof ApiError && e.status === 404
      ? h('p', {}, 'No schedule has this name: it may have been deleted. ', h('a', { href: '#/schedules' }, 'Back to the schedules'), '.')
      : null);
    return;
  }
  draw();
  poll();

  function poll() {
    setTimeout(async () => {
      if (route.signal.aborted || gone) return;
      try {
        described = await load();
        draw();
      } catch (e) {
        replace(actionArea, problemBox(e));
        return;
      }
      poll();
    }, POLL_MS);
  }

  /** Redraws what changed, keeping keyboard focus on the control that had it. */
  function draw() {
    const text = JSON.stringify(described);
    if (text === shown) return;
    shown = text;
    keepingFocus(() => {
      drawHead();
      drawBody();
    });
  }

  function drawHead() {
    const s = described.schedule;
    const writer = can('write');
    replace(head,
      h('div', { class: 'title-block' },
        h('h1', {}, 'Schedule ', h('span', { 'data-testid': 'schedule-name' }, s.name), copyButton(s.name, 'name')),
        h('p', { class: 'subtitle' }, stateBadge(s), ' ',
          h('span', { 'data-testid': 'schedule-action' }, actionText(s.action)), ' ',
          h('code', {}, s.spec), h('span', { class: 'muted' }, ` (${s.time_zone})`),
          s.paused && s.note ? h('span', { class: 'muted', 'data-testid': 'schedule-note' }, ` · ${s.note}`) : null)),
      writer && !gone ? h('div', { class: 'page-actions', 'data-testid': 'schedule-actions' },
        s.paused
          ? h('button', { type: 'button', class: 'btn', 'data-testid': 'action-resume', title: 'Fire again from the next tick', onclick: resume }, 'Resume…')
          : h('button', { type: 'button', class: 'btn', 'data-testid': 'action-pause', title: 'Fire nothing until resumed', onclick: pause }, 'Pause…'),
        h('button', { type: 'button', class: 'btn', 'data-testid': 'action-trigger', title: 'Fire once now, whatever the spec, pause or overlap policy', onclick: trigger }, 'Trigger now…'),
        h('button', { type: 'button', class: 'btn', 'data-testid': 'action-backfill', title: 'Fire the ticks of a past range that started no run', onclick: backfill }, 'Backfill…'),
        h('button', { type: 'button', class: 'btn btn-danger', 'data-testid': 'action-delete', title: 'Delete it and its fire records', onclick: remove }, 'Delete…')) : null);
  }

  function drawBody() {
    const s = described.schedule;
    const none = (text = '—') => h('span', { class: 'muted' }, text);
    const row = (label, value, testid) => [h('dt', {}, label), h('dd', { 'data-testid': testid || null }, value)];
    replace(body,
      h('section', { class: 'card summary', 'aria-label': 'Schedule' }, h('dl', { class: 'kv summary-grid', 'data-testid': 'schedule-fields' },
        row('State', [stateBadge(s, { 'data-testid': null }), s.note ? h('span', { class: 'muted small' }, ' ', s.note) : null]),
        row('Spec', h('code', {}, s.spec), 'schedule-spec'),
        row('Zone', s.time_zone),
        row('Each tick', actionText(s.action)),
        row('Overlap', s.overlap, 'schedule-overlap'),
        row('Catch-up', s.catch_up),
        row('Jitter', s.jitter_ms ? `up to ${duration(s.jitter_ms)}` : none('none')),
        row('Runs left', s.remaining_actions === null || s.remaining_actions === undefined ? none('no limit') : String(s.remaining_actions)),
        row('Starts', s.start_at ? timeEl(s.start_at) : none()),
        row('Ends', s.end_at ? timeEl(s.end_at) : none('never')),
        row('Next fire', s.paused ? none('paused') : s.next_fire_at ? timeEl(s.next_fire_at, { ago: true }) : none('never again'), 'schedule-next'),
        row('Last tick', timeEl(s.last_tick)),
        row('Running', s.running ? idWithCopy(s.running, '#' + runRoute(s.action, s.running)) : none()),
        row('Buffered tick', s.buffered ? timeEl(s.buffered) : none()),
        row('Missed', s.missed ? h('span', { class: 'warn' }, String(s.missed)) : '0', 'schedule-missed'),
        row('Created', timeEl(s.created_at)),
        row('Updated', timeEl(s.updated_at)),
        row('Version', String(s.version)))),
      h('div', { class: 'grid-2' },
        h('section', { class: 'card', 'aria-labelledby': 'sch-upcoming' },
          h('h2', { id: 'sch-upcoming' }, 'Next ticks'),
          described.upcoming.length
            ? h('ol', { class: 'upcoming', 'data-testid': 'schedule-upcoming' }, described.upcoming.map((t) => h('li', { 'data-testid': 'upcoming-tick' }, timeEl(t, { ago: true }))))
            : h('p', { class: 'muted', 'data-testid': 'schedule-upcoming' }, s.paused ? 'None while it is paused.' : 'None: it never fires again.')),
        h('section', { class: 'card', 'aria-label': 'Input of each run' },
          h('h2', {}, 'Input of each run'), jsonBlock(actionInput(s.action), { testid: 'schedule-input', label: 'input' }))),
      h('section', { class: 'card', 'aria-labelledby': 'sch-recent' },
        h('header', { class: 'card-head' }, h('h2', { id: 'sch-recent' }, 'Recent fires'),
          h('span', { class: 'muted small' }, `The latest ${RECENT}, newest first`)),
        fireTable(s, described.recent)));
  }

  function fireTable(s, fires) {
    if (!fires.length) {
      return h('p', { class: 'empty-inline', 'data-testid': 'fires-empty' }, 'No fires yet. ', s.paused ? 'It is paused.' : 'The first comes at its next tick, when a worker runs.');
    }
    const what = s.action && s.action.enqueue ? 'Task' : 'Instance';
    return h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-testid': 'fires-table' },
      h('thead', {}, h('tr', {},
        h('th', {}, 'Tick'), h('th', {}, 'Fired at'), h('th', { class: 'num', title: 'How long after the tick it fired (jitter included)' }, 'Late'),
        h('th', {}, 'Kind'), h('th', {}, what), h('th', {}, 'Status'))),
      h('tbody', {}, fires.map((f) => h('tr', { 'data-testid': 'fire-row', 'data-kind': f.kind },
        h('td', {}, timeEl(f.tick)),
        h('td', {}, timeEl(f.fired_at)),
        h('td', { class: 'num', title: `${f.late_ms} ms` }, `${f.late_ms} ms`),
        h('td', {}, h('span', { class: 'chip', 'data-testid': 'fire-kind' }, f.kind)),
        h('td', {}, f.run
          ? idWithCopy(f.run, '#' + runRoute(s.action, f.run), { 'data-testid': 'fire-run', 'data-key': `run:${f.run}` })
          : h('span', { class: 'muted' }, '—')),
        h('td', {}, f.skipped
          ? [badge('Skipped', { 'data-testid': 'fire-status' }), h('span', { class: 'muted small' }, ' ', f.skipped)]
          : f.status ? badge(f.status, { 'data-testid': 'fire-status' }) : h('span', { class: 'muted' }, '—')))))));
  }

  // Actions ----------------------------------------------------------------------------

  function showCalls(calls, summary, error) {
    replace(actionArea,
      error ? problemBox(error) : null,
      calls.length ? apiCallPanel(calls, { summary, onDismiss: () => replace(actionArea) }) : null);
  }

  /** Runs an action's request, shows the call it made, and reads the schedule again. */
  async function act(send, summary) {
    try {
      const r = await send();
      showCalls([r.call], typeof summary === 'function' ? summary(r.data) : summary);
    } catch (e) {
      showCalls(e.call ? [e.call] : [], null, e);
    }
    try {
      described = await load();
      draw();
    } catch (e) {
      replace(actionArea, problemBox(e));
    }
  }

  async function pause() {
    const noteInput = h('input', { id: 'pause-note', autocomplete: 'off', placeholder: 'Optional: why, for whoever looks next', 'data-testid': 'pause-note' });
    const ok = await confirmAction({
      title: `Pause schedule ${name}?`,
      body: h('p', {}, 'Nothing fires until it is resumed. The ticks it lets pass count as missed (backfill them if they are wanted); runs already started go on.'),
      fields: h('div', { class: 'field' }, h('label', { for: 'pause-note' }, 'Note'), noteInput),
      collect: () => ({ note: noteInput.value.trim() }),
      confirmLabel: 'Pause schedule',
      danger: true,
      testid: 'confirm-pause',
    });
    if (!ok) return;
    await act(() => call('schedules_pause', [name], { body: { note: ok.note } }), `Schedule ${name} paused.`);
  }

  async function resume() {
    const ok = await confirmAction({
      title: `Resume schedule ${name}?`,
      body: h('p', {}, 'It fires again from its next tick.'),
      confirmLabel: 'Resume schedule',
      testid: 'confirm-resume',
    });
    if (!ok) return;
    await act(() => call('schedules_resume', [name]), `Schedule ${name} resumed.`);
  }

  async function trigger() {
    const ok = await confirmAction({
      title: `Trigger schedule ${name} now?`,
      body: h('p', {}, `It fires once now (it will ${actionText(described.schedule.action)}), whatever its spec, pause or overlap policy say.`),
      confirmLabel: 'Trigger now',
      testid: 'confirm-trigger',
    });
    if (!ok) return;
    await act(() => call('schedules_trigger', [name]), (fire) => fire && fire.run
      ? h('span', {}, 'Fired: it started ', h('a', { href: '#' + runRoute(described.schedule.action, fire.run) }, fire.run), '.')
      : `Fired${fire && fire.skipped ? `, starting nothing: ${fire.skipped}` : ''}.`);
  }

  async function backfill() {
    const from = h('input', { id: 'backfill-from', type: 'datetime-local', step: '1', required: true, 'data-testid': 'backfill-from' });
    const to = h('input', { id: 'backfill-to', type: 'datetime-local', step: '1', required: true, value: toLocalInput(new Date().toISOString()), 'data-testid': 'backfill-to' });
    const ok = await confirmAction({
      title: `Backfill schedule ${name}?`,
      body: h('p', {}, 'Each tick of the range (in your local time) that the schedule has passed and that started no run yet fires once, oldest first.'),
      fields: h('div', { class: 'form-grid' },
        h('div', { class: 'field' }, h('label', { for: 'backfill-from' }, 'From'), from),
        h('div', { class: 'field' }, h('label', { for: 'backfill-to' }, 'To'), to)),
      valid: () => {
        const a = fromLocalInput(from.value);
        const b = fromLocalInput(to.value);
        return Boolean(a && b && a <= b);
      },
      collect: () => ({ from: fromLocalInput(from.value), to: fromLocalInput(to.value) }),
      confirmLabel: 'Backfill',
      testid: 'confirm-backfill',
    });
    if (!ok) return;
    await act(() => call('schedules_backfill', [name], { body: ok }), (fires) => {
      const n = Array.isArray(fires) ? fires.length : 0;
      return n ? `${n} tick${n === 1 ? '' : 's'} fired.` : 'No tick of this range was left to fire.';
    });
  }

  async function remove() {
    const ok = await confirmAction({
      title: `Delete schedule ${name}?`,
      body: h('p', {}, 'It is removed with its fire records and fires no more; runs it started go on. This cannot be undone.'),
      confirmLabel: 'Delete schedule',
      danger: true,
      testid: 'confirm-delete',
    });
    if (!ok) return;
    try {
      const r = await call('schedules_delete', [name]);
      gone = true;
      rememberAction({ calls: [r.call], summary: `Schedule ${name} deleted.` });
      navigate('/schedules');
    } catch (e) {
      showCalls(e.call ? [e.call] : [], null, e);
    }
  }
}

/**
 * Runs `redraw`, then puts keyboard focus back on the control that had it (the same
 * `data-key`, else the same `data-testid` at the same place among its kind), so a refresh
 * every 2 seconds does not lose the place of someone using the keyboard.
 */
function keepingFocus(redraw) {
  const active = document.activeElement;
  const page = active && active !== document.body ? active.closest('[data-page]') : null;
  let selector = null;
  let index = 0;
  if (page) {
    const key = active.getAttribute('data-key');
    const testid = active.getAttribute('data-testid');
    selector = key ? `[data-key="${CSS.escape(key)}"]` : testid ? `[data-testid="${CSS.escape(testid)}"]` : null;
    if (selector) index = [...page.querySelectorAll(selector)].indexOf(active);
  }
  redraw();
  if (selector && !active.isConnected) {
    const again = page.querySelectorAll(selector)[Math.max(0, index)];
    if (again && typeof again.focus === 'function') again.focus();
  }
}
