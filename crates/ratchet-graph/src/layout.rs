//! The layered layout: each level of a [`Graph`] placed Sugiyama-style, innermost first.
//!
//! Per level: cycles are broken by a depth-first search (edges back to an open node are laid
//! out reversed), nodes are ranked by longest path, edges spanning several layers get a dummy
//! node per layer (so they are routed between the nodes, never through one), the order inside
//! each layer comes from barycentre sweeps (the order with the fewest crossings wins), and x
//! is the least-squares placement nearest the neighbours' centres that keeps every node its
//! width apart (isotonic regression, solved exactly by pool-adjacent-violators), so chains
//! come out straight. Edges are routed orthogonally: down from the source, across on a track
//! of their own between the two layers, down into the target.

use crate::{Graph, Node, Shape, Status};

/// Width of a character of a node's name (12 px sans-serif, rounded up).
const LABEL_CHAR: f64 = 7.2;
/// Width of a character of a node's second line and of an edge label (10.5 px).
const SMALL_CHAR: f64 = 6.2;
/// Longer names and details are cut (the hover text has them whole).
const MAX_CHARS: usize = 42;
/// Between two nodes of a layer.
const NODE_SEP: f64 = 28.0;
/// Between two edges passing through a layer.
const DUMMY_SEP: f64 = 12.0;
/// Inside a box, around what it holds.
const PAD: f64 = 14.0;
/// A box's title line.
const HEADER: f64 = 26.0;
/// Above the first and below the last track of a gap between layers.
const GAP_MARGIN: f64 = 12.0;
/// Between two tracks.
const TRACK: f64 = 8.0;
/// Room for edge labels in a gap.
const LABEL_ROOM: f64 = 16.0;
/// How far a self-loop reaches right of its node.
const LOOP: f64 = 14.0;
/// Around the whole drawing.
const MARGIN: f64 = 16.0;

/// A node placed: its box in absolute coordinates (top-left, size).
#[derive(Clone, Debug, PartialEq)]
pub struct PlacedBox {
    /// The node's id.
    pub id: String,
    /// Its first line, cut to fit.
    pub label: String,
    /// Its second line, cut to fit.
    pub detail: Option<String>,
    /// Its hover text: the whole name and detail, and the tooltip.
    pub tooltip: String,
    /// How it is drawn.
    pub shape: Shape,
    /// Its colour.
    pub status: Status,
    /// Where a click goes.
    pub link: Option<String>,
    /// Left.
    pub x: f64,
    /// Top.
    pub y: f64,
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
    /// The box it is drawn in, an index into [`Layout::boxes`].
    pub parent: Option<usize>,
    /// Whether it holds a graph (drawn as a box around it).
    pub compound: bool,
}

impl PlacedBox {
    /// Whether the point lies strictly inside the box (not on its border).
    pub fn contains_strictly(&self, (x, y): (f64, f64)) -> bool {
        const EPS: f64 = 0.01;
        x > self.x + EPS
            && x < self.x + self.width - EPS
            && y > self.y + EPS
            && y < self.y + self.height - EPS
    }

    /// Whether the point lies on the box's border.
    pub fn on_border(&self, (x, y): (f64, f64)) -> bool {
        const EPS: f64 = 0.01;
        let (l, r, t, b) = (self.x, self.x + self.width, self.y, self.y + self.height);
        let within_x = x >= l - EPS && x <= r + EPS;
        let within_y = y >= t - EPS && y <= b + EPS;
        (within_x && ((y - t).abs() < EPS || (y - b).abs() < EPS))
            || (within_y && ((x - l).abs() < EPS || (x - r).abs() < EPS))
    }
}

/// An edge routed: a polyline of horizontal and vertical segments from its source's border
/// to its target's border.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacedEdge {
    /// The source, an index into [`Layout::boxes`].
    pub from: usize,
    /// The target, an index into [`Layout::boxes`].
    pub to: usize,
    /// The polyline, first point on the source, last on the target.
    pub points: Vec<(f64, f64)>,
    /// The label and where its text starts (left end of the baseline).
    pub label: Option<(String, f64, f64)>,
    /// The box whose graph the edge belongs to (`None`: the outermost level).
    pub within: Option<usize>,
}

/// A graph laid out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Layout {
    /// Width of the drawing.
    pub width: f64,
    /// Height of the drawing.
    pub height: f64,
    /// Every node of every level; a box comes before those inside it.
    pub boxes: Vec<PlacedBox>,
    /// Every edge of every level.
    pub edges: Vec<PlacedEdge>,
}

impl Layout {
    /// How many times two edges cross (segments meeting at a point inside both; edges that
    /// share a stretch or an end do not count).
    pub fn crossings(&self) -> usize {
        let segments: Vec<(usize, Point, Point)> = self
            .edges
            .iter()
            .enumerate()
            .flat_map(|(i, e)| e.points.windows(2).map(move |w| (i, w[0], w[1])))
            .collect();
        let mut count = 0;
        for (k, &(i, a1, a2)) in segments.iter().enumerate() {
            for &(j, b1, b2) in &segments[k + 1..] {
                if i != j && orthogonal_cross((a1, a2), (b1, b2)) {
                    count += 1;
                }
            }
        }
        count
    }

