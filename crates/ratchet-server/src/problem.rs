//! Errors as `application/problem+json` (RFC 9457): a stable `type` a program can match on,
//! a `title` and `detail` for people, and where it applies the field at fault and the limit
//! broken.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ratchet::{Error, StoreError};
use serde::Serialize;

/// The media type of a problem.
const PROBLEM_JSON: &str = "application/problem+json";

/// A refused or failed request, as the API answers it (boxed: handlers return it in every
/// `Err`, which stays one pointer wide).
#[derive(Clone, Debug, PartialEq)]
pub struct Problem(Box<Answer>);

/// A problem's body and what its answer says beside it.
#[derive(Clone, Debug, PartialEq)]
struct Answer {
    body: ProblemBody,
    /// Seconds after which the same request may succeed (`Retry-After`).
    retry_after: Option<u32>,
}

impl Serialize for Problem {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.body.serialize(serializer)
    }
}

/// The fields of a [`Problem`].
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ProblemBody {
    /// Stable identifier of the kind of problem: `urn:ratchet:problem:<kind>`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary of the kind, the same for every problem of that kind.
    pub title: &'static str,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// The field at fault, as a path into the request (`tasks[2].options.priority`), or the
    /// query parameter or path segment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The limit that was broken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// The position of the event that failed an append's condition.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Every error in a submitted workflow definition, each where it is in the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<SourceError>>,
}

/// An error in a submitted definition, at its line and column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SourceError {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    /// A problem of `kind` (the last part of its `type`) with HTTP `status`.
    pub fn new(
        status: StatusCode,
        kind: &str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self(Box::new(Answer {
            body: ProblemBody {
                kind: format!("urn:ratchet:problem:{kind}"),
                title,
                status: status.as_u16(),
                detail: detail.into(),
                field: None,
                limit: None,
                position: None,
                errors: None,
            },
            retry_after: None,
        }))
    }

    /// Says when the same request may succeed (a `Retry-After` header, in seconds).
    pub fn retry_after(mut self, seconds: u32) -> Self {
        self.0.retry_after = Some(seconds);
        self
    }

    /// Names the field at fault.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.0.body.field = Some(field.into()).filter(|f: &String| !f.is_empty());
        self
    }

    /// Puts the field at fault under `parent` (`queue` becomes `options.queue`).
    pub(crate) fn prefix_field(mut self, parent: &str) -> Self {
        self.0.body.field = Some(match self.0.body.field.take() {
            Some(f) => format!("{parent}.{f}"),
            None => parent.to_string(),
        });
        self
    }

    /// Names the limit broken.
    pub fn limit(mut self, limit: u64) -> Self {
        self.0.body.limit = Some(limit);
        self
    }

    /// Lists the errors of a submitted definition.
    pub fn errors(mut self, errors: Vec<SourceError>) -> Self {
        self.0.body.errors = Some(errors);
        self
    }

    /// Names the event that failed an append's condition.
    pub fn position(mut self, position: u64) -> Self {
        self.0.body.position = Some(position);
        self
    }

    /// 400: the request is not what the API reads (malformed JSON, a bad query string).
    pub(crate) fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            "Malformed request",
            detail,
        )
    }

    /// 422: well-formed, but a value is not acceptable.
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-input",
            "Invalid input",
            detail,
        )
    }

    /// 404.
    pub(crate) fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    }

    /// 413: a body or a batch over its limit.
    pub(crate) fn too_large(detail: impl Into<String>, limit: u64) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-large",
            "Request too large",
            detail,
        )
        .limit(limit)
    }

    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl std::ops::Deref for Problem {
    type Target = ProblemBody;

    fn deref(&self) -> &ProblemBody {
        &self.0.body
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = self.status_code();
        if status.is_server_error() {
            tracing::warn!(status = self.status, kind = %self.kind, detail = %self.detail, "request failed");
        }
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(seconds) = self.0.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Answers every error as a problem: an error answered by something other than a handler
/// of ours (a layer, a rejection of an extractor we do not wrap) in plain text becomes a
/// problem of its status, with that text as its detail.
pub(crate) async fn ensure(response: Response) -> Response {
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let detail = String::from_utf8_lossy(&text).trim().to_string();
    let (kind, title) = match status {
        StatusCode::BAD_REQUEST => ("bad-request", "Malformed request"),
        StatusCode::NOT_FOUND => ("not-found", "Not found"),
        StatusCode::METHOD_NOT_ALLOWED => ("method-not-allowed", "Method not allowed"),
        StatusCode::PAYLOAD_TOO_LARGE => ("too-large", "Request too large"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ("unsupported-media-type", "Unsupported media type"),
        StatusCode::UNPROCESSABLE_ENTITY => ("invalid-input", "Invalid input"),
        s if s.is_server_error() => ("internal", "Internal error"),
        _ => ("http-error", "Request refused"),
    };
    let detail = if detail.is_empty() {
        status.canonical_reason().unwrap_or("refused").to_string()
    } else {
        detail
    };
    let mut answer = Problem::new(status, kind, title, detail).into_response();
    // Keep what the first answer said beside its body (Allow, Retry-After, WWW-Authenticate).
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().insert(name.clone(), value.clone());
        }
    }
    answer
}

impl From<Error> for Problem {
    fn from(e: Error) -> Self {
        let detail = e.to_string();
        match e {
            Error::NotFound(_) | Error::TaskNotFound(_) => Self::not_found(detail),
            Error::AlreadyExists { .. } => Self::new(
                StatusCode::CONFLICT,
                "already-exists",
                "Instance already exists",
                detail,
            )
            .field("id"),
            Error::Finished { .. } => Self::new(
                StatusCode::CONFLICT,
                "finished",
                "Instance already finished",
                detail,
            ),
            Error::UnknownOrchestration(_) | Error::UnknownTask(_) => Self::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "unknown-name",
                "Nothing registered under this name",
                detail,
            )
            .field("name"),
            Error::TaskRefused { .. } => Self::new(
                StatusCode::CONFLICT,
                "task-state",
                "Not possible in the task's state",
                detail,
            ),
            Error::InvalidInput(_) | Error::Decode { .. } => Self::invalid(detail),
            Error::Limit(limit) => Self::invalid(detail).field(limit.field),
            Error::PayloadTooLarge { limit, .. } => Self::too_large(detail, limit as u64),
            Error::AppendConflict { position } => Self::new(
                StatusCode::CONFLICT,
                "append-conflict",
                "Append condition failed",
                detail,
            )
            .position(position.0),
            Error::Timeout(_) | Error::TaskTimeout(_) => {
                Self::new(StatusCode::REQUEST_TIMEOUT, "timeout", "Timed out", detail)
            }
            Error::ScheduleNotFound(_) => Self::not_found(detail),
            Error::ScheduleExists(_) => Self::new(
                StatusCode::CONFLICT,
                "schedule-exists",
                "Schedule already exists",
                detail,
            )
            .field("name"),
            Error::InvalidSchedule { field, .. } => Self::invalid(detail).field(field),
            Error::Store(store) => Self::from(store),
            Error::Closed => unavailable(detail),
            _ => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Internal error",
                detail,
            ),
        }
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        let detail = e.to_string();
        match e {
            StoreError::NotFound(_) => Self::not_found(detail),
            StoreError::Invalid(_) => Self::invalid(detail),
            StoreError::AlreadyExists { .. } => Self::new(
                StatusCode::CONFLICT,
                "already-exists",
                "Instance already exists",
                detail,
            ),
            StoreError::InUse { .. } => Self::new(
                StatusCode::CONFLICT,
                "workflow-in-use",
                "Workflow in use",
                detail,
            ),
            StoreError::Closed | StoreError::Backend(_) => unavailable(detail),
            _ => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Internal error",
                detail,
            ),
        }
    }
}

