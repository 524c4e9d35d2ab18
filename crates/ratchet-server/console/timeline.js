// The history as a timeline: one row per step with a bar from when it was scheduled to when
// its result arrived (activities, timers, children), points for signals, tasks, custom
// statuses and cancellation; then every event with its time.
//
// History records carry no clock of their own: each turn opens with TurnStarted {at}, and
// every event of the turn takes that time. A result arriving in a turn was delivered by then,
// so a bar is the time from the scheduling turn to the turn that saw the result.

import { h } from './dom.js';
import { duration, localText, toDate, utcText } from './time.js';
import { jsonBlock, jsonInline } from './json.js';
import { showJson } from './dialog.js';
import { instanceRoute } from './url.js';

/** Groups `records` ({execution, seq, event}) into executions with rows and timed events. */
export function buildModel(records) {
  const executions = new Map();
  let time = null;
  for (const rec of records) {
    let ex = executions.get(rec.execution);
    if (!ex) {
      ex = { execution: rec.execution, start: null, end: null, rows: [], steps: new Map(), events: [], outcome: null };
      executions.set(rec.execution, ex);
      time = null;
    }
    const e = rec.event || {};
    if (e.type === 'TurnStarted') time = e.at;
    if (ex.start === null && time !== null) ex.start = time;
    ex.events.push({ rec, time });
    const step = (kind, extra) => {
      const row = { kind, seq: e.seq, start: time, end: null, status: 'running', ...extra };
      ex.steps.set(e.seq, row);
      ex.rows.push(row);
      return row;
    };
    const finish = (status, extra) => {
      const row = ex.steps.get(e.seq);
      if (!row) return;
      Object.assign(row, { end: time, status, ...extra });
    };
    switch (e.type) {
      case 'ActivityScheduled':
        step('activity', { name: e.name, input: e.input, options: activityOptions(e.options) });
        break;
      case 'ActivityCompleted':
        finish('completed', { output: e.output });
        break;
      case 'ActivityFailed':
        finish('failed', { error: e.error, attempts: e.attempts });
        break;
      case 'TimerCreated':
        step('timer', { name: time !== null && e.fire_at ? `sleep ${duration(e.fire_at - time)}` : 'timer', fireAt: e.fire_at });
        break;
      case 'TimerFired':
        finish('completed', {});
        break;
      case 'SubOrchestrationScheduled':
        step('child', { name: e.name, instance: e.instance, input: e.input });
        break;
      case 'SubOrchestrationCompleted':
        finish('completed', { output: e.output });
        break;
      case 'SubOrchestrationFailed':
        finish('failed', { error: e.error });
        break;
      case 'TaskEnqueued':
        ex.rows.push({ kind: 'task', seq: e.seq, name: e.name, start: time, end: time, status: 'completed', point: true, input: e.input, options: e.options });
        break;
      case 'SignalReceived':
        ex.rows.push({ kind: 'signal', name: e.name, start: time, end: time, status: 'completed', point: true, payload: e.payload });
        break;
      case 'CustomStatusSet':
        ex.rows.push({ kind: 'status', name: jsonInline(e.status, 40), start: time, end: time, status: 'completed', point: true, value: e.status });
        break;
      case 'CancelRequested':
        ex.rows.push({ kind: 'cancel', name: 'cancel requested', start: time, end: time, status: 'cancelled', point: true, reason: e.reason });
        break;
      case 'ExecutionCompleted':
        ex.outcome = { status: 'completed', output: e.output };
        ex.end = time;
        break;
      case 'ExecutionFailed':
        ex.outcome = { status: 'failed', error: e.error };
        ex.end = time;
        break;
      case 'ExecutionCancelled':
        ex.outcome = { status: 'cancelled', error: e.error, output: e.output };
        ex.end = time;
        break;
      case 'ContinuedAsNew':
        ex.outcome = { status: 'continued', input: e.input };
        ex.end = time;
        break;
      default:
        break;
    }
  }
  return [...executions.values()];
}

const KIND_LABEL = { activity: 'Activity', timer: 'Timer', child: 'Child', task: 'Task', signal: 'Signal', status: 'Status', cancel: 'Cancel' };

