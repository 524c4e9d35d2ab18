//! Bearer tokens with scopes. A token is `rt_<id>_<secret>`; the store keeps its SHA-256,
//! never the token, so a leaked database gives no usable token. Each request's token is looked
//! up by its hash (one indexed read, kept for a second), so a revoked token is refused
//! within a second on every server.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ratchet::{NewToken, Timestamp, TokenRecord};
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

/// What a token grants: a scope over the API, or the work of one queue.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Grant {
    /// A scope over the whole API (`read`, `write`, `admin`).
    Scope(Scope),
    /// `worker:<queue>`: claiming, renewing and reporting the attempts of that queue through
    /// `/v1/workers/{worker}/…`, and nothing else (`worker:$activities` for activity
    /// attempts of orchestrations).
    Worker(String),
}

impl Grant {
    /// Its name as stored: `read`, or `worker:mail`.
    pub fn name(&self) -> String {
        match self {
            Self::Scope(s) => s.as_str().to_string(),
            Self::Worker(queue) => format!("{WORKER_PREFIX}{queue}"),
        }
    }
}

const WORKER_PREFIX: &str = "worker:";

impl std::str::FromStr for Grant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        match s.strip_prefix(WORKER_PREFIX) {
            Some(ratchet::ACTIVITY_QUEUE) => Ok(Self::Worker(ratchet::ACTIVITY_QUEUE.to_string())),
            Some(queue) => ratchet::validate_queue_name(queue)
                .map(|()| Self::Worker(queue.to_string()))
                .map_err(|e| format!("scope {s:?}: {e}")),
            None => s
                .parse()
                .map(Self::Scope)
                .map_err(|e: String| format!("{e}, or worker:<queue>")),
        }
    }
}

/// The widest scope of `scopes` as a token stores them, and the queues it may work.
pub(crate) fn grants(scopes: &[String]) -> (Option<Scope>, Vec<String>) {
    let mut widest = None;
    let mut queues = Vec::new();
    for grant in scopes.iter().filter_map(|s| s.parse::<Grant>().ok()) {
        match grant {
            Grant::Scope(s) => widest = widest.max(Some(s)),
            Grant::Worker(queue) => queues.push(queue),
        }
    }
    (widest, queues)
}

/// The queues a token of `worker:<queue>` grants only may work: set on its requests.
#[derive(Clone, Debug)]
pub(crate) struct WorkerQueues(pub(crate) Vec<String>);