    /// What is wrong with the drawing, if anything: two boxes that overlap (other than one
    /// inside the other), a box not inside the box that holds it, an edge segment that is
    /// not horizontal or vertical or passes through a box (other than those its level is
    /// inside), an edge that does not start on its source's border or end on its target's.
    /// The layout's tests assert this is empty for every graph they draw.
    pub fn problems(&self) -> Vec<String> {
        const EPS: f64 = 0.01;
        let mut problems = Vec::new();
        for (i, a) in self.boxes.iter().enumerate() {
            if let Some(p) = a.parent.and_then(|p| self.boxes.get(p)) {
                let inside = a.x >= p.x - EPS
                    && a.y >= p.y - EPS
                    && a.x + a.width <= p.x + p.width + EPS
                    && a.y + a.height <= p.y + p.height + EPS;
                if !inside {
                    problems.push(format!("{} sticks out of {}", a.id, p.id));
                }
            }
            for (j, b) in self.boxes.iter().enumerate().skip(i + 1) {
                if self.is_within(i, j) || self.is_within(j, i) {
                    continue;
                }
                let apart = a.x + a.width <= b.x + EPS
                    || b.x + b.width <= a.x + EPS
                    || a.y + a.height <= b.y + EPS
                    || b.y + b.height <= a.y + EPS;
                if !apart {
                    problems.push(format!("{} overlaps {}", a.id, b.id));
                }
            }
        }
        for e in &self.edges {
            let name = || {
                let id = |i: usize| self.boxes.get(i).map_or("?", |b| b.id.as_str());
                format!("edge {} -> {}", id(e.from), id(e.to))
            };
            let (Some(first), Some(last)) = (e.points.first(), e.points.last()) else {
                problems.push(format!("{} has no points", name()));
                continue;
            };
            if !self.boxes.get(e.from).is_some_and(|b| b.on_border(*first)) {
                problems.push(format!("{} does not start on its source", name()));
            }
            if !self.boxes.get(e.to).is_some_and(|b| b.on_border(*last)) {
                problems.push(format!("{} does not end on its target", name()));
            }
            for w in e.points.windows(2) {
                let (p, q) = (w[0], w[1]);
                if (p.0 - q.0).abs() > EPS && (p.1 - q.1).abs() > EPS {
                    problems.push(format!("{} has a slanted segment", name()));
                }
                for (k, b) in self.boxes.iter().enumerate() {
                    let holds_level = e.within.is_some_and(|level| self.is_within(level, k));
                    if holds_level {
                        continue;
                    }
                    let (l, r) = (p.0.min(q.0), p.0.max(q.0));
                    let (t, u) = (p.1.min(q.1), p.1.max(q.1));
                    let crosses = l < b.x + b.width - EPS
                        && r > b.x + EPS
                        && t < b.y + b.height - EPS
                        && u > b.y + EPS;
                    if crosses {
                        problems.push(format!("{} passes through {}", name(), b.id));
                    }
                }
            }
        }
        problems
    }

    /// Whether `ancestor` is `index` or holds it, at any depth.
    pub fn is_within(&self, index: usize, ancestor: usize) -> bool {
        let mut at = Some(index);
        while let Some(i) = at {
            if i == ancestor {
                return true;
            }
            at = self.boxes.get(i).and_then(|b| b.parent);
        }
        false
    }
}

/// Whether a horizontal and a vertical segment cross at a point inside both.
fn orthogonal_cross(a: ((f64, f64), (f64, f64)), b: ((f64, f64), (f64, f64))) -> bool {
    const EPS: f64 = 0.01;
    let horizontal = |s: ((f64, f64), (f64, f64))| (s.0 .1 - s.1 .1).abs() < EPS;
    let (h, v) = match (horizontal(a), horizontal(b)) {
        (true, false) => (a, b),
        (false, true) => (b, a),
        _ => return false,
    };
    let (hx1, hx2) = (h.0 .0.min(h.1 .0), h.0 .0.max(h.1 .0));
    let (vy1, vy2) = (v.0 .1.min(v.1 .1), v.0 .1.max(v.1 .1));
    let (x, y) = (v.0 .0, h.0 .1);
    x > hx1 + EPS && x < hx2 - EPS && y > vy1 + EPS && y < vy2 - EPS
}

/// A point: x, y.
type Point = (f64, f64);

/// An edge's stretch across a gap between layers, on a track of its own: its chain and step,
/// its horizontal extent, and its two ports (node, x in hundredths).
struct Jog {
    chain: usize,
    step: usize,
    left: f64,
    right: f64,
    source: (usize, i64),
    target: (usize, i64),
}

