//! Errors as `application/problem+json` (RFC 9457): a stable `type` a program can match on,
//! a `title` and `detail` for people, and where it applies the field at fault and the limit
//! broken.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ratchet::{Error, StoreError};
use ratchet_api::ApiError;
pub use ratchet_api::ProblemBody;
pub(crate) use ratchet_api::{SourceError, PROBLEM_JSON};
use serde::Serialize;

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

impl From<ProblemBody> for Problem {
    /// A problem with its body; 503s say the same request may succeed in a second.
    fn from(body: ProblemBody) -> Self {
        let retry_after = (body.status == 503).then_some(1);
        Self(Box::new(Answer { body, retry_after }))
    }
}

impl From<ApiError> for Problem {
    fn from(e: ApiError) -> Self {
        match e {
            ApiError::Problem(body) => Self::from(*body),
            other => Self::from(ProblemBody::internal(other.to_string())),
        }
    }
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
            body: ProblemBody::new(status.as_u16(), kind, title, detail),
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
        Self::from(ProblemBody::bad_request(detail))
    }

    /// 422: well-formed, but a value is not acceptable.
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        Self::from(ProblemBody::invalid(detail))
    }

    /// 404.
    pub(crate) fn not_found(detail: impl Into<String>) -> Self {
        Self::from(ProblemBody::not_found(detail))
    }

    /// 413: a body or a batch over its limit.
    pub(crate) fn too_large(detail: impl Into<String>, limit: u64) -> Self {
        Self::from(ProblemBody::too_large(detail, limit))
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
        Self::from(ProblemBody::from(e))
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        Self::from(ProblemBody::from(e))
    }
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
    fn an_unreachable_database_says_when_to_ask_again() {
        let p = Problem::from(StoreError::Closed);
        assert_eq!((p.status, p.0.retry_after), (503, Some(1)));
        assert_eq!(Problem::from(Error::TaskNotFound(3)).status, 404);
    }
}
