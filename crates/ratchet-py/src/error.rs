//! Ratchet's errors as a small Python exception hierarchy, rooted at `RatchetError`.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _ratchet,
    RatchetError,
    PyException,
    "Every error Ratchet raises."
);
create_exception!(
    _ratchet,
    NotFound,
    RatchetError,
    "No instance, task or schedule of that id or name."
);
create_exception!(
    _ratchet,
    AlreadyExists,
    RatchetError,
    "An instance with that id, or a schedule with that name, exists."
);
create_exception!(
    _ratchet,
    InvalidInput,
    RatchetError,
    "A value Ratchet cannot accept: the message names it."
);
create_exception!(
    _ratchet,
    UnknownName,
    RatchetError,
    "No orchestration or task of that name is registered."
);
create_exception!(_ratchet, Timeout, RatchetError, "A wait ran out of time.");
create_exception!(
    _ratchet,
    Failed,
    RatchetError,
    "An instance ended failed, cancelled or terminated."
);
create_exception!(
    _ratchet,
    AppendConflict,
    RatchetError,
    "An event matching the append's condition was appended since the read."
);
create_exception!(
    _ratchet,
    Refused,
    RatchetError,
    "The instance or task is in a state that refuses this."
);
create_exception!(
    _ratchet,
    StoreError,
    RatchetError,
    "The database failed or is out of reach."
);
create_exception!(
    _ratchet,
    Closed,
    RatchetError,
    "The client or worker has shut down."
);

create_exception!(
    _ratchet,
    ActivityFailed,
    RatchetError,
    "An activity a workflow awaited failed for good."
);
create_exception!(
    _ratchet,
    ChildFailed,
    RatchetError,
    "A child workflow a workflow awaited failed."
);
create_exception!(
    _ratchet,
    Cancelled,
    RatchetError,
    "The workflow was cancelled: raised at its next await."
);
create_exception!(
    _ratchet,
    ContinueAsNew,
    RatchetError,
    "Raised by ctx.continue_as_new: the workflow starts afresh with a new input."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RatchetError", py.get_type::<RatchetError>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add("AlreadyExists", py.get_type::<AlreadyExists>())?;
    m.add("InvalidInput", py.get_type::<InvalidInput>())?;
    m.add("UnknownName", py.get_type::<UnknownName>())?;
    m.add("Timeout", py.get_type::<Timeout>())?;
    m.add("Failed", py.get_type::<Failed>())?;
    m.add("AppendConflict", py.get_type::<AppendConflict>())?;
    m.add("Refused", py.get_type::<Refused>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("Closed", py.get_type::<Closed>())?;
    m.add("ActivityFailed", py.get_type::<ActivityFailed>())?;
    m.add("ChildFailed", py.get_type::<ChildFailed>())?;
    m.add("Cancelled", py.get_type::<Cancelled>())?;
    m.add("ContinueAsNew", py.get_type::<ContinueAsNew>())?;
    Ok(())
}

/// The Python exception for a Ratchet error.
pub(crate) fn to_py(e: ratchet::Error) -> PyErr {
    use ratchet::Error as E;
    let text = e.to_string();
    match e {
        E::NotFound(_) | E::TaskNotFound(_) | E::ScheduleNotFound(_) => NotFound::new_err(text),
        E::AlreadyExists { .. } | E::ScheduleExists(_) => AlreadyExists::new_err(text),
        E::InvalidSchedule { .. } | E::Limit(_) => InvalidInput::new_err(text),
        E::UnknownOrchestration(_) | E::UnknownTask(_) => UnknownName::new_err(text),
        E::InvalidInput(_) | E::PayloadTooLarge { .. } | E::Decode { .. } => {
            InvalidInput::new_err(text)
        }
        E::Timeout(_) | E::TaskTimeout(_) => Timeout::new_err(text),
        E::Failed { .. } => Failed::new_err(text),
        E::AppendConflict { .. } => AppendConflict::new_err(text),
        E::Finished { .. } | E::TaskRefused { .. } => Refused::new_err(text),
        E::Closed => Closed::new_err(text),
        E::Store(ratchet::StoreError::Invalid(_)) => InvalidInput::new_err(text),
        _ => StoreError::new_err(text),
    }
}

/// `InvalidInput` with `message`.
pub(crate) fn invalid(message: impl Into<String>) -> PyErr {
    InvalidInput::new_err(message.into())
}

/// The Python exception for an API error: by its problem's kind, with its detail (after the
/// field at fault, when it names one), as the HTTP client raises it too.
pub(crate) fn api_to_py(e: ratchet_api::ApiError) -> PyErr {
    match e.problem() {
        Some(p) => problem_to_py(p),
        None => match e {
            ratchet_api::ApiError::Timeout(_) => Timeout::new_err(e.to_string()),
            ratchet_api::ApiError::Usage(_) => InvalidInput::new_err(e.to_string()),
            _ => StoreError::new_err(e.to_string()),
        },
    }
}

/// The Python exception for a problem.
pub(crate) fn problem_to_py(p: &ratchet_api::ProblemBody) -> PyErr {
    let message = match &p.field {
        Some(field) => format!("{field}: {}", p.detail),
        None => p.detail.clone(),
    };
    match p.kind_name() {
        "not-found" => NotFound::new_err(message),
        "already-exists" | "schedule-exists" => AlreadyExists::new_err(message),
        "invalid-input" | "bad-request" | "too-large" | "invalid-workflow" => {
            InvalidInput::new_err(message)
        }
        "unknown-name" => UnknownName::new_err(message),
        "append-conflict" => AppendConflict::new_err(message),
        "finished" | "task-state" | "version-changed" | "workflow-in-use" | "running" => {
            Refused::new_err(message)
        }
        "timeout" => Timeout::new_err(message),
        "unavailable" => StoreError::new_err(message),
        _ => RatchetError::new_err(message),
    }
}

/// Raises the exception for a problem the server answered (its JSON body, or the status
/// and text of an answer that was not one): the HTTP client's errors are the native
/// client's.
#[pyfunction]
pub(crate) fn raise_problem(status: u16, body: &str) -> PyResult<()> {
    let problem = serde_json::from_str::<ratchet_api::ProblemBody>(body).unwrap_or_else(|_| {
        ratchet_api::ProblemBody::new(
            status,
            "http-error",
            "Request refused",
            format!(
                "HTTP {status}: {}",
                body.chars().take(500).collect::<String>()
            ),
        )
    });
    Err(problem_to_py(&problem))
}
