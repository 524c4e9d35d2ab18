//! Extractors that refuse bad requests with a problem naming the field at fault, instead of
//! axum's plain-text rejections.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;

use crate::problem::Problem;
use crate::state::ServerState;

/// A JSON request body: `Content-Type: application/json`, within the body limit, every field
/// known (request types deny unknown fields) and of the right type.
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<T: DeserializeOwned> FromRequest<ServerState> for JsonBody<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &ServerState) -> Result<Self, Problem> {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(|v| v.trim().to_ascii_lowercase())
            .is_some_and(|v| v == "application/json" || v.ends_with("+json"));
        if !json {
            return Err(Problem::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
                "the body must be JSON, sent with Content-Type: application/json",
            ));
        }
        let bytes = body(req, state).await?;
        ratchet_api::json::parse_json(&bytes)
            .map(JsonBody)
            .map_err(Problem::from)
    }
}

/// An optional JSON body: none, only white space or `null` is `None`; anything else is
/// read as [`JsonBody`] reads it (its `Content-Type` is not asked for).
pub(crate) struct OptionalJsonBody<T>(pub(crate) Option<T>);

impl<T: DeserializeOwned> FromRequest<ServerState> for OptionalJsonBody<T> {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &ServerState) -> Result<Self, Problem> {
        let bytes = body(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(None));
        }
        ratchet_api::json::parse_json::<Option<T>>(&bytes)
            .map(OptionalJsonBody)
            .map_err(Problem::from)
    }
}

/// Refuses a request that waits for `100 Continue` before it sends a body declared over the
/// limit: it hears 413 at once and sends nothing. (A client that sends its body without
/// waiting is read up to the limit and then hears 413: answering before reading would break
/// the connection under its write, and it might never read the answer.)
pub(crate) async fn declared_length(
    axum::extract::State(state): axum::extract::State<ServerState>,
    request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let limit = state.limits.max_body_bytes;
    let waits = request
        .headers()
        .get(header::EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if !waits {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Problem::too_large(
            format!("the body is over the limit of {limit} bytes"),
            limit as u64,
        )
        .into_response();
    }
    next.run(request).await
}

/// The request's body, within the body limit (413 as a problem over it).
async fn body(req: Request, state: &ServerState) -> Result<Bytes, Problem> {
    let limit = state.limits.max_body_bytes;
    Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Problem::too_large(
                format!("the body is over the limit of {limit} bytes"),
                limit as u64,
            )
        } else {
            Problem::bad_request(format!("the body could not be read: {e}"))
        }
    })
}

/// Query parameters, every one known and of the right type.
pub(crate) struct QueryParams<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Problem> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(q)| QueryParams(q))
            .map_err(|e| Problem::bad_request(e.body_text()))
    }
}

/// Path segments.
pub(crate) struct PathParam<T>(pub(crate) T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for PathParam<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(p)| PathParam(p))
            .map_err(|e| Problem::bad_request(e.body_text()))
    }
}