/**
 * The timeline of `records` for `instance`. `open` is a Set of row keys whose details are
 * expanded (kept across live re-renders).
 */
export function timelineView(records, instance, open) {
  const executions = buildModel(records);
  if (!executions.length) {
    return h('p', { class: 'empty-inline', 'data-testid': 'timeline-empty' }, 'No history yet: the instance has not run its first turn.');
  }
  const finished = ['Completed', 'Failed', 'Cancelled', 'Terminated'].includes(instance.status);
  const finishedAt = instance.finished_at ? new Date(instance.finished_at).getTime() : null;
  const last = executions[executions.length - 1];
  return h('div', { class: 'timeline', 'data-testid': 'timeline' },
    executions.map((ex) => {
      const current = ex === last;
      // A running execution's axis ends now; a stopped one's at its end (or the instance's).
      const end = ex.end ?? (current && finished ? finishedAt : null) ?? (current ? Date.now() : ex.events[ex.events.length - 1].time);
      return executionView(ex, end, executions.length > 1, current && !finished && ex.end === null, open);
    }));
}

function executionView(ex, end, many, live, open) {
  const start = ex.start ?? end;
  const span = Math.max(1, end - start);
  const pos = (t) => Math.min(100, Math.max(0, ((t - start) / span) * 100));
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => h('span', { class: 'tl-tick', style: { left: `${f * 100}%` } }, f === 0 ? localText(toDate(start)) : `+${duration(span * f)}`));
  const rows = ex.rows.map((row) => {
    const key = `${ex.execution}:${row.kind}:${row.seq ?? row.start}:${row.name}`;
    const rowEnd = row.end ?? end;
    const status = row.end === null ? (live ? 'running' : 'skipped') : row.status;
    const left = pos(row.start ?? start);
    const width = Math.max(0, pos(rowEnd) - left);
    const bar = row.point
      ? h('span', { class: `tl-point status-${status}`, style: { left: `${left}%` } })
      : h('span', { class: `tl-bar status-${status}${row.end === null && live ? ' live' : ''}`, style: { left: `${left}%`, width: `max(3px, ${width}%)` } });
    const fire = row.kind === 'timer' && row.fireAt && row.end === null
      ? h('span', { class: 'tl-fire', style: { left: `${pos(row.fireAt)}%` }, title: `Fires at ${utcText(toDate(row.fireAt))}` })
      : null;
    const took = row.point ? '' : row.end === null ? (live ? `${duration(end - row.start)}…` : 'not needed') : duration(row.end - row.start);
    const details = h('details', { open: open.has(key) },
      h('summary', { class: 'tl-summary' },
        h('span', { class: 'tl-label' },
          h('span', { class: `tl-kind kind-${row.kind}` }, KIND_LABEL[row.kind]),
          h('span', { class: 'tl-name' }, row.name),
          row.seq !== undefined && !row.point ? h('span', { class: 'muted small' }, ` #${row.seq}`) : null,
          row.error ? h('span', { class: 'tl-error', 'data-testid': 'timeline-error' }, `${row.error.kind}: ${row.error.message}`) : null,
          row.attempts ? h('span', { class: 'tl-attempts', 'data-testid': 'timeline-attempts' }, `after ${row.attempts} attempt${row.attempts === 1 ? '' : 's'}`) : null),
        h('span', { class: 'tl-track', 'aria-hidden': 'true' }, bar, fire),
        h('span', { class: 'tl-dur' }, took)),
      rowDetail(row, status));
    details.addEventListener('toggle', () => {
      if (details.open) open.add(key);
      else open.delete(key);
    });
    return h('li', {
      class: `tl-row kind-${row.kind}`,
      'data-testid': 'timeline-row',
      'data-kind': row.kind,
      'data-status': status,
      'data-step': row.seq ?? '',
      'data-name': row.name,
    }, details);
  });

  const outcome = ex.outcome;
  return h('section', { class: 'tl-execution', 'data-testid': 'timeline-execution', 'data-execution': ex.execution },
    many ? h('h3', { class: 'tl-exec-title' }, `Execution ${ex.execution}`, outcome ? h('span', { class: `badge status-${outcome.status === 'continued' ? 'running' : outcome.status}` }, outcome.status) : null) : null,
    h('div', { class: 'tl-axis', 'aria-hidden': 'true' }, h('span', { class: 'tl-label' }), h('span', { class: 'tl-track' }, ticks), h('span', { class: 'tl-dur' }, duration(span))),
    rows.length ? h('ol', { class: 'tl-rows', 'aria-label': `Steps of execution ${ex.execution}` }, rows) : h('p', { class: 'muted' }, 'No steps in this execution.'),
    eventTable(ex));
}

