//! `/v1/tasks`: enqueue (one or a batch, every task option), get, list, wait, cancel, retry,
//! discard (one or many).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ratchet::{
    EnqueueOutcome, Error, ErrorInfo, RetryPolicy, TaskAction, TaskActionOutcome, TaskFilter,
    TaskId, TaskOptions, TaskRecord, TaskRequest, TaskState,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::text::{Identifier, Key, QueueName, TaskStateList, Time};
use super::{comma_list, page_size, WriteParams};
use crate::extract::{JsonBody, PathParam, QueryParams};
use crate::fleet::{self, Kind};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;
use crate::time::{parse_rfc3339, rfc3339};

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(enqueue, list))
        .routes(routes!(enqueue_batch))
        .routes(routes!(act_many_cancel))
        .routes(routes!(act_many_retry))
        .routes(routes!(act_many_discard))
        .routes(routes!(show))
        .routes(routes!(wait))
        .routes(routes!(cancel))
        .routes(routes!(retry))
        .routes(routes!(discard))
}

/// A task as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TaskView {
    id: i64,
    queue: String,
    name: String,
    #[schema(value_type = String, example = "Available")]
    state: TaskState,
    priority: i16,
    attempt: u32,
    max_attempts: u32,
    input: Value,
    output: Option<Value>,
    #[schema(value_type = Option<Object>)]
    error: Option<ErrorInfo>,
    unique_key: Option<String>,
    metadata: Option<Value>,
    created_at: String,
    /// When it may run next (unfinished tasks).
    run_at: String,
    finished_at: Option<String>,
}

impl From<TaskRecord> for TaskView {
    fn from(t: TaskRecord) -> Self {
        Self {
            id: t.id.0,
            queue: t.queue,
            name: t.name,
            state: t.state,
            priority: t.priority,
            attempt: t.attempt,
            max_attempts: t.max_attempts,
            input: t.input,
            output: t.output,
            error: t.error,
            unique_key: t.unique_key,
            metadata: t.metadata,
            created_at: rfc3339(t.created_at),
            run_at: rfc3339(t.visible_at),
            finished_at: t.finished_at.map(rfc3339),
        }
    }
}

/// Retries of a task; absent fields keep the defaults.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryInput {
    #[schema(minimum = 1)]
    max_attempts: Option<u32>,
    /// At most 100 years.
    #[schema(maximum = 3155760000000_u64)]
    initial_interval_ms: Option<u64>,
    /// At least 1.
    #[schema(minimum = 1.0)]
    backoff: Option<f64>,
    /// At most 100 years.
    #[schema(maximum = 3155760000000_u64)]
    max_interval_ms: Option<u64>,
    non_retryable: Option<Vec<String>>,
    /// From 0 to 1.
    #[schema(minimum = 0.0, maximum = 1.0)]
    jitter: Option<f64>,
}

/// A task's options; absent fields keep the defaults (queue `default`, priority 0, 20
/// attempts, 5 minutes per attempt).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OptionsInput {
    #[schema(value_type = Option<QueueName>)]
    queue: Option<String>,
    #[schema(minimum = -32768, maximum = 32767)]
    priority: Option<i16>,
    /// Not run before this time (RFC 3339).
    #[schema(value_type = Option<Time>)]
    run_at: Option<String>,
    /// At most 100 years.
    #[schema(maximum = 3155760000000_u64)]
    delay_ms: Option<u64>,
    retry: Option<RetryInput>,
    /// At most 100 years.
    #[schema(maximum = 3155760000000_u64)]
    timeout_ms: Option<u64>,
    #[schema(value_type = Option<Key>)]
    unique_key: Option<String>,
    metadata: Option<Value>,
}

