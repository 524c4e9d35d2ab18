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
        let limit = state.limits.max_body_bytes;
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Problem::too_large(
                    format!("the body is over the limit of {limit} bytes"),
                    limit as u64,
                )
            } else {
                Problem::bad_request(format!("the body could not be read: {e}"))
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Reads `bytes` as one JSON value of type `T`: malformed JSON is a 400, a well-formed body
/// with a wrong or unknown field a 422 naming it.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Problem> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = match serde_path_to_error::deserialize(&mut de) {
        Ok(value) => value,
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                return Err(Problem::bad_request(format!(
                    "the body is not valid JSON: {inner}"
                )));
            }
            let message = inner.to_string();
            // An unknown field's path may stop at its parent; its message names it.
            let field = match unknown_field(&message) {
                Some(name) if path == "." => name.to_string(),
                Some(name) if !path.ends_with(name) => format!("{path}.{name}"),
                _ => path,
            };
            return Err(Problem::invalid(message).field(field.trim_start_matches('.')));
        }
    };
    de.end()
        .map_err(|e| Problem::bad_request(format!("the body is not one JSON value: {e}")))?;
    Ok(value)
}

fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        priority: i16,
    }

    #[test]
    fn bad_bodies_name_the_field_at_fault() {
        let p =
            parse_json::<Outer>(br#"{"items":[{"priority":1},{"priority":"high"}]}"#).unwrap_err();
        assert_eq!(
            (p.status, p.field.as_deref()),
            (422, Some("items[1].priority"))
        );
        let p = parse_json::<Outer>(br#"{"items":[{"priority":1,"colour":2}]}"#).unwrap_err();
        assert_eq!(p.field.as_deref(), Some("items[0].colour"));
        let p = parse_json::<Outer>(br#"{"itemz":[]}"#).unwrap_err();
        assert_eq!(p.field.as_deref(), Some("itemz"));
        let p = parse_json::<Outer>(br#"{"items":["#).unwrap_err();
        assert_eq!(p.status, 400);
        let p = parse_json::<Outer>(br#"{"items":[]} {}"#).unwrap_err();
        assert_eq!(p.status, 400);
        assert!(parse_json::<Outer>(br#"{"items":[{"priority":-3}]}"#).is_ok());
    }
}
