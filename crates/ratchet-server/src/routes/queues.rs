//! `/v1/queues`: list with depths by state, pause, resume, limits.

use axum::extract::State;
use axum::Json;
use ratchet::{QueueLimits, QueueStats, TaskState};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::text::QueueName;
use crate::extract::{JsonBody, PathParam};
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(limit))
}

/// A queue's limits: absent means none.
#[derive(Debug, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct Limits {
    #[serde(default)]
    #[schema(exclusive_minimum = 0.0)]
    rate_per_second: Option<f64>,
    #[serde(default)]
    #[schema(minimum = 1)]
    burst: Option<u32>,
    #[serde(default)]
    #[schema(minimum = 1)]
    concurrency: Option<u32>,
}

/// A queue as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
struct QueueView {
    name: String,
    paused: bool,
    limits: Limits,
    /// Tasks waiting to run: scheduled, available and retrying.
    depth: u64,
    /// Tasks by state.
    counts: std::collections::BTreeMap<String, u64>,
    /// Since when the longest-waiting available task has been ready (RFC 3339); `null` when
    /// none waits.
    oldest_available: Option<String>,
}

impl From<QueueStats> for QueueView {
    fn from(q: QueueStats) -> Self {
        Self {
            depth: q.depth(),
            counts: TaskState::ALL
                .iter()
                .map(|s| (s.to_string().to_lowercase(), q.count(*s)))
                .collect(),
            oldest_available: q.oldest_available.map(crate::time::rfc3339),
            name: q.queue,
            paused: q.paused,
            limits: Limits {
                rate_per_second: q.limits.rate_per_second,
                burst: q.limits.burst,
                concurrency: q.limits.concurrency,
            },
        }
    }
}

#[utoipa::path(
    get,
    path = "/v1/queues",
    tag = "queues",
    operation_id = "queues_list",
    responses(
        (status = 200, description = "Every queue", body = [QueueView]),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn list(State(state): State<ServerState>) -> Result<Json<Vec<QueueView>>, Problem> {
    let queues = state.client.queues().await?;
    Ok(Json(queues.into_iter().map(QueueView::from).collect()))
}

#[derive(Debug, Serialize, ToSchema)]
struct Done {
    queue: String,
}

#[utoipa::path(
    post,
    path = "/v1/queues/{name}/pause",
    tag = "queues",
    operation_id = "queues_pause",
    params(("name" = QueueName, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Paused everywhere", body = Done),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn pause(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
) -> Result<Json<Done>, Problem> {
    state.client.queue_pause(&name).await?;
    Ok(Json(Done { queue: name }))
}

#[utoipa::path(
    post,
    path = "/v1/queues/{name}/resume",
    tag = "queues",
    operation_id = "queues_resume",
    params(("name" = QueueName, Path, description = "Queue name")),
    responses(
        (status = 200, description = "Resumed", body = Done),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn resume(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
) -> Result<Json<Done>, Problem> {
    state.client.queue_resume(&name).await?;
    Ok(Json(Done { queue: name }))
}

/// Replaces the queue's limits; `{}` removes them.
#[utoipa::path(
    put,
    path = "/v1/queues/{name}/limits",
    tag = "queues",
    operation_id = "queues_limit",
    params(("name" = QueueName, Path, description = "Queue name")),
    request_body = Limits,
    responses(
        (status = 200, description = "Limits replaced", body = Done),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn limit(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
    JsonBody(limits): JsonBody<Limits>,
) -> Result<Json<Done>, Problem> {
    let limits = QueueLimits {
        rate_per_second: limits.rate_per_second,
        burst: limits.burst,
        concurrency: limits.concurrency,
    };
    state.client.queue_limit(&name, limits).await?;
    Ok(Json(Done { queue: name }))
}
