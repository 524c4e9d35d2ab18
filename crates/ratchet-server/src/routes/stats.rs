//! `/v1/whoami` and `/v1/stats/throughput`: who is asking, and work over time, for
//! dashboards.

use std::num::NonZeroU32;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ratchet::ThroughputQuery;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{caller, implied, Scope};
use crate::extract::QueryParams;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;
use crate::time::rfc3339;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(whoami))
        .routes(routes!(throughput))
}

#[derive(Debug, Serialize, ToSchema)]
struct WhoAmI {
    /// Whether this server asks for tokens.
    auth: bool,
    /// What the request may do: `read`, `write`, `admin` (every scope when auth is off, none
    /// when the server asks for a token and the request carries none).
    scopes: Vec<String>,
    /// The token's id, when the server asks for tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    /// The token's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

/// What the request's token may do, so a client shows only the actions it may take. Open to
/// requests without a token (they learn that one is needed); an unknown or revoked token
/// gets 401.
#[utoipa::path(
    get,
    path = "/v1/whoami",
    tag = "system",
    operation_id = "system_whoami",
    responses(
        (status = 200, description = "The caller", body = WhoAmI),
        (status = 401, description = "A token is needed, or this one is unknown or revoked", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn whoami(State(state): State<ServerState>, headers: HeaderMap) -> Response {
    let names = |scopes: Vec<Scope>| scopes.iter().map(|s| s.as_str().to_string()).collect();
    let who = match caller(&state, &headers).await {
        Ok(Some(caller)) => WhoAmI {
            auth: true,
            scopes: names(caller.scopes),
            token: Some(caller.token),
            name: Some(caller.name),
        },
        // A server that asks for tokens, asked without one: it may do nothing yet.
        Ok(None) if state.auth => WhoAmI {
            auth: true,
            scopes: Vec::new(),
            token: None,
            name: None,
        },
        Ok(None) => WhoAmI {
            auth: false,
            scopes: names(implied(Some(Scope::Admin))),
            token: None,
            name: None,
        },
        Err(refused) => return refused,
    };
    Json(who).into_response()
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ThroughputParams {
    /// How far back, in minutes, up to a day (default 60). The range ends at the end of the
    /// current bucket.
    #[param(minimum = 1, maximum = 1440)]
    minutes: Option<u32>,
    /// The width of a bucket in seconds, 1 to 3600 (default 60).
    #[param(minimum = 1, maximum = 3600)]
    bucket_seconds: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Throughput {
    /// The first bucket's start (RFC 3339).
    from: String,
    /// The end of the last bucket.
    to: String,
    bucket_seconds: u32,
    /// The buckets where something happened, in order; the others are left out.
    buckets: Vec<ThroughputBucketView>,
}

#[derive(Debug, Serialize, ToSchema)]
struct ThroughputBucketView {
    /// The bucket's start (RFC 3339).
    start: String,
    /// Instances created.
    started: u64,
    /// Instances that finished with an output.
    completed: u64,
    /// Instances that failed.
    failed: u64,
    /// Standalone tasks completed.
    tasks_completed: u64,
    /// Standalone tasks that ran out of attempts (dead letters).
    tasks_failed: u64,
}

/// Instances started, completed and failed and tasks completed and dead per bucket, counted
/// by the database from indexes on the times they count by.
#[utoipa::path(
    get,
    path = "/v1/stats/throughput",
    tag = "system",
    operation_id = "system_throughput",
    params(ThroughputParams),
    responses(
        (status = 200, description = "Counts by bucket", body = Throughput),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn throughput(
    State(state): State<ServerState>,
    QueryParams(p): QueryParams<ThroughputParams>,
) -> Result<Json<Throughput>, Problem> {
    let minutes = p.minutes.unwrap_or(60);
    if !(1..=1440).contains(&minutes) {
        return Err(Problem::invalid("from 1 to 1440 minutes").field("minutes"));
    }
    let bucket_seconds = p.bucket_seconds.unwrap_or(60);
    if !(1..=3600).contains(&bucket_seconds) {
        return Err(Problem::invalid("from 1 to 3600 seconds").field("bucket_seconds"));
    }
    let bucket_ms = i64::from(bucket_seconds) * 1000;
    let now = ratchet::Timestamp::now().as_millis();
    // Buckets on whole multiples of their width, so that two looks a moment apart agree.
    let to = (now / bucket_ms + 1) * bucket_ms;
    let from = to - i64::from(minutes) * 60_000;
    let query = ThroughputQuery {
        from: ratchet::Timestamp(from),
        to: ratchet::Timestamp(to),
        bucket_ms: NonZeroU32::new(bucket_seconds * 1000)
            .ok_or_else(|| Problem::invalid("must be above 0").field("bucket_seconds"))?,
    };
    let buckets = state.client.throughput(query).await?;
    Ok(Json(Throughput {
        from: rfc3339(query.from),
        to: rfc3339(query.to),
        bucket_seconds,
        buckets: buckets
            .into_iter()
            .map(|b| ThroughputBucketView {
                start: rfc3339(b.start),
                started: b.instances_started,
                completed: b.instances_completed,
                failed: b.instances_failed,
                tasks_completed: b.tasks_completed,
                tasks_failed: b.tasks_failed,
            })
            .collect(),
    }))
}
