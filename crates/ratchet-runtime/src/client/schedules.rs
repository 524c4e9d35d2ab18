//! The client's schedule calls: create, change, pause and resume, fire now, backfill, delete,
//! list and describe. Every change is a compare-and-set on the schedule's version, tried
//! again when a dispatcher's fire came first.

use ratchet_core::limits::{check_time, LimitError};
use ratchet_core::Timestamp;
use ratchet_schedule::{parse_zone, Schedule, SpecError};
use ratchet_store::{
    validate_queue_name, FireKind, FireQuery, FireRecord, NewFire, ScheduleAction, ScheduleFiring,
    ScheduleRecord, FIRES_KEPT,
};

use super::{validate_name, Client};
use crate::schedule::plan::{run_for, Parsed};
use crate::schedule::service::previous_run;
use crate::schedule::{FireResult, ScheduleDescription, ScheduleOptions};
use crate::{Error, Result};

/// Compare-and-set tries before a change gives up (each lost try means another write landed).
const TRIES: usize = 20;

/// Ticks one backfill fires at most.
pub(crate) const MAX_BACKFILL: usize = 10_000;

/// Jitter at most.
const MAX_JITTER_MS: u64 = 86_400_000;

fn invalid(field: &str, message: impl Into<String>) -> Error {
    Error::InvalidSchedule {
        field: field.into(),
        message: message.into(),
    }
}

impl From<SpecError> for Error {
    fn from(e: SpecError) -> Self {
        invalid(e.field, e.message)
    }
}

/// A limit at the edge broken by a schedule's field, as the schedule's refusal.
fn limit(e: LimitError) -> Error {
    invalid(&e.field, e.rule)
}

impl Client {
    /// Checks a schedule and computes what a new one stores, without writing it.
    fn schedule_record(
        &self,
        name: &str,
        o: &ScheduleOptions,
        now: Timestamp,
    ) -> Result<ScheduleRecord> {
        if let Err(e) = ratchet_core::limits::check_identifier("name", name, 200) {
            return Err(invalid("name", format!("the schedule name {}", e.rule)));
        }
        let spec = o.spec.parse()?;
        let zone = parse_zone(&o.time_zone)?;
        Schedule::new(spec, zone, o.start_at, o.end_at, now)?;
        o.catch_up.checked()?;
        if o.jitter_ms > MAX_JITTER_MS {
            return Err(invalid("jitter", "at most a day"));
        }
        let action = match &o.action {
            ScheduleAction::Start { workflow, input } => {
                validate_name("workflow", workflow)
                    .map_err(|e| invalid("action", e.to_string()))?;
                ScheduleAction::Start {
                    workflow: workflow.clone(),
                    input: self.payload("the schedule's input", input)?,
                }
            }
            ScheduleAction::Enqueue {
                task,
                input,
                options,
            } => {
                validate_name("task", task).map_err(|e| invalid("action", e.to_string()))?;
                validate_queue_name(&options.queue).map_err(|e| invalid("action", e))?;
                super::tasks::check_task_times(options).map_err(limit)?;
                ScheduleAction::Enqueue {
                    task: task.clone(),
                    input: self.payload("the schedule's input", input)?,
                    options: options.clone(),
                }
            }
        };
        let mut record = ScheduleRecord {
            name: name.to_string(),
            spec: o.spec.trim().to_string(),
            time_zone: o.time_zone.clone(),
            action,
            overlap: o.overlap.to_string(),
            catch_up: o.catch_up.to_string(),
            jitter_ms: o.jitter_ms,
            paused: o.paused,
            note: o.note.clone(),
            start_at: o.start_at,
            end_at: o.end_at,
            remaining: o.remaining_actions,
            last_tick: Some(now),
            next_fire_at: None,
            running: None,
            buffered: None,
            missed: 0,
            settled_through: None,
            version: 0,
            created_at: now,
            updated_at: now,
        };
        record.next_fire_at = next_fire_at(&record)?;
        Ok(record)
    }

    /// Creates a schedule; its first tick is the first after now (or after its start).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSchedule`] naming the field at fault, [`Error::PayloadTooLarge`],
    /// [`Error::ScheduleExists`], or a store error. Nothing is written on error.
    pub async fn schedule_create(
        &self,
        name: &str,
        options: ScheduleOptions,
    ) -> Result<ScheduleRecord> {
        let now = self.calls.now().await;
        let record = self.schedule_record(name, &options, now)?;
        if !self.store.schedule_put(record.clone(), None).await? {
            return Err(Error::ScheduleExists(name.to_string()));
        }
        Ok(ScheduleRecord {
            version: 1,
            ..record
        })
    }

