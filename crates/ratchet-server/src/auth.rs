//! Bearer tokens with scopes. A token is `rt_<id>_<secret>`; the store keeps its SHA-256,
//! never the token, so a leaked database gives no usable token. Each request's token is looked
//! up by its hash (one indexed read), so a revoked token is refused from the next request.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ratchet::{NewToken, Timestamp};
use sha2::{Digest, Sha256};

use crate::problem::Problem;
use crate::state::ServerState;

/// What a token may do; each scope includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Read anything: instances, histories, tasks, queues, events, metrics.
    Read,
    /// Change work: start, signal, cancel, terminate; enqueue, cancel and retry tasks; append
    /// events.
    Write,
    /// Change the system: pause, resume and limit queues; discard tasks; purge instances.
    Admin,
}

impl Scope {
    /// Its name: `read`, `write` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "read" => Ok(Self::Read),
            "write" => Ok(Self::Write),
            "admin" => Ok(Self::Admin),
            other => Err(format!(
                "unknown scope {other:?} (expected read, write or admin)"
            )),
        }
    }
}

/// Why a token could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot make a token: {0}")]
pub struct TokenError(String);

/// A token just made: the text to hand out (shown once, never stored) and what to store.
#[derive(Debug)]
pub struct IssuedToken {
    /// `rt_<id>_<secret>`.
    pub token: String,
    /// Its record, with the hash.
    pub record: NewToken,
}

/// Makes a token named `name` with `scopes`, from the operating system's random source.
///
/// # Errors
///
/// [`TokenError`] for an empty or overlong name, no scope, or no random source.
pub fn issue(name: &str, scopes: &[Scope], now: Timestamp) -> Result<IssuedToken, TokenError> {
    if let Err(e) = ratchet::limits::check_identifier("name", name.trim(), 200) {
        return Err(TokenError(format!("the token's name {}", e.rule)));
    }
    if scopes.is_empty() {
        return Err(TokenError("a token needs at least one scope".into()));
    }
    let mut id = [0u8; 6];
    let mut secret = [0u8; 32];
    getrandom::fill(&mut id).map_err(|e| TokenError(e.to_string()))?;
    getrandom::fill(&mut secret).map_err(|e| TokenError(e.to_string()))?;
    let id = hex(&id);
    let token = format!("rt_{id}_{}", URL_SAFE_NO_PAD.encode(secret));
    let mut scopes: Vec<Scope> = scopes.to_vec();
    scopes.sort();
    scopes.dedup();
    Ok(IssuedToken {
        record: NewToken {
            id,
            name: name.trim().to_string(),
            hash: hash(&token),
            scopes: scopes.iter().map(|s| s.as_str().to_string()).collect(),
            created_at: now,
        },
        token,
    })
}

/// The hash a token is stored and found by: hex SHA-256.
pub fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Who made a request, when the server asks for tokens: what `GET /v1/whoami` tells, so a
/// client (the console) can leave out what the token may not do.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    /// The token's public id.
    pub(crate) token: String,
    /// The token's name.
    pub(crate) name: String,
    /// Its scopes, each including the ones before it.
    pub(crate) scopes: Vec<Scope>,
}

/// The token a request was let in with (its hash), for the requests held open to check it
/// again while they last.
#[derive(Clone, Debug)]
pub(crate) struct Authenticated {
    pub(crate) hash: String,
}

/// How long a token found valid is taken as valid by the requests held open that check it
/// again: at most one read per token per this, however many streams it has open.
const VALID_FOR: Duration = Duration::from_secs(1);

/// When each token with requests held open was last found valid.
#[derive(Debug, Default)]
pub(crate) struct Validity(std::sync::Mutex<HashMap<String, Instant>>);

/// Whether the token of `hash` still lets requests in: false once it is revoked or gone. A
/// database out of reach keeps it valid (the next check tries again).
pub(crate) async fn still_valid(state: &ServerState, hash: &str) -> bool {
    let now = Instant::now();
    let fresh = |seen: &HashMap<String, Instant>| {
        seen.get(hash)
            .is_some_and(|at| now.duration_since(*at) < VALID_FOR)
    };
    if fresh(&lock(&state.validity)) {
        return true;
    }
    let valid = match state.client.store().token_find(hash).await {
        Ok(Some(record)) => record.revoked_at.is_none(),
        Ok(None) => false,
        Err(e) => {
            tracing::warn!(error = %e, "checking a token again failed; keeping its requests");
            return true;
        }
    };
    let mut seen = lock(&state.validity);
    if valid {
        // Forget tokens no request has checked for a while, so the map stays small.
        if seen.len() >= 1024 {
            seen.retain(|_, at| now.duration_since(*at) < VALID_FOR * 60);
        }
        seen.insert(hash.to_string(), now);
    } else {
        seen.remove(hash);
    }
    valid
}

fn lock(v: &Validity) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
    // A panic elsewhere while it was held leaves a map of times, still good to read.
    v.0.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Every scope `granted` includes, lowest first.
pub(crate) fn implied(granted: Option<Scope>) -> Vec<Scope> {
    [Scope::Read, Scope::Write, Scope::Admin]
        .into_iter()
        .filter(|s| granted.is_some_and(|g| *s <= g))
        .collect()
}

