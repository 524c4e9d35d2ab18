//! Schedules: what starts work on a calendar, and the record of each tick it handled.
//!
//! The store keeps a schedule's fields as written (spec, zone, policies as text) and its
//! progress (the last tick handled, when it is next due); the runtime reads the spec with
//! `ratchet-schedule` and decides what a tick does. Every change to a schedule, a fire
//! included, is a compare-and-set on its `version`, so two processes that find the same tick
//! due cannot both handle it: the second one's write is refused whole.

use ratchet_core::{TaskOptions, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{NewInstance, NewTask, TaskId};

/// How many fire records a schedule keeps; older ones are dropped as new ones are written,
/// and the newest tick dropped becomes the schedule's [`ScheduleRecord::settled_through`].
pub const FIRES_KEPT: u32 = 1_000;

/// What a schedule's tick starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleAction {
    /// Starts an orchestration (a Rust one, or a declarative workflow by `namespace/name`).
    Start {
        /// The orchestration's name.
        workflow: String,
        /// Its input.
        #[serde(default)]
        input: Value,
    },
    /// Enqueues a standalone task.
    Enqueue {
        /// The task's name.
        task: String,
        /// Its input.
        #[serde(default)]
        input: Value,
        /// Queue, priority, retries, timeout, metadata (a delay or run-at counts from the
        /// tick).
        #[serde(default)]
        options: TaskOptions,
    },
}

/// A schedule as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    /// Its unique name.
    pub name: String,
    /// A cron expression (seconds optional) or `every <interval> [offset <duration>]`.
    pub spec: String,
    /// The IANA zone the cron expression is read in.
    pub time_zone: String,
    /// What each tick starts.
    pub action: ScheduleAction,
    /// `skip`, `buffer_one`, `allow_all`, `cancel_previous` or `terminate_previous`.
    pub overlap: String,
    /// Which ticks missed while no process ran still fire: `skip`, `last <n>`,
    /// `within <duration>`.
    pub catch_up: String,
    /// Each tick fires up to this long after its time, by an amount drawn from the name and
    /// tick (so every process agrees on it).
    pub jitter_ms: u64,
    /// Paused: no tick fires until resumed.
    pub paused: bool,
    /// Why it was paused, or any remark.
    pub note: Option<String>,
    /// No tick before this.
    pub start_at: Option<Timestamp>,
    /// No tick after this.
    pub end_at: Option<Timestamp>,
    /// How many more runs it may start; `None` for no limit.
    pub remaining: Option<u64>,
    /// The last tick handled (fired, or skipped); ticks after it are still to come.
    pub last_tick: Option<Timestamp>,
    /// When the dispatcher should next look at it; `None` when it will never fire again.
    pub next_fire_at: Option<Timestamp>,
    /// The id of the run the last fire started (instance id, or task id in decimal): a fire
    /// that starts runs sets it to its last one's.
    pub running: Option<String>,
    /// A tick waiting for the running one to finish (overlap `buffer_one`).
    pub buffered: Option<Timestamp>,
    /// How many ticks were missed and not caught up, in all.
    pub missed: u64,
    /// Ticks at or before this are settled: their fire records were dropped (a schedule keeps
    /// its newest [`FIRES_KEPT`]), so whether they started a run can no longer be told, and no
    /// backfill fires them. Kept by the store as it drops records: a write of the schedule
    /// leaves it as stored, like `version`.
    pub settled_through: Option<Timestamp>,
    /// Bumped by every write; a write that expects another version is refused.
    pub version: i64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it was last written.
    pub updated_at: Timestamp,
}

/// Why a tick fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FireKind {
    /// Its time came.
    Scheduled,
    /// Someone asked for a run now.
    Manual,
    /// A backfill of a past range.
    Backfill,
}

impl FireKind {
    /// `scheduled`, `manual` or `backfill`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Manual => "manual",
            Self::Backfill => "backfill",
        }
    }
}

impl std::str::FromStr for FireKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "scheduled" => Ok(Self::Scheduled),
            "manual" => Ok(Self::Manual),
            "backfill" => Ok(Self::Backfill),
            other => Err(format!("unknown fire kind {other:?}")),
        }
    }
}

