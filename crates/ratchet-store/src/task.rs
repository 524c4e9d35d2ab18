use ratchet_core::{ActivityOptions, ErrorInfo, HistoryEvent, TaskOptions, Timestamp};
use serde_json::Value;

use crate::Fence;

/// A task's row id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(pub i64);

/// The orchestration step an activity task belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskOwner {
    /// Instance id.
    pub instance: String,
    /// Execution that scheduled it.
    pub execution: u32,
    /// Step number.
    pub seq: u32,
}

/// The queue activity attempts go to. Users' queue names cannot start with `$`.
pub const ACTIVITY_QUEUE: &str = "$activities";

/// A task to insert: an activity attempt (with an owner) or a standalone task (without).
#[derive(Clone, Debug, PartialEq)]
pub struct NewTask {
    /// The queue: [`ACTIVITY_QUEUE`] for activities.
    pub queue: String,
    /// Activity or task name.
    pub name: String,
    /// Input payload.
    pub input: Value,
    /// Retry policy and timeout.
    pub options: ActivityOptions,
    /// The orchestration step waiting for it; `None` for a standalone task.
    pub owner: Option<TaskOwner>,
    /// Not claimable before this time.
    pub visible_at: Timestamp,
    /// Lower runs first.
    pub priority: i16,
    /// While a task with this key is not finished, inserting another with it does nothing.
    pub unique_key: Option<String>,
    /// Kept with the task.
    pub metadata: Option<Value>,
}

impl NewTask {
    /// An activity attempt for the orchestration step `owner`.
    pub fn activity(
        name: String,
        input: Value,
        options: ActivityOptions,
        owner: TaskOwner,
        visible_at: Timestamp,
    ) -> Self {
        Self {
            queue: ACTIVITY_QUEUE.to_string(),
            name,
            input,
            options,
            owner: Some(owner),
            visible_at,
            priority: 0,
            unique_key: None,
            metadata: None,
        }
    }

    /// A standalone task enqueued at `now` with `options`.
    pub fn standalone(name: String, input: Value, options: &TaskOptions, now: Timestamp) -> Self {
        Self {
            queue: options.queue.clone(),
            name,
            input,
            options: options.attempt_options(),
            owner: None,
            visible_at: options.visible_at(now),
            priority: options.priority,
            unique_key: options.unique_key.clone(),
            metadata: options.metadata.clone(),
        }
    }
}

/// A task leased to the caller.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedTask {
    /// Row id.
    pub id: TaskId,
    /// The lease's fence.
    pub fence: Fence,
    /// Its queue.
    pub queue: String,
    /// Activity or task name.
    pub name: String,
    /// Input payload.
    pub input: Value,
    /// Retry policy and timeout.
    pub options: ActivityOptions,
    /// The orchestration step waiting for it; `None` for a standalone task.
    pub owner: Option<TaskOwner>,
    /// This attempt's number, from 1.
    pub attempt: u32,
    /// What the enqueuer kept with it.
    pub metadata: Option<Value>,
}

/// How one task attempt ended.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TaskResult {
    /// Succeeded: the result goes to the orchestration, or to the task's record.
    Completed(Value),
    /// Failed for good: the error goes to the orchestration; a standalone task becomes a dead
    /// letter.
    Failed(ErrorInfo),
    /// Failed; try again at `at` (the attempt count goes up).
    Retry {
        /// The error of this attempt.
        error: ErrorInfo,
        /// When the next attempt may start.
        at: Timestamp,
    },
    /// Not now: run again at `at`, and this attempt does not count.
    Snooze {
        /// When to run again.
        at: Timestamp,
    },
    /// Stopped because a client cancelled the task.
    Cancelled,
}

/// The end of one attempt, to be committed.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskCompletion {
    /// The task.
    pub id: TaskId,
    /// The fence of the lease the attempt ran under.
    pub fence: Fence,
    /// The orchestration step the task belongs to, as claimed (checked against the row);
    /// `None` for a standalone task.
    pub owner: Option<TaskOwner>,
    /// The attempt that ran, as claimed.
    pub attempt: u32,
    /// The outcome.
    pub result: TaskResult,
}

impl TaskCompletion {
    /// The completion of the attempt `task` with `result`.
    pub fn of(task: &ClaimedTask, result: TaskResult) -> Self {
        Self {
            id: task.id,
            fence: task.fence,
            owner: task.owner.clone(),
            attempt: task.attempt,
            result,
        }
    }

    /// The event this completion delivers to its orchestration; `None` for a standalone task
    /// and for an outcome that tells the orchestration nothing (a retry, a snooze).
    pub fn event(&self) -> Option<HistoryEvent> {
        let owner = self.owner.as_ref()?;
        match &self.result {
            TaskResult::Completed(output) => Some(HistoryEvent::ActivityCompleted {
                seq: owner.seq,
                output: output.clone(),
            }),
            TaskResult::Failed(error) => Some(HistoryEvent::ActivityFailed {
                seq: owner.seq,
                error: error.clone(),
                attempts: self.attempt,
            }),
            TaskResult::Cancelled => Some(HistoryEvent::ActivityFailed {
                seq: owner.seq,
                error: ErrorInfo::new("Cancelled", "the activity was cancelled"),
                attempts: self.attempt,
            }),
            TaskResult::Retry { .. } | TaskResult::Snooze { .. } => None,
        }
    }
}
