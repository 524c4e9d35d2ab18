use serde_json::Value;

use crate::ErrorInfo;

/// Why an orchestration step or the orchestration itself failed.
///
/// Orchestration code gets it from awaiting steps and returns it to fail the instance. Any
/// `std::error::Error` converts into it with `?` (as [`OrchestrationError::Application`]), which is
/// why this type deliberately does not implement `std::error::Error` itself.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum OrchestrationError {
    /// An activity failed for good: retries exhausted, or a non-retryable error.
    Activity {
        /// Activity name.
        name: String,
        /// The activity's last error.
        error: ErrorInfo,
        /// Attempts made.
        attempts: u32,
    },
    /// A sub-orchestration failed, was cancelled or terminated.
    SubOrchestration {
        /// The child instance.
        instance: String,
        /// The child's error.
        error: ErrorInfo,
    },
    /// The instance was cancelled while this step was pending.
    Cancelled {
        /// The reason given by the client.
        reason: String,
    },
    /// A payload did not (de)serialize to the expected type.
    Payload {
        /// What failed.
        message: String,
    },
    /// A configured limit was exceeded (fan-out width, history length, payload size).
    Limit {
        /// Which limit.
        message: String,
    },
    /// An error raised by the orchestration's own code.
    Application(ErrorInfo),
    /// Returned by [`crate::OrchestrationContext::continue_as_new`]: return it from the
    /// orchestration to restart it with fresh input and an empty history.
    ContinueAsNew {
        /// Input of the next execution.
        input: Value,
    },
}

impl OrchestrationError {
    /// An application error with a kind and a message.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Application(ErrorInfo::new(kind, message))
    }

    /// The structured form stored on a failed instance.
    pub fn to_info(&self) -> ErrorInfo {
        match self {
            Self::Activity {
                name,
                error,
                attempts,
            } => ErrorInfo::new(
                "ActivityFailed",
                format!("activity \"{name}\" failed after {attempts} attempt(s): {error}"),
            ),
            Self::SubOrchestration { instance, error } => ErrorInfo::new(
                "SubOrchestrationFailed",
                format!("sub-orchestration \"{instance}\" failed: {error}"),
            ),
            Self::Cancelled { reason } => ErrorInfo::new("Cancelled", reason.clone()),
            Self::Payload { message } => ErrorInfo::new("Payload", message.clone()),
            Self::Limit { message } => ErrorInfo::new("LimitExceeded", message.clone()),
            Self::Application(info) => info.clone(),
            Self::ContinueAsNew { .. } => ErrorInfo::new("ContinueAsNew", "continued as new"),
        }
    }

    /// True when this error says the instance was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Self::Cancelled { .. })
    }
}

impl std::fmt::Display for OrchestrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.to_info().fmt(f)
    }
}

impl<E: std::error::Error> From<E> for OrchestrationError {
    fn from(e: E) -> Self {
        Self::Application(ErrorInfo::new(short_type_name::<E>(), e.to_string()))
    }
}

/// How an activity or task attempt ended without a result.
///
/// Any `std::error::Error` converts into it with `?` (retryable, kind = the error's type name),
/// which is why it does not implement `std::error::Error` itself.
#[derive(Clone, Debug, PartialEq)]
pub struct ActivityError {
    /// The error, whose kind the retry policy matches against `non_retryable`.
    pub info: ErrorInfo,
    /// False to skip all remaining retries.
    pub retryable: bool,
    /// Set: not a failure, run again after this long without spending an attempt.
    pub snooze: Option<std::time::Duration>,
}

/// How a task attempt ended without a result: the same as an activity's.
pub type TaskError = ActivityError;

impl ActivityError {
    /// A retryable error.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            info: ErrorInfo::new(kind, message),
            retryable: true,
            snooze: None,
        }
    }

    /// An error that is never retried (a task goes straight to the dead letters).
    pub fn non_retryable(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            info: ErrorInfo::new(kind, message),
            retryable: false,
            snooze: None,
        }
    }

    /// Not now: run the attempt again after `delay`, without counting it.
    pub fn snooze(delay: std::time::Duration) -> Self {
        Self {
            info: ErrorInfo::new("Snoozed", format!("snoozed for {delay:?}")),
            retryable: true,
            snooze: Some(delay),
        }
    }
}

impl std::fmt::Display for ActivityError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.info.fmt(f)
    }
}

impl<E: std::error::Error> From<E> for ActivityError {
    fn from(e: E) -> Self {
        Self::new(short_type_name::<E>(), e.to_string())
    }
}

/// `std::io::Error` -> `Error`: the last path segment, without generics.
fn short_type_name<E>() -> String {
    let full = std::any::type_name::<E>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_errors_convert_with_their_type_name() {
        let e: ActivityError = std::fmt::Error.into();
        assert_eq!(e.info.kind, "Error");
        assert!(e.retryable);
        let parse = "x".parse::<i32>().unwrap_err();
        let o: OrchestrationError = parse.into();
        assert_eq!(o.to_info().kind, "ParseIntError");
    }
}
