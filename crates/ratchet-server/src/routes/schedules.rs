//! `/v1/schedules`: cron expressions and intervals that start a workflow or enqueue a task,
//! fired once per tick by whichever workers run. Create, change, pause, resume, fire now,
//! backfill, delete, list, describe.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use ratchet::{
    CatchUp, FireRecord, Overlap, ScheduleAction, ScheduleDescription, ScheduleOptions,
    ScheduleRecord, Timestamp,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::text::{Identifier, ScheduleName, Time};
use crate::extract::{JsonBody, PathParam, QueryParams};
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;
use crate::time::{parse_rfc3339, rfc3339};
use ratchet_api::OptionsInput;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(describe, update, delete))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(trigger))
        .routes(routes!(backfill))
}

/// A schedule as the API and `ratchet schedules --json` show it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ScheduleView {
    /// Its unique name.
    pub name: String,
    /// A cron expression or `every <interval> [offset <duration>]`.
    pub spec: String,
    /// The IANA zone the cron expression is read in.
    pub time_zone: String,
    /// `{"start": {"workflow", "input"}}` or `{"enqueue": {"task", "input", "options"}}`.
    #[schema(value_type = Object)]
    pub action: Value,
    /// skip, buffer_one, allow_all, cancel_previous or terminate_previous.
    pub overlap: String,
    /// skip, `last <n>` or `within <duration>`.
    pub catch_up: String,
    /// Each tick fires up to this late, in milliseconds.
    pub jitter_ms: u64,
    /// Paused: nothing fires.
    pub paused: bool,
    /// Why it is paused, or any remark.
    pub note: Option<String>,
    /// No tick before this.
    pub start_at: Option<String>,
    /// No tick after this.
    pub end_at: Option<String>,
    /// Runs it may still start; none for no limit.
    pub remaining_actions: Option<u64>,
    /// The last tick handled.
    pub last_tick: Option<String>,
    /// When it next fires; none when it never will again.
    pub next_fire_at: Option<String>,
    /// The run the last fire started: an instance id, or a task id.
    pub running: Option<String>,
    /// A tick waiting for the running one to finish (overlap buffer_one).
    pub buffered: Option<String>,
    /// Ticks missed and not caught up, in all.
    pub missed: u64,
    /// Ticks up to this are settled: their fire records were dropped (a schedule keeps its
    /// newest 1,000), and no backfill fires them.
    pub settled_through: Option<String>,
    /// Bumped by every write.
    pub version: i64,
    /// When it was created.
    pub created_at: String,
    /// When it was last written.
    pub updated_at: String,
}

impl ScheduleView {
    /// The view of a stored schedule.
    pub fn of(s: &ScheduleRecord) -> Self {
        let time = |t: Option<Timestamp>| t.map(rfc3339);
        Self {
            name: s.name.clone(),
            spec: s.spec.clone(),
            time_zone: s.time_zone.clone(),
            action: serde_json::to_value(&s.action).unwrap_or(Value::Null),
            overlap: s.overlap.clone(),
            catch_up: s.catch_up.clone(),
            jitter_ms: s.jitter_ms,
            paused: s.paused,
            note: s.note.clone(),
            start_at: time(s.start_at),
            end_at: time(s.end_at),
            remaining_actions: s.remaining,
            last_tick: time(s.last_tick),
            next_fire_at: time(s.next_fire_at),
            running: s.running.clone(),
            buffered: time(s.buffered),
            missed: s.missed,
            settled_through: time(s.settled_through),
            version: s.version,
            created_at: rfc3339(s.created_at),
            updated_at: rfc3339(s.updated_at),
        }
    }
}

