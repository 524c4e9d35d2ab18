//! What a due schedule does now: which ticks fire, which are skipped and why, and the
//! schedule's state after. A pure function of the stored schedule, the time and whether its
//! last run is still going, so that every process plans the same fire; the store's
//! compare-and-set lets one of them write it.

use std::time::Duration;

use ratchet_core::limits::MAX_DURATION;
use ratchet_core::Timestamp;
use ratchet_schedule::{
    jitter, keep, parse_zone, tick_id, CatchUp, Overlap, Schedule, SpecError, MAX_CATCH_UP,
};
use ratchet_store::{
    FireKind, FireRun, IfExists, NewFire, NewInstance, NewTask, ScheduleAction, ScheduleFiring,
    ScheduleRecord, StopRun, TaskId,
};

/// A tick fired no later than this after its time (plus its jitter) is on time: catch-up
/// policies apply only to ticks later than that (every process down, or far behind).
pub(crate) const LATE_GRACE: Duration = Duration::from_secs(5);

/// How often a schedule with a buffered tick looks whether the run before it finished.
pub(crate) const BUFFER_RECHECK: Duration = Duration::from_secs(1);

/// Ticks looked at in one fire at most; a longer backlog is worked through fire by fire.
const MAX_TICKS: usize = 1_000;

/// A stored schedule's fields, read.
pub(crate) struct Parsed {
    pub(crate) schedule: Schedule,
    pub(crate) overlap: Overlap,
    pub(crate) catch_up: CatchUp,
    pub(crate) jitter: Duration,
}

impl Parsed {
    /// Reads `r`'s spec, zone, window and policies.
    pub(crate) fn of(r: &ScheduleRecord) -> Result<Self, SpecError> {
        // Not `Schedule::new`: a stored schedule was checked when written, and one that ran
        // out simply has no next tick.
        let schedule = Schedule {
            spec: r.spec.parse()?,
            zone: parse_zone(&r.time_zone)?,
            start: r.start_at,
            end: r.end_at,
        };
        // A policy stored before its limits came is read within them.
        let catch_up = match r.catch_up.parse()? {
            CatchUp::Last(n) => CatchUp::Last(n.min(MAX_CATCH_UP)),
            CatchUp::Within(d) => CatchUp::Within(d.min(MAX_DURATION)),
            skip => skip,
        };
        Ok(Self {
            schedule,
            overlap: r.overlap.parse()?,
            catch_up,
            jitter: Duration::from_millis(r.jitter_ms),
        })
    }

    /// When the tick at `nominal` fires: its time plus its jitter.
    pub(crate) fn fire_at(&self, name: &str, nominal: Timestamp) -> Timestamp {
        nominal.plus(jitter(name, nominal, self.jitter))
    }

    /// When the first tick after `after` fires; `None` when none is left.
    pub(crate) fn next_fire_at(&self, name: &str, after: Timestamp) -> Option<Timestamp> {
        self.schedule
            .next_after(after)
            .map(|n| self.fire_at(name, n))
    }
}

/// The run a tick of `r` starts: an instance whose id names the schedule and tick, or a task
/// whose metadata does.
pub(crate) fn run_for(r: &ScheduleRecord, nominal: Timestamp, now: Timestamp) -> FireRun {
    match &r.action {
        ScheduleAction::Start { workflow, input } => FireRun::Instance(NewInstance {
            id: tick_id(&r.name, nominal),
            name: workflow.clone(),
            input: input.clone(),
            parent: None,
            if_exists: IfExists::UseExisting,
            trace: None,
        }),
        ScheduleAction::Enqueue {
            task,
            input,
            options,
        } => {
            let mut options = options.clone();
            let mark = serde_json::json!({
                "schedule": r.name,
                "tick": ratchet_schedule::rfc3339(nominal),
            });
            options.metadata = Some(match options.metadata.take() {
                Some(serde_json::Value::Object(mut fields)) => {
                    fields.insert("ratchet_schedule".into(), mark);
                    serde_json::Value::Object(fields)
                }
                Some(other) => serde_json::json!({"ratchet_schedule": mark, "value": other}),
                None => serde_json::json!({ "ratchet_schedule": mark }),
            });
            FireRun::Task(NewTask::standalone(
                task.clone(),
                input.clone(),
                &options,
                now,
            ))
        }
    }
}

