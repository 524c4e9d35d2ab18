//! The schedule dispatcher: one per runtime. It sleeps until the next schedule is due, a
//! schedule changes (a wake-up from the store) or, as a fallback, a while; then it fires what
//! is due. A fire costs one read of the due schedules, at most one read of the previous run
//! (for overlap policies) and one write; no process polls faster than its schedules tick.

use std::sync::Arc;
use std::time::Duration;

use ratchet_core::Timestamp;
use ratchet_schedule::Overlap;
use ratchet_store::{FireKind, ScheduleAction, ScheduleRecord, StopRun, Store, TaskId};

use super::plan::{plan, Parsed, Previous};
use crate::runtime::Shared;
use crate::{Client, Error};

/// Due schedules read at once.
const BATCH: u32 = 64;

/// How long a dispatcher sleeps at most when no schedule is due sooner: it is woken by every
/// schedule change a store pushes (PostgreSQL's notifications), so this is only a fallback.
const IDLE: Duration = Duration::from_secs(60);

/// The same on a store that pushes only this process's changes (SQLite): how soon another
/// process's new schedule is seen. Not every poll: an idle runtime costs one query per poll,
/// its claim's.
const IDLE_WITHOUT_PUSH: Duration = Duration::from_secs(2);

pub(crate) async fn run(shared: Arc<Shared>) {
    if !shared.config.schedules {
        return;
    }
    shared.clock.synced().await;
    let wakeups = shared.store.wakeups();
    let idle = match &wakeups {
        Some(w) if w.cross_process => IDLE,
        _ => IDLE_WITHOUT_PUSH,
    };
    let mut changes = wakeups.map(|w| w.schedules);
    let client = Client::local(shared.clone());
    loop {
        if shared.lifecycle.is_closing() {
            return;
        }
        let now = shared.now();
        let wait = match shared.store.schedule_due(now, BATCH).await {
            Ok(due) => {
                let (mut wrote, mut failed) = (false, false);
                for r in due.due {
                    match fire(&shared, &client, r, now).await {
                        Fired::Wrote => wrote = true,
                        Fired::Nothing => {}
                        Fired::Failed => failed = true,
                    }
                }
                match due.next {
                    // The next ticks of those written are theirs to say: read again.
                    _ if wrote => Duration::ZERO,
                    _ if failed => Duration::from_secs(1),
                    Some(next) => next.since(shared.now()),
                    None => idle,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not read the due schedules; will try again");
                Duration::from_secs(1)
            }
        };
        let changed = async {
            match changes.as_mut() {
                Some(c) => {
                    if c.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                    c.borrow_and_update();
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait.min(idle)) => {}
            () = changed => {}
            () = shared.lifecycle.closed() => return,
        }
    }
}

/// What became of a due schedule.
enum Fired {
    /// A fire was written (here, or by another process first).
    Wrote,
    /// Nothing was due after all.
    Nothing,
    /// The store failed: try again shortly.
    Failed,
}

/// Plans and writes the fire of one due schedule, then tells this process of what it did.
async fn fire(shared: &Arc<Shared>, client: &Client, r: ScheduleRecord, now: Timestamp) -> Fired {
    let written = fire_on(shared.store.as_ref(), client, r, now).await;
    if let Fired::Wrote = written.fired {
        if written.started {
            // What it started may run here: look for work now.
            shared.wake.remote_work.notify_one();
        }
        if let Some(stop) = &written.stopped {
            if let StopRun::Terminate { instance, .. } = stop {
                shared.cache.forget(instance);
            }
            // A cancelled instance has a turn to run, maybe here.
            shared.wake.work.notify_one();
        }
    }
    written.fired
}

/// What a fire wrote.
struct Written {
    fired: Fired,
    /// It started runs.
    started: bool,
    /// The run it stopped (if it still ran).
    stopped: Option<StopRun>,
}

impl From<Fired> for Written {
    fn from(fired: Fired) -> Self {
        Self {
            fired,
            started: false,
            stopped: None,
        }
    }
}

/// Plans the fire of `r` at `now` and writes it to `store` as one compare-and-set: the runs
/// it starts, and the previous run it stops (overlap cancel_previous, terminate_previous),
/// in the same transaction, so a fire that loses to another write stops nothing.
async fn fire_on(store: &dyn Store, client: &Client, r: ScheduleRecord, now: Timestamp) -> Written {
    let parsed = match Parsed::of(&r) {
        Ok(p) => p,
        Err(e) => {
            // Checked when written, so only a schedule written by something else gets here:
            // paused, so that it is not due again and again.
            tracing::warn!(schedule = %r.name, error = %e, "a schedule cannot be read; pausing it");
            let paused = ScheduleRecord {
                paused: true,
                note: Some(format!("paused by Ratchet: {e}")),
                updated_at: now,
                ..r.clone()
            };
            return match store.schedule_put(paused, Some(r.version)).await {
                Ok(_) => Fired::Wrote.into(),
                Err(e) => {
                    tracing::warn!(schedule = %r.name, error = %e, "could not pause it");
                    Fired::Failed.into()
                }
            };
        }
    };
    let follows_runs = parsed.schedule.spec.follows_runs();
    let previous = match (&r.running, parsed.overlap) {
        (None, _) => Previous::default(),
        (_, Overlap::AllowAll) if !follows_runs => Previous::default(),
        (Some(run), _) => previous_run(client, &r.action, run).await,
    };
    let planned = plan(&r, &parsed, now, previous);
    let Some(firing) = planned.firing else {
        return Fired::Nothing.into();
    };
    let started = firing.fires.iter().any(|f| f.run.is_some());
    let stopped = firing.stop.clone();
    let fires = firing.fires.len();
    match store.schedule_fire(firing).await {
        Ok(Some(records)) => {
            for f in records.iter().filter(|f| f.kind == FireKind::Scheduled) {
                let late = f.actual.since(f.nominal);
                crate::metrics::schedule_fire(&r.name, late, f.run.is_some());
                tracing::debug!(schedule = %r.name, tick = %ratchet_schedule::rfc3339(f.nominal), run = ?f.run, skipped = ?f.skipped, late_ms = late.as_millis() as u64, "schedule fired");
            }
            Written {
                fired: Fired::Wrote,
                started,
                stopped,
            }
        }
        // Another process fired it first, or it was changed: the next look reads it again.
        Ok(None) => {
            tracing::debug!(schedule = %r.name, fires, "another process wrote the schedule first");
            Fired::Wrote.into()
        }
        Err(e) => {
            tracing::warn!(schedule = %r.name, error = %e, "could not fire a schedule; will try again");
            Fired::Failed.into()
        }
    }
}

/// Where the run `run` of a schedule doing `action` stands. When it cannot be told (the
/// database is away), it is taken as going: a tick skipped is better than two at once.
pub(crate) async fn previous_run(client: &Client, action: &ScheduleAction, run: &str) -> Previous {
    let ended = |at: Option<Timestamp>| Previous {
        going: false,
        ended_at: at,
    };
    let previous = match action {
        ScheduleAction::Start { .. } => match client.status(run).await {
            Ok(r) if r.status.is_finished() => Ok(ended(r.finished_at)),
            Ok(_) => Ok(Previous {
                going: true,
                ended_at: None,
            }),
            Err(Error::NotFound(_)) => Ok(ended(None)),
            Err(e) => Err(e),
        },
        ScheduleAction::Enqueue { .. } => match run.parse::<i64>() {
            Ok(id) => match client.task(TaskId(id)).await {
                Ok(t) if t.state.is_finished() => Ok(ended(t.finished_at)),
                Ok(_) => Ok(Previous {
                    going: true,
                    ended_at: None,
                }),
                Err(Error::TaskNotFound(_)) => Ok(ended(None)),
                Err(e) => Err(e),
            },
            Err(_) => Ok(ended(None)),
        },
    };
    previous.unwrap_or_else(|e| {
        tracing::warn!(run, error = %e, "could not read a schedule's previous run; taking it as running");
        Previous {
            going: true,
            ended_at: None,
        }
    })
}

#[cfg(test)]
mod tests {
    use ratchet_store::InstanceStatus;

    use super::*;
    use crate::{ScheduleOptions, StartOptions};

    /// Two dispatchers find the same tick of a terminate_previous schedule due while its run
    /// goes on; the other one's write lands first. This one's compare-and-set then fails, and
    /// the run it would have replaced goes on (it was terminated before the compare-and-set,
    /// leaving the schedule with no run at all); from the version stored, the fire replaces
    /// it.
    #[tokio::test]
    async fn a_fire_that_loses_its_compare_and_set_stops_no_run() {
        let dir = tempfile::tempdir().expect("a directory");
        let store: Arc<dyn Store> = Arc::new(
            ratchet_store_sqlite::SqliteStore::open(dir.path().join("race.db"))
                .await
                .expect("a store"),
        );
        let client = Client::new(store.clone());
        let options = ScheduleOptions::start("every 1s", "report", ())
            .expect("options")
            .overlap(Overlap::TerminatePrevious);
        client
            .schedule_create("nightly", options)
            .await
            .expect("created");
        client
            .start_with("report", (), StartOptions::id("nightly@previous"))
            .await
            .expect("started");
        // The schedule's last fire started that run.
        let r = store
            .schedule_get("nightly")
            .await
            .expect("read")
            .expect("it");
        let running = ScheduleRecord {
            running: Some("nightly@previous".into()),
            ..r.clone()
        };
        assert!(store
            .schedule_put(running, Some(r.version))
            .await
            .expect("written"));
        let read = store
            .schedule_get("nightly")
            .await
            .expect("read")
            .expect("it");
        let due = Timestamp(read.next_fire_at.expect("a next tick").0 + 10);
        // The other dispatcher's write comes first.
        let other = ScheduleRecord {
            note: Some("written by another process".into()),
            ..read.clone()
        };
        assert!(store
            .schedule_put(other, Some(read.version))
            .await
            .expect("written"));
        let lost = fire_on(store.as_ref(), &client, read, due).await;
        assert!(matches!(lost.fired, Fired::Wrote) && lost.stopped.is_none());
        let previous = client.status("nightly@previous").await.expect("status");
        assert_eq!(
            previous.status,
            InstanceStatus::Pending,
            "a fire that lost its compare-and-set stopped nothing"
        );
        // From the version stored, the tick replaces the run.
        let read = store
            .schedule_get("nightly")
            .await
            .expect("read")
            .expect("it");
        let won = fire_on(store.as_ref(), &client, read, due).await;
        assert!(won.started && won.stopped.is_some());
        let previous = client.status("nightly@previous").await.expect("status");
        assert_eq!(previous.status, InstanceStatus::Terminated);
        let read = store
            .schedule_get("nightly")
            .await
            .expect("read")
            .expect("it");
        let new = read.running.expect("a new run");
        assert_ne!(new, "nightly@previous");
        assert_eq!(
            client.status(&new).await.expect("status").status,
            InstanceStatus::Pending
        );
    }
}
