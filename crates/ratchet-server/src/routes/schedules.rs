//! `/v1/schedules`: cron expressions and intervals that start a workflow or enqueue a task,
//! fired once per tick by whichever workers run. Create, change, pause, resume, fire now,
//! backfill, delete, list, describe.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use ratchet_api::{
    Api as _, BackfillInput, DescribeQuery, DescriptionView, FireView, PauseInput, ScheduleInput,
    ScheduleView,
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{JsonBody, PathParam, QueryParams};
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(describe, update, delete))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(trigger))
        .routes(routes!(backfill))
}

const UNAVAILABLE: &str = "The database is out of reach";

#[utoipa::path(
    get,
    path = "/v1/schedules",
    tag = "schedules",
    operation_id = "schedules_list",
    responses(
        (status = 200, description = "Every schedule, by name", body = [ScheduleView]),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn list(State(state): State<ServerState>) -> Result<Json<Vec<ScheduleView>>, Problem> {
    Ok(Json(state.api.schedules_list().await?))
}

#[utoipa::path(
    post,
    path = "/v1/schedules",
    tag = "schedules",
    operation_id = "schedules_create",
    request_body = ScheduleInput,
    responses(
        (status = 201, description = "Created; its first tick is the first after now", body = ScheduleView),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "A schedule has this name", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Refused: `field` names the part at fault (spec, time_zone, end, ...)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn create(
    State(state): State<ServerState>,
    JsonBody(input): JsonBody<ScheduleInput>,
) -> Result<(StatusCode, Json<ScheduleView>), Problem> {
    let created = state.api.schedules_create(&input).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(
    get,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    operation_id = "schedules_describe",
    params(("name" = String, Path, description = "The schedule"), DescribeQuery),
    responses(
        (status = 200, description = "The schedule, its next ticks and its latest fires with their runs' status", body = DescriptionView),
        (status = 404, description = "No such schedule", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn describe(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
    QueryParams(query): QueryParams<DescribeQuery>,
) -> Result<Json<DescriptionView>, Problem> {
    Ok(Json(state.api.schedules_describe(&name, query).await?))
}

#[utoipa::path(
    put,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    operation_id = "schedules_update",
    params(("name" = String, Path, description = "The schedule")),
    request_body = ScheduleInput,
    responses(
        (status = 200, description = "Replaced, its progress kept", body = ScheduleView),
        (status = 404, description = "No such schedule", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Refused: `field` names the part at fault", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn update(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
    JsonBody(input): JsonBody<ScheduleInput>,
) -> Result<Json<ScheduleView>, Problem> {
    Ok(Json(state.api.schedules_update(&name, &input).await?))
}

#[utoipa::path(
    delete,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    operation_id = "schedules_delete",
    params(("name" = String, Path, description = "The schedule")),
    responses(
        (status = 204, description = "Deleted with its fire records; runs it started go on"),
        (status = 404, description = "No such schedule", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn delete(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
) -> Result<StatusCode, Problem> {
    state.api.schedules_delete(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post,
    path = "/v1/schedules/{name}/pause",
    tag = "schedules",
    operation_id = "schedules_pause",
    params(("name" = String, Path, description = "The schedule")),
    request_body = PauseInput,
    responses(
        (status = 200, description = "Paused: nothing fires until resumed", body = ScheduleView),
        (status = 404, description = "No such schedule", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn pause(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
    JsonBody(input): JsonBody<PauseInput>,
) -> Result<Json<ScheduleView>, Problem> {
    Ok(Json(state.api.schedules_pause(&name, &input).await?))
}

#[utoipa::path(
    post,
    path = "/v1/schedules/{name}/resume",
    tag = "schedules",
    operation_id = "schedules_resume",
    params(("name" = String, Path, description = "The schedule")),
    responses(
        (status = 200, description = "Resumed from its next tick; the ticks of the pause count as missed", body = ScheduleView),
        (status = 404, description = "No such schedule", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn resume(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
) -> Result<Json<ScheduleView>, Problem> {
    Ok(Json(state.api.schedules_resume(&name).await?))
}

#[utoipa::path(
    post,
    path = "/v1/schedules/{name}/trigger",
    tag = "schedules",
    operation_id = "schedules_trigger",
    params(("name" = String, Path, description = "The schedule")),
    responses(
        (status = 201, description = "Fired now, whatever its spec, pause or overlap policy", body = FireView),
        (status = 404, description = "No such schedule", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn trigger(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
) -> Result<(StatusCode, Json<FireView>), Problem> {
    let fire = state.api.schedules_trigger(&name).await?;
    Ok((StatusCode::CREATED, Json(fire)))
}

#[utoipa::path(
    post,
    path = "/v1/schedules/{name}/backfill",
    tag = "schedules",
    operation_id = "schedules_backfill",
    params(("name" = String, Path, description = "The schedule")),
    request_body = BackfillInput,
    responses(
        (status = 200, description = "Each tick of the range the schedule has passed and that started no run yet, fired once", body = [FireView]),
        (status = 404, description = "No such schedule", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A bad range (`field` is from, to or range)", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn backfill(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
    JsonBody(input): JsonBody<BackfillInput>,
) -> Result<Json<Vec<FireView>>, Problem> {
    Ok(Json(state.api.schedules_backfill(&name, &input).await?))
}