/// Lays out a graph and every graph inside it.
pub fn layout(graph: &Graph) -> Layout {
    let level = level(graph);
    let mut out = Layout {
        width: level.width + 2.0 * MARGIN,
        height: level.height + 2.0 * MARGIN,
        ..Layout::default()
    };
    flatten(graph, &level, (MARGIN, MARGIN), None, &mut out);
    out
}

/// Cuts text to [`MAX_CHARS`] characters.
fn clip(text: &str) -> String {
    if text.chars().count() <= MAX_CHARS {
        text.to_string()
    } else {
        let mut cut: String = text.chars().take(MAX_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}

fn text_width(text: &str, per_char: f64) -> f64 {
    text.chars().count() as f64 * per_char
}

/// One level placed, in coordinates relative to its top-left corner.
struct Level {
    width: f64,
    height: f64,
    nodes: Vec<Placed>,
    edges: Vec<Routed>,
}

/// A node of a level: top-left and size; what it holds, and where that starts inside it.
struct Placed {
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    inner: Option<(f64, f64, Level)>,
}

struct Routed {
    from: usize,
    to: usize,
    points: Vec<(f64, f64)>,
    label: Option<(String, f64, f64)>,
}

/// A node's size, and the layout of what it holds.
fn measure(node: &Node) -> (f64, f64, Option<Level>) {
    let label = text_width(&clip(&node.label), LABEL_CHAR);
    let detail = node
        .detail
        .as_deref()
        .map_or(0.0, |d| text_width(&clip(d), SMALL_CHAR));
    let text = label.max(detail);
    if let Some(body) = &node.body {
        let inner = level(body);
        let header = if node.detail.is_some() {
            HEADER + 12.0
        } else {
            HEADER
        };
        let width = (inner.width + 2.0 * PAD).max(text + 2.0 * PAD).max(72.0);
        let height = header + inner.height + PAD;
        return (width, height, Some(inner));
    }
    let lines = if node.detail.is_some() { 46.0 } else { 32.0 };
    match node.shape {
        Shape::Point => (14.0, 14.0, None),
        // A terminal's detail is in its hover text only.
        Shape::Terminal => ((label + 28.0).max(56.0), 28.0, None),
        Shape::Decision => ((text + 44.0).max(80.0), lines, None),
        Shape::Step | Shape::Workflow => ((text + 24.0).max(72.0), lines, None),
    }
}

/// An edge of a level as laid out: `reversed` when it closes a cycle and so runs upward.
struct LevelEdge {
    from: usize,
    to: usize,
    label: Option<String>,
    reversed: bool,
}

fn level(graph: &Graph) -> Level {
    let n = graph.nodes.len();
    let measured: Vec<(f64, f64, Option<Level>)> = graph.nodes.iter().map(measure).collect();
    let sizes: Vec<(f64, f64)> = measured.iter().map(|m| (m.0, m.1)).collect();
    let size = |v: usize| sizes[v];

    // Edges between the same two nodes are drawn once, their labels joined.
    let mut edges: Vec<LevelEdge> = Vec::new();
    let mut loops: Vec<(usize, Option<String>)> = Vec::new();
    for e in &graph.edges {
        if e.from >= n || e.to >= n {
            continue;
        }
        if e.from == e.to {
            match loops.iter_mut().find(|l| l.0 == e.from) {
                Some(l) => l.1 = join_labels(l.1.take(), e.label.clone()),
                None => loops.push((e.from, e.label.clone())),
            }
            continue;
        }
        match edges.iter_mut().find(|x| x.from == e.from && x.to == e.to) {
            Some(x) => x.label = join_labels(x.label.take(), e.label.clone()),
            None => edges.push(LevelEdge {
                from: e.from,
                to: e.to,
                label: e.label.clone(),
                reversed: false,
            }),
        }
    }
    break_cycles(n, &mut edges);
    let dag: Vec<(usize, usize)> = edges
        .iter()
        .map(|e| {
            if e.reversed {
                (e.to, e.from)
            } else {
                (e.from, e.to)
            }
        })
        .collect();
    let rank = longest_path(n, &dag);

    // Virtual nodes: the real ones, then a dummy per layer an edge passes through.
    let mut vrank = rank.clone();
    let mut half: Vec<f64> = (0..n)
        .map(|v| {
            let reach = loops.iter().find(|l| l.0 == v).map_or(0.0, |l| {
                LOOP + 4.0 + l.1.as_deref().map_or(0.0, |t| text_width(t, SMALL_CHAR))
            });
            size(v).0 / 2.0 + reach
        })
        .collect();
    let mut dummy = vec![false; n];
    let mut chains: Vec<Vec<usize>> = Vec::with_capacity(dag.len());
    let mut vedges: Vec<(usize, usize)> = Vec::new();
    for &(a, b) in &dag {
        let mut chain = vec![a];
        for r in rank[a] + 1..rank[b] {
            vrank.push(r);
            half.push(0.0);
            dummy.push(true);
            chain.push(vrank.len() - 1);
        }
        chain.push(b);
        vedges.extend(chain.windows(2).map(|w| (w[0], w[1])));
        chains.push(chain);
    }
    let layers_count = vrank.iter().map(|r| r + 1).max().unwrap_or(0);
    let vn = vrank.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); vn];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); vn];
    for &(a, b) in &vedges {
        succs[a].push(b);
        preds[b].push(a);
    }

    let layers = order(n, &vrank, layers_count, &preds, &succs);
    let mut x = place_x(&layers, &half, &dummy, &preds, &succs);
    straighten(&layers, &mut x, &half, &dummy, &preds, &succs);
    // On a half-pixel grid, two ends either line up or visibly jog.
    for v in &mut x {
        *v = (*v * 2.0).round() / 2.0;
    }

    // Ports: a reversed edge leaves and enters its nodes right of centre, apart from the
    // forward edges between the same layers.
    let shift = |v: usize, reversed: bool| {
        if reversed && v < n {
            (size(v).0 / 4.0).min(16.0)
        } else {
            0.0
        }
    };

    // Tracks: each gap between two layers gets as many as its jogging edges need; edges
    // from the same port or into the same port may share one.
    let mut layer_height = vec![0.0f64; layers_count];
    for v in 0..n {
        layer_height[vrank[v]] = layer_height[vrank[v]].max(size(v).1);
    }
    let gaps = layers_count.saturating_sub(1);
    // Per virtual edge (by chain, position): its track, if it jogs.
    let mut track_of: Vec<Vec<Option<usize>>> = chains
        .iter()
        .map(|c| vec![None; c.len().saturating_sub(1)])
        .collect();
    let mut tracks_in_gap = vec![0usize; gaps];
    let mut label_below = vec![false; gaps];
    let mut label_above = vec![false; gaps];
    for (gap, tracks) in tracks_in_gap.iter_mut().enumerate() {
        // (chain, step, left, right, source port, target port)
        let mut jogs: Vec<Jog> = Vec::new();
        for (c, chain) in chains.iter().enumerate() {
            let reversed = edges[c].reversed;
            for (s, w) in chain.windows(2).enumerate() {
                if vrank[w[0]] != gap {
                    continue;
                }
                let sx = x[w[0]] + shift(w[0], reversed);
                let tx = x[w[1]] + shift(w[1], reversed);
                if edges[c].label.is_some() {
                    if !reversed && s + 2 == chain.len() {
                        label_below[gap] = true;
                    }
                    if reversed && s == 0 {
                        label_above[gap] = true;
                    }
                }
                if (sx - tx).abs() > 0.01 {
                    let port = |v: usize, px: f64| (v, (px * 100.0).round() as i64);
                    jogs.push(Jog {
                        chain: c,
                        step: s,
                        left: sx.min(tx),
                        right: sx.max(tx),
                        source: port(w[0], sx),
                        target: port(w[1], tx),
                    });
                }
            }
        }
        jogs.sort_by(|a, b| a.left.total_cmp(&b.left).then(a.right.total_cmp(&b.right)));
        let mut lanes: Vec<Vec<usize>> = Vec::new();
        for (k, jog) in jogs.iter().enumerate() {
            let fits = |lane: &Vec<usize>| {
                lane.iter().all(|&o| {
                    let other = &jogs[o];
                    other.source == jog.source
                        || other.target == jog.target
                        || other.right < jog.left - 1.0
                })
            };
            let lane = match lanes.iter().position(fits) {
                Some(l) => l,
                None => {
                    lanes.push(Vec::new());
                    lanes.len() - 1
                }
            };
            lanes[lane].push(k);
            track_of[jog.chain][jog.step] = Some(lane);
        }
        *tracks = lanes.len();
    }
    let mut band_top = vec![0.0f64; layers_count];
    let mut gap_height = vec![0.0f64; gaps];
    for gap in 0..gaps {
        let tracks = tracks_in_gap[gap].max(1) as f64;
        gap_height[gap] = 2.0 * GAP_MARGIN
            + (tracks - 1.0) * TRACK
            + if label_below[gap] { LABEL_ROOM } else { 0.0 }
            + if label_above[gap] { LABEL_ROOM } else { 0.0 };
        band_top[gap + 1] = band_top[gap] + layer_height[gap] + gap_height[gap];
    }
    let track_y = |gap: usize, track: usize| {
        band_top[gap]
            + layer_height[gap]
            + GAP_MARGIN
            + if label_above[gap] { LABEL_ROOM } else { 0.0 }
            + track as f64 * TRACK
    };

    let left = (0..vn)
        .map(|v| x[v] - half[v])
        .fold(f64::INFINITY, f64::min);
    let left = if left.is_finite() { left } else { 0.0 };
    let right = (0..vn)
        .map(|v| x[v] + half[v])
        .fold(f64::NEG_INFINITY, f64::max);
    let width = if right.is_finite() { right - left } else { 0.0 };
    let height = layers_count
        .checked_sub(1)
        .map_or(0.0, |last| band_top[last] + layer_height[last]);

    let nodes: Vec<Placed> = measured
        .into_iter()
        .enumerate()
        .map(|(v, (w, h, inner))| Placed {
            x: x[v] - left - w / 2.0,
            y: band_top[vrank[v]],
            width: w,
            height: h,
            inner: inner.map(|l| ((w - l.width) / 2.0, inner_top(&graph.nodes[v]), l)),
        })
        .collect();

    let mut routed = Vec::with_capacity(edges.len() + loops.len());
    for (c, chain) in chains.iter().enumerate() {
        let e = &edges[c];
        let px = |v: usize| x[v] - left + shift(v, e.reversed);
        let mut points = Vec::new();
        let first = chain[0];
        points.push((px(first), band_top[vrank[first]] + size(first).1));
        for (s, w) in chain.windows(2).enumerate() {
            let (a, b) = (w[0], w[1]);
            let gap = vrank[a];
            let bottom = band_top[gap] + layer_height[gap];
            points.push((px(a), bottom));
            if let Some(track) = track_of[c][s] {
                let y = track_y(gap, track);
                points.push((px(a), y));
                points.push((px(b), y));
            }
            points.push((px(b), band_top[gap + 1]));
            if b >= n {
                points.push((px(b), band_top[gap + 1] + layer_height[gap + 1]));
            }
        }
        let points = simplify(points);
        let label = e.label.as_ref().map(|text| {
            let (lx, ly) = if e.reversed {
                let (ex, ey) = points[0];
                (ex + 4.0, ey + 12.0)
            } else {
                let (ex, ey) = points[points.len() - 1];
                (ex + 4.0, ey - 5.0)
            };
            (clip(text), lx, ly)
        });
        let mut points = points;
        if e.reversed {
            points.reverse();
        }
        routed.push(Routed {
            from: e.from,
            to: e.to,
            points,
            label,
        });
    }
    for (v, label) in loops {
        let node = &nodes[v];
        let r = node.x + node.width;
        let cy = node.y + node.height / 2.0;
        routed.push(Routed {
            from: v,
            to: v,
            points: vec![
                (r, cy - 6.0),
                (r + LOOP, cy - 6.0),
                (r + LOOP, cy + 6.0),
                (r, cy + 6.0),
            ],
            label: label.map(|t| (clip(&t), r + LOOP + 4.0, cy + 4.0)),
        });
    }
    separate_labels(&mut routed, &nodes);
    Level {
        width,
        height,
        nodes,
        edges: routed,
    }
}

