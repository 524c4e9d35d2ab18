use ratchet_store::{InstanceStatus, StoreError};

/// What a client call or the runtime's start can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No instance has this id.
    #[error("instance \"{}\" not found", shown(.0))]
    NotFound(String),
    /// No task has this id (or it finished and was purged).
    #[error("task {0} not found")]
    TaskNotFound(i64),
    /// The id is taken and the start did not ask to reuse it.
    #[error("instance \"{}\" already exists with status {status}", shown(id))]
    AlreadyExists {
        /// The id.
        id: String,
        /// The existing instance's status.
        status: InstanceStatus,
    },
    /// The instance has finished, so it takes no more signals or cancellation.
    #[error("instance \"{}\" has already finished with status {status}", shown(id))]
    Finished {
        /// The id.
        id: String,
        /// Its final status.
        status: InstanceStatus,
    },
    /// No orchestration of this name is registered.
    #[error("no orchestration named \"{}\" is registered", shown(.0))]
    UnknownOrchestration(String),
    /// No task of this name is registered with the client's registry.
    #[error("no task named \"{}\" is registered", shown(.0))]
    UnknownTask(String),
    /// The task is not in a state that allows this (retrying a running task, ...).
    #[error("cannot {action} task {id}: it is {state}")]
    TaskRefused {
        /// The task's id.
        id: i64,
        /// What was asked.
        action: &'static str,
        /// Its state.
        state: ratchet_store::TaskState,
    },
    /// The input, id or name was refused before anything was written.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A payload is larger than the configured limit; nothing was written.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    PayloadTooLarge {
        /// Which payload.
        what: String,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Waiting for the instance took longer than the timeout.
    #[error("timed out waiting for instance \"{}\"", shown(.0))]
    Timeout(String),
    /// Waiting for the task took longer than the timeout.
    #[error("timed out waiting for task {0}")]
    TaskTimeout(i64),
    /// The instance ended without completing.
    #[error("instance \"{id}\" ended with status {status}{}", error.as_ref().map(|e| format!(": {e}")).unwrap_or_default())]
    Failed {
        /// The id.
        id: String,
        /// Its final status.
        status: InstanceStatus,
        /// Its error, if any.
        error: Option<ratchet_core::ErrorInfo>,
    },
    /// The instance's output does not decode to the requested type.
    #[error("the output of instance \"{id}\" does not decode: {message}")]
    Decode {
        /// The id.
        id: String,
        /// Why.
        message: String,
    },
    /// A conditional append found an event matching its condition after its position:
    /// the decision it protects was made on stale state. Nothing was appended.
    #[error("append condition failed: event {position} matches it")]
    AppendConflict {
        /// The first matching event.
        position: ratchet_store::Position,
    },
    /// No schedule has this name.
    #[error("schedule \"{}\" not found", shown(.0))]
    ScheduleNotFound(String),
    /// A schedule with this name exists already.
    #[error("schedule \"{}\" already exists", shown(.0))]
    ScheduleExists(String),
    /// A schedule was refused before anything was written; `field` names the part at fault
    /// (`name`, `spec`, `time_zone`, `start_at`, `end_at`, `jitter`, `action`, `range`, ...).
    #[error("invalid schedule: {field}: {message}")]
    InvalidSchedule {
        /// The field at fault.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A value broke a limit at the edge (a time outside the calendar, a duration over 100
    /// years): [`ratchet_core::limits::LimitError`] names the field. Nothing was written.
    #[error("invalid input: {0}")]
    Limit(#[from] ratchet_core::limits::LimitError),
    /// The runtime configuration was refused.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The runtime has shut down.
    #[error("the runtime has shut down")]
    Closed,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Result of client and runtime calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A name as an error message shows it ([`ratchet_core::limits::shown_name`]).
pub(crate) fn shown(name: &str) -> String {
    ratchet_core::limits::shown_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_not_echoed_whole() {
        assert_eq!(shown("send_email"), "send_email");
        let long = "é".repeat(1000);
        let message = Error::UnknownTask(long.clone()).to_string();
        assert!(Error::ScheduleNotFound(long.clone()).to_string().len() < 120);
        assert!(message.len() < 120, "{message}");
        assert!(message.contains("(2000 bytes)"), "{message}");
        assert_eq!(shown("ship\u{202E}gpj.exe"), "ship\\u{202e}gpj.exe");
    }
}
