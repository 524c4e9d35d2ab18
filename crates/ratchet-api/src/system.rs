//! `/healthz`, `/readyz` and `/v1/{registry,whoami,workers,stats/throughput}`: whether the
//! API answers, who asks, what runs, and work over time.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// An orchestration by name, with the versions run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OrchestrationName {
    /// Its name.
    pub name: String,
    /// The versions run.
    pub versions: Vec<u32>,
}

/// What the answering process's runtime runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Registry {
    /// False when this server runs no worker (`--no-worker`): then names are not checked here.
    pub worker: bool,
    /// Orchestrations it runs.
    pub orchestrations: Vec<OrchestrationName>,
    /// Activities it runs.
    pub activities: Vec<String>,
    /// Tasks it runs.
    pub tasks: Vec<String>,
}

/// Who asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    /// Whether this server asks for tokens.
    pub auth: bool,
    /// What the request may do: `read`, `write`, `admin` (every scope when auth is off, none
    /// when the server asks for a token and the request carries none).
    pub scopes: Vec<String>,
    /// The token's id, when the server asks for tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The token's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A process as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkerView {
    /// Its id (the owner named in its leases).
    pub id: String,
    /// The label it was started with.
    pub label: Option<String>,
    /// Its host.
    pub host: Option<String>,
    /// Its process id.
    pub pid: u32,
    /// False once it has not said so for longer than its lease: stopped, killed or cut off.
    pub alive: bool,
    /// RFC 3339.
    pub started_at: String,
    /// When it last said it is alive (RFC 3339).
    pub seen_at: String,
    /// Turns it runs at once at most.
    pub max_orchestrations: u32,
    /// Activities and tasks it runs at once at most.
    pub max_activities: u32,
    /// The queues it claims from.
    pub queues: Vec<String>,
    /// Orchestrations it runs.
    pub orchestrations: Vec<OrchestrationName>,
    /// Activities it runs.
    pub activities: Vec<String>,
    /// Tasks it runs.
    pub tasks: Vec<String>,
}

/// Which range of time to count, in buckets of what width.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ThroughputParams {
    /// How far back, in minutes, up to a day (default 60). The range ends at the end of the
    /// current bucket.
    #[param(minimum = 1, maximum = 1440)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minutes: Option<u32>,
    /// The width of a bucket in seconds, 1 to 3600 (default 60).
    #[param(minimum = 1, maximum = 3600)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket_seconds: Option<u32>,
}

/// Work counted by bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Throughput {
    /// The first bucket's start (RFC 3339).
    pub from: String,
    /// The end of the last bucket.
    pub to: String,
    /// The width of a bucket.
    pub bucket_seconds: u32,
    /// The buckets where something happened, in order; the others are left out.
    pub buckets: Vec<ThroughputBucketView>,
}

/// One bucket's counts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ThroughputBucketView {
    /// The bucket's start (RFC 3339).
    pub start: String,
    /// Instances created.
    pub started: u64,
    /// Instances that finished with an output.
    pub completed: u64,
    /// Instances that failed.
    pub failed: u64,
    /// Standalone tasks completed.
    pub tasks_completed: u64,
    /// Standalone tasks that ran out of attempts (dead letters).
    pub tasks_failed: u64,
}
