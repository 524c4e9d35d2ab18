// Schedules (#/schedules): every schedule with its spec, zone, state, next fire and what each
// tick starts; with the write scope, a form that creates one (its problem names the field at
// fault). A schedule's own page is schedule.js.

import { h, replace } from './dom.js';
import { call, can, read, session } from './api.js';
import { problemBox } from './problem.js';
import { timeEl } from './time.js';
import { jsonEditor } from './json.js';
import { openDialog } from './dialog.js';
import { apiCallPanel } from './apicall.js';
import { emptyState } from './empty.js';
import { instanceRoute, navigate, taskRoute } from './url.js';

/** What a tick does when the last overlaps the one before, as `overlap` names it. */
export const OVERLAPS = [
  ['skip', 'Skip the tick while the previous run still runs'],
  ['buffer_one', 'Run once more when the previous run ends'],
  ['allow_all', 'Start every tick, whatever still runs'],
  ['cancel_previous', 'Cancel the previous run, then start'],
  ['terminate_previous', 'Terminate the previous run, then start'],
];

/** The API call an action made on a schedule's page, shown on the list after a delete. */
let lastAction = null;

/** Keeps `result` (`{calls, summary}`) for the list page to show when it renders next. */
export function rememberAction(result) {
  lastAction = result;
}

/** The route of one schedule. */
export function scheduleRoute(name) {
  return '/schedules/' + encodeURIComponent(name);
}

/** What each tick does, in words: `start fanout`, `enqueue work on reports`. */
export function actionText(action) {
  if (action && action.start) return `start ${action.start.workflow}`;
  if (action && action.enqueue) {
    const queue = action.enqueue.options && action.enqueue.options.queue;
    return `enqueue ${action.enqueue.task}${queue && queue !== 'default' ? ` on ${queue}` : ''}`;
  }
  return JSON.stringify(action);
}

/** The input each tick's run gets. */
export function actionInput(action) {
  const a = action && (action.start || action.enqueue);
  return a ? a.input : null;
}

/** The console route of a run a fire started: an instance, or a task. */
export function runRoute(action, run) {
  return action && action.enqueue ? taskRoute(run) : instanceRoute(run);
}

/** Active, paused (with its note) or ended (it never fires again). */
export function stateBadge(s, attrs = {}) {
  const [state, tone, text] = s.paused
    ? ['paused', 'cancelled', 'Paused']
    : s.next_fire_at ? ['active', 'completed', 'Active'] : ['ended', 'pending', 'Ended'];
  return h('span', { class: `badge status-${tone}`, 'data-testid': 'schedule-state', 'data-state': state, ...attrs }, text);
}

/** How to create a schedule, by CLI and curl. */
function createCommands() {
  const auth = session.auth ? ' -H "Authorization: Bearer $RATCHET_TOKEN"' : '';
  return [
    `ratchet schedules create hourly-fanout --spec 'every 1h' --workflow fanout --input '{"activities":5}'`,
    `curl -s ${location.origin}/v1/schedules${auth} -H 'content-type: application/json' -d '{"name":"hourly-fanout","spec":"every 1h","workflow":"fanout","input":{"activities":5}}'`,
  ];
}

export async function render(root, route) {
  route.title('Schedules');
  const writer = can('write');
  const actionArea = h('div', { class: 'action-area', 'data-testid': 'action-result' });
  const card = h('section', { class: 'card', 'data-testid': 'schedules', 'aria-labelledby': 's-title' },
    h('h2', { id: 's-title' }, 'Schedules'), h('p', { class: 'loading' }, 'Loading…'));
  const reload = () => navigate('/schedules');
  replace(root,
    h('header', { class: 'page-head' }, h('h1', {}, 'Schedules'),
      h('div', { class: 'page-actions' },
        h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'refresh', onclick: reload }, 'Refresh'),
        writer ? h('button', { type: 'button', class: 'btn btn-primary btn-small', 'data-testid': 'schedule-new', onclick: () => createDialog(reload) }, 'New schedule…') : null)),
    actionArea, card);

  if (lastAction) {
    replace(actionArea,
      lastAction.error ? problemBox(lastAction.error) : null,
      apiCallPanel(lastAction.calls, { summary: lastAction.summary, onDismiss: () => replace(actionArea) }));
    lastAction = null;
  }

  let schedules;
  try {
    schedules = await read('schedules_list', [], { signal: route.signal });
  } catch (e) {
    replace(card, h('h2', { id: 's-title' }, 'Schedules'), problemBox(e));
    return;
  }
  replace(card,
    h('header', { class: 'card-head' }, h('h2', { id: 's-title' }, 'Schedules'),
      writer ? null : h('span', { class: 'muted small' }, 'Creating and changing schedules needs the write scope')),
    schedules.length
      ? scheduleTable(schedules)
      : emptyState({
        title: 'No schedules yet.',
        text: 'A schedule starts a workflow or enqueues a task on a cron expression or an interval. Create one from the command line or over HTTP:',
        commands: createCommands(),
        testid: 'schedules-empty',
      }));
}

