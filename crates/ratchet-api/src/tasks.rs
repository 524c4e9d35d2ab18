//! `/v1/tasks`: what enqueueing, reading, steering and waiting for standalone tasks send and
//! answer.

use ratchet_core::{ErrorInfo, RetryPolicy, TaskOptions};
use ratchet_store::TaskState;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::problem::{ApiError, ProblemBody};
use crate::text::{Identifier, Key, QueueName, TaskStateList, Time};

/// A task as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TaskView {
    /// Its id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// What runs it.
    pub name: String,
    /// Where it stands.
    #[schema(value_type = String, example = "Available")]
    pub state: TaskState,
    /// Higher runs first.
    pub priority: i16,
    /// Attempts begun.
    pub attempt: u32,
    /// Attempts it may have.
    pub max_attempts: u32,
    /// Its input.
    pub input: Value,
    /// Its output, once completed.
    pub output: Option<Value>,
    /// Its last attempt's error.
    #[schema(value_type = Option<Object>)]
    pub error: Option<ErrorInfo>,
    /// Its unique key, if given one.
    pub unique_key: Option<String>,
    /// What its enqueuer attached.
    pub metadata: Option<Value>,
    /// RFC 3339.
    pub created_at: String,
    /// When it may run next (unfinished tasks).
    pub run_at: String,
    /// RFC 3339, once finished.
    pub finished_at: Option<String>,
}

/// Retries of a task; absent fields keep the defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryInput {
    /// Attempts in all.
    #[schema(minimum = 1)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// At most 100 years.
    #[schema(maximum = 3155760000000_u64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_interval_ms: Option<u64>,
    /// At least 1.
    #[schema(minimum = 1.0)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<f64>,
    /// At most 100 years.
    #[schema(maximum = 3155760000000_u64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_interval_ms: Option<u64>,
    /// Error kinds not retried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_retryable: Option<Vec<String>>,
    /// From 0 to 1.
    #[schema(minimum = 0.0, maximum = 1.0)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<f64>,
}

/// A task's options; absent fields keep the defaults (queue `default`, priority 0, 20
/// attempts, 5 minutes per attempt).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OptionsInput {
    /// Its queue.
    #[schema(value_type = Option<QueueName>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Higher runs first.
    #[schema(minimum = -32768, maximum = 32767)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i16>,
    /// Not run before this time (RFC 3339).
    #[schema(value_type = Option<Time>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    /// At most 100 years.
    #[schema(maximum = 3155760000000_u64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Its retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryInput>,
    /// At most 100 years.
    #[schema(maximum = 3155760000000_u64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// At most one unfinished task holds a key.
    #[schema(value_type = Option<Key>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    /// Kept with the task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl OptionsInput {
    /// The options, or the problem with one of them (its field relative to `options`).
    pub fn into_options(self) -> Result<TaskOptions, ApiError> {
        let defaults = TaskOptions::default();
        let retry = self.retry.unwrap_or_default();
        let d = defaults.retry.clone();
        let policy = RetryPolicy {
            max_attempts: retry.max_attempts.unwrap_or(d.max_attempts),
            initial_interval_ms: retry.initial_interval_ms.unwrap_or(d.initial_interval_ms),
            backoff: retry.backoff.unwrap_or(d.backoff),
            max_interval_ms: retry.max_interval_ms.unwrap_or(d.max_interval_ms),
            non_retryable: retry.non_retryable.unwrap_or(d.non_retryable),
            jitter: retry.jitter.unwrap_or(d.jitter),
        };
        if policy.max_attempts == 0 {
            return Err(ProblemBody::invalid("max_attempts must be at least 1")
                .field("retry.max_attempts")
                .into());
        }
        if !policy.backoff.is_finite() || policy.backoff < 1.0 {
            return Err(ProblemBody::invalid("backoff must be a number from 1")
                .field("retry.backoff")
                .into());
        }
        if !(0.0..=1.0).contains(&policy.jitter) {
            return Err(ProblemBody::invalid("jitter must be from 0 to 1")
                .field("retry.jitter")
                .into());
        }
        let run_at = self
            .run_at
            .as_deref()
            .map(crate::time::parse_rfc3339)
            .transpose()
            .map_err(|e| ProblemBody::invalid(e).field("run_at"))?;
        Ok(TaskOptions {
            queue: self.queue.unwrap_or(defaults.queue),
            priority: self.priority.unwrap_or(defaults.priority),
            run_at,
            delay_ms: self.delay_ms.unwrap_or(defaults.delay_ms),
            retry: policy,
            timeout_ms: self.timeout_ms.unwrap_or(defaults.timeout_ms),
            unique_key: self.unique_key,
            metadata: self.metadata,
        })
    }
}

/// A task to enqueue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueRequest {
    /// What runs it.
    #[schema(value_type = Identifier)]
    pub name: String,
    /// Its input.
    #[serde(default)]
    pub input: Value,
    /// Its options.
    #[serde(default)]
    pub options: OptionsInput,
}

/// The outcome of an enqueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Enqueued {
    /// The task's id.
    pub id: i64,
    /// True when an unfinished task held the unique key: nothing was enqueued, and `id` is
    /// that task's.
    pub duplicate: bool,
}

/// Many tasks, all or nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueBatch {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    pub tasks: Vec<EnqueueRequest>,
}

/// Which tasks a list shows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TaskQuery {
    /// Only this queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// States, comma-separated.
    #[param(value_type = Option<TaskStateList>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Only this name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// 1 to 1,000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Only tasks with an id below this: the last id of the previous page gives the next
    /// (keyset pagination, as fast deep as shallow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
}

/// What an action did to a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActOutcome {
    /// Done.
    Done,
    /// A running task was asked to stop: it stops when its worker next hears from the store.
    Requested,
}

/// The outcome of an action on a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Acted {
    /// `done`, or `requested` for a running task that stops when its worker next hears from
    /// the store.
    pub outcome: ActOutcome,
}

/// Tasks to act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ManyIds {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    pub ids: Vec<i64>,
}

/// The outcome of an action on one task of many.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActedOn {
    /// The task.
    pub id: i64,
    /// What the action did, when it applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<ActOutcome>,
    /// Why it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<ProblemBody>,
}

/// An action on tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskAct {
    /// Cancel (a running task is asked to stop).
    Cancel,
    /// Run a dead or cancelled task again.
    Retry,
    /// Remove a dead or cancelled task.
    Discard,
}
