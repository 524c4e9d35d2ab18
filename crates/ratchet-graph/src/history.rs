//! An instance's graph, drawn from its executed history: what one turn scheduled runs side by
//! side (a fan-out is a parallel block, joined where the next turn begins), signals where they
//! arrived, children as boxes holding their own graph. This works for any orchestration,
//! Rust or declarative, because it reads only the history.

use std::collections::BTreeMap;

use ratchet_core::HistoryEvent;

use crate::{Graph, Node, Shape, Status};

/// Turns drawn in full; a longer history shows its first and last ones and a node for those
/// between.
const MAX_GROUPS: usize = 120;
/// Steps of one turn drawn side by side; more are counted in one node.
const MAX_PARALLEL: usize = 24;
/// Levels of children drawn inside their parents.
const MAX_DEPTH: usize = 4;

/// What an instance's graph is drawn from.
#[derive(Clone, Copy, Debug)]
pub struct HistoryGraph<'a> {
    /// The instance's history.
    pub events: &'a [HistoryEvent],
    /// Histories of its children (and theirs), by instance id: each is drawn inside its node.
    pub children: &'a BTreeMap<String, Vec<HistoryEvent>>,
    /// A child's node links to this followed by its id (say `/instances/`).
    pub link_prefix: Option<&'a str>,
}

/// The graph of an executed history.
pub fn from_history(source: &HistoryGraph<'_>) -> Graph {
    build(source, source.events, "", 0)
}

/// One step the code took, with how it ended.
struct Step {
    node: Node,
    seq: Option<u32>,
}

