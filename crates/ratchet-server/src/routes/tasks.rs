//! `/v1/tasks`: enqueue (one or a batch, every task option), get, list, wait, cancel, retry,
//! discard (one or many).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ratchet_api::{
    Acted, ActedOn, Api as _, EnqueueBatch, EnqueueRequest, Enqueued, ManyIds, TaskAct, TaskQuery,
    TaskView, WaitQuery, WriteParams,
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::page_size;
use crate::extract::{JsonBody, PathParam, QueryParams};
use crate::fleet::{self, Kind};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

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
    let enqueued = state.api.tasks_enqueue(&req, params).await?;
    let status = if enqueued.duplicate {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(enqueued)).into_response())
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
    let enqueued = state.api.tasks_enqueue_batch(&batch, params).await?;
    Ok((StatusCode::CREATED, Json(enqueued)).into_response())
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
    Ok(Json(state.api.tasks_show(id).await?))
}

/// Newest first (by id), a page at a time with `before`.
#[utoipa::path(
    get,
    path = "/v1/tasks",
    tag = "tasks",
    operation_id = "tasks_list",
    params(TaskQuery),
    responses(
        (status = 200, description = "Newest first", body = [TaskView]),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn list(
    State(state): State<ServerState>,
    QueryParams(query): QueryParams<TaskQuery>,
) -> Result<Json<Vec<TaskView>>, Problem> {
    let limit = page_size(query.limit, 100, &state)?;
    let query = TaskQuery {
        limit: Some(limit),
        ..query
    };
    Ok(Json(state.api.tasks_list(&query).await?))
}

/// Answers when the task finishes, or with its current state at the timeout.
#[utoipa::path(
    get,
    path = "/v1/tasks/{id}/wait",
    tag = "tasks",
    operation_id = "tasks_wait",
    params(("id" = i64, Path, description = "Task id"), WaitQuery),
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
    QueryParams(params): QueryParams<WaitQuery>,
    held: Held,
) -> Result<Json<TaskView>, Problem> {
    let timeout = super::wait_time(params.timeout_ms, &state)?;
    let query = WaitQuery {
        timeout_ms: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
    };
    // A stop (or a revoked token) answers as a timeout does: the task as it stands.
    let task = tokio::select! {
        waited = state.api.tasks_wait(id, query) => waited?,
        () = held.ended() => state.api.tasks_show(id).await?,
    };
    Ok(Json(task))
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
    Ok(Json(state.api.tasks_act(id, TaskAct::Cancel).await?))
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
    Ok(Json(state.api.tasks_act(id, TaskAct::Retry).await?))
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
    Ok(Json(state.api.tasks_act(id, TaskAct::Discard).await?))
}

/// An action on many tasks, one store call: each applies or is refused alone.
async fn act_many(
    state: ServerState,
    ids: ManyIds,
    act: TaskAct,
) -> Result<Json<Vec<ActedOn>>, Problem> {
    let max = state.limits.max_batch;
    if ids.ids.len() > max {
        return Err(Problem::too_large(
            format!("{} ids; at most {max} are allowed", ids.ids.len()),
            max as u64,
        )
        .field("ids"));
    }
    Ok(Json(state.api.tasks_act_many(&ids, act).await?))
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
    act_many(state, body, TaskAct::Cancel).await
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
    act_many(state, body, TaskAct::Retry).await
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
    act_many(state, body, TaskAct::Discard).await
}