// History writes an activity's options only as far as they differ from the defaults
// (ratchet-core's `ActivityOptions` and `RetryPolicy`): the detail shows them whole.
const ACTIVITY_DEFAULTS = {
  retry: { max_attempts: 3, initial_interval_ms: 1000, backoff: 2, max_interval_ms: 60000, non_retryable: [], jitter: 0 },
  start_to_close_ms: 300000,
};

function activityOptions(options) {
  const given = options || {};
  return { ...ACTIVITY_DEFAULTS, ...given, retry: { ...ACTIVITY_DEFAULTS.retry, ...(given.retry || {}) } };
}

function rowDetail(row, status) {
  const items = [];
  const add = (label, value) => items.push(h('dt', {}, label), h('dd', {}, value));
  if (row.start !== null) add(row.point ? 'At' : 'Scheduled', exact(row.start));
  if (!row.point) add(row.kind === 'timer' ? 'Fired' : 'Result', row.end !== null ? exact(row.end) : status);
  if (row.fireAt) add('Due', exact(row.fireAt));
  if (row.instance) add('Instance', h('a', { href: '#' + instanceRoute(row.instance), class: 'mono', 'data-testid': 'timeline-child-link' }, row.instance));
  if (row.attempts) add('Attempts', `${row.attempts}`);
  const retry = row.options && row.options.retry;
  if (retry) add('Retry policy', `up to ${retry.max_attempts} attempts, first retry after ${duration(retry.initial_interval_ms)}, ×${retry.backoff} backoff${retry.max_interval_ms ? `, at most ${duration(retry.max_interval_ms)} apart` : ''}${retry.non_retryable && retry.non_retryable.length ? `; never retried: ${retry.non_retryable.join(', ')}` : ''}`);
  if (row.options && row.options.start_to_close_ms) add('Timeout', `${duration(row.options.start_to_close_ms)} per attempt`);
  if (row.options && row.options.queue) add('Queue', row.options.queue);
  if (row.reason !== undefined) add('Reason', row.reason || '—');
  const blocks = [];
  if (row.input !== undefined) blocks.push(h('div', {}, h('h4', {}, 'Input'), jsonBlock(row.input, { label: 'input' })));
  if (row.payload !== undefined) blocks.push(h('div', {}, h('h4', {}, 'Payload'), jsonBlock(row.payload, { label: 'payload' })));
  if (row.value !== undefined) blocks.push(h('div', {}, h('h4', {}, 'Custom status'), jsonBlock(row.value, { label: 'custom status' })));
  if (row.output !== undefined) blocks.push(h('div', {}, h('h4', {}, 'Output'), jsonBlock(row.output, { label: 'output' })));
  if (row.error) blocks.push(h('div', {}, h('h4', {}, 'Error'), jsonBlock(row.error, { label: 'error' })));
  return h('div', { class: 'tl-detail' }, h('dl', { class: 'kv' }, items), blocks.length ? h('div', { class: 'json-pair' }, blocks) : null);
}

const msFormat = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', fractionalSecondDigits: 3 });

const dateFormat = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });

/** A time to the millisecond (the date too unless it is today), exact UTC on hover. */
function exact(ms) {
  const d = toDate(ms);
  if (!d) return h('span', { class: 'muted' }, '—');
  const today = d.toDateString() === new Date().toDateString();
  return h('time', { datetime: d.toISOString(), title: utcText(d) }, (today ? '' : dateFormat.format(d) + ', ') + msFormat.format(d));
}

function timeCell(ms) {
  const d = toDate(ms);
  if (!d) return h('span', { class: 'muted' }, '—');
  return h('time', { datetime: d.toISOString(), title: utcText(d) }, msFormat.format(d));
}