impl OptionsInput {
    /// The options, or the problem with one of them (its field relative to `options`).
    pub(crate) fn into_options(self) -> Result<TaskOptions, Problem> {
        let defaults = TaskOptions::default();
        let retry = self.retry.unwrap_or_default();
        let d = defaults.retry.clone();
        let policy = RetryPolicy {
            max_attempts: retry.max_attempts.unwrap_or(d.max_attempts),
            initial_interval_ms: retry.initial_interval_ms.unwrap_or(d.initial_interval_ms),
            backoff: retry.backoff.unwrap_or(d.backoff),
            max_interval_ms: retry.max_interval_ms.unwrap_or(d.max_interval_ms),
            non_retryable: retry.non_retryable.unwrap_or(d.non_retryable),
            jitter: retry.jitter.unwrap_or(d.jitter),
        };
        if policy.max_attempts == 0 {
            return Err(
                Problem::invalid("max_attempts must be at least 1").field("retry.max_attempts")
            );
        }
        if !policy.backoff.is_finite() || policy.backoff < 1.0 {
            return Err(Problem::invalid("backoff must be a number from 1").field("retry.backoff"));
        }
        if !(0.0..=1.0).contains(&policy.jitter) {
            return Err(Problem::invalid("jitter must be from 0 to 1").field("retry.jitter"));
        }
        let run_at = self
            .run_at
            .as_deref()
            .map(parse_rfc3339)
            .transpose()
            .map_err(|e| Problem::invalid(e).field("run_at"))?;
        Ok(TaskOptions {
            queue: self.queue.unwrap_or(defaults.queue),
            priority: self.priority.unwrap_or(defaults.priority),
            run_at,
            delay_ms: self.delay_ms.unwrap_or(defaults.delay_ms),
            retry: policy,
            timeout_ms: self.timeout_ms.unwrap_or(defaults.timeout_ms),
            unique_key: self.unique_key,
            metadata: self.metadata,
        })
    }
}

/// A task to enqueue.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct EnqueueRequest {
    #[schema(value_type = Identifier)]
    name: String,
    #[serde(default)]
    input: Value,
    #[serde(default)]
    options: OptionsInput,
}

/// The outcome of an enqueue.
#[derive(Debug, Serialize, ToSchema)]
struct Enqueued {
    id: i64,
    /// True when an unfinished task held the unique key: nothing was enqueued, and `id` is
    /// that task's.
    duplicate: bool,
}

impl From<EnqueueOutcome> for Enqueued {
    fn from(o: EnqueueOutcome) -> Self {
        Self {
            id: o.id().0,
            duplicate: matches!(o, EnqueueOutcome::Duplicate(_)),
        }
    }
}

/// Checks each request alone (so a refusal names the item at fault), then returns them as
/// the client takes them.
fn requests(
    state: &ServerState,
    items: Vec<EnqueueRequest>,
    prefix: &str,
) -> Result<Vec<TaskRequest>, Problem> {
    let at = |i: usize, field: Option<&str>| {
        let item = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}[{i}]")
        };
        match field {
            Some(f) if item.is_empty() => f.to_string(),
            Some(f) => format!("{item}.{f}"),
            None => item,
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let options = item.options.into_options().map_err(|p| {
                let field = p.field.clone().map(|f| format!("options.{f}"));
                p.field(at(i, field.as_deref()))
            })?;
            let request = TaskRequest {
                name: item.name,
                input: item.input,
                options,
            };
            state
                .client
                .prepare_tasks(vec![request.clone()])
                .map_err(|e| {
                    let p = Problem::from(e);
                    let field = p.field.clone();
                    p.field(at(i, field.as_deref()))
                })?;
            Ok(request)
        })
        .collect()
}