/// A tick a schedule handled.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FireView {
    /// The tick's time.
    pub tick: String,
    /// When it was handled.
    pub fired_at: String,
    /// How long after the tick, in milliseconds (jitter included).
    pub late_ms: i64,
    /// scheduled, manual or backfill.
    pub kind: String,
    /// The run it started: an instance id, or a task id.
    pub run: Option<String>,
    /// Why it started nothing.
    pub skipped: Option<String>,
    /// Where the run stands (instance status or task state), when described.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl FireView {
    /// The view of a fire, with its run's status when known.
    pub fn of(f: &FireRecord, status: Option<String>) -> Self {
        Self {
            tick: rfc3339(f.nominal),
            fired_at: rfc3339(f.actual),
            late_ms: f.actual.as_millis().saturating_sub(f.nominal.as_millis()),
            kind: f.kind.as_str().to_string(),
            run: f.run.clone(),
            skipped: f.skipped.clone(),
            status,
        }
    }
}

/// A schedule, its next ticks and its latest fires.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DescriptionView {
    /// The schedule.
    pub schedule: ScheduleView,
    /// Its next ticks (none while paused).
    pub upcoming: Vec<String>,
    /// Its latest fires, newest first, with their runs' status.
    pub recent: Vec<FireView>,
}

impl DescriptionView {
    /// The view of a description.
    pub fn of(d: &ScheduleDescription) -> Self {
        Self {
            schedule: ScheduleView::of(&d.schedule),
            upcoming: d.upcoming.iter().map(|t| rfc3339(*t)).collect(),
            recent: d
                .recent
                .iter()
                .map(|r| FireView::of(&r.fire, r.status.clone()))
                .collect(),
        }
    }
}

/// A schedule to create or replace. Give `workflow` (start it) or `task` (enqueue it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ScheduleInput {
    /// The name (on create only: a replace names it in its path).
    #[schema(value_type = Option<ScheduleName>)]
    name: Option<String>,
    /// A cron expression (five fields, or six with seconds first) or
    /// `every <interval> [offset <duration>]`.
    spec: String,
    /// The IANA zone the cron expression is read in (default UTC).
    time_zone: Option<String>,
    /// Each tick starts this orchestration (or declarative workflow `namespace/name`).
    #[schema(value_type = Option<Identifier>)]
    workflow: Option<String>,
    /// Each tick enqueues this task.
    #[schema(value_type = Option<Identifier>)]
    task: Option<String>,
    /// The input of each run.
    #[serde(default)]
    input: Value,
    /// The task's options (with `task`).
    options: Option<OptionsInput>,
    /// skip (default), buffer_one, allow_all, cancel_previous, terminate_previous.
    overlap: Option<String>,
    /// `last 1` (default), skip, `last <n>`, `within <duration>`.
    catch_up: Option<String>,
    /// Each tick fires up to this late, in milliseconds.
    jitter_ms: Option<u64>,
    /// Created paused.
    paused: Option<bool>,
    /// A note.
    note: Option<String>,
    /// No tick before this (RFC 3339).
    #[schema(value_type = Option<Time>)]
    start_at: Option<String>,
    /// No tick after this (RFC 3339).
    #[schema(value_type = Option<Time>)]
    end_at: Option<String>,
    /// Start at most this many runs.
    remaining_actions: Option<u64>,
}

fn time_field(value: Option<&str>, field: &str) -> Result<Option<Timestamp>, Problem> {
    value
        .map(parse_rfc3339)
        .transpose()
        .map_err(|e| Problem::invalid(e).field(field))
}

