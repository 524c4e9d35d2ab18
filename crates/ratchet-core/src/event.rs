use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ActivityOptions, Timestamp};

/// A structured error as stored in history and on a failed instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// A short machine-readable kind, such as `PaymentDeclined` or `Nondeterminism`.
    pub kind: String,
    /// A human-readable message.
    pub message: String,
    /// The error whole, when it has more than a kind and a message: a declarative workflow's
    /// error keeps its `type`, `status`, `title`, `detail` and `instance` here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ErrorInfo {
    /// Builds an error from a kind and a message.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            message: message.into(),
            details: None,
        }
    }

    /// The same error, with `details` (the error whole).
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
}

impl std::fmt::Display for ErrorInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// Where a sub-orchestration reports its result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentRef {
    /// The parent instance.
    pub instance: String,
    /// The parent's execution that started the child.
    pub execution: u32,
    /// The parent's step that awaits the child.
    pub seq: u32,
}

/// What kind of value `ValueRecorded` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ValueKind {
    /// From `ctx.uuid()`.
    Uuid,
    /// From `ctx.random()`.
    Random,
}

/// One entry of an orchestration's history.
///
/// History is append-only and split into turns, each opened by [`HistoryEvent::TurnStarted`].
/// A turn holds the events delivered to the orchestration ("inbound": start, completions,
/// timer firings, signals, cancellation) followed by what the code did in response
/// ("outbound": scheduling, recorded values, completion). Replay feeds each turn's inbound
/// events and checks that the code produces the same outbound events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum HistoryEvent {
    /// Opens a turn; `at` is what `ctx.now()` returns during it.
    TurnStarted {
        /// The turn's time.
        at: Timestamp,
    },
    /// The execution began with this input.
    ExecutionStarted {
        /// Orchestration name.
        name: String,
        /// Orchestration version the instance runs.
        version: u32,
        /// Input payload.
        input: Value,
        /// The parent, for a sub-orchestration.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent: Option<ParentRef>,
        /// The W3C `traceparent` of the request that started the instance, so its turns and
        /// activities join that trace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<String>,
    },
    /// The code scheduled an activity.
    ActivityScheduled {
        /// Step number.
        seq: u32,
        /// Activity name.
        name: String,
        /// Input payload.
        input: Value,
        /// Retry policy and timeout, written as far as they differ from the defaults.
        #[serde(
            default,
            skip_serializing_if = "crate::options::compact::is_default",
            serialize_with = "crate::options::compact::serialize"
        )]
        options: ActivityOptions,
    },
    /// An activity returned.
    ActivityCompleted {
        /// Step number.
        seq: u32,
        /// Output payload.
        output: Value,
    },
    /// An activity failed for good (retries exhausted or non-retryable).
    ActivityFailed {
        /// Step number.
        seq: u32,
        /// The last error.
        error: ErrorInfo,
        /// Attempts made.
        attempts: u32,
    },
    /// The code started a durable timer.
    TimerCreated {
        /// Step number.
        seq: u32,
        /// When it fires.
        fire_at: Timestamp,
    },
    /// A timer fired.
    TimerFired {
        /// Step number.
        seq: u32,
    },
    /// The code started a sub-orchestration.
    SubOrchestrationScheduled {
        /// Step number.
        seq: u32,
        /// The child's instance id.
        instance: String,
        /// The child's orchestration name.
        name: String,
        /// The child's input.
        input: Value,
    },
    /// A sub-orchestration completed.
    SubOrchestrationCompleted {
        /// Step number.
        seq: u32,
        /// The child's output.
        output: Value,
    },
    /// A sub-orchestration failed, was cancelled or terminated.
    SubOrchestrationFailed {
        /// Step number.
        seq: u32,
        /// The child's error.
        error: ErrorInfo,
    },
    /// The code enqueued a standalone task: it is committed with this turn, once.
    TaskEnqueued {
        /// Step number.
        seq: u32,
        /// Task name.
        name: String,
        /// Input payload.
        input: Value,
        /// Queue, priority, schedule, retries, unique key, metadata.
        options: crate::TaskOptions,
    },
    /// A signal was delivered.
    SignalReceived {
        /// Signal name.
        name: String,
        /// Signal payload.
        payload: Value,
    },
    /// `ctx.uuid()` or `ctx.random()` produced this value.
    ValueRecorded {
        /// Step number.
        seq: u32,
        /// Which call.
        kind: ValueKind,
        /// The value.
        value: Value,
    },
    /// `ctx.is_patched(name)` returned true for the first time.
    PatchApplied {
        /// Patch name.
        name: String,
    },
    /// The code set its custom status.
    CustomStatusSet {
        /// The new status.
        status: Value,
    },
    /// A client asked to cancel the instance.
    CancelRequested {
        /// Why.
        reason: String,
    },
    /// The execution returned successfully.
    ExecutionCompleted {
        /// Output payload.
        output: Value,
    },
    /// The execution failed.
    ExecutionFailed {
        /// The error.
        error: ErrorInfo,
    },
    /// The execution ended after cancellation was requested.
    ExecutionCancelled {
        /// Output, if the code returned one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
        /// Error, if the code returned one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorInfo>,
    },
    /// The execution continued as new with this input.
    ContinuedAsNew {
        /// Input of the next execution.
        input: Value,
    },
}

