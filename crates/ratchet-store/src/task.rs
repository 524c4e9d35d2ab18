use ratchet_core::{ActivityOptions, ErrorInfo, HistoryEvent, Timestamp};
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

/// A task to insert.
#[derive(Clone, Debug, PartialEq)]
pub struct NewTask {
    /// Activity name.
    pub name: String,
    /// Input payload.
    pub input: Value,
    /// Retry policy and timeout.
    pub options: ActivityOptions,
    /// The orchestration step waiting for it.
    pub owner: TaskOwner,
    /// Not claimable before this time.
    pub visible_at: Timestamp,
}

/// A task leased to the caller.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedTask {
    /// Row id.
    pub id: TaskId,
    /// The lease's fence.
    pub fence: Fence,
    /// Activity name.
    pub name: String,
    /// Input payload.
    pub input: Value,
    /// Retry policy and timeout.
    pub options: ActivityOptions,
    /// The orchestration step waiting for it.
    pub owner: TaskOwner,
    /// This attempt's number, from 1.
    pub attempt: u32,
}

/// How one task attempt ended.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TaskResult {
    /// Succeeded: the result goes to the orchestration.
    Completed(Value),
    /// Failed for good: the error goes to the orchestration.
    Failed(ErrorInfo),
    /// Failed; try again at `at` (the attempt count goes up).
    Retry {
        /// The error of this attempt.
        error: ErrorInfo,
        /// When the next attempt may start.
        at: Timestamp,
    },
}

/// The end of one attempt, to be committed.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskCompletion {
    /// The task.
    pub id: TaskId,
    /// The fence of the lease the attempt ran under.
    pub fence: Fence,
    /// The orchestration step the task belongs to, as claimed (checked against the row).
    pub owner: TaskOwner,
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

    /// The event this completion delivers to its orchestration; `None` for a retry, which
    /// tells the orchestration nothing.
    pub fn event(&self) -> Option<HistoryEvent> {
        match &self.result {
            TaskResult::Completed(output) => Some(HistoryEvent::ActivityCompleted {
                seq: self.owner.seq,
                output: output.clone(),
            }),
            TaskResult::Failed(error) => Some(HistoryEvent::ActivityFailed {
                seq: self.owner.seq,
                error: error.clone(),
                attempts: self.attempt,
            }),
            TaskResult::Retry { .. } => None,
        }
    }
}
