//! Liveness: says every `heartbeat` that this process is alive, for a `lease` ahead. While it
//! is, no other process takes over the leases it holds until `stall_grace` after they
//! expired; so a stall that keeps its lease renewals and commits waiting (a table lock, a
//! slow statement) runs nothing twice. The store sends it on a connection of its own, and this loop shares nothing with
//! the lease heartbeat, so neither a stuck pool nor a stuck renewal delays it.

use std::sync::Arc;

use ratchet_store::WorkerAlive;

use crate::runtime::Shared;

pub(crate) async fn run(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.config.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = shared.now();
        let until = now.plus(shared.config.lease);
        let alive = WorkerAlive {
            owner: shared.owner.clone(),
            until,
            stall_grace: shared.config.stall_grace,
            now,
            queues: shared.task_queues(),
        };
        if let Err(e) = shared.store.worker_alive(alive).await {
            tracing::warn!(error = %e, "could not tell the store this process is alive");
        }
    }
}
