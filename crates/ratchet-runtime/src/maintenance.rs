//! Maintenance: removes finished instances and finished standalone tasks older than their
//! retention periods, every `maintenance_interval`. Harmless when several processes do it at
//! once.

use std::sync::Arc;

use ratchet_core::Timestamp;

use crate::runtime::Shared;

pub(crate) async fn run(shared: Arc<Shared>) {
    let (instances, tasks) = (shared.config.retention, shared.config.task_retention);
    if instances.is_none() && tasks.is_none() {
        return;
    }
    let mut tick = tokio::time::interval(shared.config.maintenance_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = shared.now();
        if let Some(retention) = instances {
            match shared.store.instance_purge(before(now, retention)).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    purged = n,
                    ?retention,
                    "removed finished instances past retention"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "retention purge of instances failed; will try again")
                }
            }
        }
        if let Some(retention) = tasks {
            match shared.store.task_purge(before(now, retention)).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    purged = n,
                    ?retention,
                    "removed finished tasks past retention"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "retention purge of tasks failed; will try again")
                }
            }
        }
    }
}

fn before(now: Timestamp, retention: std::time::Duration) -> Timestamp {
    Timestamp(
        now.0
            .saturating_sub(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX)),
    )
}
