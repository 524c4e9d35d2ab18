//! The layout's guarantees on graphs of every shape: random ones (cycles, self-loops, edges
//! skipping layers, nested boxes, labels) and graphs of executed histories.

use std::collections::BTreeMap;

use ratchet_core::{ActivityOptions, ErrorInfo, HistoryEvent, Timestamp};
use ratchet_graph::{from_history, layout, render, svg, Graph, HistoryGraph, Node, Shape, Status};
use serde_json::json;

/// A linear congruential generator: the same graphs on every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n.max(1) as u64) as usize
    }
}

fn random_graph(rng: &mut Lcg, nodes: usize, depth: usize, prefix: &str) -> Graph {
    let mut g = Graph::default();
    for i in 0..nodes {
        let label = "x".repeat(1 + rng.below(30));
        let mut node = Node::new(format!("{prefix}{i}"), label);
        if rng.below(2) == 0 {
            node = node.detail("d".repeat(rng.below(50)));
        }
        node = node.shape(
            [
                Shape::Step,
                Shape::Terminal,
                Shape::Decision,
                Shape::Point,
                Shape::Workflow,
            ][rng.below(5)],
        );
        if depth < 2 && rng.below(6) == 0 {
            let inner = 1 + rng.below(6);
            node = node.body(random_graph(
                rng,
                inner,
                depth + 1,
                &format!("{prefix}{i}."),
            ));
        }
        g.node(node);
    }
    for i in 0..nodes {
        // A chain, and edges forward, back and to itself.
        if i + 1 < nodes {
            g.edge(i, i + 1, None);
        }
        for _ in 0..rng.below(3) {
            let to = rng.below(nodes);
            let label = (rng.below(3) == 0).then(|| format!("case {}", rng.below(9)));
            g.edge(i, to, label);
        }
    }
    g
}

fn assert_clean(name: &str, g: &Graph) {
    let laid = layout(g);
    let problems = laid.problems();
    assert!(problems.is_empty(), "{name}: {problems:#?}");
    assert_eq!(svg(&laid), render(g), "{name}: drew differently twice");
    assert_eq!(laid.boxes.len(), g.len(), "{name}: a node is missing");
}

#[test]
fn random_graphs_lay_out_cleanly() {
    let mut rng = Lcg(7);
    let mut crossings = 0;
    for round in 0..60 {
        let nodes = 1 + rng.below(40);
        let g = random_graph(&mut rng, nodes, 0, "n");
        assert_clean(&format!("random graph #{round}"), &g);
        crossings += layout(&g).crossings();
    }
    println!("60 random graphs, {crossings} crossings");
}

#[test]
fn a_chain_is_one_straight_column() {
    let mut g = Graph::default();
    for i in 0..10 {
        g.node(Node::new(format!("n{i}"), format!("step {i}")));
        if i > 0 {
            g.edge(i - 1, i, None);
        }
    }
    let laid = layout(&g);
    let centre = |b: &ratchet_graph::PlacedBox| b.x + b.width / 2.0;
    let first = centre(&laid.boxes[0]);
    assert!(laid.boxes.iter().all(|b| (centre(b) - first).abs() < 0.01));
    assert!(laid.edges.iter().all(|e| e.points.len() == 2), "no bends");
    assert_eq!(laid.crossings(), 0);
}

#[test]
fn an_empty_graph_draws_an_empty_picture() {
    let svg = render(&Graph::default());
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
}

#[test]
fn text_is_escaped() {
    let mut g = Graph::default();
    g.node(Node::new("a\"<", "<script>&").tooltip("x > y"));
    let svg = render(&g);
    assert!(!svg.contains("<script>"));
    assert!(svg.contains("&lt;script&gt;&amp;"));
    assert!(svg.contains("id=\"a&quot;&lt;\""));
}

fn at(ms: i64) -> HistoryEvent {
    HistoryEvent::TurnStarted { at: Timestamp(ms) }
}

fn scheduled(seq: u32, name: &str) -> HistoryEvent {
    HistoryEvent::ActivityScheduled {
        seq,
        name: name.into(),
        input: json!(null),
        options: ActivityOptions::default(),
    }
}

fn started(name: &str) -> HistoryEvent {
    HistoryEvent::ExecutionStarted {
        name: name.into(),
        version: 1,
        input: json!({}),
        parent: None,
        trace: None,
    }
}

