//! `/v1/workers/{worker}/…`: the protocol of workers in other processes, which need only this
//! server's address and a token. A worker claims attempts of standalone tasks and of
//! orchestrations' activities (long-polling when none is ready), renews their leases while
//! it runs them, and reports how each ended; a failure is retried as the task's own policy
//! says. Leases, fences and attempts are those of in-process workers: a worker that stops
//! answering loses its attempts to others when their leases run out, and its late reports are
//! refused.

use std::time::Duration;

use axum::extract::State;
use axum::{Extension, Json};
use ratchet::{
    ClaimedTask, CompletionResult, ErrorInfo, Fence, LeaseState, RemoteClaim, RemoteOutcome,
    RemoteResult, TaskId,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::WorkerQueues;
use crate::extract::{JsonBody, PathParam};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;
use crate::time::rfc3339;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(claim))
        .routes(routes!(heartbeat))
        .routes(routes!(complete))
        .routes(routes!(release))
}

/// The longest error kind and message a worker may report, in bytes.
const MAX_KIND: usize = 255;
const MAX_MESSAGE: usize = 32 * 1024;

/// A queue to claim from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct QueueLimit {
    queue: String,
    /// At most this many of its tasks.
    #[schema(maximum = 1000)]
    limit: u32,
}

/// What a worker asks for.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ClaimBody {
    /// Queues of standalone tasks, each with the most to take.
    #[serde(default)]
    queues: Vec<QueueLimit>,
    /// The most activity attempts of orchestrations to take (default 0).
    #[serde(default)]
    #[schema(maximum = 1000)]
    activities: u32,
    /// The task and activity names the worker runs (1 to 1,000).
    #[schema(min_items = 1, max_items = 1000)]
    names: Vec<String>,
    /// How long the leases last unless renewed: 1,000 to 3,600,000 ms (default 30,000).
    #[schema(minimum = 1000, maximum = 3600000)]
    lease_ms: Option<u64>,
    /// How long to wait when nothing is ready (default 0; at most the server's longest wait).
    #[schema(maximum = 60000)]
    wait_ms: Option<u64>,
}

/// The orchestration step an activity attempt serves.
#[derive(Debug, Serialize, ToSchema)]
struct StepView {
    instance: String,
    execution: u32,
    step: u32,
}

/// An attempt handed to a worker: run it, renew its lease while it runs, report its end with
/// its `id` and `fence`.
#[derive(Debug, Serialize, ToSchema)]
struct AttemptView {
    id: i64,
    /// The lease's fence: a report with an older one is refused.
    fence: i64,
    queue: String,
    name: String,
    input: Value,
    /// This attempt's number, from 1.
    attempt: u32,
    max_attempts: u32,
    /// How long the attempt may run before it counts as failed (`Timeout`).
    timeout_ms: u64,
    metadata: Option<Value>,
    /// For an activity, the step it serves; absent for a standalone task.
    #[serde(skip_serializing_if = "Option::is_none")]
    activity: Option<StepView>,
    /// When the lease runs out unless renewed.
    lease_until: String,
}

#[derive(Debug, Serialize, ToSchema)]
struct Claimed {
    tasks: Vec<AttemptView>,
}

fn lease_of(ms: Option<u64>) -> Result<Duration, Problem> {
    let ms = ms.unwrap_or(30_000);
    if !(1_000..=3_600_000).contains(&ms) {
        return Err(
            Problem::invalid(format!("a lease is 1,000 to 3,600,000 ms, got {ms}"))
                .field("lease_ms"),
        );
    }
    Ok(Duration::from_millis(ms))
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
    let lease = lease_of(body.lease_ms)?;
    let wait = super::wait_time(Some(body.wait_ms.unwrap_or(0)), &state)?;
    let claim = RemoteClaim {
        worker,
        queues: body
            .queues
            .into_iter()
            .map(|q| (q.queue, q.limit))
            .collect(),
        activities: body.activities,
        names: body.names,
        lease,
        wait,
    };
    let claimed = state.client.remote_claim(claim, held.ended()).await?;
    let until = rfc3339(ratchet::Timestamp::now().plus(lease));
    Ok(Json(Claimed {
        tasks: claimed
            .into_iter()
            .map(|t| view(t, until.clone()))
            .collect(),
    }))
}

fn view(t: ClaimedTask, lease_until: String) -> AttemptView {
    AttemptView {
        id: t.id.0,
        fence: t.fence.0,
        queue: t.queue,
        name: t.name,
        input: t.input,
        attempt: t.attempt,
        max_attempts: t.options.retry.max_attempts,
        timeout_ms: t.options.start_to_close_ms,
        metadata: t.metadata,
        activity: t.owner.map(|o| StepView {
            instance: o.instance,
            execution: o.execution,
            step: o.seq,
        }),
        lease_until,
    }
}

/// An attempt's lease, as a worker holds it.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct LeaseHeld {
    id: i64,
    fence: i64,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct HeartbeatBody {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    tasks: Vec<LeaseHeld>,
    /// For how long more: 1,000 to 3,600,000 ms (default 30,000).
    #[schema(minimum = 1000, maximum = 3600000)]
    lease_ms: Option<u64>,
}