impl WorkerQueues {
    /// Refuses (403) work of a queue outside the token's.
    pub(crate) fn allow(&self, queue: &str) -> Result<(), Problem> {
        if self.0.iter().any(|q| q == queue) {
            return Ok(());
        }
        Err(Problem::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Forbidden",
            format!(
                "this token may work only the queues {}, not {queue:?}",
                self.0.join(", ")
            ),
        ))
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

/// Makes a token named `name` with `grants`, from the operating system's random source.
///
/// # Errors
///
/// [`TokenError`] for an empty or overlong name, no scope, or no random source.
pub fn issue(name: &str, grants: &[Grant], now: Timestamp) -> Result<IssuedToken, TokenError> {
    if let Err(e) = ratchet::limits::check_identifier("name", name.trim(), 200) {
        return Err(TokenError(format!("the token's name {}", e.rule)));
    }
    if grants.is_empty() {
        return Err(TokenError("a token needs at least one scope".into()));
    }
    let mut id = [0u8; 6];
    let mut secret = [0u8; 32];
    getrandom::fill(&mut id).map_err(|e| TokenError(e.to_string()))?;
    getrandom::fill(&mut secret).map_err(|e| TokenError(e.to_string()))?;
    let id = hex(&id);
    let token = format!("rt_{id}_{}", URL_SAFE_NO_PAD.encode(secret));
    let mut grants: Vec<Grant> = grants.to_vec();
    grants.sort();
    grants.dedup();
    Ok(IssuedToken {
        record: NewToken {
            id,
            name: name.trim().to_string(),
            hash: hash(&token),
            scopes: grants.iter().map(Grant::name).collect(),
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

/// How long a token read from the database is taken as it was read: at most one read per
/// token per this, however many requests and streams it makes, so a revocation holds on every
/// server within it.
const VALID_FOR: Duration = Duration::from_secs(1);

/// The most tokens kept; past it, those read longest ago go first.
const CACHED_TOKENS: usize = 1024;

/// Tokens read lately, by hash, with when. Only tokens that let requests in are kept: an
/// unknown token is read again each time (one made meanwhile works at once), and a revoked
/// one leaves.
#[derive(Debug, Default)]
pub(crate) struct TokenCache(std::sync::Mutex<HashMap<String, (TokenRecord, Instant)>>);

impl TokenCache {
    /// The token of `hash` when it was read less than [`VALID_FOR`] before `now`.
    fn fresh(&self, hash: &str, now: Instant) -> Option<TokenRecord> {
        self.lock()
            .get(hash)
            .filter(|(_, at)| now.saturating_duration_since(*at) < VALID_FOR)
            .map(|(record, _)| record.clone())
    }

    /// Keeps what a read of `hash` found at `now`: a token that lets requests in, or none.
    fn remember(&self, hash: &str, found: Option<&TokenRecord>, now: Instant) {
        let mut seen = self.lock();
        match found.filter(|r| r.revoked_at.is_none()) {
            Some(record) => {
                if seen.len() >= CACHED_TOKENS && !seen.contains_key(hash) {
                    seen.retain(|_, (_, at)| now.saturating_duration_since(*at) < VALID_FOR);
                    if seen.len() >= CACHED_TOKENS {
                        // All fresh: many tokens at once. The oldest goes.
                        let oldest = seen.iter().min_by_key(|(_, (_, at))| *at);
                        if let Some(key) = oldest.map(|(key, _)| key.clone()) {
                            seen.remove(&key);
                        }
                    }
                }
                seen.insert(hash.to_string(), (record.clone(), now));
            }
            None => {
                seen.remove(hash);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (TokenRecord, Instant)>> {
        // A panic elsewhere while it was held leaves a map of records, still good to read.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The token of `hash`, from the cache when read less than [`VALID_FOR`] ago, else from the
/// store.
async fn find(state: &ServerState, hash: &str) -> Result<Option<TokenRecord>, ratchet::StoreError> {
    if let Some(record) = state.tokens.fresh(hash, Instant::now()) {
        return Ok(Some(record));
    }
    let found = state.client.store().token_find(hash).await?;
    state.tokens.remember(hash, found.as_ref(), Instant::now());
    Ok(found)
}

/// Whether the token of `hash` still lets requests in: false once it is revoked or gone. A
/// database out of reach keeps it valid (the next check tries again).
pub(crate) async fn still_valid(state: &ServerState, hash: &str) -> bool {
    match find(state, hash).await {
        Ok(Some(record)) => record.revoked_at.is_none(),
        Ok(None) => false,
        Err(e) => {
            tracing::warn!(error = %e, "checking a token again failed; keeping its requests");
            true
        }
    }
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
    match find(state, &hash).await {
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
    let (granted, _) = grants(&record.scopes);
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
    let (granted, queues) = grants(&record.scopes);
    if granted.is_none() && !queues.is_empty() {
        // A worker's token: the worker routes, for its queues (which they check), only.
        if !route.starts_with("/v1/workers/{worker}/") {
            return Problem::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "Forbidden",
                format!(
                    "token {} may only claim and report the work of queues {}",
                    record.id,
                    queues.join(", ")
                ),
            )
            .into_response();
        }
        request.extensions_mut().insert(WorkerQueues(queues));
        request.extensions_mut().insert(Authenticated { hash });
        return next.run(request).await;
    }
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
        let a = issue(
            "ci",
            &[Grant::Scope(Scope::Write), Grant::Scope(Scope::Read)],
            Timestamp(1),
        )
        .unwrap();
        let b = issue("ci", &[Grant::Scope(Scope::Read)], Timestamp(1)).unwrap();
        assert_ne!(a.token, b.token);
        assert!(a.token.starts_with(&format!("rt_{}_", a.record.id)));
        assert_eq!(a.record.hash, hash(&a.token));
        assert!(!a.record.hash.contains(&a.token));
        assert_eq!(a.record.scopes, vec!["read", "write"]);
        assert!(issue("", &[Grant::Scope(Scope::Read)], Timestamp(1)).is_err());
        let w: Vec<Grant> = ["worker:mail", "worker:$activities", "read"]
            .iter()
            .map(|g| g.parse().unwrap())
            .collect();
        let worker = issue("w", &w, Timestamp(1)).unwrap();
        assert_eq!(
            worker.record.scopes,
            vec!["read", "worker:$activities", "worker:mail"]
        );
        assert_eq!(
            grants(&worker.record.scopes),
            (
                Some(Scope::Read),
                vec!["$activities".to_string(), "mail".to_string()]
            )
        );
        assert!("worker:".parse::<Grant>().is_err());
        assert!("worker:$mine".parse::<Grant>().is_err());
        assert!("root".parse::<Grant>().is_err());
        assert!(issue("x", &[], Timestamp(1)).is_err());
    }

    fn record(id: &str, revoked: bool) -> TokenRecord {
        TokenRecord {
            id: id.into(),
            name: "ci".into(),
            scopes: vec!["read".into()],
            created_at: Timestamp(1),
            revoked_at: revoked.then_some(Timestamp(2)),
        }
    }

    #[test]
    fn a_token_read_is_kept_for_a_second_and_only_while_it_lets_requests_in() {
        let cache = TokenCache::default();
        let t0 = Instant::now();
        cache.remember("a", Some(&record("a", false)), t0);
        assert_eq!(cache.fresh("a", t0).map(|r| r.id), Some("a".into()));
        let almost = t0 + VALID_FOR - Duration::from_millis(1);
        assert!(cache.fresh("a", almost).is_some());
        assert!(
            cache.fresh("a", t0 + VALID_FOR).is_none(),
            "read again after a second"
        );
        // Revoked or gone: read again on every request, until it is made again.
        cache.remember("a", Some(&record("a", true)), t0);
        assert!(cache.fresh("a", t0).is_none());
        cache.remember("b", Some(&record("b", false)), t0);
        cache.remember("b", None, t0);
        assert!(cache.fresh("b", t0).is_none());
        // However many tokens come, the cache holds at most its bound.
        for n in 0..CACHED_TOKENS * 2 {
            let id = format!("t{n}");
            cache.remember(&id, Some(&record(&id, false)), t0);
        }
        assert_eq!(cache.lock().len(), CACHED_TOKENS);
        let last = format!("t{}", CACHED_TOKENS * 2 - 1);
        assert!(cache.fresh(&last, t0).is_some(), "the newest is kept");
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
