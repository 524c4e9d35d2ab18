//! `/v1/queues`: list with depths by state, pause, resume, limits.

use axum::extract::State;
use axum::Json;
use ratchet_api::{Api as _, Done, Limits, QueueView};
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
    Ok(Json(state.api.queues_list().await?))
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
    Ok(Json(state.api.queues_pause(&name).await?))
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
    Ok(Json(state.api.queues_resume(&name).await?))
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
    Ok(Json(state.api.queues_limit(&name, &limits).await?))
}