impl HistoryEvent {
    /// The event's name as shown to people (`ActivityScheduled`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TurnStarted { .. } => "TurnStarted",
            Self::ExecutionStarted { .. } => "ExecutionStarted",
            Self::ActivityScheduled { .. } => "ActivityScheduled",
            Self::ActivityCompleted { .. } => "ActivityCompleted",
            Self::ActivityFailed { .. } => "ActivityFailed",
            Self::TimerCreated { .. } => "TimerCreated",
            Self::TimerFired { .. } => "TimerFired",
            Self::SubOrchestrationScheduled { .. } => "SubOrchestrationScheduled",
            Self::SubOrchestrationCompleted { .. } => "SubOrchestrationCompleted",
            Self::SubOrchestrationFailed { .. } => "SubOrchestrationFailed",
            Self::TaskEnqueued { .. } => "TaskEnqueued",
            Self::SignalReceived { .. } => "SignalReceived",
            Self::ValueRecorded { .. } => "ValueRecorded",
            Self::PatchApplied { .. } => "PatchApplied",
            Self::CustomStatusSet { .. } => "CustomStatusSet",
            Self::CancelRequested { .. } => "CancelRequested",
            Self::ExecutionCompleted { .. } => "ExecutionCompleted",
            Self::ExecutionFailed { .. } => "ExecutionFailed",
            Self::ExecutionCancelled { .. } => "ExecutionCancelled",
            Self::ContinuedAsNew { .. } => "ContinuedAsNew",
        }
    }

    /// True for events delivered to the orchestration (through the inbox).
    pub fn is_inbound(&self) -> bool {
        matches!(
            self,
            Self::ExecutionStarted { .. }
                | Self::ActivityCompleted { .. }
                | Self::ActivityFailed { .. }
                | Self::TimerFired { .. }
                | Self::SubOrchestrationCompleted { .. }
                | Self::SubOrchestrationFailed { .. }
                | Self::SignalReceived { .. }
                | Self::CancelRequested { .. }
        )
    }

    /// True for events that end an execution.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::ExecutionCompleted { .. }
                | Self::ExecutionFailed { .. }
                | Self::ExecutionCancelled { .. }
                | Self::ContinuedAsNew { .. }
        )
    }

    /// A one-line description naming the step and the name, used in nondeterminism errors.
    pub fn describe(&self) -> String {
        match self {
            Self::ActivityScheduled { seq, name, .. } => {
                format!("ActivityScheduled(step {seq}, activity \"{name}\")")
            }
            Self::TimerCreated { seq, .. } => format!("TimerCreated(step {seq})"),
            Self::SubOrchestrationScheduled {
                seq,
                name,
                instance,
                ..
            } => {
                format!("SubOrchestrationScheduled(step {seq}, orchestration \"{name}\", instance \"{instance}\")")
            }
            Self::ValueRecorded { seq, kind, .. } => format!("ValueRecorded(step {seq}, {kind:?})"),
            Self::TaskEnqueued { seq, name, .. } => {
                format!("TaskEnqueued(step {seq}, task \"{name}\")")
            }
            Self::PatchApplied { name } => format!("PatchApplied(\"{name}\")"),
            other => other.kind().to_string(),
        }
    }
}
