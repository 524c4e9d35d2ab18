use std::sync::Arc;
use std::time::Duration;

use ratchet::{
    ActivityContext, ActivityError, Client, InstanceStatus, OrchestrationContext,
    OrchestrationError, StartOptions, Store,
};

use crate::harness::{start, WAIT};

async fn echo(_ctx: ActivityContext, s: String) -> Result<String, ActivityError> {
    Ok(s)
}

async fn until_running(c: &Client, id: &str) {
    until_history(c, id, 1).await;
}

/// Waits until the instance's history has a turn that is waiting for a signal.
async fn until_history(c: &Client, id: &str, len: u32) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while c
        .status(id)
        .await
        .map(|r| r.history_len < len)
        .unwrap_or(true)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} never reached {len} history events"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn recorded(
    ctx: OrchestrationContext,
    _: (),
) -> Result<(String, f64, i64), OrchestrationError> {
    let id = ctx.uuid().to_string();
    let r = ctx.random();
    let t = ctx.now().as_millis();
    let _: String = ctx.activity("echo", "x").await?;
    let _: () = ctx.signal("go").await?;
    Ok((id, r, t))
}

async fn values_are_recorded_and_replayed(store: Arc<dyn Store>) {
    let r1 = start(&store, |b| {
        b.orchestration("recorded", recorded).activity("echo", echo)
    })
    .await;
    r1.client()
        .start_with("recorded", (), StartOptions::id("v"))
        .await
        .unwrap();
    // ExecutionStarted turn + activity completion turn: wait for the second turn.
    until_history(r1.client(), "v", 7).await;
    let history = r1.client().history("v").await.unwrap();
    r1.shutdown().await;
    // A new runtime has nothing cached: it replays the history, which must give the same values.
    let r2 = start(&store, |b| {
        b.orchestration("recorded", recorded).activity("echo", echo)
    })
    .await;
    r2.client().signal("v", "go", ()).await.unwrap();
    let (id, random, now): (String, f64, i64) = r2
        .client()
        .wait("v", WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let uuid_recorded = history.iter().any(|h| matches!(&h.event, ratchet::HistoryEvent::ValueRecorded { value, .. } if value.as_str() == Some(id.as_str())));
    assert!(
        uuid_recorded,
        "the uuid returned after replay is the one in history"
    );
    assert!((0.0..1.0).contains(&random));
    let first_turn = history.iter().find_map(|h| match h.event {
        ratchet::HistoryEvent::TurnStarted { at } => Some(at.as_millis()),
        _ => None,
    });
    assert_eq!(
        Some(now),
        first_turn,
        "now() is the recorded turn time, not the replay's clock"
    );
    r2.shutdown().await;
}

async fn v1(ctx: OrchestrationContext, _: ()) -> Result<String, OrchestrationError> {
    let a: String = ctx.activity("echo", "a").await?;
    let _: () = ctx.signal("go").await?;
    Ok(a)
}

async fn v2_changed(ctx: OrchestrationContext, _: ()) -> Result<String, OrchestrationError> {
    let b: String = ctx.activity("echo-b", "b").await?;
    let _: () = ctx.signal("go").await?;
    Ok(b)
}

async fn nondeterminism_fails_with_a_named_mismatch(store: Arc<dyn Store>) {
    let r1 = start(&store, |b| {
        b.orchestration("flow", v1).activity("echo", echo)
    })
    .await;
    r1.client()
        .start_with("flow", (), StartOptions::id("nd"))
        .await
        .unwrap();
    until_history(r1.client(), "nd", 5).await;
    r1.shutdown().await;
    let r2 = start(&store, |b| {
        b.orchestration("flow", v2_changed)
            .activity("echo", echo)
            .activity("echo-b", echo)
    })
    .await;
    r2.client().signal("nd", "go", ()).await.unwrap();
    let outcome = r2.client().wait("nd", WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "Nondeterminism");
    assert!(error.message.contains("position 2"), "{}", error.message);
    assert!(
        error.message.contains("\"echo\"") && error.message.contains("\"echo-b\""),
        "{}",
        error.message
    );
    r2.shutdown().await;
}

async fn patched(ctx: OrchestrationContext, _: ()) -> Result<String, OrchestrationError> {
    let mut a: String = ctx.activity("echo", "a").await?;
    // The patch sits where old instances already went past: they replay it as false.
    if ctx.is_patched("add-suffix") {
        let s: String = ctx.activity("echo", "-new").await?;
        a += &s;
    }
    let _: () = ctx.signal("go").await?;
    Ok(a)
}

async fn patches_keep_old_instances_on_the_old_path(store: Arc<dyn Store>) {
    let r1 = start(&store, |b| {
        b.orchestration("flow", v1).activity("echo", echo)
    })
    .await;
    r1.client()
        .start_with("flow", (), StartOptions::id("old"))
        .await
        .unwrap();
    until_history(r1.client(), "old", 5).await;
    r1.shutdown().await;
    let r2 = start(&store, |b| {
        b.orchestration("flow", patched).activity("echo", echo)
    })
    .await;
    let c = r2.client();
    let new = c
        .start_with("flow", (), StartOptions::id("new"))
        .await
        .unwrap();
    until_running(c, "new").await;
    c.signal("old", "go", ()).await.unwrap();
    c.signal("new", "go", ()).await.unwrap();
    let old_out: String = c.wait("old", WAIT).await.unwrap().into_result().unwrap();
    let new_out: String = new.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(
        old_out, "a",
        "an instance past the patch point before the patch keeps the old path"
    );
    assert_eq!(new_out, "a-new");
    r2.shutdown().await;
}

async fn versions_pin_instances(store: Arc<dyn Store>) {
    let r1 = start(&store, |b| {
        b.orchestration_version("flow", 1, v1)
            .activity("echo", echo)
    })
    .await;
    r1.client()
        .start_with("flow", (), StartOptions::id("pinned"))
        .await
        .unwrap();
    until_history(r1.client(), "pinned", 5).await;
    r1.shutdown().await;
    // Version 2 only: this process must not run the version-1 instance.
    let r2 = start(&store, |b| {
        b.orchestration_version("flow", 2, v2_changed)
            .activity("echo-b", echo)
    })
    .await;
    r2.client().signal("pinned", "go", ()).await.unwrap();
    let fresh = r2
        .client()
        .start_with("flow", (), StartOptions::id("fresh"))
        .await
        .unwrap();
    r2.client().signal("fresh", "go", ()).await.unwrap();
    let out: String = fresh.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, "b");
    assert_eq!(r2.client().status("fresh").await.unwrap().version, Some(2));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        r2.client().status("pinned").await.unwrap().status,
        InstanceStatus::Running,
        "version 1 is not run by a version-2-only process"
    );
    r2.shutdown().await;
    let r3 = start(&store, |b| {
        b.orchestration_version("flow", 1, v1)
            .orchestration_version("flow", 2, v2_changed)
            .activity("echo", echo)
            .activity("echo-b", echo)
    })
    .await;
    let out: String = r3
        .client()
        .wait("pinned", WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(
        out, "a",
        "it runs on its own version where that is registered"
    );
    r3.shutdown().await;
}

crate::on_every_backend!(
    values_are_recorded_and_replayed,
    nondeterminism_fails_with_a_named_mismatch,
    patches_keep_old_instances_on_the_old_path,
    versions_pin_instances,
);
