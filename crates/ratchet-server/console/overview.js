// Overview (#/): throughput over the last hour, queue depths and ages, live workers, recent
// failures. Refreshed every 10 seconds while shown.

import { h, replace } from './dom.js';
import { read } from './api.js';
import { problemBox, note } from './problem.js';
import { timeEl, ago } from './time.js';
import { badge } from './status.js';
import { idWithCopy } from './copy.js';
import { instanceRoute, withQuery } from './url.js';
import { throughputChart, throughputTable } from './chart.js';
import { queueTable } from './queues.js';
import { emptyState, startCommands } from './empty.js';

const REFRESH_MS = 10000;

export async function render(root, route) {
  route.title('Overview');
  const updated = h('span', { class: 'muted small', 'data-testid': 'overview-updated', 'aria-live': 'off' });
  const tiles = h('div', { class: 'tiles', 'data-testid': 'overview-tiles' });
  const throughput = h('section', { class: 'card', 'data-testid': 'overview-throughput', 'aria-labelledby': 'ov-tp' });
  const queues = h('section', { class: 'card', 'data-testid': 'overview-queues', 'aria-labelledby': 'ov-q' });
  const workers = h('section', { class: 'card', 'data-testid': 'overview-workers', 'aria-labelledby': 'ov-w' });
  const failures = h('section', { class: 'card failures-card', 'data-testid': 'overview-failures', 'aria-labelledby': 'ov-f' });
  const refresh = h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'refresh', onclick: () => load() }, 'Refresh');
  replace(root,
    h('header', { class: 'page-head' }, h('h1', {}, 'Overview'), h('div', { class: 'page-actions' }, updated, refresh)),
    tiles,
    h('div', { class: 'overview-top' }, throughput, failures),
    queues,
    workers);

  const numbers = {};
  function drawTiles() {
    const tile = (label, value, testid, cls = '', href = null) => {
      const body = [h('span', { class: 'tile-value' }, value === undefined ? '…' : String(value)), h('span', { class: 'tile-label' }, label)];
      return href
        ? h('a', { class: `tile ${cls}`, href, 'data-testid': testid }, body)
        : h('div', { class: `tile ${cls}`, 'data-testid': testid }, body);
    };
    replace(tiles,
      tile('Started, last hour', numbers.started, 'tile-started', 'tone-running', '#/instances?since=1h'),
      tile('Completed, last hour', numbers.completed, 'tile-completed', 'tone-completed', '#/instances?status=Completed&since=1h'),
      tile('Failed, last hour', numbers.failed, 'tile-failed', numbers.failed ? 'tone-failed' : '', '#/instances?status=Failed&since=1h'),
      tile('Tasks waiting', numbers.depth, 'tile-depth', '', '#/tasks'),
      tile('Dead letters', numbers.dead, 'tile-dead', numbers.dead ? 'tone-failed' : '', '#/tasks?state=Dead'),
      tile('Live workers', numbers.workers, 'tile-workers', numbers.workers === 0 ? 'tone-failed' : ''));
  }
  drawTiles();

  async function section(el, id, title, extra, fill) {
    try {
      const content = await fill();
      replace(el, h('header', { class: 'card-head' }, h('h2', { id }, title), extra), content);
    } catch (e) {
      replace(el, h('header', { class: 'card-head' }, h('h2', { id }, title)), problemBox(e));
    }
  }

  async function load() {
    const now = new Date();
    await Promise.all([
      section(throughput, 'ov-tp', 'Throughput, last hour', legend(), () => loadThroughput(now, route.signal, numbers, throughput.clientWidth - 34)),
      section(queues, 'ov-q', 'Queues', h('a', { href: '#/tasks', class: 'small' }, 'Tasks & queues →'), () => loadQueues(route.signal, numbers)),
      section(workers, 'ov-w', 'Workers', null, () => loadWorkers(route.signal, numbers)),
      section(failures, 'ov-f', 'Recent failures', h('a', { href: '#/instances?status=Failed', class: 'small' }, 'All failed →'), () => loadFailures(route.signal)),
    ]);
    drawTiles();
    replace(updated, 'Updated ', timeEl(new Date().toISOString()));
  }

  await load();
  const timer = setInterval(() => {
    if (document.visibilityState === 'visible' && !document.querySelector('dialog[open]')) load();
  }, REFRESH_MS);
  route.signal.addEventListener('abort', () => clearInterval(timer));
}

function legend() {
  return h('ul', { class: 'legend', 'aria-hidden': 'true' },
    h('li', {}, h('span', { class: 'swatch swatch-started' }), 'Started'),
    h('li', {}, h('span', { class: 'swatch swatch-completed' }), 'Completed'),
    h('li', {}, h('span', { class: 'swatch swatch-failed' }), 'Failed'));
}

