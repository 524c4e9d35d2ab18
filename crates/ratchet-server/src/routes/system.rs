//! `/healthz`, `/readyz`, and `/v1/registry`: what this server's runtime runs.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::problem::Problem;
use crate::state::ServerState;

pub(crate) fn routes() -> Router<ServerState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/v1/registry", get(registry))
}

/// Ready when the database answers.
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

#[derive(Debug, Serialize)]
struct Orchestration {
    name: String,
    versions: Vec<u32>,
}

#[derive(Debug, Serialize)]
struct Registry {
    /// False when this server runs no worker (`--no-worker`): then names are not checked here.
    worker: bool,
    orchestrations: Vec<Orchestration>,
    activities: Vec<String>,
    tasks: Vec<String>,
}

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
