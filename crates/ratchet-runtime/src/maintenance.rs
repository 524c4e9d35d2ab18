//! Maintenance: removes finished instances older than the retention period, every
//! `maintenance_interval`. Harmless when several processes do it at once.

use std::sync::Arc;

use ratchet_core::Timestamp;

use crate::runtime::Shared;

pub(crate) async fn run(shared: Arc<Shared>) {
    let Some(retention) = shared.config.retention else {
        return;
    };
    let mut tick = tokio::time::interval(shared.config.maintenance_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = Timestamp::now();
        let before = Timestamp(
            now.0
                .saturating_sub(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX)),
        );
        match shared.store.instance_purge(before).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                purged = n,
                ?retention,
                "removed finished instances past retention"
            ),
            Err(e) => tracing::warn!(error = %e, "retention purge failed; will try again"),
        }
    }
}
