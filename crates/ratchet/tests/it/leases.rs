use std::sync::Arc;
use std::time::Duration;

use ratchet::{
    ActivityContext, ActivityError, HistoryEvent, InstanceStatus, OrchestrationContext,
    OrchestrationError, Ratchet, RuntimeConfig, Store, Timestamp,
};
use ratchet_store::{
    CommitBatch, CompletionResult, IfExists, Lease, NewInstance, TaskClaim, TaskCompletion,
    TaskResult,
};

use crate::harness::{fast, start, WAIT};

async fn once(ctx: OrchestrationContext, _: ()) -> Result<u32, OrchestrationError> {
    ctx.activity("work", ()).await
}

async fn a_dead_owners_lease_is_taken_over(store: Arc<dyn Store>) {
    // A process that leased the new instance and died before its first turn.
    let lease = Lease {
        owner: "dead-process".into(),
        until: Timestamp::now().plus(Duration::from_millis(700)),
    };
    let new = NewInstance {
        id: "orphan".into(),
        name: "once".into(),
        input: serde_json::json!(null),
        parent: None,
        if_exists: IfExists::Fail,
    };
    store
        .instance_create(vec![new], Some(lease), Timestamp::now())
        .await
        .unwrap();
    let r = start(&store, |b| {
        b.orchestration("once", once)
            .activity("work", |ctx: ActivityContext, _: ()| async move {
                Ok::<_, ActivityError>(ctx.attempt())
            })
    })
    .await;
    let out: u32 = r
        .client()
        .wait("orphan", WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, 1);
    r.shutdown().await;
}

async fn shutdown_releases_running_work(store: Arc<dyn Store>) {
    // A long lease: only an explicit release lets the second runtime take the activity soon.
    let long_lease = RuntimeConfig {
        lease: Duration::from_secs(120),
        heartbeat: Duration::from_secs(30),
        shutdown_grace: Duration::from_millis(200),
        ..fast()
    };
    let r1 = Ratchet::builder()
        .store(store.clone())
        .config(long_lease)
        .orchestration("once", once)
        .activity("work", |_ctx: ActivityContext, _: ()| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<u32, ActivityError>(0)
        })
        .start()
        .await
        .unwrap();
    let id = r1
        .client()
        .start("once", ())
        .await
        .unwrap()
        .id()
        .to_string();
    while store.instance_get(&id).await.unwrap().unwrap().history_len == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    r1.shutdown().await;
    r1.shutdown().await; // a second shutdown is harmless
    let r2 = start(&store, |b| {
        b.orchestration("once", once)
            .activity("work", |ctx: ActivityContext, _: ()| async move {
                Ok::<_, ActivityError>(ctx.attempt())
            })
    })
    .await;
    let outcome = r2.client().wait(&id, WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Completed);
    assert_eq!(
        outcome.output,
        Some(serde_json::json!(1)),
        "a released attempt is not counted as failed"
    );
    r2.shutdown().await;
}

async fn a_completion_after_takeover_is_refused(store: Arc<dyn Store>) {
    // Heartbeats far apart, so the runtime learns of the takeover only from the refusal.
    let config = RuntimeConfig {
        lease: Duration::from_secs(20),
        heartbeat: Duration::from_secs(10),
        ..fast()
    };
    let r = Ratchet::builder()
        .store(store.clone())
        .config(config)
        .orchestration("once", once)
        .activity("work", |_ctx: ActivityContext, _: ()| async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            Ok::<u32, ActivityError>(1)
        })
        .start()
        .await
        .unwrap();
    let id = r.client().start("once", ()).await.unwrap().id().to_string();
    while store.instance_get(&id).await.unwrap().unwrap().history_len == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Another process takes the running attempt over, as if the lease had run out.
    let later = Timestamp::now().plus(Duration::from_secs(60));
    let stolen = store
        .task_claim(TaskClaim::activities(
            Lease {
                owner: "thief".into(),
                until: later.plus(Duration::from_secs(60)),
            },
            10,
            vec!["work".into()],
            later,
        ))
        .await
        .unwrap();
    assert_eq!(stolen.len(), 1, "the attempt was taken over");
    let refused = store.stats().stale_refused;
    let deadline = tokio::time::Instant::now() + WAIT;
    while store.stats().stale_refused == refused {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the late completion was never refused"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let completed = |history: &[ratchet::HistoryRecord]| {
        history
            .iter()
            .filter(|h| matches!(h.event, HistoryEvent::ActivityCompleted { .. }))
            .count()
    };
    assert_eq!(
        completed(&store.history_read(&id, None).await.unwrap()),
        0,
        "the refused completion left history unchanged"
    );
    let mut thief = CommitBatch {
        now: Timestamp::now(),
        ..CommitBatch::default()
    };
    thief.completions = vec![TaskCompletion::of(
        &stolen[0],
        TaskResult::Completed(serde_json::json!(2)),
    )];
    assert_eq!(
        store.commit(thief).await.unwrap().completions,
        vec![CompletionResult::Applied]
    );
    let out: u32 = r
        .client()
        .wait(&id, WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, 2, "the new lease holder's result is the one recorded");
    assert_eq!(completed(&store.history_read(&id, None).await.unwrap()), 1);
    r.shutdown().await;
}

crate::on_every_backend!(
    a_dead_owners_lease_is_taken_over,
    shutdown_releases_running_work,
    a_completion_after_takeover_is_refused
);
