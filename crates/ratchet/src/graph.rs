//! Graphs of workflows, drawn as SVG: a declarative definition's
//! ([`crate::workflow::Workflow::graph`]) and an instance's, from its executed history
//! ([`instance`]), for Rust orchestrations and declarative workflows alike.

use std::collections::BTreeMap;

pub use ratchet_graph::{
    from_history, layout, render, svg, Edge, Graph, HistoryGraph, Layout, Node, PlacedBox,
    PlacedEdge, Shape, Status,
};
use ratchet_store::{Store, StoreError};

use crate::HistoryEvent;

/// Children drawn inside their parent's graph, at most (the rest are plain nodes).
const MAX_CHILDREN: usize = 64;
/// Levels of children drawn inside their parent's graph.
const MAX_DEPTH: usize = 3;

/// The graph of an instance's current execution, from its history: a turn's steps side by
/// side, signals where they arrived, children inside their nodes (their current execution,
/// up to three levels and 64 children, each level's read at once). A child's node links to
/// `link_prefix` followed by its id. `None` when there is no such instance.
///
/// # Errors
///
/// Database failures.
pub async fn instance(
    store: &dyn Store,
    id: &str,
    link_prefix: Option<&str>,
) -> Result<Option<Graph>, StoreError> {
    let Some(record) = store.instance_get(id).await? else {
        return Ok(None);
    };
    let events = current(store.history_read(id, Some(record.execution)).await?);
    let mut children: BTreeMap<String, Vec<HistoryEvent>> = BTreeMap::new();
    let mut wanted = child_ids(&events);
    for _ in 0..MAX_DEPTH {
        wanted.retain(|c| !children.contains_key(c));
        wanted.truncate(MAX_CHILDREN.saturating_sub(children.len()));
        if wanted.is_empty() {
            break;
        }
        let read =
            futures::future::join_all(wanted.iter().map(|c| store.history_read(c, None))).await;
        let mut next = Vec::new();
        for (child, history) in wanted.drain(..).zip(read) {
            let history = last_execution(history?);
            next.extend(child_ids(&history));
            children.insert(child, history);
        }
        wanted = next;
    }
    Ok(Some(from_history(&HistoryGraph {
        events: &events,
        children: &children,
        link_prefix,
    })))
}

fn current(records: Vec<crate::HistoryRecord>) -> Vec<HistoryEvent> {
    records.into_iter().map(|r| r.event).collect()
}

/// The events of the last execution of a history read whole.
fn last_execution(records: Vec<crate::HistoryRecord>) -> Vec<HistoryEvent> {
    let last = records.iter().map(|r| r.execution).max().unwrap_or(0);
    records
        .into_iter()
        .filter(|r| r.execution == last)
        .map(|r| r.event)
        .collect()
}

fn child_ids(events: &[HistoryEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            HistoryEvent::SubOrchestrationScheduled { instance, .. } => Some(instance.clone()),
            _ => None,
        })
        .collect()
}
