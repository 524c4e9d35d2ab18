//! Standalone tasks and their queues: what enqueueing returns, a task's record and state,
//! queue settings and statistics.

use ratchet_core::{ActivityOptions, ErrorInfo, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{TaskId, TaskOwner};

/// The outcome of enqueueing one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnqueueOutcome {
    /// Enqueued with this id.
    Enqueued(TaskId),
    /// A task with the same unique key is not finished yet: nothing was enqueued. Its id.
    Duplicate(TaskId),
}

impl EnqueueOutcome {
    /// The id of the task enqueued, or of the one that holds the unique key.
    pub fn id(self) -> TaskId {
        match self {
            Self::Enqueued(id) | Self::Duplicate(id) => id,
        }
    }
}

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum TaskState {
    /// Waiting for its run-at time (first attempt).
    Scheduled,
    /// Ready to run.
    Available,
    /// Leased to a worker.
    Running,
    /// Waiting for its next attempt after a failure.
    Retrying,
    /// Finished with a result.
    Completed,
    /// Failed for good: a dead letter, which can be retried or discarded.
    Dead,
    /// Cancelled by a client.
    Cancelled,
}

impl TaskState {
    /// Every state, in display order.
    pub const ALL: [TaskState; 7] = [
        Self::Scheduled,
        Self::Available,
        Self::Running,
        Self::Retrying,
        Self::Completed,
        Self::Dead,
        Self::Cancelled,
    ];

    /// True once the task will not run again by itself.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Completed | Self::Dead | Self::Cancelled)
    }

    /// The name stored in the database and shown to people.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "Scheduled",
            Self::Available => "Available",
            Self::Running => "Running",
            Self::Retrying => "Retrying",
            Self::Completed => "Completed",
            Self::Dead => "Dead",
            Self::Cancelled => "Cancelled",
        }
    }
}

impl std::str::FromStr for TaskState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown task state \"{s}\" (expected one of Scheduled, Available, Running, Retrying, Completed, Dead, Cancelled)"))
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task as stored, running or finished.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRecord {
    /// Its id.
    pub id: TaskId,
    /// Its queue.
    pub queue: String,
    /// Task (or activity) name.
    pub name: String,
    /// Where it stands.
    pub state: TaskState,
    /// Lower runs first.
    pub priority: i16,
    /// The current or last attempt, from 1.
    pub attempt: u32,
    /// Attempts allowed in all.
    pub max_attempts: u32,
    /// Its retry policy and attempt timeout.
    pub options: ActivityOptions,
    /// Input payload.
    pub input: Value,
    /// Output, once completed.
    pub output: Option<Value>,
    /// The last attempt's error.
    pub error: Option<ErrorInfo>,
    /// Its unique key.
    pub unique_key: Option<String>,
    /// What the enqueuer kept with it.
    pub metadata: Option<Value>,
    /// The orchestration step it serves, for an activity.
    pub owner: Option<TaskOwner>,
    /// When it was enqueued.
    pub created_at: Timestamp,
    /// When it may run next (unfinished tasks).
    pub visible_at: Timestamp,
    /// When it finished.
    pub finished_at: Option<Timestamp>,
}

/// Filter for listing tasks. Empty fields match everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskFilter {
    /// This queue.
    pub queue: Option<String>,
    /// Any of these states.
    pub states: Vec<TaskState>,
    /// This task name.
    pub name: Option<String>,
    /// At most this many, newest first (default 100).
    pub limit: Option<u32>,
}

/// What a client asked of some tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskAction {
    /// Stop it: a waiting task is cancelled at once, a running one when its worker next hears
    /// from the store.
    Cancel,
    /// Run a dead (or cancelled) task again, with a fresh budget of attempts.
    Retry,
    /// Remove a finished task for good.
    Discard,
}

/// The outcome of a [`TaskAction`] on one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskActionOutcome {
    /// Done.
    Done,
    /// Asked: the running attempt stops when its worker next hears from the store.
    Requested,
    /// No such task (or an activity, which its orchestration owns).
    NotFound,
    /// Not possible in this state; nothing changed.
    Refused(TaskState),
}

/// Limits on a queue that hold across every process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueueLimits {
    /// Tasks started per second at most.
    pub rate_per_second: Option<f64>,
    /// Tasks that may start at once after a quiet spell (default: a tenth of a second's worth,
    /// at least 1).
    pub burst: Option<u32>,
    /// Tasks running at once at most.
    pub concurrency: Option<u32>,
}

/// A change to a queue's shared settings.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueUpdate {
    /// The queue.
    pub queue: String,
    /// Pause (no task starts anywhere) or resume.
    pub paused: Option<bool>,
    /// New limits, replacing the old ones.
    pub limits: Option<QueueLimits>,
}

/// A queue's settings and counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueStats {
    /// The queue.
    pub queue: String,
    /// Paused everywhere.
    pub paused: bool,
    /// Its limits.
    pub limits: QueueLimits,
    /// Tasks by state: scheduled, available, running, retrying, completed, dead, cancelled.
    pub counts: Vec<(TaskState, u64)>,
    /// Since when the longest-waiting available task has been ready to run (`None` when none
    /// is): how far behind the queue's workers are.
    pub oldest_available: Option<Timestamp>,
}

impl QueueStats {
    /// The number of tasks in `state`.
    pub fn count(&self, state: TaskState) -> u64 {
        self.counts
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n)
    }

    /// Tasks waiting to run: scheduled, available and retrying.
    pub fn depth(&self) -> u64 {
        self.count(TaskState::Scheduled)
            + self.count(TaskState::Available)
            + self.count(TaskState::Retrying)
    }
}

/// How a running task's lease stands after a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseState {
    /// Extended.
    Kept,
    /// Lost: taken over, or the task is gone. Its result will be refused.
    Lost,
    /// Extended, and a client asked to cancel the task: stop it.
    CancelRequested,
}

/// Checks a queue name a user chose: 1 to 128 bytes, printable and in normal form C
/// ([`ratchet_core::limits::check_identifier`]: no control, format or separator
/// characters, so no bidi overrides or zero-width characters), not starting with `$`
/// (reserved for Ratchet's own queues).
///
/// # Errors
///
/// A message saying what is wrong.
pub fn validate_queue_name(queue: &str) -> Result<(), String> {
    if let Err(e) = ratchet_core::limits::check_identifier("queue", queue, 128) {
        return Err(format!("the queue name {queue:?} {}", e.rule));
    }
    if queue.starts_with('$') {
        return Err(format!(
            "queue names starting with $ are reserved, got {queue:?}"
        ));
    }
    Ok(())
}