/// Moves edge labels that would cover another label or a node (two cases into one step put
/// theirs at the same place) to a bend of their own edge where they cover nothing; one with
/// no such place stays where it was.
fn separate_labels(edges: &mut [Routed], nodes: &[Placed]) {
    let rect = |text: &str, x: f64, y: f64| (x, y - 9.0, x + text_width(text, SMALL_CHAR), y + 2.0);
    let clear = |r: (f64, f64, f64, f64), taken: &[(f64, f64, f64, f64)]| {
        let apart = |o: &(f64, f64, f64, f64)| r.2 <= o.0 || o.2 <= r.0 || r.3 <= o.1 || o.3 <= r.1;
        taken.iter().all(apart)
            && nodes
                .iter()
                .all(|n| apart(&(n.x, n.y, n.x + n.width, n.y + n.height)))
    };
    let mut taken: Vec<(f64, f64, f64, f64)> = Vec::new();
    for edge in edges.iter_mut() {
        let Some((text, x, y)) = edge.label.clone() else {
            continue;
        };
        let mut places = vec![(x, y)];
        for &(px, py) in edge.points.iter().rev() {
            places.push((px + 4.0, py - 4.0));
            places.push((px + 4.0, py + 12.0));
        }
        let chosen = places
            .into_iter()
            .find(|&(px, py)| clear(rect(&text, px, py), &taken))
            .unwrap_or((x, y));
        taken.push(rect(&text, chosen.0, chosen.1));
        edge.label = Some((text, chosen.0, chosen.1));
    }
}