/// Where the run a schedule's last fire started stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Previous {
    /// It still runs.
    pub(crate) going: bool,
    /// When it ended, if it did and that is known.
    pub(crate) ended_at: Option<Timestamp>,
}

/// What the dispatcher does with a due schedule.
pub(crate) struct Plan {
    /// The write (with the previous run to stop, if any, in the same transaction), or `None`
    /// when nothing changed.
    pub(crate) firing: Option<ScheduleFiring>,
}

/// The run `r`'s fires started last, to stop as `policy` (`cancel_previous` or
/// `terminate_previous`) says; `None` when there is none it can name.
fn stop_of(r: &ScheduleRecord, policy: Overlap) -> Option<StopRun> {
    let run = r.running.clone()?;
    let reason = format!("replaced by the next tick of schedule {}", r.name);
    match &r.action {
        ScheduleAction::Start { .. } if policy == Overlap::TerminatePrevious => {
            Some(StopRun::Terminate {
                instance: run,
                reason,
            })
        }
        ScheduleAction::Start { .. } => Some(StopRun::Cancel {
            instance: run,
            reason,
        }),
        // For a task, cancel and terminate are one.
        ScheduleAction::Enqueue { .. } => {
            run.parse().ok().map(|id| StopRun::CancelTask(TaskId(id)))
        }
    }
}

/// Plans the fire of `r` at `now`, given where the run its last fire started stands.
pub(crate) fn plan(
    r: &ScheduleRecord,
    parsed: &Parsed,
    now: Timestamp,
    previous: Previous,
) -> Plan {
    if parsed.schedule.spec.follows_runs() {
        return plan_after(r, parsed, now, previous);
    }
    let previous_running = previous.going;
    let after = r.last_tick.unwrap_or(r.created_at);
    let ticks = parsed.schedule.between(after, now, MAX_TICKS);
    // A tick whose jittered time is still ahead waits, and so do those after it.
    let cut = ticks.iter().position(|t| parsed.fire_at(&r.name, *t) > now);
    let (considered, handled_until) = match cut {
        Some(i) => (&ticks[..i], Timestamp(ticks[i].0 - 1)),
        // No tick yet: nothing moves (and nothing is written).
        None if ticks.is_empty() => (&ticks[..], after),
        None if ticks.len() == MAX_TICKS => (&ticks[..], ticks[MAX_TICKS - 1]),
        None => (&ticks[..], now),
    };
    let grace = parsed.jitter + LATE_GRACE;
    // A backlog longer than one look (every process was down for more than MAX_TICKS ticks)
    // is worked through a look at a time, oldest first; the catch-up policy still applies to
    // the whole of it, so each look counts what was missed after it.
    let more = cut.is_none()
        && ticks.len() == MAX_TICKS
        && parsed
            .schedule
            .next_after(ticks[MAX_TICKS - 1])
            .is_some_and(|t| t <= now);
    let later_missed = match parsed.catch_up {
        CatchUp::Last(n) if more => {
            let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
            let last_missed = Timestamp(now.0.saturating_sub(grace_ms).saturating_sub(1));
            parsed
                .schedule
                .between(ticks[MAX_TICKS - 1], last_missed, n as usize)
                .len()
        }
        _ => 0,
    };
    let (kept, missed) = keep(considered, now, parsed.catch_up, grace, later_missed);
    let mut next = r.clone();
    next.last_tick = Some(handled_until.max(after));
    next.missed = r.missed + missed as u64;
    let mut fires = Vec::new();
    let mut busy = previous_running;
    let mut stop_previous = None;
    let start = |t: Timestamp, next: &mut ScheduleRecord, fires: &mut Vec<NewFire>| {
        fires.push(NewFire {
            nominal: t,
            kind: FireKind::Scheduled,
            run: Some(run_for(r, t, now)),
            skipped: None,
        });
        next.remaining = next.remaining.map(|n| n.saturating_sub(1));
    };
    let skip = |t: Timestamp, why: &str, fires: &mut Vec<NewFire>| {
        fires.push(NewFire {
            nominal: t,
            kind: FireKind::Scheduled,
            run: None,
            skipped: Some(why.into()),
        });
    };
    // A tick buffered behind a run that has finished since goes first.
    if let Some(b) = r.buffered {
        if !busy && next.remaining != Some(0) {
            start(b, &mut next, &mut fires);
            next.buffered = None;
            busy = true;
        }
    }
    let last = kept.len().saturating_sub(1);
    for (i, t) in kept.iter().copied().enumerate() {
        if next.remaining == Some(0) {
            skip(t, "no actions remaining", &mut fires);
            continue;
        }
        match parsed.overlap {
            Overlap::AllowAll => start(t, &mut next, &mut fires),
            Overlap::Skip if busy => skip(t, "the previous run is still running", &mut fires),
            Overlap::BufferOne if busy => {
                if next.buffered.is_none() {
                    next.buffered = Some(t);
                } else {
                    skip(t, "a run is already buffered", &mut fires);
                }
            }
            // Only the latest tick of those due starts: a later look at a longer backlog
            // has a later one.
            Overlap::CancelPrevious | Overlap::TerminatePrevious if i < last || more => {
                skip(t, "replaced by a later tick", &mut fires);
            }
            Overlap::CancelPrevious | Overlap::TerminatePrevious => {
                if busy {
                    stop_previous = stop_of(r, parsed.overlap);
                }
                start(t, &mut next, &mut fires);
            }
            Overlap::Skip | Overlap::BufferOne => start(t, &mut next, &mut fires),
        }
        busy = true;
    }
    next.next_fire_at = if next.remaining == Some(0) {
        None
    } else {
        let tick = next.last_tick.and_then(|l| parsed.next_fire_at(&r.name, l));
        match next.buffered {
            Some(_) => {
                let recheck = now.plus(BUFFER_RECHECK);
                Some(tick.map_or(recheck, |t| t.min(recheck)))
            }
            None => tick,
        }
    };
    finish(r, next, fires, now, stop_previous)
}