/// The run a fire creates.
#[derive(Clone, Debug, PartialEq)]
pub enum FireRun {
    /// An orchestration instance.
    Instance(NewInstance),
    /// A standalone task.
    Task(NewTask),
}

/// One tick handled, to record.
#[derive(Clone, Debug, PartialEq)]
pub struct NewFire {
    /// The tick's time.
    pub nominal: Timestamp,
    /// Why it fired.
    pub kind: FireKind,
    /// What it starts; `None` when the tick was skipped (then `skipped` says why).
    pub run: Option<FireRun>,
    /// Why nothing started.
    pub skipped: Option<String>,
}

/// A run a fire stops, in its transaction and only once its compare-and-set has succeeded
/// (overlap `cancel_previous`, `terminate_previous`): a fire that loses the race to another
/// write stops nothing. A run that has finished meanwhile is left alone.
#[derive(Clone, Debug, PartialEq)]
pub enum StopRun {
    /// Asks the instance to cancel (its code sees `Cancelled` and may clean up).
    Cancel {
        /// The instance.
        instance: String,
        /// Why, as its history records it.
        reason: String,
    },
    /// Terminates the instance.
    Terminate {
        /// The instance.
        instance: String,
        /// Why, as its error says.
        reason: String,
    },
    /// Cancels the task.
    CancelTask(TaskId),
}

/// A fire: the schedule's new state, written only if the stored one is still at
/// `expect_version`, the ticks it handled with their runs, and the run it stops, in the same
/// transaction. When `watch` is set and it starts any run, the schedule's `running` becomes
/// the last one's id (a task's is known only once it is enqueued).
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleFiring {
    /// The schedule as it is after the fire (its `version` and `settled_through` are
    /// ignored).
    pub schedule: ScheduleRecord,
    /// The version the caller read.
    pub expect_version: i64,
    /// The ticks handled, oldest first.
    pub fires: Vec<NewFire>,
    /// The time of the fire (each record's actual time).
    pub now: Timestamp,
    /// Whether the last run this fire starts becomes the schedule's `running`, the run its
    /// overlap policy watches: so for the schedule's own ticks; never for a backfill (outside
    /// the overlap policy), so that the policy goes on watching the run it watched.
    pub watch: bool,
    /// The run to stop once the compare-and-set has succeeded.
    pub stop: Option<StopRun>,
}

/// A tick handled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FireRecord {
    /// The schedule.
    pub schedule: String,
    /// The tick's time.
    pub nominal: Timestamp,
    /// When it was handled.
    pub actual: Timestamp,
    /// Why it fired.
    pub kind: FireKind,
    /// The run it started: instance id, or task id in decimal.
    pub run: Option<String>,
    /// Why nothing started, when nothing did.
    pub skipped: Option<String>,
}

/// Schedules due now, and when the next of the others is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulesDue {
    /// Unpaused schedules whose `next_fire_at` has come, earliest first.
    pub due: Vec<ScheduleRecord>,
    /// The earliest `next_fire_at` of the unpaused schedules not due yet.
    pub next: Option<Timestamp>,
}

/// The fire records of `name` with a tick in `from..=to`, newest first.
#[derive(Clone, Debug, PartialEq)]
pub struct FireQuery {
    /// The schedule.
    pub schedule: String,
    /// Ticks at or after this.
    pub from: Timestamp,
    /// Ticks at or before this.
    pub to: Timestamp,
    /// At most this many.
    pub limit: u32,
}

impl ScheduleAction {
    /// As stored: JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "null".into())
    }

    /// From its stored JSON.
    ///
    /// # Errors
    ///
    /// [`crate::StoreError::Corrupt`] when it does not decode.
    pub fn from_json(text: &str) -> crate::Result<Self> {
        serde_json::from_str(text)
            .map_err(|e| crate::StoreError::Corrupt(format!("a schedule's action: {e}")))
    }
}

impl NewFire {
    /// Its record, as the fire of `schedule` at `now` that started `run`.
    pub fn record(&self, schedule: &str, now: Timestamp, run: Option<String>) -> FireRecord {
        FireRecord {
            schedule: schedule.to_string(),
            nominal: self.nominal,
            actual: now,
            kind: self.kind,
            run,
            skipped: self.skipped.clone(),
        }
    }
}