/// Where a box's graph starts below its top.
fn inner_top(node: &Node) -> f64 {
    if node.detail.is_some() {
        HEADER + 12.0
    } else {
        HEADER
    }
}

fn join_labels(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}, {b}")),
        (a, b) => a.or(b),
    }
}

/// Marks the edges that close a cycle (found by a depth-first search from each node in
/// order) as reversed, which leaves the rest a DAG.
fn break_cycles(n: usize, edges: &mut [LevelEdge]) {
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, e) in edges.iter().enumerate() {
        out[e.from].push(i);
    }
    // 0: not seen, 1: open, 2: done.
    let mut state = vec![0u8; n];
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        state[root] = 1;
        let mut stack = vec![(root, 0usize)];
        while let Some(top) = stack.last_mut() {
            let (v, next) = *top;
            match out[v].get(next) {
                Some(&e) => {
                    top.1 += 1;
                    let w = edges[e].to;
                    match state[w] {
                        0 => {
                            state[w] = 1;
                            stack.push((w, 0));
                        }
                        1 => edges[e].reversed = true,
                        _ => {}
                    }
                }
                None => {
                    state[v] = 2;
                    stack.pop();
                }
            }
        }
    }
}

/// Each node's layer: the longest path to it from a node with no incoming edge.
fn longest_path(n: usize, dag: &[(usize, usize)]) -> Vec<usize> {
    let mut indegree = vec![0usize; n];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b) in dag {
        indegree[b] += 1;
        out[a].push(b);
    }
    let mut rank = vec![0usize; n];
    let mut ready: std::collections::BTreeSet<usize> =
        (0..n).filter(|&v| indegree[v] == 0).collect();
    while let Some(v) = ready.pop_first() {
        for &w in &out[v] {
            rank[w] = rank[w].max(rank[v] + 1);
            indegree[w] -= 1;
            if indegree[w] == 0 {
                ready.insert(w);
            }
        }
    }
    rank
}

