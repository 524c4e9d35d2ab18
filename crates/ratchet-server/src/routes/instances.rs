//! `/v1/instances`: start (one or a batch), get, list, history, signal, cancel, terminate,
//! wait.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use ratchet_api::{
    Api as _, BatchItem, HistoryPage, HistoryQuery, InstancePage, InstanceQuery, InstanceView,
    PurgeRequest, Purged, Restarted, SignalRequest, Signalled, StartBatch, StartRequest, Started,
    StopRequest, WaitOutcome, WaitQuery, WriteParams,
};
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::page_size;
use super::text::InstanceId;
use crate::extract::{JsonBody, OptionalJsonBody, PathParam, QueryParams};
use crate::fleet::{self, Kind};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;
use crate::trace::IncomingTrace;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(start, list))
        .routes(routes!(start_batch))
        .routes(routes!(show))
        .routes(routes!(history))
        .routes(routes!(graph))
        .routes(routes!(signal))
        .routes(routes!(cancel))
        .routes(routes!(terminate))
        .routes(routes!(wait))
        .routes(routes!(restart))
        .routes(routes!(purge))
}

#[utoipa::path(
    post,
    path = "/v1/instances",
    tag = "instances",
    operation_id = "instances_start",
    params(WriteParams),
    request_body = StartRequest,
    responses(
        (status = 201, description = "Started (or, with `if_exists: use_existing`, the existing instance)", body = Started),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not possible in the current state", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn start(
    State(state): State<ServerState>,
    trace: Option<Extension<IncomingTrace>>,
    QueryParams(params): QueryParams<WriteParams>,
    JsonBody(req): JsonBody<StartRequest>,
) -> Result<Response, Problem> {
    let names = [(0, req.name.as_str())];
    fleet::check(
        &state,
        Kind::Orchestration,
        names,
        params.allow_unknown,
        |_| "name".to_string(),
    )
    .await?;
    let trace = trace.map(|t| t.0).unwrap_or_default();
    let Started { id } = state.api.start_traced(&req, trace.carried()).await?;
    Ok(created(&format!("/v1/instances/{id}"), Started { id }))
}

