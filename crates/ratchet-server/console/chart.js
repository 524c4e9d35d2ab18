// The throughput chart, drawn as inline SVG: finishes per minute as stacked bars (completed
// green, failed red) and starts as a blue line, on a time axis in the viewer's time zone.

import { h, s } from './dom.js';
import { utcText } from './time.js';

const H = 220;
const PAD = { left: 40, right: 12, top: 12, bottom: 26 };

function niceMax(v) {
  if (v <= 4) return 4;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

const hm = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit' });

/**
 * Draws `buckets` (`{start, started, completed, failed}`, start RFC 3339) over the window
 * from `from` to `to` (Dates). Answers the SVG element.
 */
export function throughputChart(buckets, from, to, width = 760) {
  // Drawn at the width it is shown at, so text keeps its size.
  const W = Math.max(320, Math.round(width || 760));
  const t0 = from.getTime();
  const t1 = to.getTime();
  const span = Math.max(1, t1 - t0);
  const rows = buckets
    .map((b) => ({ ...b, t: new Date(b.start).getTime() }))
    .filter((b) => Number.isFinite(b.t))
    .sort((a, b) => a.t - b.t);
  let step = 60e3;
  for (let i = 1; i < rows.length; i++) step = Math.min(step, Math.max(1000, rows[i].t - rows[i - 1].t));
  const max = niceMax(Math.max(1, ...rows.map((b) => Math.max(b.started || 0, (b.completed || 0) + (b.failed || 0)))));
  const iw = W - PAD.left - PAD.right;
  const ih = H - PAD.top - PAD.bottom;
  const x = (t) => PAD.left + ((t - t0) / span) * iw;
  const y = (v) => PAD.top + ih - (v / max) * ih;
  const barW = Math.max(1, (step / span) * iw - 1.5);

  const svg = s('svg', {
    class: 'chart',
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'aria-label': 'Instances started, completed and failed per minute over the last hour',
    'data-testid': 'throughput-chart',
    preserveAspectRatio: 'xMidYMid meet',
  });

  // Grid and y labels.
  for (let i = 0; i <= 4; i++) {
    const v = (max / 4) * i;
    svg.appendChild(s('line', { class: 'grid', x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }));
    svg.appendChild(s('text', { class: 'axis', x: PAD.left - 6, y: y(v) + 4, 'text-anchor': 'end' }, formatCount(v)));
  }
  // X labels every 10 minutes on the clock.
  const tick = 10 * 60e3;
  for (let t = Math.ceil(t0 / tick) * tick; t <= t1; t += tick) {
    svg.appendChild(s('line', { class: 'tick', x1: x(t), x2: x(t), y1: PAD.top + ih, y2: PAD.top + ih + 4 }));
    svg.appendChild(s('text', { class: 'axis', x: x(t), y: H - 8, 'text-anchor': 'middle' }, hm.format(new Date(t))));
  }
  svg.appendChild(s('line', { class: 'baseline', x1: PAD.left, x2: W - PAD.right, y1: PAD.top + ih, y2: PAD.top + ih }));

  // Bars: completed below failed.
  for (const b of rows) {
    const bx = x(b.t) + 0.75;
    const c = b.completed || 0;
    const f = b.failed || 0;
    if (c > 0) svg.appendChild(s('rect', { class: 'bar-completed', x: bx, width: barW, y: y(c), height: y(0) - y(c) }));
    if (f > 0) svg.appendChild(s('rect', { class: 'bar-failed', x: bx, width: barW, y: y(c + f), height: y(c) - y(c + f) }));
  }
  // The starts line.
  if (rows.length) {
    const d = rows.map((b, i) => `${i ? 'L' : 'M'}${(x(b.t) + barW / 2 + 0.75).toFixed(1)},${y(b.started || 0).toFixed(1)}`).join('');
    svg.appendChild(s('path', { class: 'line-started', d }));
    for (const b of rows) {
      if (b.started) svg.appendChild(s('circle', { class: 'dot-started', cx: x(b.t) + barW / 2 + 0.75, cy: y(b.started), r: 2.2 }));
    }
  }
  // Hover targets: one column per bucket, with its numbers.
  for (const b of rows) {
    const col = s('rect', { class: 'hover', x: x(b.t), width: Math.max(2, (step / span) * iw), y: PAD.top, height: ih });
    col.appendChild(s('title', {}, `${hm.format(new Date(b.t))} (${utcText(new Date(b.t))})\nstarted ${b.started || 0} · completed ${b.completed || 0} · failed ${b.failed || 0}`));
    svg.appendChild(col);
  }
  return svg;
}

function formatCount(v) {
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

/** The same numbers as a table (for screen readers and for copying). */
export function throughputTable(buckets) {
  return h('table', { class: 'table compact', 'data-testid': 'throughput-table' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Minute'), h('th', { class: 'num' }, 'Started'), h('th', { class: 'num' }, 'Completed'), h('th', { class: 'num' }, 'Failed'))),
    h('tbody', {}, buckets.filter((b) => b.started || b.completed || b.failed).map((b) => {
      const d = new Date(b.start);
      return h('tr', {},
        h('td', {}, h('time', { datetime: d.toISOString(), title: utcText(d) }, hm.format(d))),
        h('td', { class: 'num' }, String(b.started || 0)),
        h('td', { class: 'num' }, String(b.completed || 0)),
        h('td', { class: 'num' }, String(b.failed || 0)));
    })));
}