impl ScheduleInput {
    fn into_options(self) -> Result<ScheduleOptions, Problem> {
        let action = match (self.workflow, self.task) {
            (Some(workflow), None) => {
                if self.options.is_some() {
                    return Err(Problem::invalid("options go with a task").field("options"));
                }
                ScheduleAction::Start {
                    workflow,
                    input: self.input,
                }
            }
            (None, Some(task)) => ScheduleAction::Enqueue {
                task,
                input: self.input,
                options: self
                    .options
                    .unwrap_or_default()
                    .into_options()
                    .map_err(|e| Problem::from(e).prefix_field("options"))?,
            },
            _ => return Err(Problem::invalid("give either `workflow` or `task`").field("workflow")),
        };
        let overlap: Overlap = match self.overlap {
            Some(o) => o.parse().map_err(ratchet::Error::from)?,
            None => Overlap::default(),
        };
        let catch_up: CatchUp = match self.catch_up {
            Some(c) => c.parse().map_err(ratchet::Error::from)?,
            None => CatchUp::default(),
        };
        Ok(ScheduleOptions {
            spec: self.spec,
            time_zone: self.time_zone.unwrap_or_else(|| "UTC".into()),
            action,
            overlap,
            catch_up,
            jitter_ms: self.jitter_ms.unwrap_or(0),
            paused: self.paused.unwrap_or(false),
            note: self.note,
            start_at: time_field(self.start_at.as_deref(), "start_at")?,
            end_at: time_field(self.end_at.as_deref(), "end_at")?,
            remaining_actions: self.remaining_actions,
        })
    }
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
    let all = state.client.schedules().await?;
    Ok(Json(all.iter().map(ScheduleView::of).collect()))
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
    let Some(name) = input.name.clone() else {
        return Err(Problem::invalid("a schedule needs a name").field("name"));
    };
    let created = state
        .client
        .schedule_create(&name, input.into_options()?)
        .await?;
    Ok((StatusCode::CREATED, Json(ScheduleView::of(&created))))
}

/// How much of a schedule's past and future to describe.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct DescribeParams {
    /// Next ticks to list (default 5, at most 1,000).
    upcoming: Option<u32>,
    /// Latest fires to list (default 10, at most 1,000).
    recent: Option<u32>,
}

#[utoipa::path(
    get,
    path = "/v1/schedules/{name}",
    tag = "schedules",
    operation_id = "schedules_describe",
    params(("name" = String, Path, description = "The schedule"), DescribeParams),
    responses(
        (status = 200, description = "The schedule, its next ticks and its latest fires with their runs' status", body = DescriptionView),
        (status = 404, description = "No such schedule", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = UNAVAILABLE, body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn describe(
    State(state): State<ServerState>,
    PathParam(name): PathParam<String>,
    QueryParams(params): QueryParams<DescribeParams>,
) -> Result<Json<DescriptionView>, Problem> {
    let d = state
        .client
        .schedule_describe(
            &name,
            params.upcoming.unwrap_or(5).min(1_000) as usize,
            params.recent.unwrap_or(10).min(1_000),
        )
        .await?;
    Ok(Json(DescriptionView::of(&d)))
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
    if input.name.as_ref().is_some_and(|n| *n != name) {
        return Err(Problem::invalid("a schedule cannot be renamed").field("name"));
    }
    let updated = state
        .client
        .schedule_update(&name, input.into_options()?)
        .await?;
    Ok(Json(ScheduleView::of(&updated)))
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
    state.client.schedule_delete(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Why a schedule is paused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct PauseInput {
    /// A note kept with the schedule.
    #[serde(default)]
    note: String,
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
    let paused = state.client.schedule_pause(&name, &input.note).await?;
    Ok(Json(ScheduleView::of(&paused)))
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
    let resumed = state.client.schedule_resume(&name).await?;
    Ok(Json(ScheduleView::of(&resumed)))
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
    let fire = state.client.schedule_trigger_now(&name).await?;
    Ok((StatusCode::CREATED, Json(FireView::of(&fire, None))))
}

/// A past range of ticks.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct BackfillInput {
    /// The first time of the range (RFC 3339).
    #[schema(value_type = Time)]
    from: String,
    /// The last time of the range (RFC 3339).
    #[schema(value_type = Time)]
    to: String,
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
    let from = parse_rfc3339(&input.from).map_err(|e| Problem::invalid(e).field("from"))?;
    let to = parse_rfc3339(&input.to).map_err(|e| Problem::invalid(e).field("to"))?;
    let fires = state.client.schedule_backfill(&name, from, to).await?;
    Ok(Json(fires.iter().map(|f| FireView::of(f, None)).collect()))
}