#[utoipa::path(
    post,
    path = "/v1/tasks",
    tag = "tasks",
    operation_id = "tasks_enqueue",
    params(WriteParams),
    request_body = EnqueueRequest,
    responses(
        (status = 201, description = "Enqueued", body = Enqueued), (status = 200, description = "An unfinished task holds the unique key: nothing enqueued", body = Enqueued),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn enqueue(
    State(state): State<ServerState>,
    QueryParams(params): QueryParams<WriteParams>,
    JsonBody(req): JsonBody<EnqueueRequest>,
) -> Result<Response, Problem> {
    let names = [(0, req.name.as_str())];
    fleet::check(&state, Kind::Task, names, params.allow_unknown, |_| {
        "name".to_string()
    })
    .await?;
    let requests = requests(&state, vec![req], "")?;
    let outcome = state
        .client
        .enqueue_many(requests)
        .await?
        .pop()
        .ok_or_else(|| {
            Problem::from(Error::InvalidInput("the store returned no outcome".into()))
        })?;
    let status = if matches!(outcome, EnqueueOutcome::Duplicate(_)) {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(Enqueued::from(outcome))).into_response())
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct EnqueueBatch {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    tasks: Vec<EnqueueRequest>,
}

/// Many tasks in one store round trip, all or nothing.
#[utoipa::path(
    post,
    path = "/v1/tasks/batch",
    tag = "tasks",
    operation_id = "tasks_enqueue_batch",
    params(WriteParams),
    request_body = EnqueueBatch,
    responses(
        (status = 201, description = "Each task's outcome, in order", body = [Enqueued]),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn enqueue_batch(
    State(state): State<ServerState>,
    QueryParams(params): QueryParams<WriteParams>,
    JsonBody(batch): JsonBody<EnqueueBatch>,
) -> Result<Response, Problem> {
    let max = state.limits.max_batch;
    if batch.tasks.len() > max {
        return Err(Problem::too_large(
            format!(
                "{} tasks in one batch; at most {max} are allowed",
                batch.tasks.len()
            ),
            max as u64,
        )
        .field("tasks"));
    }
    let names = batch.tasks.iter().map(|t| t.name.as_str()).enumerate();
    fleet::check(&state, Kind::Task, names, params.allow_unknown, |i| {
        format!("tasks[{i}].name")
    })
    .await?;
    let requests = requests(&state, batch.tasks, "tasks")?;
    let outcomes = state.client.enqueue_many(requests).await?;
    let body: Vec<Enqueued> = outcomes.into_iter().map(Enqueued::from).collect();
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/tasks/{id}",
    tag = "tasks",
    operation_id = "tasks_show",
    params(("id" = i64, Path, description = "Task id")),
    responses(
        (status = 200, description = "The task", body = TaskView),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn show(
    State(state): State<ServerState>,
    PathParam(id): PathParam<i64>,
) -> Result<Json<TaskView>, Problem> {
    Ok(Json(state.client.task(TaskId(id)).await?.into()))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListParams {
    queue: Option<String>,
    /// States, comma-separated.
    #[param(value_type = Option<TaskStateList>)]
    state: Option<String>,
    name: Option<String>,
    /// 1 to 1,000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// Only tasks with an id below this: the last id of the previous page gives the next
    /// (keyset pagination, as fast deep as shallow).
    before: Option<i64>,
}

/// Newest first (by id), a page at a time with `before`.
#[utoipa::path(
    get,
    path = "/v1/tasks",
    tag = "tasks",
    operation_id = "tasks_list",
    params(ListParams),
    responses(
        (status = 200, description = "Newest first", body = [TaskView]),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn list(
    State(state): State<ServerState>,
    QueryParams(params): QueryParams<ListParams>,
) -> Result<Json<Vec<TaskView>>, Problem> {
    let limit = page_size(params.limit, 100, &state)?;
    let states = comma_list(params.state.as_deref())
        .iter()
        .map(|s| s.parse::<TaskState>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Problem::invalid(e).field("state"))?;
    let filter = TaskFilter {
        queue: params.queue,
        states,
        name: params.name,
        limit: Some(limit),
    };
    let tasks = state
        .client
        .tasks_before(filter, params.before.map(TaskId))
        .await?;
    Ok(Json(tasks.into_iter().map(TaskView::from).collect()))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct WaitParams {
    timeout_ms: Option<u64>,
}

/// Answers when the task finishes, or with its current state at the timeout.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/wait",
    tag = "tasks",
    operation_id = "tasks_wait",
    params(("id" = i64, Path, description = "Task id"), WaitParams),
    responses(
        (status = 200, description = "The task once finished, or as it stands at the timeout", body = TaskView),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 429, description = "Too many requests held open; `limit` says how many", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn wait(
    State(state): State<ServerState>,
    PathParam(id): PathParam<i64>,
    QueryParams(params): QueryParams<WaitParams>,
    held: Held,
) -> Result<Json<TaskView>, Problem> {
    let timeout = super::wait_time(params.timeout_ms, &state)?;
    // A stop (or a revoked token) answers as a timeout does: the task as it stands.
    let waited = tokio::select! {
        waited = state.client.task_wait(TaskId(id), timeout) => waited,
        () = held.ended() => Err(Error::TaskTimeout(id)),
    };
    let record = match waited {
        Ok(record) => record,
        Err(Error::TaskTimeout(_)) => state.client.task(TaskId(id)).await?,
        Err(e) => return Err(e.into()),
    };
    Ok(Json(record.into()))
}

#[derive(Debug, Serialize, ToSchema)]
struct Acted {
    /// `done`, or `requested` for a running task that stops when its worker next hears from
    /// the store.
    outcome: &'static str,
}

#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/cancel",
    tag = "tasks",
    operation_id = "tasks_cancel",
    params(("id" = i64, Path, description = "Task id")),
    responses(
        (status = 200, description = "Cancelled, or asked to stop", body = Acted),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not possible in the current state", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn cancel(
    State(state): State<ServerState>,
    PathParam(id): PathParam<i64>,
) -> Result<Json<Acted>, Problem> {
    let outcome = match state.client.task_cancel(TaskId(id)).await? {
        TaskActionOutcome::Requested => "requested",
        _ => "done",
    };
    Ok(Json(Acted { outcome }))
}

#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/retry",
    tag = "tasks",
    operation_id = "tasks_retry",
    params(("id" = i64, Path, description = "Task id")),
    responses(
        (status = 200, description = "Ready to run again", body = Acted),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not possible in the current state", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn retry(
    State(state): State<ServerState>,
    PathParam(id): PathParam<i64>,
) -> Result<Json<Acted>, Problem> {
    state.client.task_retry(TaskId(id)).await?;
    Ok(Json(Acted { outcome: "done" }))
}

#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/discard",
    tag = "tasks",
    operation_id = "tasks_discard",
    params(("id" = i64, Path, description = "Task id")),
    responses(
        (status = 200, description = "Removed", body = Acted),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not possible in the current state", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn discard(
    State(state): State<ServerState>,
    PathParam(id): PathParam<i64>,
) -> Result<Json<Acted>, Problem> {
    state.client.task_discard(TaskId(id)).await?;
    Ok(Json(Acted { outcome: "done" }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ManyIds {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    ids: Vec<i64>,
}

/// The outcome of an action on one task of many.
#[derive(Debug, Serialize, ToSchema)]
struct ActedOn {
    id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ProblemBody>)]
    problem: Option<Problem>,
}

/// An action on many tasks, one store call: each applies or is refused alone.
async fn act_many(
    state: ServerState,
    ids: Vec<i64>,
    action: TaskAction,
) -> Result<Json<Vec<ActedOn>>, Problem> {
    let max = state.limits.max_batch;
    if ids.len() > max {
        return Err(Problem::too_large(
            format!("{} ids; at most {max} are allowed", ids.len()),
            max as u64,
        )
        .field("ids"));
    }
    let ids: Vec<TaskId> = ids.into_iter().map(TaskId).collect();
    let outcomes = state.client.tasks_act(&ids, action).await?;
    Ok(Json(
        ids.iter()
            .zip(outcomes)
            .map(|(id, outcome)| match outcome {
                Ok(o) => ActedOn {
                    id: id.0,
                    outcome: Some(match o {
                        TaskActionOutcome::Requested => "requested",
                        _ => "done",
                    }),
                    problem: None,
                },
                Err(e) => ActedOn {
                    id: id.0,
                    outcome: None,
                    problem: Some(e.into()),
                },
            })
            .collect(),
    ))
}

#[utoipa::path(
    post,
    path = "/v1/tasks/cancel",
    tag = "tasks",
    operation_id = "tasks_act_many_cancel",
    request_body = ManyIds,
    responses(
        (status = 200, description = "Each task's outcome", body = [ActedOn]),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn act_many_cancel(
    State(state): State<ServerState>,
    JsonBody(body): JsonBody<ManyIds>,
) -> Result<Json<Vec<ActedOn>>, Problem> {
    act_many(state, body.ids, TaskAction::Cancel).await
}

#[utoipa::path(
    post,
    path = "/v1/tasks/retry",
    tag = "tasks",
    operation_id = "tasks_act_many_retry",
    request_body = ManyIds,
    responses(
        (status = 200, description = "Each task's outcome", body = [ActedOn]),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn act_many_retry(
    State(state): State<ServerState>,
    JsonBody(body): JsonBody<ManyIds>,
) -> Result<Json<Vec<ActedOn>>, Problem> {
    act_many(state, body.ids, TaskAction::Retry).await
}

#[utoipa::path(
    post,
    path = "/v1/tasks/discard",
    tag = "tasks",
    operation_id = "tasks_act_many_discard",
    request_body = ManyIds,
    responses(
        (status = 200, description = "Each task's outcome", body = [ActedOn]),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn act_many_discard(
    State(state): State<ServerState>,
    JsonBody(body): JsonBody<ManyIds>,
) -> Result<Json<Vec<ActedOn>>, Problem> {
    act_many(state, body.ids, TaskAction::Discard).await
}