async function loadThroughput(now, signal, numbers, width) {
  const from = new Date(Math.floor((now.getTime() - 3600e3) / 60e3) * 60e3);
  const to = new Date(Math.ceil(now.getTime() / 60e3) * 60e3);
  // The server's buckets end at the end of the current minute, as the chart's axis does.
  const data = await read('system_throughput', [], { query: { minutes: 60 }, signal });
  const buckets = data.buckets || [];
  const sum = (k) => buckets.reduce((a, b) => a + (b[k] || 0), 0);
  numbers.started = sum('started');
  numbers.completed = sum('completed');
  numbers.failed = sum('failed');
  const nothing = numbers.started + numbers.completed + numbers.failed === 0;
  return [
    h('div', { class: 'chart-wrap' }, throughputChart(buckets, from, to, width)),
    nothing
      ? emptyState({ title: 'Nothing started or finished in the last hour.', text: 'Start an instance and it shows here:', commands: startCommands() })
      : h('details', { class: 'disclosure' }, h('summary', {}, 'Show as a table'), throughputTable(buckets)),
  ];
}

async function loadQueues(signal, numbers) {
  const list = await read('queues_list', [], { signal });
  numbers.depth = list.reduce((a, q) => a + (q.depth || 0), 0);
  numbers.dead = list.reduce((a, q) => a + ((q.counts && q.counts.dead) || 0), 0);
  if (!list.length) {
    return emptyState({ title: 'No queues yet.', text: 'A queue appears with its first task:', commands: [`ratchet tasks enqueue work --input '{"ms":10}'`] });
  }
  return queueTable(list, { compact: true });
}

async function loadWorkers(signal, numbers) {
  const list = await read('system_workers', [], { signal });
  const alive = list.filter((w) => w.alive);
  numbers.workers = alive.length;
  if (!list.length) {
    return emptyState({ title: 'No worker has said it is alive.', text: 'Run one (or a server, which runs one unless --no-worker):', commands: ['ratchet worker', 'ratchet server'] });
  }
  list.sort((a, b) => Number(b.alive) - Number(a.alive) || String(b.seen_at).localeCompare(String(a.seen_at)));
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-testid': 'workers-table' },
    h('thead', {}, h('tr', {},
      h('th', {}, 'Worker'), h('th', {}, 'Host'), h('th', {}, 'State'), h('th', { class: 'num' }, 'Capacity'),
      h('th', {}, 'Queues'), h('th', {}, 'Runs'), h('th', {}, 'Started'), h('th', {}, 'Last seen'))),
    h('tbody', {}, list.map((w) => h('tr', { 'data-testid': 'worker-row', 'data-worker-id': w.id, class: w.alive ? '' : 'dim' },
      h('td', {}, h('div', { class: 'strong' }, w.label || w.id), w.label ? h('div', { class: 'muted small mono' }, idWithCopy(w.id)) : null),
      h('td', { class: 'mono small nowrap' }, `${w.host || '?'} · pid ${w.pid}`),
      h('td', {}, w.alive ? badge('Running', { 'data-status': 'alive' }, 'Alive') : badge('Pending', { 'data-status': 'gone' }, 'Gone')),
      h('td', { class: 'num small' }, h('div', { title: 'Orchestration turns at once' }, `${w.max_orchestrations} turns`), h('div', { title: 'Activities at once' }, `${w.max_activities} activities`)),
      h('td', { class: 'small' }, (w.queues || []).filter((q) => !q.startsWith('$')).map((q) => h('a', { class: 'chip', href: '#' + withQuery('/tasks', { queue: q }) }, q))),
      h('td', { class: 'small' }, names(w)),
      h('td', {}, timeEl(w.started_at)),
      h('td', {}, h('span', { title: w.seen_at }, ago(new Date(w.seen_at)))))))));
}

function names(w) {
  const orch = (w.orchestrations || []).map((o) => `${o.name}${o.versions && o.versions.length ? ' v' + o.versions.join(',') : ''}`);
  const acts = (w.activities || []).filter((a) => !a.startsWith('ratchet.'));
  const tasks = w.tasks || [];
  return h('details', { class: 'names' },
    h('summary', {}, `${orch.length} orchestrations · ${acts.length} activities · ${tasks.length} tasks`),
    h('dl', { class: 'names-list' },
      h('dt', {}, 'Orchestrations'), h('dd', {}, orch.join(', ') || '—'),
      h('dt', {}, 'Activities'), h('dd', {}, acts.join(', ') || '—'),
      h('dt', {}, 'Tasks'), h('dd', {}, tasks.join(', ') || '—')));
}

async function loadFailures(signal) {
  const page = await read('instances_list', [], { query: { status: 'Failed', limit: 10 }, signal });
  const items = page.items || [];
  if (!items.length) {
    return h('p', { class: 'empty-inline', 'data-testid': 'no-failures' }, 'No failed instances.');
  }
  return h('ul', { class: 'failures', 'data-testid': 'failures-list' }, items.map((i) =>
    h('li', { 'data-testid': 'failure-row', 'data-instance-id': i.id },
      h('div', { class: 'failure-head' },
        h('a', { href: '#' + instanceRoute(i.id), class: 'mono strong' }, i.id),
        h('span', { class: 'muted' }, i.name),
        h('span', { class: 'spacer' }),
        timeEl(i.finished_at || i.updated_at)),
      i.error
        ? h('p', { class: 'failure-error', 'data-testid': 'failure-error' }, h('strong', {}, i.error.kind || 'Error'), ': ', i.error.message || '')
        : h('p', { class: 'muted' }, 'No error recorded'))));
}