/// A lease after a heartbeat.
#[derive(Debug, Serialize, ToSchema)]
struct LeaseView {
    id: i64,
    fence: i64,
    /// `kept`; `cancel` (kept, and a client asked to cancel the task: stop it and report
    /// `cancelled`); or `lost` (taken over, or the task is gone: stop, its report would be
    /// refused).
    lease: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
struct Leases {
    tasks: Vec<LeaseView>,
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
    let lease = lease_of(body.lease_ms)?;
    let tasks = leases(&state, scoped, &body.tasks).await?;
    let states = state.client.remote_heartbeat(&worker, tasks, lease).await?;
    Ok(Json(Leases {
        tasks: body
            .tasks
            .iter()
            .zip(states)
            .map(|(t, s)| LeaseView {
                id: t.id,
                fence: t.fence,
                lease: match s {
                    LeaseState::Kept => "kept",
                    LeaseState::CancelRequested => "cancel",
                    _ => "lost",
                },
            })
            .collect(),
    }))
}

/// An error a worker reports.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ErrorBody {
    /// A short machine-readable kind, matched against the retry policy's `non_retryable`.
    kind: String,
    message: String,
    details: Option<Value>,
}

/// One attempt's end.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ResultBody {
    id: i64,
    fence: i64,
    /// `completed` (with `output`); `failed` (with `error`, tried again as the task's retry
    /// policy says unless `retryable` is false); `snoozed` (run again after `delay_ms`, the
    /// attempt not counted); `cancelled` (stopped because a heartbeat said so).
    outcome: String,
    output: Option<Value>,
    error: Option<ErrorBody>,
    retryable: Option<bool>,
    delay_ms: Option<u64>,
}

impl ResultBody {
    /// The outcome it reports, checked; `n` is its place in the request, for the field.
    fn outcome(self, n: usize) -> Result<RemoteOutcome, Problem> {
        let field = |name: &str| format!("results[{n}].{name}");
        match self.outcome.as_str() {
            "completed" => Ok(RemoteOutcome::Completed(self.output.unwrap_or(Value::Null))),
            "failed" => {
                let Some(error) = self.error else {
                    return Err(Problem::invalid("a failed attempt reports its error")
                        .field(field("error")));
                };
                if error.kind.is_empty() || error.kind.len() > MAX_KIND {
                    return Err(Problem::invalid(format!(
                        "an error's kind is 1 to {MAX_KIND} bytes"
                    ))
                    .field(field("error.kind")));
                }
                if error.message.len() > MAX_MESSAGE {
                    return Err(Problem::invalid(format!(
                        "an error's message is at most {MAX_MESSAGE} bytes"
                    ))
                    .field(field("error.message")));
                }
                // Details are kept in the task's row and an activity's step, read back with
                // more around them: as shallow and small as any payload.
                if let Some(details) = &error.details {
                    let at = field("error.details");
                    ratchet::limits::check_json_depth(&at, details)
                        .map_err(|e| Problem::invalid(e.to_string()).field(at.clone()))?;
                    if serde_json::to_vec(details).map_or(0, |b| b.len()) > MAX_MESSAGE {
                        return Err(Problem::invalid(format!(
                            "an error's details are at most {MAX_MESSAGE} bytes"
                        ))
                        .field(at));
                    }
                }
                let mut info = ErrorInfo::new(error.kind, error.message);
                info.details = error.details;
                Ok(RemoteOutcome::Failed {
                    error: info,
                    retryable: self.retryable.unwrap_or(true),
                })
            }
            "snoozed" => match self.delay_ms {
                Some(ms) if ms <= MAX_SNOOZE_MS => {
                    Ok(RemoteOutcome::Snooze(Duration::from_millis(ms)))
                }
                _ => Err(Problem::invalid(format!(
                    "a snoozed attempt gives delay_ms, at most {MAX_SNOOZE_MS}"
                ))
                .field(field("delay_ms"))),
            },
            "cancelled" => Ok(RemoteOutcome::Cancelled),
            other => Err(Problem::invalid(format!(
                "unknown outcome {other:?} (expected completed, failed, snoozed or cancelled)"
            ))
            .field(field("outcome"))),
        }
    }
}

/// The longest snooze: a year.
const MAX_SNOOZE_MS: u64 = 365 * 24 * 3_600_000;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CompleteBody {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    results: Vec<ResultBody>,
}

/// Whether an end was written.
#[derive(Debug, Serialize, ToSchema)]
struct Reported {
    id: i64,
    fence: i64,
    /// `applied`, or `stale`: the lease was lost (taken over, or the task is gone) and the
    /// report was dropped.
    result: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
struct ReportedAll {
    results: Vec<Reported>,
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
    let mut results = Vec::with_capacity(body.results.len());
    let mut keys = Vec::with_capacity(body.results.len());
    for (n, r) in body.results.into_iter().enumerate() {
        keys.push((r.id, r.fence));
        let (id, fence) = (TaskId(r.id), Fence(r.fence));
        results.push(RemoteResult {
            id,
            fence,
            outcome: r.outcome(n)?,
        });
    }
    let tasks: Vec<(TaskId, Fence)> = results.iter().map(|r| (r.id, r.fence)).collect();
    within(&state, scoped, &tasks).await?;
    let applied = state.client.remote_complete(results).await?;
    Ok(Json(ReportedAll {
        results: keys
            .into_iter()
            .zip(applied)
            .map(|((id, fence), result)| Reported {
                id,
                fence,
                result: match result {
                    CompletionResult::Applied => "applied",
                    _ => "stale",
                },
            })
            .collect(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    tasks: Vec<LeaseHeld>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Released {
    released: usize,
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
    let tasks = leases(&state, scoped, &body.tasks).await?;
    let released = tasks.len();
    state.client.remote_release(&worker, tasks).await?;
    Ok(Json(Released { released }))
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
    let tasks: Vec<(TaskId, Fence)> = held
        .iter()
        .map(|t| (TaskId(t.id), Fence(t.fence)))
        .collect();
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