/// The order of the nodes in each layer: first as a depth-first walk meets them (so a chain
/// stays in one column), then barycentre sweeps down and up; the order with the fewest
/// crossings is kept.
fn order(
    n: usize,
    vrank: &[usize],
    layers_count: usize,
    preds: &[Vec<usize>],
    succs: &[Vec<usize>],
) -> Vec<Vec<usize>> {
    let vn = vrank.len();
    let mut layers: Vec<Vec<usize>> = vec![Vec::new(); layers_count];
    let mut seen = vec![false; vn];
    let roots = (0..n)
        .filter(|&v| preds[v].is_empty())
        .chain(0..vn)
        .collect::<Vec<_>>();
    for root in roots {
        if seen[root] {
            continue;
        }
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            if seen[v] {
                continue;
            }
            seen[v] = true;
            layers[vrank[v]].push(v);
            stack.extend(succs[v].iter().rev().filter(|&&w| !seen[w]));
        }
    }
    let mut pos = vec![0usize; vn];
    let index = |layers: &Vec<Vec<usize>>, pos: &mut Vec<usize>| {
        for layer in layers {
            for (i, &v) in layer.iter().enumerate() {
                pos[v] = i;
            }
        }
    };
    index(&layers, &mut pos);
    let mut best = layers.clone();
    let mut best_count = count_crossings(&layers, &pos, succs);
    for _ in 0..12 {
        if best_count == 0 {
            break;
        }
        for layer in layers.iter_mut().skip(1) {
            sort_by_barycentre(layer, &mut pos, preds);
        }
        for l in (0..layers_count.saturating_sub(1)).rev() {
            sort_by_barycentre(&mut layers[l], &mut pos, succs);
        }
        let count = count_crossings(&layers, &pos, succs);
        if count < best_count {
            best_count = count;
            best = layers.clone();
        }
    }
    best
}

fn sort_by_barycentre(layer: &mut [usize], pos: &mut [usize], neighbours: &[Vec<usize>]) {
    let key = |v: usize| {
        let ns = &neighbours[v];
        if ns.is_empty() {
            pos[v] as f64
        } else {
            ns.iter().map(|&u| pos[u] as f64).sum::<f64>() / ns.len() as f64
        }
    };
    let mut keyed: Vec<(f64, usize, usize)> = layer.iter().map(|&v| (key(v), pos[v], v)).collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    for (i, (_, _, v)) in keyed.into_iter().enumerate() {
        layer[i] = v;
        pos[v] = i;
    }
}

/// Crossings between consecutive layers, as the order puts them.
fn count_crossings(layers: &[Vec<usize>], pos: &[usize], succs: &[Vec<usize>]) -> usize {
    let mut total = 0;
    for layer in layers {
        let pairs: Vec<(usize, usize)> = layer
            .iter()
            .flat_map(|&a| succs[a].iter().map(move |&b| (a, b)))
            .map(|(a, b)| (pos[a], pos[b]))
            .collect();
        for (i, p) in pairs.iter().enumerate() {
            for q in &pairs[i + 1..] {
                if (p.0 < q.0 && p.1 > q.1) || (p.0 > q.0 && p.1 < q.1) {
                    total += 1;
                }
            }
        }
    }
    total
}

/// The least distance between two neighbours of a layer, besides their half widths.
fn separation(dummy: &[bool], a: usize, b: usize) -> f64 {
    match (dummy[a], dummy[b]) {
        (true, true) => DUMMY_SEP,
        (false, false) => NODE_SEP,
        _ => (DUMMY_SEP + NODE_SEP) / 2.0,
    }
}

