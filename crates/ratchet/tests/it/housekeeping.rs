use std::sync::Arc;
use std::time::Duration;

use ratchet::{
    ActivityContext, ActivityError, OrchestrationContext, OrchestrationError, Ratchet,
    RuntimeConfig, Store,
};

use crate::harness::{fast, start, WAIT};

async fn idle_runtime_costs_one_query_per_poll(store: Arc<dyn Store>) {
    let poll = Duration::from_millis(200);
    let r = start(&store, |b| {
        b.config(RuntimeConfig {
            poll_interval: poll,
            ..fast()
        })
        .orchestration("noop", |_ctx: OrchestrationContext, _: ()| async move {
            Ok::<_, OrchestrationError>(())
        })
        .activity("work", |_ctx: ActivityContext, _: ()| async move {
            Ok::<_, ActivityError>(())
        })
    })
    .await;
    // Let start-up settle, then count a quiet second.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = r.stats();
    let quiet = Duration::from_secs(1);
    tokio::time::sleep(quiet).await;
    let spent = r.stats().round_trips - before.round_trips;
    let polls = (quiet.as_millis() / poll.as_millis()) as u64;
    // And it says it is alive once a heartbeat.
    let beats = (quiet.as_millis() / fast().heartbeat.as_millis()) as u64 + 1;
    assert!(
        spent <= polls + beats + 1,
        "an idle runtime made {spent} round trips in {quiet:?} with a {poll:?} poll"
    );
    assert!(spent >= 1, "the poll fallback still runs");
    r.shutdown().await;
}

async fn retention_removes_old_finished_instances(store: Arc<dyn Store>) {
    let r = Ratchet::builder()
        .store(store.clone())
        .config(RuntimeConfig {
            retention: Some(Duration::ZERO),
            maintenance_interval: Duration::from_millis(100),
            ..fast()
        })
        .orchestration("quick", |_ctx: OrchestrationContext, n: u32| async move {
            Ok::<_, OrchestrationError>(n)
        })
        .start()
        .await
        .unwrap();
    let h = r.client().start("quick", 7).await.unwrap();
    let id = h.id().to_string();
    // It finishes in its first turn, committed with the start: on a loaded machine the
    // maintenance loop may purge it before the wait reads it.
    match h.wait(WAIT).await {
        Ok(outcome) => assert_eq!(outcome.into_result::<u32>().unwrap(), 7),
        Err(ratchet::Error::NotFound(_)) => {}
        Err(e) => panic!("{e}"),
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    while store.instance_get(&id).await.unwrap().is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the finished instance was never purged"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(store.history_read(&id, None).await.unwrap().is_empty());
    r.shutdown().await;
}

crate::on_every_backend!(
    idle_runtime_costs_one_query_per_poll,
    retention_removes_old_finished_instances
);