/// 201 with a `Location`.
fn created(location: &str, body: impl Serialize) -> Response {
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    if let Ok(value) = location.parse() {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// Many starts: every item is checked first, and one bad item refuses the whole batch
/// before anything is written; the starts then run concurrently, so the client merges them
/// into as few store calls as it can, and each reports its own outcome (an id taken).
#[utoipa::path(
    post,
    path = "/v1/instances/batch",
    tag = "instances",
    operation_id = "instances_start_batch",
    params(WriteParams),
    request_body = StartBatch,
    responses(
        (status = 200, description = "Each start's outcome, in order", body = [BatchItem]),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn start_batch(
    State(state): State<ServerState>,
    trace: Option<Extension<IncomingTrace>>,
    QueryParams(params): QueryParams<WriteParams>,
    JsonBody(batch): JsonBody<StartBatch>,
) -> Result<Json<Vec<BatchItem>>, Problem> {
    let trace = trace.map(|t| t.0).unwrap_or_default();
    let max = state.limits.max_batch;
    if batch.instances.len() > max {
        return Err(Problem::too_large(
            format!(
                "{} starts in one batch; at most {max} are allowed",
                batch.instances.len()
            ),
            max as u64,
        )
        .field("instances"));
    }
    state.api.check_batch(&batch)?;
    let names = batch.instances.iter().map(|r| r.name.as_str()).enumerate();
    fleet::check(
        &state,
        Kind::Orchestration,
        names,
        params.allow_unknown,
        |i| format!("instances[{i}].name"),
    )
    .await?;
    Ok(Json(state.api.start_checked(&batch, trace.carried()).await))
}

#[utoipa::path(
    get,
    path = "/v1/instances/{id}",
    tag = "instances",
    operation_id = "instances_show",
    params(("id" = InstanceId, Path, description = "Instance id")),
    responses(
        (status = 200, description = "The instance", body = InstanceView),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn show(
    State(state): State<ServerState>,
    PathParam(id): PathParam<String>,
) -> Result<Json<InstanceView>, Problem> {
    Ok(Json(state.api.instances_show(&id).await?))
}

/// Newest first, a page at a time by keyset (creation time and id), never by offset.
#[utoipa::path(
    get,
    path = "/v1/instances",
    tag = "instances",
    operation_id = "instances_list",
    params(InstanceQuery),
    responses(
        (status = 200, description = "A page, newest first", body = InstancePage),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn list(
    State(state): State<ServerState>,
    QueryParams(query): QueryParams<InstanceQuery>,
) -> Result<Json<InstancePage>, Problem> {
    let limit = page_size(query.limit, 100, &state)?;
    let query = InstanceQuery {
        limit: Some(limit),
        ..query
    };
    Ok(Json(state.api.instances_list(&query).await?))
}

#[utoipa::path(
    get,
    path = "/v1/instances/{id}/graph.svg",
    tag = "instances",
    operation_id = "instances_graph",
    params(("id" = InstanceId, Path, description = "Instance id")),
    responses(
        (status = 200, description = "The graph of the instance's current execution, drawn from its history (Rust or declarative): each turn's steps side by side, signals where they arrived, children inside their nodes; completed, running, failed, pending and skipped coloured. A standalone SVG.", body = String, content_type = "image/svg+xml"),
        (status = 404, description = "No such instance", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn graph(
    State(state): State<ServerState>,
    PathParam(id): PathParam<String>,
) -> Result<axum::response::Response, Problem> {
    Ok(super::workflows::svg(state.api.instances_graph(&id).await?))
}

#[utoipa::path(
    get,
    path = "/v1/instances/{id}/history",
    tag = "instances",
    operation_id = "instances_history",
    params(("id" = InstanceId, Path, description = "Instance id"), HistoryQuery),
    responses(
        (status = 200, description = "A page of the history", body = HistoryPage),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn history(
    State(state): State<ServerState>,
    PathParam(id): PathParam<String>,
    QueryParams(query): QueryParams<HistoryQuery>,
) -> Result<Json<HistoryPage>, Problem> {
    let limit = page_size(query.limit, 1000, &state)?;
    let query = HistoryQuery {
        limit: Some(limit),
        ..query
    };
    Ok(Json(state.api.instances_history(&id, &query).await?))
}

#[utoipa::path(
    post,
    path = "/v1/instances/{id}/signals",
    tag = "instances",
    operation_id = "instances_signal",
    params(("id" = InstanceId, Path, description = "Instance id")),
    request_body = SignalRequest,
    responses(
        (status = 202, description = "Raised", body = Signalled), (status = 200, description = "Raised before under this dedup id: nothing raised", body = Signalled),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not possible in the current state", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn signal(
    State(state): State<ServerState>,
    PathParam(id): PathParam<String>,
    JsonBody(req): JsonBody<SignalRequest>,
) -> Result<Response, Problem> {
    let signalled = state.api.instances_signal(&id, &req).await?;
    let status = if signalled.raised {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(signalled)).into_response())
}

#[utoipa::path(
    post,
    path = "/v1/instances/{id}/cancel",
    tag = "instances",
    operation_id = "instances_cancel",
    params(("id" = InstanceId, Path, description = "Instance id")),
    request_body = Option<StopRequest>,
    responses(
        (status = 202, description = "Asked: its code may clean up"),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not possible in the current state", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn cancel(
    State(state): State<ServerState>,
    PathParam(id): PathParam<String>,
    OptionalJsonBody(body): OptionalJsonBody<StopRequest>,
) -> Result<StatusCode, Problem> {
    let stop = body.unwrap_or_default();
    state.api.instances_cancel(&id, &stop).await?;
    Ok(StatusCode::ACCEPTED)
}

#[utoipa::path(
    post,
    path = "/v1/instances/{id}/terminate",
    tag = "instances",
    operation_id = "instances_terminate",
    params(("id" = InstanceId, Path, description = "Instance id")),
    request_body = Option<StopRequest>,
    responses(
        (status = 202, description = "Stopped"),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Not possible in the current state", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn terminate(
    State(state): State<ServerState>,
    PathParam(id): PathParam<String>,
    OptionalJsonBody(body): OptionalJsonBody<StopRequest>,
) -> Result<StatusCode, Problem> {
    let stop = body.unwrap_or_default();
    state.api.instances_terminate(&id, &stop).await?;
    Ok(StatusCode::ACCEPTED)
}

/// A long poll: answers as soon as the instance finishes (woken by the client's hub, which
/// the runtime and the store's notifications feed), or with where it stands at the timeout.
/// It reads the instance once when asked (it may have finished already) and again only at a
/// timeout.
#[utoipa::path(
    get,
    path = "/v1/instances/{id}/wait",
    tag = "instances",
    operation_id = "instances_wait",
    params(("id" = InstanceId, Path, description = "Instance id"), WaitQuery),
    responses(
        (status = 200, description = "The outcome once finished, or where it stands at the timeout", body = WaitOutcome),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 404, description = "No such instance or task", body = ProblemBody, content_type = "application/problem+json"),
        (status = 429, description = "Too many requests held open; `limit` says how many", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn wait(
    State(state): State<ServerState>,
    PathParam(id): PathParam<String>,
    QueryParams(params): QueryParams<WaitQuery>,
    held: Held,
) -> Result<Json<WaitOutcome>, Problem> {
    let timeout = super::wait_time(params.timeout_ms, &state)?;
    let query = WaitQuery {
        timeout_ms: Some(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
    };
    // A stop (or a revoked token) answers as a timeout does: where the instance stands.
    let outcome = tokio::select! {
        waited = state.api.instances_wait(&id, query) => waited?,
        () = held.ended() => state.api.instance_outcome(&id).await?,
    };
    Ok(Json(outcome))
}

/// Starts a finished instance afresh under the same id, with the same name and input.
#[utoipa::path(
    post,
    path = "/v1/instances/{id}/restart",
    tag = "instances", operation_id = "instances_restart",
    params(("id" = InstanceId, Path, description = "Instance id")),
    responses(
        (status = 201, description = "Started afresh", body = Restarted),
        (status = 404, description = "No such instance", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "It has not finished", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn restart(
    State(state): State<ServerState>,
    PathParam(id): PathParam<String>,
) -> Result<Response, Problem> {
    let Restarted { id } = state.api.instances_restart(&id).await?;
    Ok(created(&format!("/v1/instances/{id}"), Restarted { id }))
}

/// Removes finished instances, with their history, that finished before a time.
#[utoipa::path(
    post,
    path = "/v1/instances/purge",
    tag = "instances", operation_id = "instances_purge",
    request_body = PurgeRequest,
    responses(
        (status = 200, description = "How many were removed", body = Purged),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Not a time", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn purge(
    State(state): State<ServerState>,
    JsonBody(req): JsonBody<PurgeRequest>,
) -> Result<Json<Purged>, Problem> {
    Ok(Json(state.api.instances_purge(&req).await?))
}
