//! Liveness: says every `heartbeat` that this process is alive, for a `lease` ahead. While it
//! is, no other process takes over the leases it holds until `stall_grace` after they
//! expired; so a stall that keeps its lease renewals and commits waiting (a table lock, a
//! slow statement) runs nothing twice. The store sends it on a connection of its own, and this loop shares nothing with
//! the lease heartbeat, so neither a stuck pool nor a stuck renewal delays it.

use std::sync::Arc;

use ratchet_store::{WorkerAbout, WorkerAlive};

use crate::runtime::Shared;

pub(crate) async fn run(shared: Arc<Shared>) {
    let mut seen_changes = shared.registry.orchestration_changes();
    let mut about = about(&shared);
    let mut tick = tokio::time::interval(shared.config.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Orchestrations added while running (a workflow applied later) are said too.
        let changes = shared.registry.orchestration_changes();
        if changes != seen_changes {
            seen_changes = changes;
            about = self::about(&shared);
        }
        let now = shared.now();
        let until = now.plus(shared.config.lease);
        let alive = WorkerAlive {
            owner: shared.owner.clone(),
            until,
            stall_grace: shared.config.stall_grace,
            now,
            queues: shared.task_queues(),
            about: about.clone(),
        };
        if let Err(e) = shared.store.worker_alive(alive).await {
            tracing::warn!(error = %e, "could not tell the store this process is alive");
        }
    }
}

/// What this process says of itself: it changes only when orchestrations are added.
fn about(shared: &Shared) -> WorkerAbout {
    let names = shared.registry.names();
    WorkerAbout {
        label: shared.config.label.clone(),
        host: gethostname::gethostname().into_string().ok(),
        pid: std::process::id(),
        max_orchestrations: u32::try_from(shared.config.max_orchestrations).unwrap_or(u32::MAX),
        max_activities: u32::try_from(shared.config.max_activities).unwrap_or(u32::MAX),
        orchestrations: names.orchestrations,
        activities: names.activities,
        tasks: names.tasks,
    }
}