function scheduleTable(schedules) {
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-testid': 'schedules-table' },
    h('thead', {}, h('tr', {},
      h('th', {}, 'Schedule'),
      h('th', {}, 'Spec'),
      h('th', {}, 'Zone'),
      h('th', {}, 'State'),
      h('th', {}, 'Next fire'),
      h('th', {}, 'Each tick'),
      h('th', { title: 'While the previous run still runs' }, 'Overlap'),
      h('th', { class: 'num', title: 'Ticks missed and not caught up' }, 'Missed'))),
    h('tbody', {}, schedules.map((s) => h('tr', { 'data-testid': 'schedule-row', 'data-schedule': s.name },
      h('td', { class: 'nowrap' }, h('a', { href: '#' + scheduleRoute(s.name), class: 'strong', 'data-testid': 'schedule-link' }, s.name)),
      h('td', {}, h('code', { 'data-testid': 'schedule-spec' }, s.spec)),
      h('td', { class: 'small' }, s.time_zone),
      h('td', {}, stateBadge(s), s.note ? h('span', { class: 'muted small', 'data-testid': 'schedule-note' }, ' ', s.note) : null),
      h('td', { 'data-testid': 'schedule-next' }, s.paused ? h('span', { class: 'muted', title: 'Nothing fires while it is paused' }, '—') : timeEl(s.next_fire_at)),
      h('td', { 'data-testid': 'schedule-action' }, actionText(s.action)),
      h('td', { class: 'small' }, s.overlap),
      h('td', { class: `num${s.missed ? ' warn' : ' muted'}` }, String(s.missed)))))));
}

/** The field of the form that a problem's `field` names (`time_zone`, `options.queue`, ...). */
function fieldFor(inputs, field) {
  if (!field) return null;
  const key = field.split('.')[0];
  return inputs[key] || null;
}

