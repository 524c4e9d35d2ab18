//! A definition as a graph for [`ratchet_graph`]: each task a node, its flow as edges (switch
//! cases labelled with their names), composite tasks (`do`, `for`, `fork`, `try`) as boxes
//! holding their own tasks.

use std::time::Duration;

use ratchet_graph::{Graph, Node, Shape};

use serde_json::Value;

use crate::model::{Block, Catch, Flow, Kind, Task, Template};
use crate::Workflow;

impl Workflow {
    /// The definition's graph: `start`, its tasks, `end`.
    pub fn graph(&self) -> Graph {
        let mut level = level(&self.body, "t");
        let start = level.graph.node(
            Node::new("start", "start")
                .detail(format!("{}/{} {}", self.namespace, self.name, self.version))
                .shape(Shape::Terminal),
        );
        let end = level
            .graph
            .node(Node::new("end", "end").shape(Shape::Terminal));
        if let Some(first) = level.first {
            level.graph.edge(start, first, None);
        } else {
            level.graph.edge(start, end, None);
        }
        for (from, label) in level.exits.into_iter().chain(level.ends) {
            level.graph.edge(from, end, label);
        }
        level.graph
    }

    /// The definition's graph drawn as SVG.
    pub fn render(&self) -> String {
        ratchet_graph::render(&self.graph())
    }
}

/// A list of tasks as a graph, with the edges that leave it: to the task after the list
/// (`exits`) and to the end of the workflow (`ends`).
struct Level {
    graph: Graph,
    first: Option<usize>,
    exits: Vec<(usize, Option<String>)>,
    ends: Vec<(usize, Option<String>)>,
}

fn level(block: &Block, path: &str) -> Level {
    let mut graph = Graph::default();
    let ids: Vec<usize> = block
        .tasks
        .iter()
        .enumerate()
        .map(|(i, task)| graph.node(task_node(task, &format!("{path}{i}"))))
        .collect();
    let mut exits = Vec::new();
    let mut ends = Vec::new();
    for (i, task) in block.tasks.iter().enumerate() {
        let mut flows: Vec<(Flow, Option<String>)> = Vec::new();
        if let Kind::Switch(cases) = &task.kind {
            flows.extend(cases.iter().map(|c| (c.then, Some(c.name.clone()))));
            if cases.iter().all(|c| c.when.is_some()) {
                flows.push((task.then, Some("no match".into())));
            }
        } else if !matches!(task.kind, Kind::Raise(_)) {
            // A raise never goes on.
            flows.push((task.then, None));
        }
        if task.when.is_some() && task.then != Flow::Continue {
            flows.push((Flow::Continue, Some("skipped".into())));
        }
        for (flow, label) in flows {
            match flow {
                Flow::Continue if i + 1 < ids.len() => graph.edge(ids[i], ids[i + 1], label),
                Flow::Continue | Flow::Exit => exits.push((ids[i], label)),
                Flow::Goto(j) => match ids.get(j) {
                    Some(&to) => graph.edge(ids[i], to, label),
                    None => exits.push((ids[i], label)),
                },
                Flow::End => ends.push((ids[i], label)),
            }
        }
    }
    Level {
        graph,
        first: ids.first().copied(),
        exits,
        ends,
    }
}

/// A nested list of tasks as the graph inside its box: where it leaves other than by its
/// last task's end, an `exit` point; where it ends the workflow, an `end`.
fn nested(block: &Block, path: &str) -> Graph {
    let mut level = level(block, &format!("{path}."));
    let last = level.graph.nodes.len().checked_sub(1);
    let plain =
        level.exits.len() == 1 && Some(level.exits[0].0) == last && level.exits[0].1.is_none();
    if !level.exits.is_empty() && !plain {
        let exit = level.graph.node(
            Node::new(format!("{path}.exit"), "exit")
                .shape(Shape::Point)
                .tooltip("leaves this block"),
        );
        for (from, label) in level.exits {
            level.graph.edge(from, exit, label);
        }
    }
    if !level.ends.is_empty() {
        let end = level
            .graph
            .node(Node::new(format!("{path}.end"), "end").shape(Shape::Terminal));
        for (from, label) in level.ends {
            level.graph.edge(from, end, label);
        }
    }
    level.graph
}

