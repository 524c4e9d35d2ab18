//! The fleet: the processes that said they are alive, and the names they run. A server that
//! runs no worker checks a start or an enqueue against it, so a name that nothing runs is
//! refused instead of waiting forever; the view is read at most once a second (a workflow's
//! apply, rare, reads it afresh).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratchet::{Timestamp, WorkerRecord};
use tokio::sync::Mutex;

use crate::problem::Problem;
use crate::state::ServerState;

/// How long a process seen last is still counted as one that runs its names: a worker
/// restarting, or briefly cut off, should not make its names unknown.
const RECENT: Duration = Duration::from_secs(60 * 60);

/// How long a read of the fleet serves checks.
const FRESH: Duration = Duration::from_secs(1);

/// Names some live or recent process runs.
#[derive(Debug, Default)]
pub(crate) struct Served {
    orchestrations: BTreeSet<String>,
    activities: BTreeSet<String>,
    tasks: BTreeSet<String>,
}

/// The last read of the fleet.
#[derive(Default)]
pub(crate) struct Fleet {
    last: Mutex<Option<(Instant, Arc<Served>)>>,
}

impl Fleet {
    /// The fleet as read at most [`FRESH`] ago, or read now when `now`.
    async fn served_at(&self, state: &ServerState, now: bool) -> Result<Arc<Served>, Problem> {
        let mut last = self.last.lock().await;
        if let Some((at, served)) = &*last {
            if !now && at.elapsed() < FRESH {
                return Ok(served.clone());
            }
        }
        let workers = state.client.store().worker_list().await?;
        let served = Arc::new(served_by(&workers, Timestamp::now()));
        *last = Some((Instant::now(), served.clone()));
        Ok(served)
    }

    async fn served(&self, state: &ServerState) -> Result<Arc<Served>, Problem> {
        self.served_at(state, false).await
    }

    /// The activities live or recent processes run, read now: a definition is applied
    /// rarely, and one applied right after its worker's first claim should see it.
    pub(crate) async fn activities(&self, state: &ServerState) -> Result<Vec<String>, Problem> {
        Ok(self
            .served_at(state, true)
            .await?
            .activities
            .iter()
            .cloned()
            .collect())
    }
}

/// The names of the processes alive now or seen within [`RECENT`].
fn served_by(workers: &[WorkerRecord], now: Timestamp) -> Served {
    let recent = Timestamp(now.0 - i64::try_from(RECENT.as_millis()).unwrap_or(i64::MAX));
    let mut served = Served::default();
    for w in workers
        .iter()
        .filter(|w| w.alive_until >= now || w.seen_at >= recent)
    {
        served
            .orchestrations
            .extend(w.about.orchestrations.iter().map(|(name, _)| name.clone()));
        served.activities.extend(w.about.activities.iter().cloned());
        served.tasks.extend(w.about.tasks.iter().cloned());
    }
    served
}

/// What is started or enqueued.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Orchestration,
    Task,
}

/// Refuses `name` when no live or recent process runs it, unless the caller allows unknown
/// names. A name this server's own worker runs passes at once (its client checks the input
/// too); a task name may also be run by workers elsewhere, over HTTP.
pub(crate) async fn check(
    state: &ServerState,
    kind: Kind,
    names: impl IntoIterator<Item = (usize, &str)>,
    allow_unknown: bool,
    field: impl Fn(usize) -> String,
) -> Result<(), Problem> {
    if allow_unknown {
        return Ok(());
    }
    let registry = state.client.registry();
    let here = |name: &str| {
        registry.is_some_and(|r| match kind {
            Kind::Orchestration => r.has_orchestration(name),
            Kind::Task => r.has_task(name),
        })
    };
    // Orchestrations run only where a runtime is: a server with one checks them itself.
    if registry.is_some() && matches!(kind, Kind::Orchestration) {
        return Ok(());
    }
    let elsewhere: Vec<(usize, &str)> = names.into_iter().filter(|(_, n)| !here(n)).collect();
    if elsewhere.is_empty() {
        return Ok(());
    }
    let served = state.fleet.served(state).await?;
    for (i, name) in elsewhere {
        let (known, what) = match kind {
            Kind::Orchestration => (served.orchestrations.contains(name), "orchestration"),
            Kind::Task => (served.tasks.contains(name), "task"),
        };
        if !known {
            return Err(Problem::new(
                axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                "unknown-name",
                "Nothing registered under this name",
                format!(
                    "no live or recent worker runs {what} \"{}\"; start one that does, or \
                     pass allow_unknown=true to accept it anyway",
                    ratchet::limits::shown_name(name)
                ),
            )
            .field(field(i)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratchet::WorkerAbout;

    fn worker(seen: i64, alive_until: i64, orchestration: &str) -> WorkerRecord {
        WorkerRecord {
            id: orchestration.into(),
            started_at: Timestamp(0),
            seen_at: Timestamp(seen),
            alive_until: Timestamp(alive_until),
            queues: vec![],
            about: WorkerAbout {
                orchestrations: vec![(orchestration.into(), vec![1])],
                tasks: vec![format!("{orchestration}-task")],
                ..WorkerAbout::default()
            },
        }
    }

    #[test]
    fn live_and_recent_workers_count_and_long_silent_ones_do_not() {
        let now = Timestamp(10_000_000);
        let workers = [
            worker(now.0, now.0 + 1, "live"),
            worker(now.0 - 60_000, now.0 - 1, "recent"),
            worker(now.0 - 2 * 3_600_000, now.0 - 3_600_000, "gone"),
        ];
        let served = served_by(&workers, now);
        assert!(served.orchestrations.contains("live"));
        assert!(served.orchestrations.contains("recent"));
        assert!(!served.orchestrations.contains("gone"));
        assert!(served.tasks.contains("live-task"));
    }
}