/** A one-line description of an event's content. */
function describe(e) {
  switch (e.type) {
    case 'TurnStarted':
      return 'A turn began';
    case 'ExecutionStarted':
      return `${e.name} v${e.version}${e.parent ? `, child of ${e.parent.instance}` : ''} · input ${jsonInline(e.input, 60)}`;
    case 'ActivityScheduled':
      return `#${e.seq} ${e.name}(${jsonInline(e.input, 50)})`;
    case 'ActivityCompleted':
    case 'SubOrchestrationCompleted':
      return `#${e.seq} → ${jsonInline(e.output, 70)}`;
    case 'ActivityFailed':
      return `#${e.seq} ${e.error.kind}: ${e.error.message} (after ${e.attempts} attempt${e.attempts === 1 ? '' : 's'})`;
    case 'SubOrchestrationFailed':
      return `#${e.seq} ${e.error.kind}: ${e.error.message}`;
    case 'TimerCreated':
      return `#${e.seq} fires at ${localText(toDate(e.fire_at))}`;
    case 'TimerFired':
      return `#${e.seq}`;
    case 'SubOrchestrationScheduled':
      return `#${e.seq} ${e.name} as ${e.instance}`;
    case 'TaskEnqueued':
      return `#${e.seq} ${e.name} on ${(e.options && e.options.queue) || 'default'}`;
    case 'SignalReceived':
      return `${e.name} · ${jsonInline(e.payload, 60)}`;
    case 'ValueRecorded':
      return `#${e.seq} ${e.kind} = ${jsonInline(e.value, 50)}`;
    case 'PatchApplied':
      return e.name;
    case 'CustomStatusSet':
      return jsonInline(e.status, 70);
    case 'CancelRequested':
      return e.reason || 'no reason given';
    case 'ExecutionCompleted':
      return `→ ${jsonInline(e.output, 80)}`;
    case 'ExecutionFailed':
      return `${e.error.kind}: ${e.error.message}`;
    case 'ExecutionCancelled':
      return e.error ? `${e.error.kind}: ${e.error.message}` : 'cancelled';
    case 'ContinuedAsNew':
      return `input ${jsonInline(e.input, 70)}`;
    default:
      return jsonInline(e, 80);
  }
}

function category(type) {
  if (/Failed|Cancel/.test(type)) return 'bad';
  if (/Completed|Fired/.test(type)) return 'good';
  if (/Scheduled|Created|Enqueued|Started/.test(type)) return 'start';
  if (type === 'SignalReceived') return 'signal';
  return 'other';
}

function eventTable(ex) {
  const start = ex.start;
  return h('details', { class: 'disclosure tl-events', open: true },
    h('summary', {}, `Every event (${ex.events.length})`),
    h('div', { class: 'table-wrap' }, h('table', { class: 'table compact', 'data-testid': 'history-table' },
      h('thead', {}, h('tr', {}, h('th', { class: 'num' }, '#'), h('th', {}, 'Time'), h('th', { class: 'num' }, 'Offset'), h('th', {}, 'Event'), h('th', {}, 'Details'), h('th', {}, h('span', { class: 'sr-only' }, 'JSON')))),
      h('tbody', {}, ex.events.map(({ rec, time }) => {
        const e = rec.event || {};
        return h('tr', { class: e.type === 'TurnStarted' ? 'turn' : '', 'data-testid': 'history-row', 'data-type': e.type, 'data-seq': rec.seq },
          h('td', { class: 'num muted' }, String(rec.seq)),
          h('td', { class: 'nowrap' }, e.type === 'TurnStarted' ? timeCell(time) : h('span', { class: 'muted' }, timeCell(time))),
          h('td', { class: 'num muted' }, time !== null && start !== null ? `+${duration(time - start)}` : ''),
          h('td', {}, h('span', { class: `ev-type ev-${category(e.type)}` }, e.type)),
          h('td', { class: 'ev-desc' }, describe(e)),
          h('td', {}, h('button', {
            type: 'button',
            class: 'link-btn small',
            'data-testid': 'history-json',
            'aria-label': `Event ${rec.seq} as JSON`,
            onclick: () => showJson(`Event ${rec.execution}.${rec.seq}: ${e.type}`, rec),
          }, 'JSON')));
      })))));
}
