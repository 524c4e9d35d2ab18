//! `/healthz`, `/readyz`, and `/v1/registry`: what this server's runtime runs.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;
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
async fn ready(State(state): State<ServerState>) -> Result<&'static str, Problem> {
    state.client.store().clock().await.map_err(|e| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
            format!("the database does not answer: {e}"),
        )
    })?;
    Ok("ready")
}

#[derive(Debug, Serialize, ToSchema)]
struct Orchestration {
    name: String,
    versions: Vec<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Registry {
    /// False when this server runs no worker (`--no-worker`): then names are not checked here.
    worker: bool,
    orchestrations: Vec<Orchestration>,
    activities: Vec<String>,
    tasks: Vec<String>,
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
async fn registry(State(state): State<ServerState>) -> Json<Registry> {
    let names = state
        .client
        .registry()
        .map(|r| r.names())
        .unwrap_or_default();
    Json(Registry {
        worker: state.client.registry().is_some(),
        orchestrations: names
            .orchestrations
            .into_iter()
            .map(|(name, versions)| Orchestration { name, versions })
            .collect(),
        activities: names.activities,
        tasks: names.tasks,
    })
}
