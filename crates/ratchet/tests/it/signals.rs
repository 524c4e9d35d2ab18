use std::sync::Arc;
use std::time::Duration;

use ratchet::{
    Error, InstanceStatus, OrchestrationContext, OrchestrationError, StartOptions, Store,
};

use crate::harness::{start, WAIT};

async fn collector(ctx: OrchestrationContext, n: usize) -> Result<Vec<String>, OrchestrationError> {
    let mut got = Vec::new();
    for _ in 0..n {
        got.push(ctx.signal::<String>("item").await?);
    }
    Ok(got)
}

async fn signals_are_buffered_in_order(store: Arc<dyn Store>) {
    // No runtime yet: the instance cannot be waiting when the signals arrive.
    let client = ratchet::Client::new(store.clone());
    client
        .start_with("collect", 3, StartOptions::id("s"))
        .await
        .unwrap();
    for item in ["a", "b", "c"] {
        client.signal("s", "item", item).await.unwrap();
    }
    let r = start(&store, |b| b.orchestration("collect", collector)).await;
    let out: Vec<String> = r
        .client()
        .wait("s", WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, vec!["a", "b", "c"]);
    r.shutdown().await;
}

async fn signal_dedup_is_idempotent(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.orchestration("collect", collector)).await;
    let c = r.client();
    let h = c
        .start_with("collect", 2, StartOptions::id("d"))
        .await
        .unwrap();
    assert!(c.signal_once("d", "item", "first", "k1").await.unwrap());
    assert!(
        !c.signal_once("d", "item", "again", "k1").await.unwrap(),
        "same dedup id: ignored"
    );
    assert!(c.signal_once("d", "item", "second", "k2").await.unwrap());
    let out: Vec<String> = h.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, vec!["first", "second"]);
    match c.signal("d", "item", "late").await {
        Err(Error::Finished { status, .. }) => assert_eq!(status, InstanceStatus::Completed),
        other => panic!("expected Finished, got {other:?}"),
    }
    match c.signal("nobody", "item", "x").await {
        Err(Error::NotFound(id)) => assert_eq!(id, "nobody"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    r.shutdown().await;
}

async fn delivery(ctx: OrchestrationContext, ms: u64) -> Result<String, OrchestrationError> {
    match ctx
        .signal_timeout::<String>("delivered", Duration::from_millis(ms))
        .await?
    {
        Some(who) => Ok(format!("signed by {who}")),
        None => Ok("timed out".into()),
    }
}

async fn signal_wait_with_timeout(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.orchestration("delivery", delivery)).await;
    let c = r.client();
    let late = c.start("delivery", 100u64).await.unwrap();
    let on_time = c.start("delivery", 30_000u64).await.unwrap();
    c.signal(on_time.id(), "delivered", "Ada").await.unwrap();
    let a: String = late.wait(WAIT).await.unwrap().into_result().unwrap();
    let b: String = on_time.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(a, "timed out");
    assert_eq!(b, "signed by Ada");
    r.shutdown().await;
}

async fn unconsumed_signals_survive_continue_as_new(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration(
            "looper",
            |ctx: OrchestrationContext, round: u32| async move {
                let got: u32 = ctx.signal("n").await?;
                if round == 0 {
                    // Give the other signals time to arrive in this execution's inbox.
                    ctx.sleep(Duration::from_millis(200)).await?;
                    return ctx.continue_as_new(1u32);
                }
                let next: u32 = ctx.signal("n").await?;
                Ok((got, next))
            },
        )
    })
    .await;
    let c = r.client();
    let h = c
        .start_with("looper", 0u32, StartOptions::id("loop"))
        .await
        .unwrap();
    for n in [1u32, 2, 3] {
        c.signal("loop", "n", n).await.unwrap();
    }
    let out: (u32, u32) = h.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(
        out,
        (2, 3),
        "signals not read by the first execution are carried over in order"
    );
    r.shutdown().await;
}

crate::on_every_backend!(
    signals_are_buffered_in_order,
    signal_dedup_is_idempotent,
    signal_wait_with_timeout,
    unconsumed_signals_survive_continue_as_new,
);
