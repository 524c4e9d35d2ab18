//! `/v1/instances`: start (one or a batch), get, list, history, signal, cancel, terminate,
//! wait.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ratchet::{
    Error, ErrorInfo, HistoryEvent, IfExists, InstanceFilter, InstanceRecord, InstanceStatus,
    StartOptions, Timestamp,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::text::{HistoryPosition, Identifier, InstanceId, StatusList, Time};
use super::{comma_list, page_size, WriteParams};
use crate::extract::{JsonBody, OptionalJsonBody, PathParam, QueryParams};
use crate::fleet::{self, Kind};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;
use crate::time::{parse_rfc3339, rfc3339};
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

/// An instance as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct InstanceView {
    id: String,
    name: String,
    version: Option<u32>,
    #[schema(value_type = String, example = "Running")]
    status: InstanceStatus,
    execution: u32,
    input: Value,
    output: Option<Value>,
    #[schema(value_type = Option<Object>)]
    error: Option<ErrorInfo>,
    custom_status: Option<Value>,
    parent: Option<ParentView>,
    history_len: u32,
    created_at: String,
    updated_at: String,
    finished_at: Option<String>,
}

/// The parent of a sub-orchestration: its instance, the execution and the step that started
/// this one.
#[derive(Debug, Serialize, ToSchema)]
struct ParentView {
    instance: String,
    execution: u32,
    seq: u32,
}

impl From<InstanceRecord> for InstanceView {
    fn from(r: InstanceRecord) -> Self {
        Self {
            parent: r.parent.map(|p| ParentView {
                instance: p.instance,
                execution: p.execution,
                seq: p.seq,
            }),
            id: r.id,
            name: r.name,
            version: r.version,
            status: r.status,
            execution: r.execution,
            input: r.input,
            output: r.output,
            error: r.error,
            custom_status: r.custom_status,
            history_len: r.history_len,
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
            finished_at: r.finished_at.map(rfc3339),
        }
    }
}

/// What to do when the id is taken.
#[derive(Clone, Copy, Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum IfExistsParam {
    /// Refuse with 409.
    #[default]
    Fail,
    /// Answer with the existing instance (an idempotent start).
    UseExisting,
    /// Start afresh if the existing one finished; otherwise 409.
    RestartIfFinished,
}

impl From<IfExistsParam> for IfExists {
    fn from(p: IfExistsParam) -> Self {
        match p {
            IfExistsParam::Fail => IfExists::Fail,
            IfExistsParam::UseExisting => IfExists::UseExisting,
            IfExistsParam::RestartIfFinished => IfExists::RestartIfFinished,
        }
    }
}

/// A start.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct StartRequest {
    /// The orchestration.
    #[schema(value_type = Identifier)]
    name: String,
    /// Its input (default `null`).
    #[serde(default)]
    input: Value,
    /// The instance id (default: a new UUID).
    #[serde(default)]
    #[schema(value_type = Option<Identifier>)]
    id: Option<String>,
    #[serde(default)]
    if_exists: IfExistsParam,
}

