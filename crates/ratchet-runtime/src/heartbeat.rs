//! The lease heartbeat: renews the leases of every activity and task held here in one round
//! trip, and passes on a client's request to cancel a task.

use std::sync::Arc;

use ratchet_store::{Fence, LeaseState, TaskId};

use crate::runtime::Shared;

pub(crate) async fn run(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.config.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let tasks: Vec<(TaskId, Fence)> = shared.capacity.running.leases();
        if tasks.is_empty() {
            continue;
        }
        let until = shared.now().plus(shared.config.lease);
        match shared.store.task_heartbeat(tasks.clone(), until).await {
            Ok(states) => {
                let mut lost = Vec::new();
                for ((id, fence), state) in tasks.iter().zip(states) {
                    match state {
                        LeaseState::Lost => lost.push((*id, *fence)),
                        LeaseState::CancelRequested => shared.capacity.running.cancel(*id),
                        _ => {}
                    }
                }
                // An attempt that finished since the snapshot left the table on its own; only
                // the ones still held here were really taken over.
                let lost = shared.capacity.running.lost(&lost);
                if !lost.is_empty() {
                    tracing::warn!(
                        ?lost,
                        "task leases were taken over; their results will be refused"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "lease heartbeat failed"),
        }
    }
}
