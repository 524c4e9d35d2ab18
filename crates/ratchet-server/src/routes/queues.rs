//! `/v1/queues`: list with depths by state, pause, resume, limits.

use axum::extract::State;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use ratchet::{QueueLimits, QueueStats, TaskState};
use serde::{Deserialize, Serialize};

use crate::extract::{JsonBody, PathParam};
use crate::problem::Problem;
use crate::state::ServerState;

pub(crate) fn routes() -> Router<ServerState> {
    Router::new()
        .route("/v1/queues", get(list))
        .route("/v1/queues/{name}/pause", post(pause))
        .route("/v1/queues/{name}/resume", post(resume))
        .route("/v1/queues/{name}/limits", put(limit))
}

/// A queue's limits: absent means none.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Limits {
    #[serde(default)]
    rate_per_second: Option<f64>,
    #[serde(default)]
    burst: Option<u32>,
    #[serde(default)]
    concurrency: Option<u32>,
}

/// A queue as the API shows it.
#[derive(Debug, Serialize)]
struct QueueView {
    name: String,
    paused: bool,
    limits: Limits,
    /// Tasks waiting to run: scheduled, available and retrying.
    depth: u64,
    /// Tasks by state.
    counts: std::collections::BTreeMap<String, u64>,
}

impl From<QueueStats> for QueueView {
    fn from(q: QueueStats) -> Self {
        Self {
            depth: q.depth(),
            counts: TaskState::ALL
                .iter()
                .map(|s| (s.to_string().to_lowercase(), q.count(*s)))
                .collect(),
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

async fn list(State(state): State<ServerState>) -> Result<Json<Vec<QueueView>>, Problem> {
    let queues = state.client.queues().await?;
    Ok(Json(queues.into_iter().map(QueueView::from).collect()))
}

#[derive(Debug, Serialize)]
struct Done {
    queue: String,
}

async fn pause(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
) -> Result<Json<Done>, Problem> {
    state.client.queue_pause(&name).await?;
    Ok(Json(Done { queue: name }))
}

async fn resume(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
) -> Result<Json<Done>, Problem> {
    state.client.queue_resume(&name).await?;
    Ok(Json(Done { queue: name }))
}

/// Replaces the queue's limits; `{}` removes them.
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
