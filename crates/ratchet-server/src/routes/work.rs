//! `/v1/workers/{worker}/…`: the protocol of workers in other processes, which need only this
//! server's address and a token. A worker claims attempts of standalone tasks and of
//! orchestrations' activities (long-polling when none is ready), renews their leases while
//! it runs them, and reports how each ended; a failure is retried as the task's own policy
//! says. Leases, fences and attempts are those of in-process workers: a worker that stops
//! answering loses its attempts to others when their leases run out, and its late reports are
//! refused.

use axum::extract::State;
use axum::{Extension, Json};
use ratchet::{Fence, TaskId};
use ratchet_api::{
    lease_keys, Api as _, ClaimBody, Claimed, CompleteBody, HeartbeatBody, LeaseHeld, Leases,
    ReleaseBody, Released, ReportedAll,
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::WorkerQueues;
use crate::extract::{JsonBody, PathParam};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(claim))
        .routes(routes!(heartbeat))
        .routes(routes!(complete))
        .routes(routes!(release))
}

/// Claims attempts for a worker: ready ones at once, else the first that become ready within
/// `wait_ms`.
#[utoipa::path(
    post,
    path = "/v1/workers/{worker}/claim",
    tag = "workers",
    operation_id = "workers_claim",
    params(("worker" = String, Path, description = "The worker: one name per worker process")),
    request_body = ClaimBody,
    responses(
        (status = 200, description = "The attempts leased to the worker (none when nothing became ready)", body = Claimed),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 429, description = "Too many requests held open; `limit` says how many", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn claim(
    State(state): State<ServerState>,
    PathParam(worker): PathParam<String>,
    scoped: Option<Extension<WorkerQueues>>,
    held: Held,
    JsonBody(body): JsonBody<ClaimBody>,
) -> Result<Json<Claimed>, Problem> {
    if let Some(Extension(queues)) = &scoped {
        for q in &body.queues {
            queues.allow(&q.queue)?;
        }
        if body.activities > 0 {
            queues.allow(ratchet::ACTIVITY_QUEUE)?;
        }
    }
    let wait = super::wait_time(Some(body.wait_ms.unwrap_or(0)), &state)?;
    let body = ClaimBody {
        wait_ms: Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
        ..body
    };
    let claimed = ratchet_api::worker_claim(&state.client, &worker, &body, held.ended()).await?;
    Ok(Json(claimed))
}

/// Renews the leases of attempts a worker runs; says of each whether it holds, was lost, or
/// should stop because a client cancelled its task.
#[utoipa::path(
    post,
    path = "/v1/workers/{worker}/heartbeat",
    tag = "workers",
    operation_id = "workers_heartbeat",
    params(("worker" = String, Path, description = "The worker")),
    request_body = HeartbeatBody,
    responses(
        (status = 200, description = "Each lease as it stands", body = Leases),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn heartbeat(
    State(state): State<ServerState>,
    PathParam(worker): PathParam<String>,
    scoped: Option<Extension<WorkerQueues>>,
    JsonBody(body): JsonBody<HeartbeatBody>,
) -> Result<Json<Leases>, Problem> {
    leases(&state, scoped, &body.tasks).await?;
    Ok(Json(state.api.workers_heartbeat(&worker, &body).await?))
}

/// Reports how attempts ended, in one commit: each applied, or refused when its lease was
/// lost.
#[utoipa::path(
    post,
    path = "/v1/workers/{worker}/complete",
    tag = "workers",
    operation_id = "workers_complete",
    params(("worker" = String, Path, description = "The worker")),
    request_body = CompleteBody,
    responses(
        (status = 200, description = "Each report's result", body = ReportedAll),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn complete(
    State(state): State<ServerState>,
    PathParam(_worker): PathParam<String>,
    scoped: Option<Extension<WorkerQueues>>,
    JsonBody(body): JsonBody<CompleteBody>,
) -> Result<Json<ReportedAll>, Problem> {
    at_most(&state, body.results.len(), "results")?;
    let results = body.to_results()?;
    let tasks: Vec<(TaskId, Fence)> = results.iter().map(|r| (r.id, r.fence)).collect();
    within(&state, scoped, &tasks).await?;
    Ok(Json(
        ratchet_api::worker_complete(&state.client, results).await?,
    ))
}

/// Gives attempts a worker will not run back to their queues at once (a worker stopping);
/// they count no attempt.
#[utoipa::path(
    post,
    path = "/v1/workers/{worker}/release",
    tag = "workers",
    operation_id = "workers_release",
    params(("worker" = String, Path, description = "The worker")),
    request_body = ReleaseBody,
    responses(
        (status = 200, description = "Given back", body = Released),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn release(
    State(state): State<ServerState>,
    PathParam(worker): PathParam<String>,
    scoped: Option<Extension<WorkerQueues>>,
    JsonBody(body): JsonBody<ReleaseBody>,
) -> Result<Json<Released>, Problem> {
    leases(&state, scoped, &body.tasks).await?;
    Ok(Json(state.api.workers_release(&worker, &body).await?))
}

/// Refuses (413) more than the server's batch limit of `what`.
fn at_most(state: &ServerState, len: usize, what: &str) -> Result<(), Problem> {
    let max = state.limits.max_batch;
    if len > max {
        return Err(Problem::too_large(
            format!("{len} {what}; at most {max} are allowed"),
            max as u64,
        )
        .field(what));
    }
    Ok(())
}

/// The leases a request names, checked: at most the batch limit, and of the token's queues.
async fn leases(
    state: &ServerState,
    scoped: Option<Extension<WorkerQueues>>,
    held: &[LeaseHeld],
) -> Result<Vec<(TaskId, Fence)>, Problem> {
    at_most(state, held.len(), "tasks")?;
    let tasks = lease_keys(held);
    within(state, scoped, &tasks).await?;
    Ok(tasks)
}

/// Refuses (403), for a token that may work only some queues, attempts of any other queue.
async fn within(
    state: &ServerState,
    scoped: Option<Extension<WorkerQueues>>,
    tasks: &[(TaskId, Fence)],
) -> Result<(), Problem> {
    let Some(Extension(queues)) = scoped else {
        return Ok(());
    };
    for queue in state.client.remote_queues(tasks).await?.iter().flatten() {
        queues.allow(queue)?;
    }
    Ok(())
}
