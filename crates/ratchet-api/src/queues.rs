//! `/v1/queues`: what listing queues and setting their pause and limits send and answer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A queue's limits: absent means none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Attempts started per second, across every worker.
    #[serde(default)]
    #[schema(exclusive_minimum = 0.0)]
    pub rate_per_second: Option<f64>,
    /// Attempts that may start at once after a quiet spell.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub burst: Option<u32>,
    /// Attempts running at once, across every worker.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub concurrency: Option<u32>,
}

/// A queue as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueView {
    /// Its name.
    pub name: String,
    /// Whether its tasks wait.
    pub paused: bool,
    /// Its limits.
    pub limits: Limits,
    /// Tasks waiting to run: scheduled, available and retrying.
    pub depth: u64,
    /// Tasks by state.
    pub counts: BTreeMap<String, u64>,
    /// Since when the longest-waiting available task has been ready (RFC 3339); `null` when
    /// none waits.
    pub oldest_available: Option<String>,
}

impl QueueView {
    /// How many of its tasks are in `state`.
    pub fn count(&self, state: ratchet_store::TaskState) -> u64 {
        self.counts
            .get(&state.as_str().to_lowercase())
            .copied()
            .unwrap_or(0)
    }
}

/// The queue a change applied to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Done {
    /// Its name.
    pub queue: String,
}
