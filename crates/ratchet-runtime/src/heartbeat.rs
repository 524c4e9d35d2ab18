//! The lease heartbeat: renews the leases of every activity running here in one round trip.

use std::sync::Arc;

use ratchet_core::Timestamp;
use ratchet_store::{Fence, TaskId};

use crate::runtime::Shared;

pub(crate) async fn run(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.config.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let tasks: Vec<(TaskId, Fence)> = shared.running_leases();
        if tasks.is_empty() {
            continue;
        }
        let until = Timestamp::now().plus(shared.config.lease);
        match shared.store.task_heartbeat(tasks.clone(), until).await {
            Ok(kept) => {
                // An attempt that finished since the snapshot left the table on its own; only
                // the ones still running here were really taken over.
                let mut running = shared.running_lock();
                let lost: Vec<_> = tasks
                    .iter()
                    .zip(kept)
                    .filter(|((id, fence), kept)| {
                        !kept && running.get(id).is_some_and(|r| r.fence == *fence)
                    })
                    .map(|((id, _), _)| *id)
                    .collect();
                if !lost.is_empty() {
                    tracing::warn!(
                        ?lost,
                        "activity leases were taken over; their results will be refused"
                    );
                    for id in lost {
                        running.remove(&id);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "lease heartbeat failed"),
        }
    }
}