    /// Replaces a schedule's spec, zone, action and policies, keeping its progress: the
    /// ticks it handled stay handled, a run it started stays its running one.
    ///
    /// # Errors
    ///
    /// As [`Client::schedule_create`], and [`Error::ScheduleNotFound`].
    pub async fn schedule_update(
        &self,
        name: &str,
        options: ScheduleOptions,
    ) -> Result<ScheduleRecord> {
        let now = self.calls.now().await;
        let fresh = self.schedule_record(name, &options, now)?;
        self.schedule_change(name, |old, _| {
            let mut r = ScheduleRecord {
                last_tick: old.last_tick,
                running: old.running.clone(),
                buffered: old.buffered,
                missed: old.missed,
                settled_through: old.settled_through,
                created_at: old.created_at,
                version: old.version,
                ..fresh.clone()
            };
            r.next_fire_at = next_fire_at(&r)?;
            Ok(r)
        })
        .await
    }

    /// Pauses a schedule: no tick fires until it is resumed. `note` says why.
    ///
    /// # Errors
    ///
    /// [`Error::ScheduleNotFound`], or a store error.
    pub async fn schedule_pause(&self, name: &str, note: &str) -> Result<ScheduleRecord> {
        self.schedule_change(name, |old, _| {
            Ok(ScheduleRecord {
                paused: true,
                note: (!note.is_empty())
                    .then(|| note.to_string())
                    .or(old.note.clone()),
                ..old.clone()
            })
        })
        .await
    }

    /// Resumes a paused schedule from its next tick: ticks that came while it was paused
    /// are counted as missed, not fired (backfill them if they are wanted).
    ///
    /// # Errors
    ///
    /// [`Error::ScheduleNotFound`], or a store error.
    pub async fn schedule_resume(&self, name: &str) -> Result<ScheduleRecord> {
        self.schedule_change(name, |old, now| {
            if !old.paused {
                return Ok(old.clone());
            }
            let parsed = Parsed::of(old)?;
            let after = old.last_tick.unwrap_or(old.created_at);
            let passed = if parsed.schedule.spec.follows_runs() {
                0
            } else {
                parsed.schedule.between(after, now, MAX_BACKFILL).len() as u64
            };
            let mut r = ScheduleRecord {
                paused: false,
                last_tick: Some(now.max(after)),
                missed: old.missed + passed,
                ..old.clone()
            };
            r.next_fire_at = next_fire_at(&r)?;
            Ok(r)
        })
        .await
    }

    /// Fires a schedule now, whatever its spec, overlap policy or pause say: one run with
    /// the tick time now (kind `manual`). It becomes the schedule's running one (the run its
    /// overlap policy watches) unless the run the schedule started last is still going: the
    /// policy then goes on watching that one.
    ///
    /// # Errors
    ///
    /// [`Error::ScheduleNotFound`], or a store error.
    pub async fn schedule_trigger_now(&self, name: &str) -> Result<FireRecord> {
        for _ in 0..TRIES {
            let old = self.schedule(name).await?;
            let going = match &old.running {
                Some(run) => previous_run(self, &old.action, run).await.going,
                None => false,
            };
            let now = self.calls.now().await;
            let fire = NewFire {
                nominal: now,
                kind: FireKind::Manual,
                run: Some(run_for(&old, now, now)),
                skipped: None,
            };
            if let Some(mut records) = self.fire_once(&old, now, vec![fire], !going).await? {
                return records
                    .pop()
                    .ok_or_else(|| Error::InvalidInput("the store recorded no fire".into()));
            }
        }
        Err(changed_meanwhile(name))
    }

