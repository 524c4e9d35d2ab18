// The queues table: depth by state, the oldest ready task's age, limits; with the admin
// scope, pause/resume and limits edited in a dialog.

import { h } from './dom.js';
import { ApiError, call, can } from './api.js';
import { confirmAction } from './dialog.js';
import { duration, toDate, utcText } from './time.js';
import { withQuery } from './url.js';

const STATE_NAMES = { scheduled: 'Scheduled', available: 'Available', running: 'Running', retrying: 'Retrying', dead: 'Dead', completed: 'Completed', cancelled: 'Cancelled' };

function oldest(q) {
  const d = toDate(q.oldest_available);
  if (!d) return h('span', { class: 'muted' }, '—');
  const age = Date.now() - d.getTime();
  return h('span', { title: `Ready since ${utcText(d)}`, class: age > 60e3 ? 'warn' : '' }, duration(age));
}

function limitsText(l) {
  const parts = [];
  if (l && l.rate_per_second !== null && l.rate_per_second !== undefined) parts.push(`${l.rate_per_second}/s${l.burst ? ` (burst ${l.burst})` : ''}`);
  if (l && l.concurrency !== null && l.concurrency !== undefined) parts.push(`${l.concurrency} at once`);
  return parts.length ? parts.join(' · ') : h('span', { class: 'muted' }, 'none');
}

/**
 * A table of `queues`. `compact` leaves out limits and actions; `onAction(result)` is called
 * after a pause, resume or limits change with `{calls, summary}` or `{error}`.
 */
export function queueTable(queues, { compact = false, onAction = null, selected = null } = {}) {
  const admin = can('admin') && !compact;
  // Waiting and running states get a column each; finished ones share one.
  const states = compact ? ['available', 'running', 'retrying', 'dead'] : ['scheduled', 'available', 'running', 'retrying', 'dead'];
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-testid': 'queues-table' },
    h('thead', {}, h('tr', {},
      h('th', {}, 'Queue'),
      h('th', { class: 'num', title: 'Tasks waiting to run: scheduled, available and retrying' }, 'Depth'),
      states.map((s) => h('th', { class: 'num' }, STATE_NAMES[s])),
      compact ? null : h('th', { class: 'num' }, 'Finished'),
      h('th', { class: 'num', title: 'How long the longest-waiting available task has been ready' }, 'Oldest ready'),
      compact ? null : h('th', {}, 'Limits'),
      admin ? h('th', { class: 'actions-col' }, h('span', { class: 'sr-only' }, 'Actions')) : null)),
    h('tbody', {}, queues.map((q) => h('tr', {
      'data-testid': 'queue-row',
      'data-queue': q.name,
      class: selected === q.name ? 'selected' : '',
    },
    h('td', { class: 'nowrap' },
      h('a', { href: '#' + withQuery('/tasks', { queue: q.name }), class: 'strong', 'data-testid': 'queue-link' }, q.name),
      q.paused ? h('span', { class: 'badge status-cancelled', 'data-testid': 'queue-paused' }, 'Paused') : null),
    h('td', { class: 'num strong', 'data-testid': 'queue-depth' }, String(q.depth)),
    states.map((s) => {
      const n = (q.counts && q.counts[s]) || 0;
      return h('td', { class: `num${n && s === 'dead' ? ' bad' : ''}${n ? '' : ' muted'}`, 'data-state': STATE_NAMES[s] },
        n ? h('a', { href: '#' + withQuery('/tasks', { queue: q.name, state: STATE_NAMES[s] }), title: `${STATE_NAMES[s]} tasks of ${q.name}` }, String(n)) : '0');
    }),
    compact ? null : h('td', { class: 'num small nowrap' }, ['completed', 'cancelled'].map((s) => {
      const n = (q.counts && q.counts[s]) || 0;
      return h('div', { 'data-state': STATE_NAMES[s] },
        n ? h('a', { href: '#' + withQuery('/tasks', { queue: q.name, state: STATE_NAMES[s] }) }, String(n)) : h('span', { class: 'muted' }, '0'),
        h('span', { class: 'muted' }, ` ${s}`));
    })),
    h('td', { class: 'num' }, oldest(q)),
    compact ? null : h('td', { class: 'small nowrap', 'data-testid': 'queue-limits' }, limitsText(q.limits)),
    admin ? h('td', { class: 'actions-col' }, h('div', { class: 'row-actions' },
      q.paused
        ? h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'queue-resume', onclick: () => pauseResume(q, 'resume', onAction) }, 'Resume')
        : h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'queue-pause', onclick: () => pauseResume(q, 'pause', onAction) }, 'Pause'),
      h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'queue-edit-limits', onclick: () => editLimits(q, onAction) }, 'Limits…'))) : null)))));
}

async function pauseResume(q, what, onAction) {
  const ok = await confirmAction({
    title: `${what === 'pause' ? 'Pause' : 'Resume'} queue ${q.name}?`,
    body: what === 'pause'
      ? h('p', {}, 'No process starts its tasks until it is resumed. Running tasks finish; new ones wait.')
      : h('p', {}, 'Every process starts its tasks again.'),
    confirmLabel: what === 'pause' ? 'Pause queue' : 'Resume queue',
    danger: what === 'pause',
    testid: `confirm-${what}`,
  });
  if (!ok) return;
  try {
    const r = await call(`queues_${what}`, [q.name]);
    onAction && onAction({ calls: [r.call], summary: `Queue ${q.name} ${what === 'pause' ? 'paused' : 'resumed'}.` });
  } catch (e) {
    onAction && onAction({ error: e, calls: e instanceof ApiError ? [e.call] : [] });
  }
}

async function editLimits(q, onAction) {
  const l = q.limits || {};
  const field = (id, label, value, help, step) => h('div', { class: 'field' },
    h('label', { for: id }, label),
    h('input', { id, type: 'number', min: '0', step, value: value ?? '', placeholder: 'none', 'data-testid': id }),
    h('p', { class: 'help' }, help));
  const fields = h('div', { class: 'form-grid' },
    field('limit-rate', 'Rate per second', l.rate_per_second, 'Tasks started per second across every process.', 'any'),
    field('limit-burst', 'Burst', l.burst, 'Starts allowed at once above the rate.', '1'),
    field('limit-concurrency', 'Concurrency', l.concurrency, 'Tasks running at once across every process.', '1'));
  const values = await confirmAction({
    title: `Limits of queue ${q.name}`,
    body: h('p', {}, 'Leave a field empty for no limit. Saving replaces every limit.'),
    fields,
    confirmLabel: 'Save limits',
    testid: 'limits-dialog',
    valid: () => [...fields.querySelectorAll('input')].every((i) => i.checkValidity()),
    collect: () => {
      const out = {};
      const rate = fields.querySelector('#limit-rate').value;
      const burst = fields.querySelector('#limit-burst').value;
      const conc = fields.querySelector('#limit-concurrency').value;
      if (rate !== '') out.rate_per_second = Number(rate);
      if (burst !== '') out.burst = Number(burst);
      if (conc !== '') out.concurrency = Number(conc);
      return out;
    },
  });
  if (!values) return;
  try {
    const r = await call('queues_limit', [q.name], { body: values });
    onAction && onAction({ calls: [r.call], summary: `Limits of ${q.name} saved.` });
  } catch (e) {
    onAction && onAction({ error: e, calls: e instanceof ApiError ? [e.call] : [] });
  }
}
