//! `/v1/schedules`: what creating, changing, firing and reading schedules send and answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::tasks::OptionsInput;
use crate::text::{Identifier, ScheduleName, Time};

/// A schedule as the API and `ratchet schedules --json` show it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
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

/// A tick a schedule handled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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

/// A schedule, its next ticks and its latest fires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DescriptionView {
    /// The schedule.
    pub schedule: ScheduleView,
    /// Its next ticks (none while paused).
    pub upcoming: Vec<String>,
    /// Its latest fires, newest first, with their runs' status.
    pub recent: Vec<FireView>,
}

/// A schedule to create or replace. Give `workflow` (start it) or `task` (enqueue it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleInput {
    /// The name (on create only: a replace names it in its path).
    #[schema(value_type = Option<ScheduleName>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A cron expression (five fields, or six with seconds first) or
    /// `every <interval> [offset <duration>]`.
    pub spec: String,
    /// The IANA zone the cron expression is read in (default UTC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Each tick starts this orchestration (or declarative workflow `namespace/name`).
    #[schema(value_type = Option<Identifier>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Each tick enqueues this task.
    #[schema(value_type = Option<Identifier>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// The input of each run.
    #[serde(default)]
    pub input: Value,
    /// The task's options (with `task`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<OptionsInput>,
    /// skip (default), buffer_one, allow_all, cancel_previous, terminate_previous.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// `last 1` (default), skip, `last <n>`, `within <duration>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<String>,
    /// Each tick fires up to this late, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<u64>,
    /// Created paused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// A note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// No tick before this (RFC 3339).
    #[schema(value_type = Option<Time>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// No tick after this (RFC 3339).
    #[schema(value_type = Option<Time>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
    /// Start at most this many runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_actions: Option<u64>,
}

/// How much of a schedule's past and future to describe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DescribeQuery {
    /// Next ticks to list (default 5, at most 1,000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upcoming: Option<u32>,
    /// Latest fires to list (default 10, at most 1,000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recent: Option<u32>,
}

/// Why a schedule is paused.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseInput {
    /// A note kept with the schedule.
    #[serde(default)]
    pub note: String,
}

/// A past range of ticks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillInput {
    /// The first time of the range (RFC 3339).
    #[schema(value_type = Time)]
    pub from: String,
    /// The last time of the range (RFC 3339).
    #[schema(value_type = Time)]
    pub to: String,
}
