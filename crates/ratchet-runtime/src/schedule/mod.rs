//! Schedules: starting work on a calendar, exactly once per tick, whichever processes run.
//!
//! Every runtime runs a [`service`] that sleeps until the next schedule is due (or a schedule
//! changes), plans the fire ([`plan`]) and writes it as one compare-and-set on the schedule:
//! two processes that find the same tick due plan the same fire, and the store lets one of
//! them write it. The client's schedule calls are in `client/schedules.rs`.

pub(crate) mod plan;
pub(crate) mod service;

use std::time::Duration;

use ratchet_core::{TaskOptions, Timestamp};
use ratchet_schedule::{CatchUp, Overlap};
use ratchet_store::{FireRecord, ScheduleAction, ScheduleRecord};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// A schedule as its creator writes it. Times are the database's; `spec` is a cron
/// expression (five fields, or six with seconds first; read in `time_zone`) or
/// `every <interval> [offset <duration>]` (`every 30s`, `every 1h offset 15m`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleOptions {
    /// When it ticks.
    pub spec: String,
    /// The IANA zone the cron expression is read in (default `UTC`).
    #[serde(default = "utc")]
    pub time_zone: String,
    /// What each tick starts.
    pub action: ScheduleAction,
    /// What a tick does while the previous run still runs (default `skip`).
    #[serde(default)]
    pub overlap: Overlap,
    /// Which ticks missed while no process ran still fire (default `last 1`).
    #[serde(default)]
    pub catch_up: CatchUp,
    /// Each tick fires up to this long after its time (spreads load), in milliseconds.
    #[serde(default)]
    pub jitter_ms: u64,
    /// Created paused.
    #[serde(default)]
    pub paused: bool,
    /// A note (why it is paused, or anything).
    #[serde(default)]
    pub note: Option<String>,
    /// No tick before this.
    #[serde(default)]
    pub start_at: Option<Timestamp>,
    /// No tick after this.
    #[serde(default)]
    pub end_at: Option<Timestamp>,
    /// Starts at most this many runs, then stops.
    #[serde(default)]
    pub remaining_actions: Option<u64>,
}

fn utc() -> String {
    "UTC".into()
}

impl ScheduleOptions {
    fn with_action(spec: &str, action: ScheduleAction) -> Self {
        Self {
            spec: spec.into(),
            time_zone: utc(),
            action,
            overlap: Overlap::default(),
            catch_up: CatchUp::default(),
            jitter_ms: 0,
            paused: false,
            note: None,
            start_at: None,
            end_at: None,
            remaining_actions: None,
        }
    }

    /// Each tick of `spec` starts the orchestration `workflow` (a Rust one, or a declarative
    /// workflow by `namespace/name`) with `input`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the input does not serialize.
    pub fn start(spec: &str, workflow: &str, input: impl Serialize) -> Result<Self> {
        Ok(Self::with_action(
            spec,
            ScheduleAction::Start {
                workflow: workflow.into(),
                input: to_value(input)?,
            },
        ))
    }

    /// Each tick of `spec` enqueues the task `task` with `input` and `options`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the input does not serialize.
    pub fn enqueue(
        spec: &str,
        task: &str,
        input: impl Serialize,
        options: TaskOptions,
    ) -> Result<Self> {
        Ok(Self::with_action(
            spec,
            ScheduleAction::Enqueue {
                task: task.into(),
                input: to_value(input)?,
                options,
            },
        ))
    }

    /// Reads the cron expression in `zone` (`Europe/Paris`).
    pub fn time_zone(mut self, zone: &str) -> Self {
        self.time_zone = zone.into();
        self
    }

    /// Sets the overlap policy.
    pub fn overlap(mut self, overlap: Overlap) -> Self {
        self.overlap = overlap;
        self
    }

    /// Sets the catch-up policy.
    pub fn catch_up(mut self, catch_up: CatchUp) -> Self {
        self.catch_up = catch_up;
        self
    }

    /// Fires each tick up to `jitter` late.
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter_ms = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Creates it paused, with a note.
    pub fn paused(mut self, note: &str) -> Self {
        self.paused = true;
        self.note = Some(note.into());
        self
    }

    /// No tick before `at`.
    pub fn start_at(mut self, at: Timestamp) -> Self {
        self.start_at = Some(at);
        self
    }

    /// No tick after `at`.
    pub fn end_at(mut self, at: Timestamp) -> Self {
        self.end_at = Some(at);
        self
    }

    /// Starts at most `n` runs.
    pub fn remaining_actions(mut self, n: u64) -> Self {
        self.remaining_actions = Some(n);
        self
    }
}

fn to_value(input: impl Serialize) -> Result<serde_json::Value> {
    serde_json::to_value(input)
        .map_err(|e| Error::InvalidInput(format!("the schedule's input does not serialize: {e}")))
}

/// A schedule with its next ticks and its latest fires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleDescription {
    /// The schedule as stored.
    pub schedule: ScheduleRecord,
    /// Its next ticks (none while paused or after its end).
    pub upcoming: Vec<Timestamp>,
    /// Its latest fires, newest first, with where their runs stand.
    pub recent: Vec<FireResult>,
}

/// A fire and where its run stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FireResult {
    /// The fire.
    #[serde(flatten)]
    pub fire: FireRecord,
    /// The run's status (`Running`, `Completed`, ...), or task state; `None` when it started
    /// nothing or is gone.
    pub status: Option<String>,
}
