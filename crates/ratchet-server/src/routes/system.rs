//! `/healthz`, `/readyz`, and `/v1/registry`: what this server's runtime runs.

use axum::extract::State;
use axum::Json;
use ratchet_api::{Api as _, Registry};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready))
        .routes(routes!(registry))
}

/// Alive: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "system", operation_id = "system_health", responses((status = 200, description = "Alive", body = String)))]
async fn health() -> &'static str {
    "ok"
}

/// Ready when the database answers.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "system",
    operation_id = "system_ready",
    responses(
        (status = 200, description = "The database answers", body = String),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn ready(State(state): State<ServerState>) -> Result<String, Problem> {
    Ok(state.api.system_ready().await?)
}

#[utoipa::path(
    get,
    path = "/v1/registry",
    tag = "system",
    operation_id = "system_registry",
    responses(
        (status = 200, description = "What this server's runtime runs", body = Registry),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn registry(State(state): State<ServerState>) -> Result<Json<Registry>, Problem> {
    Ok(Json(state.api.system_registry().await?))
}
