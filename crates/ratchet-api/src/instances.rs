//! `/v1/instances`: what starting, reading, steering and waiting for orchestration instances
//! send and answer.

use ratchet_core::ErrorInfo;
use ratchet_core::HistoryEvent;
use ratchet_store::InstanceStatus;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::problem::ProblemBody;
use crate::text::{HistoryPosition, Identifier, StatusList, Time};

/// An instance as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InstanceView {
    /// Its id.
    pub id: String,
    /// Its orchestration.
    pub name: String,
    /// The version of its declarative workflow, if it runs one.
    pub version: Option<u32>,
    /// Where it stands.
    #[schema(value_type = String, example = "Running")]
    pub status: InstanceStatus,
    /// Its execution (continue-as-new starts the next).
    pub execution: u32,
    /// Its input.
    pub input: Value,
    /// Its output, once completed.
    pub output: Option<Value>,
    /// Its error, once failed.
    #[schema(value_type = Option<Object>)]
    pub error: Option<ErrorInfo>,
    /// What its code last said of itself.
    pub custom_status: Option<Value>,
    /// The instance that started it, if a sub-orchestration.
    pub parent: Option<ParentView>,
    /// Events in its current execution's history.
    pub history_len: u32,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// RFC 3339, once finished.
    pub finished_at: Option<String>,
}

/// The parent of a sub-orchestration: its instance, the execution and the step that started
/// this one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ParentView {
    /// The parent's id.
    pub instance: String,
    /// The parent's execution.
    pub execution: u32,
    /// The step of the parent that started this one.
    pub seq: u32,
}

/// What to do when the id is taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IfExistsParam {
    /// Refuse with 409.
    #[default]
    Fail,
    /// Answer with the existing instance (an idempotent start).
    UseExisting,
    /// Start afresh if the existing one finished; otherwise 409.
    RestartIfFinished,
}

/// A start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// The orchestration.
    #[schema(value_type = Identifier)]
    pub name: String,
    /// Its input (default `null`).
    #[serde(default)]
    pub input: Value,
    /// The instance id (default: a new UUID).
    #[serde(default)]
    #[schema(value_type = Option<Identifier>)]
    pub id: Option<String>,
    /// What to do when the id is taken.
    #[serde(default)]
    pub if_exists: IfExistsParam,
}

impl StartRequest {
    /// A start of `name` with `input`, under a new id.
    pub fn new(name: impl Into<String>, input: Value) -> Self {
        Self {
            name: name.into(),
            input,
            id: None,
            if_exists: IfExistsParam::Fail,
        }
    }
}

/// A started instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Started {
    /// Its id.
    pub id: String,
}

/// Many starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartBatch {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    pub instances: Vec<StartRequest>,
}

/// The outcome of one start of a batch: its id, or the problem that refused it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchItem {
    /// The instance's id, when started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Why it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<ProblemBody>,
}

/// Which instances a list shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct InstanceQuery {
    /// Statuses, comma-separated.
    #[param(value_type = Option<StatusList>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Only this orchestration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Only instances created after this time.
    #[param(value_type = Option<Time>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_after: Option<String>,
    /// Only instances created before this time.
    #[param(value_type = Option<Time>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_before: Option<String>,
    /// 1 to 1,000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The `next` cursor of the previous page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Only this custom status: JSON (`42`, `"42"`, `{"step":2}`), or else a string
    /// (`awaiting-delivery`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_status: Option<String>,
    /// Only instances whose id starts with this (case matters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_prefix: Option<String>,
}

/// A page of instances.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct InstancePage {
    /// Newest first.
    pub items: Vec<InstanceView>,
    /// Pass as `cursor` for the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Which part of a history a page shows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// Only events after this position, `execution.seq` (the `next` of the previous page).
    #[param(value_type = Option<HistoryPosition>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// 1 to 1,000 (default 1,000).
    #[param(minimum = 1, maximum = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// One event of a history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HistoryItem {
    /// Its execution.
    pub execution: u32,
    /// Its place in the execution.
    pub seq: u32,
    /// What happened.
    #[schema(value_type = Object)]
    pub event: HistoryEvent,
}

/// A page of a history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HistoryPage {
    /// In order.
    pub items: Vec<HistoryItem>,
    /// The `after` of the next page (`execution.seq`); absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// A signal.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalRequest {
    /// The signal's name.
    #[schema(value_type = Identifier)]
    pub name: String,
    /// What it carries.
    #[serde(default)]
    pub payload: Value,
    /// Raise at most once per this id.
    #[serde(default)]
    pub dedup_id: Option<String>,
}

/// Whether a signal was raised.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Signalled {
    /// False when a signal with the same dedup id was raised before (nothing was raised).
    pub raised: bool,
}

/// Why an instance is cancelled or terminated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopRequest {
    /// Kept with the instance.
    #[serde(default)]
    pub reason: Option<String>,
}

/// How long a wait holds its request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WaitQuery {
    /// How long to hold the request open, in milliseconds (default 30 s, at most the server's
    /// limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// How a wait ended: the instance's outcome, or where it stands at the timeout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WaitOutcome {
    /// The instance.
    pub id: String,
    /// False when the wait timed out first.
    pub finished: bool,
    /// Where it stands.
    #[schema(value_type = String, example = "Completed")]
    pub status: InstanceStatus,
    /// Its output, once completed.
    pub output: Option<Value>,
    /// Its error, once failed.
    #[schema(value_type = Option<Object>)]
    pub error: Option<ErrorInfo>,
}

/// An instance started afresh.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Restarted {
    /// Its id (the same).
    pub id: String,
}

/// Which finished instances to remove.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    /// Remove instances that finished before this time (RFC 3339).
    #[schema(value_type = Time)]
    pub finished_before: String,
}

/// How many were removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Purged {
    /// Instances removed, with their histories.
    pub removed: u64,
}

/// Query parameters of a start or an enqueue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    /// Accept a name no live or recent worker runs (a server without a worker refuses it
    /// otherwise, since nothing would run it).
    #[serde(default)]
    pub allow_unknown: bool,
}

/// What an instance's stream follows from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct InstanceStreamQuery {
    /// Start after this history position, `execution.seq` (default: from the first event);
    /// a `Last-Event-ID` header, which browsers send when they reconnect, wins over it.
    #[param(value_type = Option<HistoryPosition>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// One message of an instance's stream.
#[derive(Clone, Debug, PartialEq)]
pub enum InstanceMessage {
    /// The instance, first and again whenever it changes (an `instance` message).
    Instance(Box<InstanceView>),
    /// An event of its history, in order (a `history` message whose id is `execution.seq`).
    History(Box<HistoryItem>),
    /// Finished, its whole history sent, or gone: nothing more comes (an `end` message).
    End,
}

impl InstanceMessage {
    /// The name of its Server-Sent Events message.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Instance(_) => "instance",
            Self::History(_) => "history",
            Self::End => "end",
        }
    }
}
