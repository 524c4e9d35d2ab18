//! The schedule dispatcher: one per runtime. It sleeps until the next schedule is due, a
//! schedule changes (a wake-up from the store) or, as a fallback, a while; then it fires what
//! is due. A fire costs one read of the due schedules, at most one read of the previous run
//! (for overlap policies) and one write; no process polls faster than its schedules tick.

use std::sync::Arc;
use std::time::Duration;

use ratchet_core::Timestamp;
use ratchet_schedule::Overlap;
use ratchet_store::{FireKind, ScheduleAction, ScheduleRecord, TaskId};

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

/// Plans and writes the fire of one due schedule.
async fn fire(shared: &Arc<Shared>, client: &Client, r: ScheduleRecord, now: Timestamp) -> Fired {
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
            return match shared.store.schedule_put(paused, Some(r.version)).await {
                Ok(_) => Fired::Wrote,
                Err(e) => {
                    tracing::warn!(schedule = %r.name, error = %e, "could not pause it");
                    Fired::Failed
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
        return Fired::Nothing;
    };
    let starts = firing.fires.iter().any(|f| f.run.is_some());
    if let (Some(policy), Some(run), true) = (planned.stop_previous, &r.running, starts) {
        stop(client, &r.action, run, policy, &r.name).await;
    }
    let fires = firing.fires.len();
    match shared.store.schedule_fire(firing).await {
        Ok(Some(records)) => {
            for f in records.iter().filter(|f| f.kind == FireKind::Scheduled) {
                let late = f.actual.since(f.nominal);
                crate::metrics::schedule_fire(&r.name, late, f.run.is_some());
                tracing::debug!(schedule = %r.name, tick = %ratchet_schedule::rfc3339(f.nominal), run = ?f.run, skipped = ?f.skipped, late_ms = late.as_millis() as u64, "schedule fired");
            }
            if starts {
                // What it started may run here: look for work now.
                shared.wake.remote_work.notify_one();
            }
            Fired::Wrote
        }
        // Another process fired it first, or it was changed: the next look reads it again.
        Ok(None) => {
            tracing::debug!(schedule = %r.name, fires, "another process wrote the schedule first");
            Fired::Wrote
        }
        Err(e) => {
            tracing::warn!(schedule = %r.name, error = %e, "could not fire a schedule; will try again");
            Fired::Failed
        }
    }
}

/// Where the run `run` of a schedule doing `action` stands. When it cannot be told (the
/// database is away), it is taken as going: a tick skipped is better than two at once.
async fn previous_run(client: &Client, action: &ScheduleAction, run: &str) -> Previous {
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

/// Cancels or terminates a schedule's previous run (overlap `cancel_previous`,
/// `terminate_previous`); a run that finished meanwhile is left alone.
async fn stop(client: &Client, action: &ScheduleAction, run: &str, policy: Overlap, name: &str) {
    let reason = format!("replaced by the next tick of schedule {name}");
    let outcome = match action {
        ScheduleAction::Start { .. } if policy == Overlap::TerminatePrevious => {
            client.terminate(run, &reason).await
        }
        ScheduleAction::Start { .. } => client.cancel(run, &reason).await,
        ScheduleAction::Enqueue { .. } => match run.parse::<i64>() {
            Ok(id) => client.task_cancel(TaskId(id)).await.map(|_| ()),
            Err(_) => Ok(()),
        },
    };
    match outcome {
        Ok(()) | Err(Error::Finished { .. } | Error::NotFound(_) | Error::TaskNotFound(_)) => {}
        Err(e) => {
            tracing::warn!(schedule = name, run, error = %e, "could not stop the previous run")
        }
    }
}