fn task_node(task: &Task, path: &str) -> Node {
    let mut node = Node::new(path, task.name.as_str());
    if let Some(when) = &task.when {
        node = node.tooltip(format!("if: {}", when.code));
    }
    match &task.kind {
        Kind::Do(block) => node.detail("do").body(nested(block, path)),
        Kind::Set(_) => node.detail("set"),
        Kind::Switch(_) => node.detail("switch").shape(Shape::Decision),
        Kind::For {
            each, list, body, ..
        } => node
            .detail(format!("for each {each} in {}", list.code))
            .body(nested(body, path)),
        Kind::Fork { compete, branches } => {
            let mut inner = Graph::default();
            for (i, branch) in branches.tasks.iter().enumerate() {
                inner.node(task_node(branch, &format!("{path}.{i}")));
            }
            node.detail(if *compete {
                "fork: first to finish"
            } else {
                "fork: all"
            })
            .body(inner)
        }
        Kind::Function { name, .. } => node.detail(format!("call {name}")),
        Kind::Call { activity, .. } => {
            let detail = match task.timeout {
                Some(t) => format!("call {activity}, timeout {}", duration(t)),
                None => format!("call {activity}"),
            };
            node.detail(detail)
        }
        Kind::Http(c) => {
            let method = match &c.method {
                Template::Literal(Value::String(m)) => m.to_ascii_uppercase(),
                _ => "HTTP".to_string(),
            };
            let target = match &c.endpoint.uri {
                Template::Literal(Value::String(u)) => u.clone(),
                _ => "(computed)".to_string(),
            };
            node.detail(format!("call {method} {target}"))
        }
        Kind::OpenApi(c) => node.detail(format!("call openapi {}", c.operation)),
        Kind::Grpc(c) => node.detail(format!("call grpc {}/{}", c.service, c.method)),
        Kind::Wait(d) => node.detail(format!("wait {}", duration(*d))),
        Kind::Listen { signal } => {
            let detail = match task.timeout {
                Some(t) => format!("listen {signal}, timeout {}", duration(t)),
                None => format!("listen {signal}"),
            };
            node.detail(detail)
        }
        Kind::ListenMany {
            all,
            filters,
            one,
            until,
            ..
        } => {
            let mut detail = match (one, filters.as_slice()) {
                (true, [crate::model::Filter::Event(e)]) => {
                    format!("listen event {}", e.kind.as_deref().unwrap_or("(any type)"))
                }
                _ => format!(
                    "listen to {} of {}",
                    if *all { "all" } else { "any" },
                    filters.len()
                ),
            };
            if until.is_some() {
                detail.push_str(", until");
            }
            if let Some(t) = task.timeout {
                detail.push_str(&format!(", timeout {}", duration(t)));
            }
            node.detail(detail)
        }
        Kind::Emit(_) => node.detail("emit"),
        Kind::Process(p) => node.detail(format!("run {}", p.kind.as_str())),
        Kind::Raise(_) => node.detail("raise"),
        Kind::Run { target, .. } => node
            .detail(format!("run {}/{} {}", target.0, target.1, target.2))
            .shape(Shape::Workflow),
        Kind::Try { body, catch } => try_node(node, body, catch, path),
    }
}

/// A `try`: its body in a box; with a `catch.do`, that too, reached `on error`.
fn try_node(node: Node, body: &Block, catch: &Catch, path: &str) -> Node {
    let retry = catch.retry.as_ref().map(|r| match r.attempts {
        u32::MAX => "retry until its limit".to_string(),
        n => format!("retry up to {n} attempts"),
    });
    let Some(handler) = &catch.body else {
        return node
            .detail(retry.unwrap_or_else(|| "try".into()))
            .body(nested(body, path));
    };
    let mut inner = Graph::default();
    let mut attempt =
        Node::new(format!("{path}.try"), "try").body(nested(body, &format!("{path}.try")));
    if let Some(retry) = retry {
        attempt = attempt.detail(retry);
    }
    let attempt = inner.node(attempt);
    let caught = catch
        .with
        .iter()
        .find(|(k, _)| k == "type")
        .and_then(|(_, v)| v.as_str())
        .map(|t| t.rsplit('/').next().unwrap_or(t).to_string());
    let mut handler_node =
        Node::new(format!("{path}.catch"), "catch").body(nested(handler, &format!("{path}.catch")));
    if let Some(caught) = &caught {
        handler_node = handler_node.detail(caught.as_str());
    }
    let handler_node = inner.node(handler_node);
    inner.edge(attempt, handler_node, Some("on error".into()));
    node.detail("try / catch").body(inner)
}

/// A duration as people write it: `250 ms`, `30 s`, `5 min`, `2 h`, `1 d`.
fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 && ms % 1_000 == 0 => format!("{} s", ms / 1_000),
        ms if ms < 60_000 => format!("{:.1} s", ms as f64 / 1_000.0),
        ms if ms < 3_600_000 && ms % 60_000 == 0 => format!("{} min", ms / 60_000),
        ms if ms < 86_400_000 && ms % 3_600_000 == 0 => format!("{} h", ms / 3_600_000),
        ms if ms % 86_400_000 == 0 => format!("{} d", ms / 86_400_000),
        ms => format!("{} s", ms / 1_000),
    }
}