/// A fan-out of five, joined, then a signal, a timer and a child that failed.
fn fan_out_history() -> Vec<HistoryEvent> {
    let mut h = vec![at(0), started("order")];
    h.extend((1..=5).map(|s| scheduled(s, "ship")));
    h.push(at(10));
    h.extend((1..=5).map(|seq| HistoryEvent::ActivityCompleted {
        seq,
        output: json!(seq),
    }));
    h.push(scheduled(6, "charge"));
    h.push(at(20));
    h.push(HistoryEvent::ActivityFailed {
        seq: 6,
        error: ErrorInfo::new("Declined", "card declined"),
        attempts: 3,
    });
    h.push(HistoryEvent::TimerCreated {
        seq: 7,
        fire_at: Timestamp(5_020),
    });
    h.push(at(5_020));
    h.push(HistoryEvent::TimerFired { seq: 7 });
    h.push(HistoryEvent::SignalReceived {
        name: "approve".into(),
        payload: json!(true),
    });
    h.push(HistoryEvent::SubOrchestrationScheduled {
        seq: 8,
        instance: "child-1".into(),
        name: "refund".into(),
        input: json!({}),
    });
    h
}

#[test]
fn a_fan_out_is_drawn_side_by_side_and_joined() {
    let children = BTreeMap::new();
    let events = fan_out_history();
    let g = from_history(&HistoryGraph {
        events: &events,
        children: &children,
        link_prefix: Some("/instances/"),
    });
    assert_clean("fan-out history", &g);
    // start, the parallel block of five, charge, the timer, the signal, the child, end.
    let labels: Vec<&str> = g.nodes.iter().map(|n| n.label.as_str()).collect();
    assert_eq!(
        labels,
        ["start", "parallel", "charge", "timer", "approve", "refund", "end"]
    );
    let block = &g.nodes[1];
    assert_eq!(block.body.as_ref().map(|b| b.nodes.len()), Some(5));
    assert_eq!(block.status, Status::Completed);
    assert_eq!(g.nodes[2].status, Status::Failed);
    assert_eq!(g.nodes[3].detail.as_deref(), Some("sleep 5 s"));
    assert_eq!(g.nodes[5].status, Status::Running);
    assert_eq!(g.nodes[5].link.as_deref(), Some("/instances/child-1"));
    assert_eq!(g.nodes[6].status, Status::Pending);
    // Edges join consecutive steps.
    assert_eq!(g.edges.len(), 6);
}

#[test]
fn a_child_is_drawn_inside_its_node_and_what_never_finished_is_skipped() {
    let mut events = fan_out_history();
    events.push(at(6_000));
    events.push(HistoryEvent::ExecutionFailed {
        error: ErrorInfo::new("Failed", "gave up"),
    });
    let mut children = BTreeMap::new();
    children.insert(
        "child-1".to_string(),
        vec![
            at(0),
            started("refund"),
            scheduled(1, "refund_card"),
            at(1),
            HistoryEvent::ActivityCompleted {
                seq: 1,
                output: json!(null),
            },
        ],
    );
    let g = from_history(&HistoryGraph {
        events: &events,
        children: &children,
        link_prefix: None,
    });
    assert_clean("history with a child", &g);
    let child = &g.nodes[5];
    assert_eq!(child.status, Status::Skipped, "the parent ended first");
    let inner = child.body.as_ref().expect("the child's graph is inside");
    assert!(inner.nodes.iter().any(|n| n.label == "refund_card"));
    assert_eq!(g.nodes[6].status, Status::Failed);
}

#[test]
fn a_long_history_is_cut_in_the_middle() {
    let mut events = vec![at(0), started("loop")];
    for seq in 1..=1_000u32 {
        events.push(scheduled(seq, "step"));
        events.push(at(i64::from(seq)));
        events.push(HistoryEvent::ActivityCompleted {
            seq,
            output: json!(null),
        });
    }
    let children = BTreeMap::new();
    let g = from_history(&HistoryGraph {
        events: &events,
        children: &children,
        link_prefix: None,
    });
    assert!(g.nodes.len() < 130, "{} nodes", g.nodes.len());
    assert!(g.nodes.iter().any(|n| n.label == "880 more steps"));
    assert_clean("a long history", &g);
}
