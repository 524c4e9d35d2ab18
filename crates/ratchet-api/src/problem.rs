//! Errors as the API answers them, `application/problem+json` (RFC 9457): a stable `type` a
//! program can match on, a `title` and `detail` for people, and where it applies the field
//! at fault and the limit broken; and [`ApiError`], what an [`Api`](crate::Api) call fails
//! with, in process or over HTTP alike.

use serde::{Deserialize, Serialize};

/// The media type of a problem.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A refused or failed request: the body of a problem answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProblemBody {
    /// Stable identifier of the kind of problem: `urn:ratchet:problem:<kind>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary of the kind, the same for every problem of that kind.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// The field at fault, as a path into the request (`tasks[2].options.priority`), or the
    /// query parameter or path segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The limit that was broken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// The position of the event that failed an append's condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Every error in a submitted workflow definition, each where it is in the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<SourceError>>,
}

/// An error in a submitted definition, at its line and column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SourceError {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl ProblemBody {
    /// A problem of `kind` (the last part of its `type`) with HTTP `status`.
    pub fn new(status: u16, kind: &str, title: &str, detail: impl Into<String>) -> Self {
        Self {
            kind: format!("urn:ratchet:problem:{kind}"),
            title: title.to_string(),
            status,
            detail: detail.into(),
            field: None,
            limit: None,
            position: None,
            errors: None,
        }
    }

    /// Names the field at fault (an empty name names none).
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into()).filter(|f: &String| !f.is_empty());
        self
    }

    /// Names the limit broken.
    pub fn limit(mut self, limit: u64) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Names the event that failed an append's condition.
    pub fn position(mut self, position: u64) -> Self {
        self.position = Some(position);
        self
    }

    /// 400: the request is not what the API reads (malformed JSON, a bad query string).
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(400, "bad-request", "Malformed request", detail)
    }

    /// 422: well-formed, but a value is not acceptable.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(422, "invalid-input", "Invalid input", detail)
    }

    /// 404.
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(404, "not-found", "Not found", detail)
    }

    /// 409: not possible in the current state.
    pub fn conflict(kind: &str, title: &str, detail: impl Into<String>) -> Self {
        Self::new(409, kind, title, detail)
    }

    /// 413: a body or a batch over its limit.
    pub fn too_large(detail: impl Into<String>, limit: u64) -> Self {
        Self::new(413, "too-large", "Request too large", detail).limit(limit)
    }

    /// 503: the database is out of reach; the same request may succeed later.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(503, "unavailable", "Service unavailable", detail)
    }

    /// 500.
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(500, "internal", "Internal error", detail)
    }

    /// The last part of `type` (`not-found`).
    pub fn kind_name(&self) -> &str {
        self.kind
            .strip_prefix("urn:ratchet:problem:")
            .unwrap_or(&self.kind)
    }
}

impl std::fmt::Display for ProblemBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)?;
        if let Some(field) = &self.field {
            write!(f, " (field {field})")?;
        }
        Ok(())
    }
}

/// Why an [`Api`](crate::Api) call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The API refused the request or failed it, and said why.
    #[error("{0}")]
    Problem(Box<ProblemBody>),
    /// The server was not reached, or its answer not read whole.
    #[error("calling {url}: {message}")]
    Transport {
        /// What was called.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The server answered with something this client does not read.
    #[error("reading the answer of {url}: {message}")]
    Decode {
        /// What was called.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// A wait ran out before its instance or task finished.
    #[error("timed out waiting for {0}")]
    Timeout(String),
    /// The client was given something it cannot send (not a server's URL).
    #[error("{0}")]
    Usage(String),
}

impl ApiError {
    /// The problem the API answered, if it answered one.
    pub fn problem(&self) -> Option<&ProblemBody> {
        match self {
            Self::Problem(p) => Some(p),
            _ => None,
        }
    }

    /// The same error, its problem's field at fault named anew from the one it names.
    pub fn refield(self, field: impl FnOnce(Option<&str>) -> String) -> Self {
        match self {
            Self::Problem(mut p) => {
                let named = field(p.field.as_deref());
                p.field = Some(named).filter(|f| !f.is_empty());
                Self::Problem(p)
            }
            other => other,
        }
    }

    /// The problem the API answered, taken out.
    pub fn into_problem(self) -> Option<ProblemBody> {
        match self {
            Self::Problem(p) => Some(*p),
            _ => None,
        }
    }

    /// The HTTP status the API answered (or would have, in process).
    pub fn status(&self) -> Option<u16> {
        self.problem().map(|p| p.status)
    }
}

impl From<ProblemBody> for ApiError {
    fn from(p: ProblemBody) -> Self {
        Self::Problem(Box::new(p))
    }
}