function createDialog(reload) {
  const field = (id, label, control, help) => h('div', { class: 'field' },
    h('label', { for: id }, label), control, help ? h('p', { class: 'help', id: `${id}-help` }, help) : null);
  const input = (id, testid, attrs = {}) => h('input', { id, autocomplete: 'off', 'data-testid': testid, 'aria-describedby': `${id}-help`, ...attrs });
  const name = input('sch-name', 'schedule-name', { required: true, placeholder: 'nightly-report' });
  const spec = input('sch-spec', 'schedule-spec', { required: true, placeholder: 'every 1h' });
  const zones = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  const zone = input('sch-zone', 'schedule-zone', { value: 'UTC', list: 'sch-zones', required: true });
  const kind = h('select', { id: 'sch-kind', 'data-testid': 'schedule-kind', 'aria-describedby': 'sch-kind-help' },
    h('option', { value: 'workflow' }, 'Start a workflow'),
    h('option', { value: 'task' }, 'Enqueue a task'));
  const target = input('sch-target', 'schedule-target', { required: true, placeholder: 'fanout' });
  const queue = input('sch-queue', 'schedule-queue', { placeholder: 'default' });
  const queueField = field('sch-queue', 'Queue', queue, 'The queue each task goes to.');
  queueField.hidden = true;
  const overlap = h('select', { id: 'sch-overlap', 'data-testid': 'schedule-overlap', 'aria-describedby': 'sch-overlap-help' },
    OVERLAPS.map(([value, text]) => h('option', { value, title: text }, value)));
  const overlapHelp = h('span', {}, OVERLAPS[0][1] + '.');
  const catchUp = input('sch-catch-up', 'schedule-catch-up', { value: 'last 1', list: 'sch-catch-ups', required: true });
  const paused = h('input', { id: 'sch-paused', type: 'checkbox', 'data-testid': 'schedule-paused', 'aria-describedby': 'sch-paused-help' });
  const editor = jsonEditor({ value: null, id: 'sch-input', testid: 'schedule-input', rows: 4, onChange: () => update() });
  editor.textarea.value = '';
  const problem = h('div', { 'data-testid': 'schedule-problem', 'aria-live': 'assertive' });
  const send = h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'schedule-create', disabled: true }, 'Create schedule');
  const inputs = { name, spec, time_zone: zone, workflow: target, task: target, action: target, options: queue, overlap, catch_up: catchUp, input: editor.textarea };

  function update() {
    const filled = [name, spec, zone, target, catchUp].every((i) => i.value.trim() !== '');
    send.disabled = !filled || !editor.valid();
  }
  const targetLabel = h('span', {}, 'Workflow');
  kind.addEventListener('change', () => {
    const task = kind.value === 'task';
    target.placeholder = task ? 'work' : 'fanout';
    queueField.hidden = !task;
    replace(targetLabel, task ? 'Task' : 'Workflow');
  });
  overlap.addEventListener('change', () => replace(overlapHelp, OVERLAPS.find(([v]) => v === overlap.value)[1] + '.'));
  const content = [
    h('div', { class: 'form-grid' },
      field('sch-name', 'Name', name, 'Unique; it names the schedule in URLs and commands.'),
      field('sch-spec', 'Spec', spec, h('span', {}, 'A cron expression (', h('code', {}, '0 9 * * MON-FRI'), '; six fields for seconds) or ', h('code', {}, 'every 30s'), ', ', h('code', {}, 'every 1h offset 15m'), '.')),
      field('sch-zone', 'Time zone', zone, 'The IANA zone the cron expression is read in.')),
    h('datalist', { id: 'sch-zones' }, ['UTC', ...zones.filter((z) => z !== 'UTC')].map((z) => h('option', { value: z }))),
    h('div', { class: 'form-grid' },
      field('sch-kind', 'Each tick', kind, 'What a tick does.'),
      h('div', { class: 'field' }, h('label', { for: 'sch-target' }, targetLabel), target,
        h('p', { class: 'help', id: 'sch-target-help' }, 'Registered with the workers (a declarative workflow as namespace/name).')),
      queueField),
    field('sch-input', 'Input of each run (JSON)', editor.el),
    h('div', { class: 'form-grid' },
      field('sch-overlap', 'Overlap', overlap, overlapHelp),
      field('sch-catch-up', 'Catch-up', catchUp, h('span', {}, 'Ticks missed while no worker ran: ', h('code', {}, 'skip'), ', ', h('code', {}, 'last 1'), ', ', h('code', {}, 'within 1h'), '.')),
      field('sch-paused', 'Create it paused', paused, 'Nothing fires until it is resumed.')),
    h('datalist', { id: 'sch-catch-ups' }, ['last 1', 'skip', 'last 10', 'within 1h'].map((v) => h('option', { value: v }))),
    problem,
  ];
  const d = openDialog({ title: 'New schedule', content, actions: [send], testid: 'schedule-dialog', wide: true, closeLabel: 'Cancel' });
  const form = d.dialog.querySelector('form');
  form.addEventListener('input', (e) => {
    // The JSON editor marks its own text; the other fields lose a refused mark when edited.
    if (e.target instanceof HTMLElement && e.target !== editor.textarea) e.target.removeAttribute('aria-invalid');
    update();
  });
  form.addEventListener('change', update);
  name.focus();

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    editor.check();
    update();
    if (send.disabled) return;
    send.disabled = true;
    const task = kind.value === 'task';
    const body = {
      name: name.value.trim(),
      spec: spec.value.trim(),
      time_zone: zone.value.trim(),
      [task ? 'task' : 'workflow']: target.value.trim(),
      input: editor.value(),
      overlap: overlap.value,
      catch_up: catchUp.value.trim(),
    };
    if (task && queue.value.trim()) body.options = { queue: queue.value.trim() };
    if (paused.checked) body.paused = true;
    try {
      const r = await call('schedules_create', [], { body });
      d.close();
      const s = r.data;
      rememberAction({
        calls: [r.call],
        summary: h('span', {}, 'Schedule ', h('a', { href: '#' + scheduleRoute(s.name) }, s.name), ' created',
          s.next_fire_at && !s.paused ? [': it first fires at ', timeEl(s.next_fire_at)] : null, '.'),
      });
      reload();
    } catch (err) {
      replace(problem, problemBox(err));
      const at = fieldFor(inputs, err.problem && err.problem.field);
      if (at) {
        at.setAttribute('aria-invalid', 'true');
        at.focus({ preventScroll: true });
      }
      problem.scrollIntoView({ block: 'nearest' });
      send.disabled = false;
    }
  });
}