/// A schedule whose ticks follow its runs (`after`): while a run goes it looks again now and
/// then; once none goes, the next tick is the delay after the last one ended.
fn plan_after(r: &ScheduleRecord, parsed: &Parsed, now: Timestamp, previous: Previous) -> Plan {
    let mut next = r.clone();
    let mut fires = Vec::new();
    if previous.going {
        next.next_fire_at = Some(now.plus(BUFFER_RECHECK));
    } else {
        let base = previous.ended_at.or(r.last_tick).unwrap_or(r.created_at);
        next.next_fire_at = match parsed.schedule.next_after(base) {
            _ if r.remaining == Some(0) => None,
            Some(tick) if parsed.fire_at(&r.name, tick) <= now => {
                fires.push(NewFire {
                    nominal: tick,
                    kind: FireKind::Scheduled,
                    run: Some(run_for(r, tick, now)),
                    skipped: None,
                });
                next.last_tick = Some(tick);
                next.remaining = r.remaining.map(|n| n.saturating_sub(1));
                (next.remaining != Some(0)).then(|| now.plus(BUFFER_RECHECK))
            }
            Some(tick) => Some(parsed.fire_at(&r.name, tick)),
            None => None,
        };
    }
    finish(r, next, fires, now, None)
}

/// The plan that writes `next` and `fires`, stopping `stop` in the same transaction, unless
/// nothing changed.
fn finish(
    r: &ScheduleRecord,
    mut next: ScheduleRecord,
    fires: Vec<NewFire>,
    now: Timestamp,
    stop: Option<StopRun>,
) -> Plan {
    // Never due again at once: a schedule that changed under a process would spin.
    next.next_fire_at = next.next_fire_at.map(|t| t.max(Timestamp(now.0 + 1)));
    next.updated_at = now;
    let unchanged = fires.is_empty()
        && next.last_tick == r.last_tick
        && next.next_fire_at == r.next_fire_at
        && next.buffered == r.buffered
        && next.missed == r.missed;
    Plan {
        firing: (!unchanged).then_some(ScheduleFiring {
            schedule: next,
            expect_version: r.version,
            fires,
            now,
            // The schedule's own ticks: the last run they start is the one to watch.
            watch: true,
            stop,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(spec: &str, overlap: &str, catch_up: &str) -> ScheduleRecord {
        ScheduleRecord {
            name: "s".into(),
            spec: spec.into(),
            time_zone: "UTC".into(),
            action: ScheduleAction::Start {
                workflow: "w".into(),
                input: json!(null),
            },
            overlap: overlap.into(),
            catch_up: catch_up.into(),
            jitter_ms: 0,
            paused: false,
            note: None,
            start_at: None,
            end_at: None,
            remaining: None,
            last_tick: Some(Timestamp(10_000)),
            next_fire_at: Some(Timestamp(11_000)),
            running: None,
            buffered: None,
            missed: 0,
            settled_through: None,
            version: 1,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
        }
    }

    fn idle() -> Previous {
        Previous::default()
    }

    fn going() -> Previous {
        Previous {
            going: true,
            ended_at: None,
        }
    }

    #[test]
    fn an_after_schedule_starts_the_delay_after_the_last_run_ended() {
        let mut r = record("after 5s", "skip", "last 1");
        r.running = Some("s@1".into());
        let parsed = Parsed::of(&r).expect("parsed");
        let busy = plan(&r, &parsed, Timestamp(20_000), going());
        let s = busy.firing.expect("looks again").schedule;
        assert_eq!(s.next_fire_at, Some(Timestamp(21_000)));
        let ended = Previous {
            going: false,
            ended_at: Some(Timestamp(19_000)),
        };
        let early = plan(&s, &parsed, Timestamp(23_000), ended);
        assert_eq!(
            early
                .firing
                .expect("sleeps until the tick")
                .schedule
                .next_fire_at,
            Some(Timestamp(24_000))
        );
        let due = plan(&s, &parsed, Timestamp(24_000), ended);
        assert_eq!(fired(&due), vec![(24_000, true)]);
    }

    fn fired(p: &Plan) -> Vec<(i64, bool)> {
        p.firing
            .as_ref()
            .map(|f| {
                f.fires
                    .iter()
                    .map(|x| (x.nominal.0, x.run.is_some()))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn on_time_ticks_fire_once_and_the_state_moves_past_them() {
        let r = record("every 1s", "skip", "last 1");
        let parsed = Parsed::of(&r).expect("parsed");
        let p = plan(&r, &parsed, Timestamp(12_100), idle());
        assert_eq!(
            fired(&p),
            vec![(11_000, true), (12_000, false)],
            "the second overlaps the first"
        );
        let s = &p.firing.as_ref().expect("a write").schedule;
        assert_eq!(s.last_tick, Some(Timestamp(12_100)));
        assert_eq!(s.next_fire_at, Some(Timestamp(13_000)));
        let nothing = plan(&r, &parsed, Timestamp(10_500), idle());
        assert!(nothing.firing.is_none(), "not due: nothing to write");
    }

    #[test]
    fn overlap_policies_decide_what_a_busy_schedule_does() {
        let at = Timestamp(11_010);
        let reason = "replaced by the next tick of schedule s".to_string();
        for (overlap, expect_run, stop) in [
            ("skip", false, None),
            ("allow_all", true, None),
            (
                "cancel_previous",
                true,
                Some(StopRun::Cancel {
                    instance: "s@1".into(),
                    reason: reason.clone(),
                }),
            ),
            (
                "terminate_previous",
                true,
                Some(StopRun::Terminate {
                    instance: "s@1".into(),
                    reason: reason.clone(),
                }),
            ),
        ] {
            let mut r = record("every 1s", overlap, "last 1");
            r.running = Some("s@1".into());
            let p = plan(&r, &Parsed::of(&r).expect("parsed"), at, going());
            assert_eq!(fired(&p), vec![(11_000, expect_run)], "{overlap}");
            let firing = p.firing.expect("a write");
            assert_eq!(
                firing.stop, stop,
                "{overlap}: stopped in the fire, or not at all"
            );
            assert!(firing.watch, "{overlap}: its run is the one to watch");
        }
        let r = record("every 1s", "buffer_one", "last 1");
        let parsed = Parsed::of(&r).expect("parsed");
        let p = plan(&r, &parsed, at, going());
        let s = p.firing.expect("a write").schedule;
        assert_eq!(s.buffered, Some(Timestamp(11_000)), "buffered, not fired");
        assert_eq!(s.next_fire_at, Some(Timestamp(12_000)), "looks again soon");
        let later = plan(&s, &parsed, Timestamp(11_500), idle());
        assert_eq!(
            fired(&later),
            vec![(11_000, true)],
            "fires once the run ended"
        );
    }

    #[test]
    fn catch_up_after_downtime_follows_its_policy() {
        // Down from 10 s to 40.5 s: 30 ticks, the last ones within the grace.
        let now = Timestamp(40_500);
        for (catch_up, runs) in [("skip", 5), ("last 3", 8), ("within 10s", 10)] {
            let r = record("every 1s", "allow_all", catch_up);
            let p = plan(&r, &Parsed::of(&r).expect("parsed"), now, idle());
            let f = p.firing.expect("a write");
            assert_eq!(f.fires.len(), runs, "{catch_up}");
            assert_eq!(
                f.schedule.missed as usize,
                30 - runs,
                "{catch_up}: the rest are counted as missed"
            );
        }
    }

    /// Plans `r` at `now` again and again, as the dispatcher does while a schedule is due,
    /// until nothing is left to write: every fire, and the schedule after.
    fn plan_until_caught_up(
        mut r: ScheduleRecord,
        now: Timestamp,
    ) -> (Vec<NewFire>, ScheduleRecord) {
        let parsed = Parsed::of(&r).expect("parsed");
        let mut fires = Vec::new();
        for _ in 0..100 {
            let Some(firing) = plan(&r, &parsed, now, idle()).firing else {
                return (fires, r);
            };
            fires.extend(firing.fires);
            r = ScheduleRecord {
                version: r.version + 1,
                ..firing.schedule
            };
        }
        panic!("never caught up: {r:?}");
    }

    #[test]
    fn catch_up_after_an_outage_longer_than_a_look_applies_to_all_it_missed() {
        // Down from 10 s for 2,500 ticks: the five newest are within the grace (on time).
        let now = Timestamp(2_510_500);
        let started = |fires: &[NewFire]| -> Vec<i64> {
            fires
                .iter()
                .filter(|f| f.run.is_some())
                .map(|f| f.nominal.0)
                .collect()
        };
        let on_time: Vec<i64> = (2_506..=2_510).map(|s| s * 1_000).collect();
        for (catch_up, newest) in [
            ("last 3", vec![2_503_000, 2_504_000, 2_505_000]),
            ("last 1", vec![2_505_000]),
            ("within 10s", (2_501..=2_505).map(|s| s * 1_000).collect()),
            ("skip", vec![]),
        ] {
            let r = record("every 1s", "allow_all", catch_up);
            let (fires, after) = plan_until_caught_up(r, now);
            let expected: Vec<i64> = newest.iter().chain(&on_time).copied().collect();
            assert_eq!(
                started(&fires),
                expected,
                "{catch_up}: the newest of all missed"
            );
            assert_eq!(
                after.missed as usize,
                2_500 - expected.len(),
                "{catch_up}: every other tick counted as missed"
            );
            assert_eq!(after.last_tick, Some(now), "{catch_up}: caught up");
        }
        // Replacing policies start only the latest tick of the whole backlog.
        let r = record("every 1s", "cancel_previous", "last 3");
        let (fires, _) = plan_until_caught_up(r, now);
        assert_eq!(started(&fires), vec![2_510_000]);
        assert_eq!(fires.len(), 8, "the others kept are recorded as replaced");
    }

    #[test]
    fn remaining_actions_run_out() {
        let mut r = record("every 1s", "allow_all", "last 10");
        r.remaining = Some(2);
        let p = plan(
            &r,
            &Parsed::of(&r).expect("parsed"),
            Timestamp(13_100),
            idle(),
        );
        assert_eq!(
            fired(&p),
            vec![(11_000, true), (12_000, true), (13_000, false)]
        );
        let s = p.firing.expect("a write").schedule;
        assert_eq!((s.remaining, s.next_fire_at), (Some(0), None));
    }

    #[test]
    fn a_tick_waits_for_its_jitter() {
        let mut r = record("every 1m", "allow_all", "last 1");
        r.jitter_ms = 30_000;
        r.last_tick = Some(Timestamp(0));
        let parsed = Parsed::of(&r).expect("parsed");
        let fire_at = parsed.fire_at("s", Timestamp(60_000));
        assert!(fire_at.0 >= 60_000 && fire_at.0 < 90_000);
        let early = plan(&r, &parsed, Timestamp(fire_at.0 - 1), idle());
        assert!(early.firing.as_ref().is_none_or(|f| f.fires.is_empty()));
        let due = plan(&r, &parsed, fire_at, idle());
        assert_eq!(fired(&due), vec![(60_000, true)]);
    }
}