/// The scope a request needs, by method and route pattern.
fn needed(method: &Method, route: &str) -> Scope {
    // A read with its query in the body is a read.
    if method == Method::GET
        || method == Method::HEAD
        || route == "/v1/events/query"
        || route == "/v1/workflows/validate"
    {
        return Scope::Read;
    }
    if route.starts_with("/v1/queues/") || route.ends_with("/discard") || route.ends_with("/purge")
    {
        return Scope::Admin;
    }
    Scope::Write
}

/// Routes anyone may call: probes, the API's description, and whoami (which checks a token
/// it is given itself).
fn public(route: &str) -> bool {
    matches!(
        route,
        "/healthz" | "/readyz" | "/openapi.json" | "/v1/whoami"
    )
}

fn unauthorized(detail: &str) -> Response {
    let mut response = Problem::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "Unauthorized",
        detail,
    )
    .into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"ratchet\""),
    );
    response
}

/// The token a request carries, looked up, with its hash: refused (401) when missing,
/// unknown or revoked.
async fn authenticate(
    state: &ServerState,
    headers: &axum::http::HeaderMap,
) -> Result<(ratchet::TokenRecord, String), Response> {
    // The scheme's name is case-insensitive (RFC 7235): `bearer` is `Bearer`.
    let Some(token) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once([' ', '\t']))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
    else {
        return Err(unauthorized(
            "this server asks for a token: Authorization: Bearer <token>",
        ));
    };
    let hash = hash(token);
    match state.client.store().token_find(&hash).await {
        Ok(Some(record)) if record.revoked_at.is_none() => Ok((record, hash)),
        Ok(Some(_)) => Err(unauthorized("this token was revoked")),
        Ok(None) => Err(unauthorized("this token is not known here")),
        Err(e) => Err(Problem::from(e).into_response()),
    }
}

/// Who a request is from, for `GET /v1/whoami` (a public route, so that a client without a
/// token learns that it needs one without an error): `Ok(None)` when it carries no token,
/// or the server asks for none; a refusal for a token that is unknown or revoked.
pub(crate) async fn caller(
    state: &ServerState,
    headers: &axum::http::HeaderMap,
) -> Result<Option<Caller>, Response> {
    if !state.auth || !headers.contains_key(header::AUTHORIZATION) {
        return Ok(None);
    }
    let (record, _) = authenticate(state, headers).await?;
    let granted = record
        .scopes
        .iter()
        .filter_map(|s| s.parse::<Scope>().ok())
        .max();
    Ok(Some(Caller {
        token: record.id,
        name: record.name,
        scopes: implied(granted),
    }))
}

/// Checks the request's bearer token and its scope, when the server asks for tokens.
pub(crate) async fn check(
    State(state): State<ServerState>,
    mut request: Request,
    next: Next,
) -> Response {
    if !state.auth {
        return next.run(request).await;
    }
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    if public(&route) {
        return next.run(request).await;
    }
    let (record, hash) = match authenticate(&state, request.headers()).await {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let needs = needed(request.method(), &route);
    let granted = record
        .scopes
        .iter()
        .filter_map(|s| s.parse::<Scope>().ok())
        .max();
    if granted.is_none_or(|g| g < needs) {
        return Problem::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Forbidden",
            format!(
                "token {} may not do this: it needs the {} scope",
                record.id,
                needs.as_str()
            ),
        )
        .into_response();
    }
    request.extensions_mut().insert(Authenticated { hash });
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_stored_by_hash_only() {
        let a = issue("ci", &[Scope::Write, Scope::Read], Timestamp(1)).unwrap();
        let b = issue("ci", &[Scope::Read], Timestamp(1)).unwrap();
        assert_ne!(a.token, b.token);
        assert!(a.token.starts_with(&format!("rt_{}_", a.record.id)));
        assert_eq!(a.record.hash, hash(&a.token));
        assert!(!a.record.hash.contains(&a.token));
        assert_eq!(a.record.scopes, vec!["read", "write"]);
        assert!(issue("", &[Scope::Read], Timestamp(1)).is_err());
        assert!(issue("x", &[], Timestamp(1)).is_err());
    }

    #[test]
    fn routes_need_the_scope_of_what_they_change() {
        assert_eq!(needed(&Method::GET, "/v1/queues"), Scope::Read);
        assert_eq!(needed(&Method::POST, "/v1/instances"), Scope::Write);
        assert_eq!(needed(&Method::POST, "/v1/events/query"), Scope::Read);
        assert_eq!(needed(&Method::POST, "/v1/workflows/validate"), Scope::Read);
        assert_eq!(needed(&Method::POST, "/v1/workflows"), Scope::Write);
        assert_eq!(
            needed(&Method::DELETE, "/v1/workflows/{namespace}/{name}"),
            Scope::Write
        );
        assert_eq!(
            needed(&Method::POST, "/v1/queues/{name}/pause"),
            Scope::Admin
        );
        assert_eq!(
            needed(&Method::POST, "/v1/tasks/{id}/discard"),
            Scope::Admin
        );
        assert_eq!(needed(&Method::POST, "/v1/tasks/{id}/retry"), Scope::Write);
        assert!("root".parse::<Scope>().is_err());
        assert!(Scope::Admin > Scope::Write && Scope::Write > Scope::Read);
    }
}