/// Puts each run of nodes linked one to one (a chain of steps, the dummies of a long edge)
/// on one vertical line where their neighbours leave room: the sweeps leave them drifting a
/// little from layer to layer. Longest runs first; the line through their median, else
/// through one of them.
fn straighten(
    layers: &[Vec<usize>],
    x: &mut [f64],
    half: &[f64],
    dummy: &[bool],
    preds: &[Vec<usize>],
    succs: &[Vec<usize>],
) {
    let mut position = vec![0usize; x.len()];
    let mut layer_of = vec![0usize; x.len()];
    for (l, layer) in layers.iter().enumerate() {
        for (i, &v) in layer.iter().enumerate() {
            position[v] = i;
            layer_of[v] = l;
        }
    }
    let linked = |v: usize| succs[v].len() == 1 && preds[succs[v][0]].len() == 1;
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for layer in layers {
        for &v in layer {
            // A run starts where no one-to-one link comes in.
            if preds[v].len() == 1 && linked(preds[v][0]) {
                continue;
            }
            let mut run = vec![v];
            let mut at = v;
            while linked(at) {
                at = succs[at][0];
                run.push(at);
            }
            if run.len() > 1 {
                runs.push(run);
            }
        }
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.len()));
    for run in runs {
        let mut xs: Vec<f64> = run.iter().map(|&v| x[v]).collect();
        xs.sort_by(f64::total_cmp);
        let median = xs[xs.len() / 2];
        let mut candidates = vec![median];
        xs.sort_by(|a, b| (a - median).abs().total_cmp(&(b - median).abs()));
        candidates.extend(xs);
        let fits = |c: f64, x: &[f64]| {
            run.iter().all(|&v| {
                let layer = &layers[layer_of[v]];
                let p = position[v];
                let left_ok = p == 0 || {
                    let l = layer[p - 1];
                    x[l] + half[l] + half[v] + separation(dummy, l, v) <= c + 0.001
                };
                let right_ok = p + 1 >= layer.len() || {
                    let r = layer[p + 1];
                    c + half[v] + half[r] + separation(dummy, v, r) <= x[r] + 0.001
                };
                left_ok && right_ok
            })
        };
        if let Some(&c) = candidates.iter().find(|&&c| fits(c, x)) {
            for &v in &run {
                x[v] = c;
            }
        }
    }
}

/// Each virtual node's centre x: sweeps that pull nodes toward their neighbours' centres,
/// each layer placed by [`nearest_placement`].
fn place_x(
    layers: &[Vec<usize>],
    half: &[f64],
    dummy: &[bool],
    preds: &[Vec<usize>],
    succs: &[Vec<usize>],
) -> Vec<f64> {
    let mut x = vec![0.0; half.len()];
    let sep = |a: usize, b: usize| separation(dummy, a, b);
    let place = |layer: &[usize], x: &mut Vec<f64>, desired: &dyn Fn(usize, &[f64]) -> f64| {
        let want: Vec<f64> = layer.iter().map(|&v| desired(v, x)).collect();
        let weight: Vec<f64> = layer
            .iter()
            .map(|&v| if dummy[v] { 4.0 } else { 1.0 })
            .collect();
        let mut gaps = vec![0.0; layer.len()];
        for k in 1..layer.len() {
            gaps[k] = half[layer[k - 1]] + half[layer[k]] + sep(layer[k - 1], layer[k]);
        }
        for (k, placed) in nearest_placement(&want, &weight, &gaps)
            .into_iter()
            .enumerate()
        {
            x[layer[k]] = placed;
        }
    };
    let mean = |ns: &[usize], x: &[f64], own: f64| {
        if ns.is_empty() {
            own
        } else {
            ns.iter().map(|&u| x[u]).sum::<f64>() / ns.len() as f64
        }
    };
    for layer in layers {
        place(layer, &mut x, &|_, _| 0.0);
    }
    for _ in 0..8 {
        for layer in layers.iter().skip(1) {
            place(layer, &mut x, &|v, x| mean(&preds[v], x, x[v]));
        }
        for layer in layers.iter().rev().skip(1) {
            place(layer, &mut x, &|v, x| mean(&succs[v], x, x[v]));
        }
    }
    for layer in layers {
        place(layer, &mut x, &|v, x| {
            let both: Vec<usize> = preds[v].iter().chain(&succs[v]).copied().collect();
            mean(&both, x, x[v])
        });
    }
    x
}

