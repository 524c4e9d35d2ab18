// Events (#/events?types=Enrolled&tags=course:c1&before=120&follow=1&open=42): the event
// store read by types and tags, newest first, a page backward (older, `before`) or forward
// (newer, `after`); followed live from /v1/events/stream; one event opened as JSON.

import { h, replace } from './dom.js';
import { call, can, pathOf, read } from './api.js';
import { follow } from './sse.js';
import { problemBox } from './problem.js';
import { timeEl } from './time.js';
import { jsonEditor, jsonInline } from './json.js';
import { openDialog, showJson } from './dialog.js';
import { apiCallPanel } from './apicall.js';
import { emptyState, appendCommands } from './empty.js';
import { navigate, replaceUrl, withQuery } from './url.js';

const MAX_ROWS = 1000;

export async function render(root, route) {
  route.title('Events');
  const p = route.params;
  const filters = { types: p.get('types') || '', tags: p.get('tags') || '', limit: p.get('limit') || '' };
  const after = p.get('after') || '';
  const before = p.get('before') || '';
  let following = p.get('follow') === '1';
  const limit = Number(filters.limit || 50);

  const actionArea = h('div', { 'data-testid': 'action-result' });
  const results = h('section', { class: 'card', 'data-testid': 'events-results', 'aria-label': 'Events' }, h('p', { class: 'loading' }, 'Loading…'));
  const followButton = h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'events-follow', 'aria-pressed': 'false' }, 'Follow live');
  const followState = h('span', { class: 'live-state', 'data-testid': 'live-state', 'aria-live': 'polite' });
  const appendButton = can('write') ? h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'events-append', onclick: () => appendDialog() }, 'Append event…') : null;
  replace(root,
    h('header', { class: 'page-head' }, h('h1', {}, 'Events'),
      h('div', { class: 'page-actions' }, followState, followButton, appendButton)),
    filterForm(filters),
    actionArea,
    results);

  const route0 = () => withQuery('/events', { ...filters, after, before, follow: following ? '1' : '' });
  let events = [];
  let head = null;
  let tbody = null;
  let stream = null;

  function openEvent(e) {
    replaceUrl(withQuery('/events', { ...filters, after, before, follow: following ? '1' : '', open: e.position }));
    const d = showJson(`Event ${e.position}: ${e.type}`, e, {
      testid: 'event-dialog',
      extra: h('dl', { class: 'kv' },
        h('dt', {}, 'Position'), h('dd', { class: 'mono' }, String(e.position)),
        h('dt', {}, 'Type'), h('dd', {}, e.type),
        h('dt', {}, 'Tags'), h('dd', {}, (e.tags || []).join(', ') || '—'),
        h('dt', {}, 'Recorded'), h('dd', {}, timeEl(e.recorded_at))),
    });
    d.closed.then(() => replaceUrl(route0()));
  }

  function row(e, fresh = false) {
    return h('tr', { 'data-testid': 'event-row', 'data-position': e.position, 'data-type': e.type, class: fresh ? 'fresh' : '' },
      h('td', { class: 'num' }, h('button', { type: 'button', class: 'link-btn mono', 'data-testid': 'event-open', 'aria-label': `Open event ${e.position}`, onclick: () => openEvent(e) }, String(e.position))),
      h('td', {}, h('a', { href: '#' + withQuery('/events', { types: e.type }), class: 'strong' }, e.type)),
      h('td', {}, (e.tags || []).map((t) => h('a', { class: 'chip', href: '#' + withQuery('/events', { tags: t }), title: `Events tagged ${t}` }, t))),
      h('td', { class: 'nowrap' }, timeEl(e.recorded_at)),
      h('td', { class: 'small mono payload-cell' }, jsonInline(e.payload, 120)));
  }

  function table() {
    const positions = events.map((e) => e.position);
    const newest = positions.length ? Math.max(...positions) : null;
    const oldest = positions.length ? Math.min(...positions) : null;
    const base = { ...filters };
    const pager = h('nav', { class: 'pager', 'aria-label': 'Pages', 'data-testid': 'pager' },
      h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'page-first', disabled: !after && !before, onclick: () => navigate(withQuery('/events', base)) }, '« Newest'),
      h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'page-prev', disabled: newest === null || (head !== null && newest >= head) || (!after && !before), onclick: () => navigate(withQuery('/events', { ...base, after: newest })) }, '‹ Newer'),
      h('span', { class: 'muted small', 'data-testid': 'page-info' }, head !== null ? `Store head: position ${head}` : ''),
      h('button', { type: 'button', class: 'btn btn-small', 'data-testid': 'page-next', disabled: oldest === null || oldest <= 1, onclick: () => navigate(withQuery('/events', { ...base, before: oldest })) }, 'Older ›'));
    tbody = h('tbody', {}, events.map((e) => row(e)));
    return [
      h('div', { class: 'table-wrap' }, h('table', { class: 'table', 'data-testid': 'events-table' },
        h('thead', {}, h('tr', {}, h('th', { class: 'num' }, 'Position'), h('th', {}, 'Type'), h('th', {}, 'Tags'), h('th', {}, 'Recorded'), h('th', {}, 'Payload'))),
        tbody)),
      following ? null : pager,
    ];
  }

  function draw() {
    if (!events.length) {
      const filtered = filters.types || filters.tags || after || before;
      replace(results,
        following ? h('p', { class: 'muted', 'data-testid': 'events-waiting' }, 'Waiting for new events…') : null,
        filtered
          ? emptyState({ title: 'No events match.', text: 'Try other types or tags, or clear the filters.' })
          : emptyState({ title: 'No events yet.', text: 'Append one from the command line or over HTTP:', commands: appendCommands() }),
        following || !filtered ? null : table().slice(1));
      tbody = null;
      return;
    }
    replace(results, table());
  }

  async function load() {
    const query = { types: filters.types, tags: filters.tags, limit };
    if (after) Object.assign(query, { after, direction: 'forward' });
    else if (before) Object.assign(query, { before, direction: 'backward' });
    else query.direction = 'backward';
    const page = await read('events_read', [], { query, signal: route.signal });
    head = page.head;
    events = (page.events || []).slice().sort((a, b) => b.position - a.position);
  }

  function setFollowing(on) {
    following = on;
    followButton.setAttribute('aria-pressed', String(on));
    followButton.textContent = on ? 'Stop following' : 'Follow live';
    replaceUrl(route0());
    if (stream) {
      stream.close();
      stream = null;
    }
    replace(followState);
    followState.dataset.state = on ? 'connecting' : 'off';
    if (!on) {
      draw();
      return;
    }
    const start = events.length ? Math.max(...events.map((e) => e.position)) : head ?? 0;
    stream = follow(pathOf('events_stream'), {
      query: { types: filters.types, tags: filters.tags, after: start },
      signal: route.signal,
      onState(s) {
        followState.dataset.state = s === 'open' ? 'live' : s;
        replace(followState, s === 'open' ? [h('span', { class: 'pulse', 'aria-hidden': 'true' }), 'Live'] : s === 'reconnecting' ? 'Reconnecting…' : '');
      },
      onMessage(m) {
        let e;
        try {
          e = JSON.parse(m.data);
        } catch {
          return;
        }
        if (!e || typeof e.position !== 'number' || events.some((x) => x.position === e.position)) return;
        events.unshift(e);
        if (head === null || e.position > head) head = e.position;
        if (events.length > MAX_ROWS) events.length = MAX_ROWS;
        if (tbody) {
          tbody.insertBefore(row(e, true), tbody.firstChild);
          while (tbody.children.length > MAX_ROWS) tbody.lastChild.remove();
        } else {
          draw();
        }
      },
      onError(err) {
        following = false;
        followButton.setAttribute('aria-pressed', 'false');
        followButton.textContent = 'Follow live';
        replace(followState);
        replace(actionArea, problemBox(err));
      },
    });
    draw();
  }

  followButton.addEventListener('click', async () => {
    if (!following && (after || before)) {
      // Following shows the newest: leave the page being read.
      navigate(withQuery('/events', { ...filters, follow: '1' }));
      return;
    }
    setFollowing(!following);
  });

  async function appendDialog() {
    const type = h('input', { id: 'ev-type', required: true, autocomplete: 'off', placeholder: 'Enrolled', 'data-testid': 'append-type' });
    const tags = h('input', { id: 'ev-tags', autocomplete: 'off', placeholder: 'course:c1, student:s-1', 'data-testid': 'append-tags' });
    const send = h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'append-send', disabled: true }, 'Append');
    const editor = jsonEditor({ value: {}, id: 'ev-payload', testid: 'append-payload', rows: 6, onChange: () => update() });
    const problem = h('div');
    function update() {
      send.disabled = !editor.valid() || !type.value.trim();
    }
    type.addEventListener('input', update);
    const d = openDialog({
      title: 'Append an event',
      testid: 'append-dialog',
      wide: true,
      closeLabel: 'Cancel',
      content: [
        h('div', { class: 'field' }, h('label', { for: 'ev-type' }, 'Type'), type),
        h('div', { class: 'field' }, h('label', { for: 'ev-tags' }, 'Tags (key:value, comma-separated)'), tags),
        h('div', { class: 'field' }, h('label', { for: 'ev-payload' }, 'Payload (JSON)'), editor.el),
        problem,
      ],
      actions: [send],
    });
    type.focus();
    d.dialog.querySelector('form').addEventListener('submit', async (e) => {
      e.preventDefault();
      update();
      if (send.disabled) return;
      send.disabled = true;
      const event = { type: type.value.trim(), tags: tags.value.split(',').map((t) => t.trim()).filter(Boolean), payload: editor.value() };
      try {
        const r = await call('events_append', [], { body: { events: [event] } });
        d.close();
        replace(actionArea, apiCallPanel([r.call], {
          summary: `Appended at position ${r.data.first}${r.data.duplicate ? ' (a duplicate: nothing new)' : ''}.`,
          onDismiss: () => replace(actionArea),
        }));
        if (!following) {
          await load();
          draw();
        }
      } catch (err) {
        replace(problem, problemBox(err));
        send.disabled = false;
      }
    });
  }

  try {
    await load();
  } catch (e) {
    replace(results, problemBox(e));
    return;
  }
  draw();
  if (following) setFollowing(true);
  const open = p.get('open');
  if (open && /^\d+$/.test(open)) {
    const pos = Number(open);
    let e = events.find((x) => x.position === pos);
    if (!e) {
      try {
        const page = await read('events_read', [], { query: { after: pos - 1, limit: 1 }, signal: route.signal });
        e = (page.events || []).find((x) => x.position === pos);
      } catch (err) {
        replace(actionArea, problemBox(err));
      }
    }
    if (e) openEvent(e);
    else replace(actionArea, problemBox({ problem: { title: 'No such event', detail: `No event at position ${pos}.` } }));
  }
}

