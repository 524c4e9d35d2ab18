//! `/v1/workers/{worker}/…`: what workers in other processes send and are answered when
//! they claim attempts, renew their leases, report their ends and give attempts back.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A queue to claim from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueLimit {
    /// The queue.
    pub queue: String,
    /// At most this many of its tasks.
    #[schema(maximum = 1000)]
    pub limit: u32,
}

/// What a worker asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimBody {
    /// Queues of standalone tasks, each with the most to take.
    #[serde(default)]
    pub queues: Vec<QueueLimit>,
    /// The most activity attempts of orchestrations to take (default 0).
    #[serde(default)]
    #[schema(maximum = 1000)]
    pub activities: u32,
    /// The task and activity names the worker runs (1 to 1,000).
    #[schema(min_items = 1, max_items = 1000)]
    pub names: Vec<String>,
    /// How long the leases last unless renewed: 1,000 to 3,600,000 ms (default 30,000).
    #[schema(minimum = 1000, maximum = 3600000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// How long to wait when nothing is ready (default 0; at most the server's longest wait).
    #[schema(maximum = 60000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// The orchestration step an activity attempt serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StepView {
    /// The instance.
    pub instance: String,
    /// Its execution.
    pub execution: u32,
    /// The step.
    pub step: u32,
}

/// An attempt handed to a worker: run it, renew its lease while it runs, report its end with
/// its `id` and `fence`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AttemptView {
    /// The task (or activity attempt).
    pub id: i64,
    /// The lease's fence: a report with an older one is refused.
    pub fence: i64,
    /// Its queue.
    pub queue: String,
    /// What runs it.
    pub name: String,
    /// Its input.
    pub input: Value,
    /// This attempt's number, from 1.
    pub attempt: u32,
    /// Attempts it may have.
    pub max_attempts: u32,
    /// How long the attempt may run before it counts as failed (`Timeout`).
    pub timeout_ms: u64,
    /// What its enqueuer attached.
    pub metadata: Option<Value>,
    /// For an activity, the step it serves; absent for a standalone task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<StepView>,
    /// When the lease runs out unless renewed.
    pub lease_until: String,
}

/// The attempts leased to a worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Claimed {
    /// None when nothing became ready.
    pub tasks: Vec<AttemptView>,
}

/// An attempt's lease, as a worker holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseHeld {
    /// The attempt.
    pub id: i64,
    /// Its lease's fence.
    pub fence: i64,
}

/// Leases to renew.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    pub tasks: Vec<LeaseHeld>,
    /// For how long more: 1,000 to 3,600,000 ms (default 30,000).
    #[schema(minimum = 1000, maximum = 3600000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

/// How a lease stands after a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LeaseStatus {
    /// Renewed.
    Kept,
    /// Renewed, and a client asked to cancel the task: stop it and report `cancelled`.
    Cancel,
    /// Taken over, or the task is gone: stop; its report would be refused.
    Lost,
}

/// A lease after a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LeaseView {
    /// The attempt.
    pub id: i64,
    /// Its lease's fence.
    pub fence: i64,
    /// `kept`; `cancel` (kept, and a client asked to cancel the task: stop it and report
    /// `cancelled`); or `lost` (taken over, or the task is gone: stop, its report would be
    /// refused).
    pub lease: LeaseStatus,
}

/// Each lease as it stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Leases {
    /// In the order asked.
    pub tasks: Vec<LeaseView>,
}

/// An error a worker reports.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorBody {
    /// A short machine-readable kind, matched against the retry policy's `non_retryable`.
    pub kind: String,
    /// What went wrong.
    pub message: String,
    /// Anything more, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// One attempt's end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultBody {
    /// The attempt.
    pub id: i64,
    /// Its lease's fence.
    pub fence: i64,
    /// `completed` (with `output`); `failed` (with `error`, tried again as the task's retry
    /// policy says unless `retryable` is false); `snoozed` (run again after `delay_ms`, the
    /// attempt not counted); `cancelled` (stopped because a heartbeat said so).
    pub outcome: String,
    /// Its output, when completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Its error, when failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// False: do not try again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// When snoozed, run again after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

/// Attempts' ends, written in one commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteBody {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    pub results: Vec<ResultBody>,
}

/// Whether a report was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReportStatus {
    /// Written.
    Applied,
    /// The lease was lost (taken over, or the task is gone): dropped.
    Stale,
}

/// Whether an end was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Reported {
    /// The attempt.
    pub id: i64,
    /// Its lease's fence.
    pub fence: i64,
    /// `applied`, or `stale`: the lease was lost (taken over, or the task is gone) and the
    /// report was dropped.
    pub result: ReportStatus,
}

/// Each report's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReportedAll {
    /// In the order reported.
    pub results: Vec<Reported>,
}

/// Attempts to give back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseBody {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    pub tasks: Vec<LeaseHeld>,
}

/// How many were given back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Released {
    /// Attempts given back.
    pub released: usize,
}