impl StartRequest {
    fn options(&self, trace: &IncomingTrace) -> StartOptions {
        StartOptions {
            id: self.id.clone(),
            if_exists: self.if_exists.into(),
            trace: trace.carried(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
struct Started {
    id: String,
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
    let handle = state
        .client
        .start_with(&req.name, &req.input, req.options(&trace))
        .await?;
    let id = handle.id().to_string();
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

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct StartBatch {
    /// At most 1,000 (the server's `max_batch`).
    #[schema(max_items = 1000)]
    instances: Vec<StartRequest>,
}

/// The outcome of one start of a batch: its id, or the problem that refused it.
#[derive(Debug, Serialize, ToSchema)]
struct BatchItem {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ProblemBody>)]
    problem: Option<Problem>,
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
    for (i, req) in batch.instances.iter().enumerate() {
        state
            .client
            .check_start(&req.name, &req.input, &req.options(&trace))
            .map_err(|e| {
                let p = Problem::from(e);
                let field = match &p.field {
                    Some(f) => format!("instances[{i}].{f}"),
                    None => format!("instances[{i}]"),
                };
                p.field(field)
            })?;
    }
    let names = batch.instances.iter().map(|r| r.name.as_str()).enumerate();
    fleet::check(
        &state,
        Kind::Orchestration,
        names,
        params.allow_unknown,
        |i| format!("instances[{i}].name"),
    )
    .await?;
    let starts = batch.instances.iter().map(|req| {
        state
            .client
            .start_with(&req.name, &req.input, req.options(&trace))
    });
    let outcomes = futures::future::join_all(starts).await;
    Ok(Json(
        outcomes
            .into_iter()
            .map(|o| match o {
                Ok(handle) => BatchItem {
                    id: Some(handle.id().to_string()),
                    problem: None,
                },
                Err(e) => BatchItem {
                    id: None,
                    problem: Some(e.into()),
                },
            })
            .collect(),
    ))
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
    Ok(Json(state.client.status(&id).await?.into()))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListParams {
    /// Statuses, comma-separated.
    #[param(value_type = Option<StatusList>)]
    status: Option<String>,
    name: Option<String>,
    #[param(value_type = Option<Time>)]
    created_after: Option<String>,
    #[param(value_type = Option<Time>)]
    created_before: Option<String>,
    /// 1 to 1,000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    /// The `next` cursor of the previous page.
    cursor: Option<String>,
    /// Only this custom status: JSON (`42`, `"42"`, `{"step":2}`), or else a string
    /// (`awaiting-delivery`).
    custom_status: Option<String>,
    /// Only instances whose id starts with this (case matters).
    id_prefix: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
struct InstancePage {
    items: Vec<InstanceView>,
    /// Pass as `cursor` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

/// Newest first, a page at a time by keyset (creation time and id), never by offset.
#[utoipa::path(
    get,
    path = "/v1/instances",
    tag = "instances",
    operation_id = "instances_list",
    params(ListParams),
    responses(
        (status = 200, description = "A page, newest first", body = InstancePage),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn list(
    State(state): State<ServerState>,
    QueryParams(params): QueryParams<ListParams>,
) -> Result<Json<InstancePage>, Problem> {
    let limit = page_size(params.limit, 100, &state)?;
    let statuses = comma_list(params.status.as_deref())
        .iter()
        .map(|s| s.parse::<InstanceStatus>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Problem::invalid(e).field("status"))?;
    let time = |text: &Option<String>, field: &str| {
        text.as_deref()
            .map(|t| parse_rfc3339(t).map_err(|e| Problem::invalid(e).field(field)))
            .transpose()
    };
    let filter = InstanceFilter {
        statuses,
        name: params.name,
        created_after: time(&params.created_after, "created_after")?,
        created_before: time(&params.created_before, "created_before")?,
        // One more than the page tells whether there is a next.
        limit: Some(limit + 1),
        after: params.cursor.as_deref().map(decode_cursor).transpose()?,
        custom_status: params
            .custom_status
            .map(|text| serde_json::from_str(&text).unwrap_or(Value::String(text))),
        id_prefix: params.id_prefix,
    };
    let mut records = state.client.list(filter).await?;
    let more = records.len() > limit as usize;
    records.truncate(limit as usize);
    let next = more
        .then(|| records.last().map(|r| encode_cursor(r.created_at, &r.id)))
        .flatten();
    Ok(Json(InstancePage {
        items: records.into_iter().map(InstanceView::from).collect(),
        next,
    }))
}

fn encode_cursor(at: Timestamp, id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}/{id}", at.as_millis()))
}

fn decode_cursor(text: &str) -> Result<(Timestamp, String), Problem> {
    let bad = || Problem::invalid("not a cursor this server gave").field("cursor");
    let raw = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
    let raw = String::from_utf8(raw).map_err(|_| bad())?;
    let (at, id) = raw.split_once('/').ok_or_else(bad)?;
    Ok((Timestamp(at.parse().map_err(|_| bad())?), id.to_string()))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct HistoryParams {
    /// Only events after this position, `execution.seq` (the `next` of the previous page).
    #[param(value_type = Option<HistoryPosition>)]
    after: Option<String>,
    /// 1 to 1,000 (default 1,000).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct HistoryItem {
    pub(super) execution: u32,
    pub(super) seq: u32,
    #[schema(value_type = Object)]
    pub(super) event: HistoryEvent,
}

#[derive(Debug, Serialize, ToSchema)]
struct HistoryPage {
    items: Vec<HistoryItem>,
    /// The `after` of the next page (`execution.seq`); absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
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
    let drawn =
        ratchet::graph::instance(state.client.store().as_ref(), &id, Some("/v1/instances/"))
            .await?
            .ok_or_else(|| Problem::not_found(format!("no instance {id}")))?;
    Ok(super::workflows::svg(ratchet::graph::render(&drawn)))
}

/// A history position as `next` gives it: `execution.seq`.
pub(super) fn parse_position(text: &str) -> Result<(u32, u32), Problem> {
    text.split_once('.')
        .and_then(|(e, s)| Some((e.parse().ok()?, s.parse().ok()?)))
        .ok_or_else(|| {
            Problem::invalid(format!(
                "{text:?} is not a history position (execution.seq, as `next` gives it)"
            ))
            .field("after")
        })
}

#[utoipa::path(
    get,
    path = "/v1/instances/{id}/history",
    tag = "instances",
    operation_id = "instances_history",
    params(("id" = InstanceId, Path, description = "Instance id"), HistoryParams),
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
    QueryParams(params): QueryParams<HistoryParams>,
) -> Result<Json<HistoryPage>, Problem> {
    let limit = page_size(params.limit, 1000, &state)?;
    let after = params.after.as_deref().map(parse_position).transpose()?;
    // One more than asked, to know whether a next page exists.
    let mut page = state
        .client
        .history_page(&id, after, limit.saturating_add(1))
        .await?;
    let more = page.len() > limit as usize;
    page.truncate(limit as usize);
    let next = more
        .then(|| page.last().map(|r| format!("{}.{}", r.execution, r.seq)))
        .flatten();
    let items = page
        .into_iter()
        .map(|r| HistoryItem {
            execution: r.execution,
            seq: r.seq,
            event: r.event,
        })
        .collect();
    Ok(Json(HistoryPage { items, next }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SignalRequest {
    #[schema(value_type = Identifier)]
    name: String,
    #[serde(default)]
    payload: Value,
    /// Raise at most once per this id.
    #[serde(default)]
    dedup_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Signalled {
    /// False when a signal with the same dedup id was raised before (nothing was raised).
    raised: bool,
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
    let raised = match &req.dedup_id {
        Some(dedup) => {
            state
                .client
                .signal_once(&id, &req.name, &req.payload, dedup)
                .await?
        }
        None => {
            state.client.signal(&id, &req.name, &req.payload).await?;
            true
        }
    };
    let status = if raised {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(Signalled { raised })).into_response())
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct StopRequest {
    #[serde(default)]
    reason: Option<String>,
}

/// The reason a cancel or terminate gives, or `default`: its body is optional (`{"reason":
/// "..."}`, `{}`, `null` or nothing).
fn reason(body: Option<StopRequest>, default: &str) -> String {
    body.and_then(|b| b.reason)
        .unwrap_or_else(|| default.to_string())
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
    let reason = reason(body, "cancelled through the API");
    state.client.cancel(&id, &reason).await?;
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
    let reason = reason(body, "terminated through the API");
    state.client.terminate(&id, &reason).await?;
    Ok(StatusCode::ACCEPTED)
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct WaitParams {
    /// How long to hold the request open, in milliseconds (default 30 s, at most the server's
    /// limit).
    timeout_ms: Option<u64>,
}

/// How a wait ended: the instance's outcome, or where it stands at the timeout.
#[derive(Debug, Serialize, ToSchema)]
struct WaitOutcome {
    id: String,
    /// False when the wait timed out first.
    finished: bool,
    #[schema(value_type = String, example = "Completed")]
    status: InstanceStatus,
    output: Option<Value>,
    #[schema(value_type = Option<Object>)]
    error: Option<ErrorInfo>,
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
    params(("id" = InstanceId, Path, description = "Instance id"), WaitParams),
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
    QueryParams(params): QueryParams<WaitParams>,
    held: Held,
) -> Result<Json<WaitOutcome>, Problem> {
    let timeout = super::wait_time(params.timeout_ms, &state)?;
    // A stop (or a revoked token) answers as a timeout does: where the instance stands.
    let waited = tokio::select! {
        waited = state.client.wait(&id, timeout) => waited,
        () = held.ended() => Err(Error::Timeout(id.clone())),
    };
    let outcome = match waited {
        Ok(o) => WaitOutcome {
            id: o.id,
            finished: true,
            status: o.status,
            output: o.output,
            error: o.error,
        },
        Err(Error::Timeout(_)) => {
            let r = state.client.status(&id).await?;
            WaitOutcome {
                finished: r.status.is_finished(),
                id: r.id,
                status: r.status,
                output: r.output,
                error: r.error,
            }
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Json(outcome))
}

#[derive(Debug, Serialize, ToSchema)]
struct Restarted {
    id: String,
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
    let record = state.client.status(&id).await?;
    if !record.status.is_finished() {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "running",
            "Instance still running",
            format!(
                "instance {id:?} is {}: only a finished one restarts",
                record.status
            ),
        ));
    }
    let options = StartOptions::id(id.clone()).if_exists(IfExists::RestartIfFinished);
    state
        .client
        .start_with(&record.name, &record.input, options)
        .await?;
    Ok(created(&format!("/v1/instances/{id}"), Restarted { id }))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct PurgeRequest {
    /// Remove instances that finished before this time (RFC 3339).
    #[schema(value_type = Time)]
    finished_before: String,
}

#[derive(Debug, Serialize, ToSchema)]
struct Purged {
    removed: u64,
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
    let before = parse_rfc3339(&req.finished_before)
        .map_err(|e| Problem::invalid(e).field("finished_before"))?;
    let removed = state.client.store().instance_purge(before).await?;
    Ok(Json(Purged { removed }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_forgeries() {
        let cursor = encode_cursor(Timestamp(1_795_000_000_123), "order/7");
        assert_eq!(
            decode_cursor(&cursor).unwrap(),
            (Timestamp(1_795_000_000_123), "order/7".to_string())
        );
        assert_eq!(decode_cursor("%%%").unwrap_err().status, 422);
        assert_eq!(
            decode_cursor(&URL_SAFE_NO_PAD.encode("x/y"))
                .unwrap_err()
                .field
                .as_deref(),
            Some("cursor")
        );
    }
}