    /// Fires each tick of `from..=to` that the schedule has passed (none after its last
    /// handled tick: those are still its own to fire) and that has not started a run yet,
    /// once, in one transaction (kind `backfill`; overlap policies do not apply, and the
    /// schedule's running run stays the one they watch). Ticks at or before the schedule's
    /// `settled_through` are left alone: their fire records were dropped (it keeps its newest
    /// 1,000), so whether they ran cannot be told. Running it again, however long the range,
    /// fires nothing more. Returns the fires.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSchedule`] on `from` or `to` outside the calendar (years 1 to 9999), on
    /// `range` when `from` is after `to` or the range holds more than 10,000 ticks to look
    /// at; [`Error::ScheduleNotFound`]; a store error.
    pub async fn schedule_backfill(
        &self,
        name: &str,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<FireRecord>> {
        check_time("from", from).map_err(limit)?;
        check_time("to", to).map_err(limit)?;
        if from > to {
            return Err(invalid("range", "the start of the range is after its end"));
        }
        for _ in 0..TRIES {
            let old = self.schedule(name).await?;
            let parsed = Parsed::of(&old)?;
            if parsed.schedule.spec.follows_runs() {
                return Err(invalid(
                    "spec",
                    "an `after` schedule follows its runs, not a calendar: it has no past ticks to backfill",
                ));
            }
            let until = to.min(old.last_tick.unwrap_or(old.created_at));
            let after = Timestamp(from.0.saturating_sub(1))
                .max(old.settled_through.unwrap_or(Timestamp(i64::MIN)));
            let ticks = parsed.schedule.between(after, until, MAX_BACKFILL + 1);
            if ticks.len() > MAX_BACKFILL {
                return Err(invalid(
                    "range",
                    format!("more than {MAX_BACKFILL} ticks: backfill a shorter range"),
                ));
            }
            let (Some(first), Some(last)) = (ticks.first(), ticks.last()) else {
                return Ok(Vec::new());
            };
            // Read after the schedule: a fire since would have moved its version, and the
            // compare-and-set below would refuse this one.
            let started: std::collections::HashSet<i64> = self
                .store
                .schedule_fires(FireQuery {
                    schedule: name.to_string(),
                    from: *first,
                    to: *last,
                    limit: u32::try_from(MAX_BACKFILL * 3).unwrap_or(u32::MAX),
                })
                .await?
                .iter()
                .filter(|f| f.run.is_some() && f.kind != FireKind::Manual)
                .map(|f| f.nominal.0)
                .collect();
            let now = self.calls.now().await;
            let fires: Vec<NewFire> = ticks
                .into_iter()
                .filter(|t| !started.contains(&t.0))
                .map(|t| NewFire {
                    nominal: t,
                    kind: FireKind::Backfill,
                    run: Some(run_for(&old, t, now)),
                    skipped: None,
                })
                .collect();
            if fires.is_empty() {
                return Ok(Vec::new());
            }
            if let Some(records) = self.fire_once(&old, now, fires, false).await? {
                return Ok(records);
            }
        }
        Err(changed_meanwhile(name))
    }

    /// Deletes a schedule and its fire records; runs it started go on.
    ///
    /// # Errors
    ///
    /// [`Error::ScheduleNotFound`], or a store error.
    pub async fn schedule_delete(&self, name: &str) -> Result<()> {
        if self.store.schedule_delete(name).await? {
            Ok(())
        } else {
            Err(Error::ScheduleNotFound(name.to_string()))
        }
    }

    /// Every schedule, by name.
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn schedules(&self) -> Result<Vec<ScheduleRecord>> {
        Ok(self.store.schedule_list().await?)
    }

    /// The schedule `name`.
    ///
    /// # Errors
    ///
    /// [`Error::ScheduleNotFound`], or a store error.
    pub async fn schedule(&self, name: &str) -> Result<ScheduleRecord> {
        self.store
            .schedule_get(name)
            .await?
            .ok_or_else(|| Error::ScheduleNotFound(name.to_string()))
    }

    /// The schedule `name`, its next `upcoming` ticks, and its latest `recent` fires (at most
    /// 1,000) with where each run stands (read concurrently: one round trip's wait).
    ///
    /// # Errors
    ///
    /// [`Error::ScheduleNotFound`], or a store error.
    pub async fn schedule_describe(
        &self,
        name: &str,
        upcoming: usize,
        recent: u32,
    ) -> Result<ScheduleDescription> {
        let schedule = self.schedule(name).await?;
        let parsed = Parsed::of(&schedule)?;
        let upcoming = match (schedule.paused, schedule.next_fire_at) {
            // Its next tick depends on when the run ends: only the next look is known.
            (false, Some(at)) if parsed.schedule.spec.follows_runs() => vec![at],
            (false, Some(_)) => parsed.schedule.upcoming(
                schedule.last_tick.unwrap_or(schedule.created_at),
                upcoming.min(1_000),
            ),
            _ => Vec::new(),
        };
        let fires = self
            .schedule_fires(name, Timestamp(i64::MIN), Timestamp(i64::MAX), recent)
            .await?;
        let statuses = futures::future::join_all(
            fires
                .iter()
                .map(|f| self.run_status(&schedule.action, f.run.as_deref())),
        )
        .await;
        let recent = fires
            .into_iter()
            .zip(statuses)
            .map(|(fire, status)| FireResult { fire, status })
            .collect();
        Ok(ScheduleDescription {
            schedule,
            upcoming,
            recent,
        })
    }

    /// The fire records of `name` with a tick in `from..=to`, newest first, at most `limit`
    /// (and at most the 1,000 a schedule keeps).
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn schedule_fires(
        &self,
        name: &str,
        from: Timestamp,
        to: Timestamp,
        limit: u32,
    ) -> Result<Vec<FireRecord>> {
        Ok(self
            .store
            .schedule_fires(FireQuery {
                schedule: name.to_string(),
                from,
                to,
                limit: limit.min(FIRES_KEPT),
            })
            .await?)
    }

    /// Where a run stands: its instance's status or its task's state; `None` when there is
    /// none or it is gone.
    async fn run_status(&self, action: &ScheduleAction, run: Option<&str>) -> Option<String> {
        let run = run?;
        match action {
            ScheduleAction::Start { .. } => {
                self.status(run).await.ok().map(|r| r.status.to_string())
            }
            ScheduleAction::Enqueue { .. } => {
                let id = run.parse::<i64>().ok()?;
                self.task(ratchet_store::TaskId(id))
                    .await
                    .ok()
                    .map(|t| t.state.to_string())
            }
        }
    }

    /// Reads, changes with `change` (given the stored schedule and the time) and writes back
    /// a schedule, again while another write comes first.
    async fn schedule_change(
        &self,
        name: &str,
        change: impl Fn(&ScheduleRecord, Timestamp) -> Result<ScheduleRecord>,
    ) -> Result<ScheduleRecord> {
        for _ in 0..TRIES {
            let old = self.schedule(name).await?;
            let now = self.calls.now().await;
            let new = ScheduleRecord {
                updated_at: now,
                ..change(&old, now)?
            };
            if new == old {
                return Ok(old);
            }
            if self
                .store
                .schedule_put(new.clone(), Some(old.version))
                .await?
            {
                return Ok(ScheduleRecord {
                    version: old.version + 1,
                    ..new
                });
            }
        }
        Err(Error::InvalidInput(format!(
            "schedule {name} changed {TRIES} times while being written: try again"
        )))
    }

    /// Writes `fires` as one fire of the schedule `old` read, if it is still at that version:
    /// `None` when another write came first. `watch`: whether the last run started becomes
    /// the schedule's running one.
    async fn fire_once(
        &self,
        old: &ScheduleRecord,
        now: Timestamp,
        fires: Vec<NewFire>,
        watch: bool,
    ) -> Result<Option<Vec<FireRecord>>> {
        let firing = ScheduleFiring {
            schedule: ScheduleRecord {
                updated_at: now,
                ..old.clone()
            },
            expect_version: old.version,
            fires,
            now,
            watch,
            stop: None,
        };
        let records = self.store.schedule_fire(firing).await?;
        if let (Some(_), Some(shared)) = (&records, &self.local) {
            shared.wake.remote_work.notify_one();
        }
        Ok(records)
    }
}

/// A change that lost the compare-and-set every time it tried.
fn changed_meanwhile(name: &str) -> Error {
    Error::InvalidInput(format!(
        "schedule {name} changed {TRIES} times while being fired: try again"
    ))
}

/// When `r` next fires after its last handled tick; `None` when no run is left to start.
fn next_fire_at(r: &ScheduleRecord) -> Result<Option<Timestamp>> {
    if r.remaining == Some(0) {
        return Ok(None);
    }
    let parsed = Parsed::of(r)?;
    Ok(parsed.next_fire_at(&r.name, r.last_tick.unwrap_or(r.created_at)))
}