/// 503: the database is out of reach; the same request may succeed later.
fn unavailable(detail: String) -> Problem {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "Service unavailable",
        detail,
    )
    .retry_after(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_error_answered_in_plain_text_becomes_a_problem() {
        let plain = (
            StatusCode::PAYLOAD_TOO_LARGE,
            [(header::RETRY_AFTER, "3")],
            "length limit exceeded",
        )
            .into_response();
        let answer = ensure(plain).await;
        assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(answer.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        assert_eq!(answer.headers()[header::RETRY_AFTER], "3");
        let body = axum::body::to_bytes(answer.into_body(), 4096)
            .await
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["type"], "urn:ratchet:problem:too-large");
        assert_eq!(json["detail"], "length limit exceeded");
        // A problem, or a success, passes as it is.
        let ok = ensure((StatusCode::OK, "fine").into_response()).await;
        assert_eq!(ok.status(), StatusCode::OK);
        let problem = ensure(Problem::not_found("x").into_response()).await;
        assert_eq!(problem.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        let retry = Problem::invalid("x").retry_after(1).into_response();
        assert_eq!(retry.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn errors_map_to_statuses_with_stable_types() {
        let p = Problem::from(Error::UnknownTask("nope".into()));
        assert_eq!(p.status, 422);
        assert_eq!(p.kind, "urn:ratchet:problem:unknown-name");
        assert_eq!(p.field.as_deref(), Some("name"));
        let p = Problem::from(Error::PayloadTooLarge {
            what: "the input".into(),
            size: 10,
            limit: 5,
        });
        assert_eq!((p.status, p.limit), (413, Some(5)));
        assert_eq!(Problem::from(Error::TaskNotFound(3)).status, 404);
        let p = Problem::from(StoreError::InUse {
            workflow: "shop/order".into(),
            instances: 2,
        });
        assert_eq!(
            (p.status, p.kind.as_str()),
            (409, "urn:ratchet:problem:workflow-in-use")
        );
        assert!(p.detail.contains("2 unfinished"), "{}", p.detail);
        let json = serde_json::to_value(Problem::not_found("x")).unwrap();
        assert_eq!(json["type"], "urn:ratchet:problem:not-found");
        assert!(json.get("field").is_none(), "absent fields are left out");
    }
}