/// The positions nearest `want` (weighted least squares) with each at least `gaps[k]` right
/// of the one before: isotonic regression of `want[k] - offset[k]`, by pool-adjacent-violators.
fn nearest_placement(want: &[f64], weight: &[f64], gaps: &[f64]) -> Vec<f64> {
    let mut offset = vec![0.0; want.len()];
    for k in 1..want.len() {
        offset[k] = offset[k - 1] + gaps[k];
    }
    // Blocks of (weighted sum, weight, count), their means non-decreasing.
    let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
    for k in 0..want.len() {
        blocks.push(((want[k] - offset[k]) * weight[k], weight[k], 1));
        while blocks.len() > 1 {
            let last = blocks[blocks.len() - 1];
            let prev = blocks[blocks.len() - 2];
            if prev.0 / prev.1 > last.0 / last.1 {
                blocks.pop();
                let merged = blocks.len() - 1;
                blocks[merged] = (prev.0 + last.0, prev.1 + last.1, prev.2 + last.2);
            } else {
                break;
            }
        }
    }
    let mut out = Vec::with_capacity(want.len());
    for (sum, w, count) in blocks {
        for _ in 0..count {
            let k = out.len();
            out.push(sum / w + offset[k]);
        }
    }
    out
}

/// Drops repeated points and the middle of three points on one line.
fn simplify(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    const EPS: f64 = 0.01;
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(points.len());
    for p in points {
        if let Some(&last) = out.last() {
            if (last.0 - p.0).abs() < EPS && (last.1 - p.1).abs() < EPS {
                continue;
            }
        }
        if out.len() >= 2 {
            let a = out[out.len() - 2];
            let b = out[out.len() - 1];
            let vertical = (a.0 - b.0).abs() < EPS && (b.0 - p.0).abs() < EPS;
            let horizontal = (a.1 - b.1).abs() < EPS && (b.1 - p.1).abs() < EPS;
            if vertical || horizontal {
                out.pop();
            }
        }
        out.push(p);
    }
    out
}

/// Writes a level's nodes and edges into the layout at `origin`, and every level inside.
fn flatten(
    graph: &Graph,
    level: &Level,
    origin: (f64, f64),
    parent: Option<usize>,
    out: &mut Layout,
) {
    let mut index = Vec::with_capacity(level.nodes.len());
    for (node, placed) in graph.nodes.iter().zip(&level.nodes) {
        let (x, y) = (origin.0 + placed.x, origin.1 + placed.y);
        let tooltip = [
            Some(node.label.as_str()),
            node.detail.as_deref(),
            node.tooltip.as_deref(),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n");
        out.boxes.push(PlacedBox {
            id: node.id.clone(),
            label: clip(&node.label),
            detail: match node.shape {
                Shape::Terminal | Shape::Point => None,
                _ => node.detail.as_deref().map(clip),
            },
            tooltip,
            shape: node.shape,
            status: node.status,
            link: node.link.clone(),
            x,
            y,
            width: placed.width,
            height: placed.height,
            parent,
            compound: placed.inner.is_some(),
        });
        let me = out.boxes.len() - 1;
        index.push(me);
        if let (Some(body), Some((ix, iy, inner))) = (&node.body, &placed.inner) {
            flatten(body, inner, (x + ix, y + iy), Some(me), out);
        }
    }
    for e in &level.edges {
        out.edges.push(PlacedEdge {
            from: index[e.from],
            to: index[e.to],
            points: e
                .points
                .iter()
                .map(|&(x, y)| (origin.0 + x, origin.1 + y))
                .collect(),
            label: e
                .label
                .as_ref()
                .map(|(t, x, y)| (t.clone(), origin.0 + x, origin.1 + y)),
            within: parent,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_placement_keeps_the_gaps_and_the_wishes_it_can() {
        // Three nodes all wanting 0, each 10 apart: centred on 0.
        let x = nearest_placement(&[0.0, 0.0, 0.0], &[1.0, 1.0, 1.0], &[0.0, 10.0, 10.0]);
        assert_eq!(x, vec![-10.0, 0.0, 10.0]);
        // Far apart wishes are kept as they are.
        let x = nearest_placement(&[0.0, 50.0], &[1.0, 1.0], &[0.0, 10.0]);
        assert_eq!(x, vec![0.0, 50.0]);
    }

    #[test]
    fn a_cycle_is_broken_by_one_reversed_edge() {
        let mut edges: Vec<LevelEdge> = [(0, 1), (1, 2), (2, 0)]
            .into_iter()
            .map(|(from, to)| LevelEdge {
                from,
                to,
                label: None,
                reversed: false,
            })
            .collect();
        break_cycles(3, &mut edges);
        let reversed: Vec<bool> = edges.iter().map(|e| e.reversed).collect();
        assert_eq!(reversed, vec![false, false, true]);
    }

    #[test]
    fn crossings_count_only_points_inside_both_segments() {
        let cross = ((0.0, 5.0), (10.0, 5.0));
        assert!(orthogonal_cross(cross, ((5.0, 0.0), (5.0, 10.0))));
        // Touching at an end is not a crossing.
        assert!(!orthogonal_cross(cross, ((10.0, 0.0), (10.0, 10.0))));
        assert!(!orthogonal_cross(cross, ((5.0, 5.0), (5.0, 10.0))));
    }
}