fn build(source: &HistoryGraph<'_>, events: &[HistoryEvent], prefix: &str, depth: usize) -> Graph {
    let mut start = Node::new(format!("{prefix}start"), "start")
        .shape(Shape::Terminal)
        .status(Status::Completed);
    let mut end = Node::new(format!("{prefix}end"), "end")
        .shape(Shape::Terminal)
        .status(Status::Pending);
    let mut ended = false;
    let mut steps: Vec<Step> = Vec::new();
    // Steps begun in one turn, as indexes into `steps`.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut open = false;
    let mut turn_at = 0i64;
    let mut signals = 0usize;
    for event in events {
        let mut begin =
            |steps: &mut Vec<Step>, groups: &mut Vec<Vec<usize>>, step: Step, own: bool| {
                steps.push(step);
                let index = steps.len() - 1;
                match groups.last_mut() {
                    Some(group) if open && !own => group.push(index),
                    _ => groups.push(vec![index]),
                }
                open = !own;
            };
        match event {
            HistoryEvent::TurnStarted { at } => {
                turn_at = at.as_millis();
                open = false;
            }
            HistoryEvent::ExecutionStarted { name, version, .. } => {
                start = start.detail(format!("{name} v{version}"));
            }
            HistoryEvent::ActivityScheduled {
                seq, name, options, ..
            } => {
                let node = Node::new(format!("{prefix}s{seq}"), name.as_str())
                    .detail("activity")
                    .tooltip(format!(
                        "step {seq}; up to {} attempt(s)",
                        options.retry.max_attempts
                    ))
                    .status(Status::Running);
                begin(
                    &mut steps,
                    &mut groups,
                    Step {
                        node,
                        seq: Some(*seq),
                    },
                    false,
                );
            }
            HistoryEvent::TimerCreated { seq, fire_at } => {
                let wait = fire_at.as_millis().saturating_sub(turn_at).max(0);
                let node = Node::new(format!("{prefix}s{seq}"), "timer")
                    .detail(format!("sleep {}", duration(wait)))
                    .status(Status::Running);
                begin(
                    &mut steps,
                    &mut groups,
                    Step {
                        node,
                        seq: Some(*seq),
                    },
                    false,
                );
            }
            HistoryEvent::SubOrchestrationScheduled {
                seq,
                instance,
                name,
                ..
            } => {
                let mut node = Node::new(format!("{prefix}s{seq}"), name.as_str())
                    .detail(instance.as_str())
                    .shape(Shape::Workflow)
                    .status(Status::Running);
                if let Some(link) = source.link_prefix {
                    node = node.link(format!("{link}{instance}"));
                }
                if depth + 1 < MAX_DEPTH {
                    if let Some(child) = source.children.get(instance) {
                        let inner = build(source, child, &format!("{prefix}s{seq}."), depth + 1);
                        node = node.body(inner);
                    }
                }
                begin(
                    &mut steps,
                    &mut groups,
                    Step {
                        node,
                        seq: Some(*seq),
                    },
                    false,
                );
            }
            HistoryEvent::TaskEnqueued { seq, name, .. } => {
                let node = Node::new(format!("{prefix}s{seq}"), name.as_str())
                    .detail("task enqueued")
                    .status(Status::Completed);
                begin(&mut steps, &mut groups, Step { node, seq: None }, false);
            }
            HistoryEvent::SignalReceived { name, .. } => {
                signals += 1;
                let node = Node::new(format!("{prefix}signal{signals}"), name.as_str())
                    .detail("signal received")
                    .shape(Shape::Decision)
                    .status(Status::Completed);
                begin(&mut steps, &mut groups, Step { node, seq: None }, true);
            }
            HistoryEvent::CancelRequested { reason } => {
                let node = Node::new(format!("{prefix}cancel"), "cancel requested")
                    .tooltip(reason.as_str())
                    .status(Status::Failed);
                begin(&mut steps, &mut groups, Step { node, seq: None }, true);
            }
            HistoryEvent::ActivityCompleted { seq, .. }
            | HistoryEvent::TimerFired { seq }
            | HistoryEvent::SubOrchestrationCompleted { seq, .. } => {
                set_status(&mut steps, *seq, Status::Completed, None);
            }
            HistoryEvent::ActivityFailed {
                seq,
                error,
                attempts,
            } => {
                let detail = format!("failed after {attempts} attempt(s)");
                set_status(
                    &mut steps,
                    *seq,
                    Status::Failed,
                    Some((detail, error.to_string())),
                );
            }
            HistoryEvent::SubOrchestrationFailed { seq, error } => {
                set_status(
                    &mut steps,
                    *seq,
                    Status::Failed,
                    Some(("failed".into(), error.to_string())),
                );
            }
            HistoryEvent::ExecutionCompleted { .. } => {
                ended = true;
                end.status = Status::Completed;
            }
            HistoryEvent::ExecutionFailed { error } => {
                ended = true;
                end = end
                    .status(Status::Failed)
                    .detail("failed")
                    .tooltip(error.to_string());
            }
            HistoryEvent::ExecutionCancelled { error, .. } => {
                ended = true;
                end = end.status(Status::Failed).detail("cancelled");
                if let Some(error) = error {
                    end = end.tooltip(error.to_string());
                }
            }
            HistoryEvent::ContinuedAsNew { .. } => {
                ended = true;
                end = end.status(Status::Completed).detail("continued as new");
            }
            _ => {}
        }
    }
    if ended {
        // What was under way when the run ended never finished.
        for step in &mut steps {
            if step.node.status == Status::Running {
                step.node.status = Status::Skipped;
            }
        }
    }

    let mut graph = Graph::default();
    let mut last = graph.node(start);
    let shown: Vec<(usize, &Vec<usize>)> = groups.iter().enumerate().collect();
    let mut taken: Vec<Option<Step>> = steps.into_iter().map(Some).collect();
    let (head, tail) = if shown.len() > MAX_GROUPS {
        (MAX_GROUPS / 2, shown.len() - MAX_GROUPS / 2)
    } else {
        (shown.len(), shown.len())
    };
    for (g, group) in shown {
        if g >= head && g < tail {
            if g == head {
                let hidden: usize = groups[head..tail].iter().map(Vec::len).sum();
                let status = aggregate(
                    groups[head..tail]
                        .iter()
                        .flatten()
                        .filter_map(|&i| taken[i].as_ref().map(|s| s.node.status)),
                );
                let node = Node::new(format!("{prefix}more"), format!("{hidden} more steps"))
                    .detail(format!("{} turns", tail - head))
                    .status(status);
                let at = graph.node(node);
                graph.edge(last, at, None);
                last = at;
            }
            continue;
        }
        let mut members: Vec<Node> = group
            .iter()
            .filter_map(|&i| taken[i].take().map(|s| s.node))
            .collect();
        let at = if members.len() == 1 {
            graph.node(members.remove(0))
        } else {
            let status = aggregate(members.iter().map(|n| n.status));
            let count = members.len();
            let mut body = Graph::default();
            if count > MAX_PARALLEL {
                let rest = members.split_off(MAX_PARALLEL - 1);
                let rest_status = aggregate(rest.iter().map(|n| n.status));
                members.push(
                    Node::new(format!("{prefix}g{g}.more"), format!("{} more", rest.len()))
                        .status(rest_status),
                );
            }
            for member in members {
                body.node(member);
            }
            graph.node(
                Node::new(format!("{prefix}g{g}"), "parallel")
                    .detail(format!("{count} steps"))
                    .status(status)
                    .body(body),
            )
        };
        graph.edge(last, at, None);
        last = at;
    }
    let at = graph.node(end);
    graph.edge(last, at, None);
    graph
}

/// Sets a step's status (and, for a failure, its second line and hover text).
fn set_status(steps: &mut [Step], seq: u32, status: Status, failure: Option<(String, String)>) {
    if let Some(step) = steps.iter_mut().rev().find(|s| s.seq == Some(seq)) {
        step.node.status = status;
        if let Some((detail, tooltip)) = failure {
            step.node.detail = Some(detail);
            step.node.tooltip = Some(tooltip);
        }
    }
}

/// One status for many steps: failed if one failed, else running if one runs, else completed
/// if one completed.
fn aggregate(statuses: impl Iterator<Item = Status>) -> Status {
    let all: Vec<Status> = statuses.collect();
    if all.contains(&Status::Failed) {
        Status::Failed
    } else if all.contains(&Status::Running) {
        Status::Running
    } else if all.contains(&Status::Completed) {
        Status::Completed
    } else {
        all.first().copied().unwrap_or_default()
    }
}

/// A duration in milliseconds as people write it: `250 ms`, `5 s`, `2 min`, `3 h`, `2 d`.
fn duration(ms: i64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{} s", ms / 1_000),
        ms if ms < 3_600_000 => format!("{} min", ms / 60_000),
        ms if ms < 86_400_000 => format!("{} h", ms / 3_600_000),
        ms => format!("{} d", ms / 86_400_000),
    }
}