function filterForm(filters) {
  const form = h('form', { class: 'filters card', role: 'search', 'aria-label': 'Filter events', 'data-testid': 'events-filters' },
    h('div', { class: 'filter-row' },
      h('div', { class: 'field grow' }, h('label', { for: 'e-types' }, 'Types (any of, comma-separated)'),
        h('input', { id: 'e-types', name: 'types', value: filters.types, placeholder: 'Enrolled, Dropped', 'data-testid': 'filter-types', 'data-slash': '', autocomplete: 'off' })),
      h('div', { class: 'field grow' }, h('label', { for: 'e-tags' }, 'Tags (all of, key:value)'),
        h('input', { id: 'e-tags', name: 'tags', value: filters.tags, placeholder: 'course:c1', 'data-testid': 'filter-tags', autocomplete: 'off' })),
      h('div', { class: 'field' }, h('label', { for: 'e-limit' }, 'Per page'),
        h('select', { id: 'e-limit', name: 'limit', 'data-testid': 'filter-limit' },
          ['25', '50', '100', '500'].map((n) => h('option', { value: n, selected: (filters.limit || '50') === n }, n)))),
      h('div', { class: 'filter-buttons' },
        h('button', { type: 'submit', class: 'btn btn-primary', 'data-testid': 'filter-apply' }, 'Apply'),
        h('button', { type: 'button', class: 'btn', 'data-testid': 'filter-clear', onclick: () => navigate('/events') }, 'Clear'))));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const d = new FormData(form);
    const clean = (v) => String(v || '').split(',').map((x) => x.trim()).filter(Boolean).join(',');
    navigate(withQuery('/events', { types: clean(d.get('types')), tags: clean(d.get('tags')), limit: d.get('limit') === '50' ? '' : d.get('limit') }));
  });
  return form;
}
