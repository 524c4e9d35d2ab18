use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ratchet::{
    ActivityContext, ActivityError, Error, InstanceStatus, OrchestrationContext,
    OrchestrationError, StartOptions, Store,
};

use crate::harness::{start, WAIT};

async fn cancellation_lets_the_code_clean_up(store: Arc<dyn Store>) {
    let cleanups = Arc::new(AtomicU32::new(0));
    let counter = cleanups.clone();
    let r = start(&store, move |b| {
        b.orchestration("booking", |ctx: OrchestrationContext, _: ()| async move {
            match ctx.sleep(Duration::from_secs(3600)).await {
                Err(e) if e.is_cancelled() => {
                    assert!(ctx.is_cancelled());
                    let _: () = ctx.activity("release", ()).await?;
                    Err(e)
                }
                other => other.map(|_| "slept".to_string()),
            }
        })
        .activity("release", move |_ctx: ActivityContext, _: ()| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ActivityError>(())
            }
        })
    })
    .await;
    let c = r.client();
    c.start_with("booking", (), StartOptions::id("b"))
        .await
        .unwrap();
    // Wait until the first turn has run (the timer is scheduled).
    while c.status("b").await.unwrap().status != InstanceStatus::Running {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.cancel("b", "customer changed plans").await.unwrap();
    let outcome = c.wait("b", WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Cancelled);
    let error = outcome.error.unwrap();
    assert_eq!(
        (error.kind.as_str(), error.message.as_str()),
        ("Cancelled", "customer changed plans")
    );
    assert_eq!(
        cleanups.load(Ordering::SeqCst),
        1,
        "the cleanup activity ran once"
    );
    match c.cancel("b", "again").await {
        Err(Error::Finished { status, .. }) => assert_eq!(status, InstanceStatus::Cancelled),
        other => panic!("expected Finished, got {other:?}"),
    }
    r.shutdown().await;
}

/// An instance cancelled before its code first ran runs none of its steps: the first fails
/// with `Cancelled`, and so do the rest (there is nothing of its own to clean up).
async fn cancelling_before_the_first_turn_runs_no_step(store: Arc<dyn Store>) {
    let ran = Arc::new(AtomicU32::new(0));
    let counter = ran.clone();
    // Started and cancelled while no runtime runs it.
    let plain = ratchet::Client::new(store.clone());
    plain
        .start_with("ship", (), StartOptions::id("s"))
        .await
        .unwrap();
    plain.cancel("s", "changed my mind").await.unwrap();
    let r = start(&store, move |b| {
        b.orchestration("ship", |ctx: OrchestrationContext, _: ()| async move {
            ctx.set_custom_status("shipping");
            match ctx.activity::<()>("send", ()).await {
                Err(e) if e.is_cancelled() => {
                    // Even a cleanup step fails: nothing ran that needs one.
                    let cleanup = ctx.activity::<()>("send", ()).await;
                    assert!(cleanup.is_err_and(|e| e.is_cancelled()));
                    Err(e)
                }
                other => other.map(|()| "shipped".to_string()),
            }
        })
        .activity("send", move |_ctx: ActivityContext, _: ()| {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ActivityError>(())
            }
        })
    })
    .await;
    let outcome = r.client().wait("s", WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Cancelled);
    assert_eq!(outcome.error.unwrap().message, "changed my mind");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "no activity ran");
    r.shutdown().await;
}

async fn termination_is_immediate(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration("waiter", |ctx: OrchestrationContext, _: ()| async move {
            let _: () = ctx.signal("go").await?;
            Ok(())
        })
    })
    .await;
    let c = r.client();
    let h = c
        .start_with("waiter", (), StartOptions::id("t"))
        .await
        .unwrap();
    c.terminate("t", "operator stop").await.unwrap();
    let outcome = h.wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Terminated);
    let rec = c.status("t").await.unwrap();
    assert_eq!(rec.status, InstanceStatus::Terminated);
    assert_eq!(rec.error.unwrap().message, "operator stop");
    assert!(matches!(
        c.signal("t", "go", ()).await,
        Err(Error::Finished { .. })
    ));
    assert!(matches!(
        c.terminate("missing", "x").await,
        Err(Error::NotFound(_))
    ));
    r.shutdown().await;
}

async fn terminating_a_child_fails_the_parent_step(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration("kid", |ctx: OrchestrationContext, _: ()| async move {
            let _: () = ctx.signal("go").await?;
            Ok(())
        })
        .orchestration("mom", |ctx: OrchestrationContext, _: ()| async move {
            match ctx
                .sub_orchestration_with_id::<()>("kid", "the-kid", ())
                .await
            {
                Err(OrchestrationError::SubOrchestration { error, .. }) => Ok(error.kind),
                other => Ok(format!("{other:?}")),
            }
        })
    })
    .await;
    let c = r.client();
    let h = c
        .start_with("mom", (), StartOptions::id("mom"))
        .await
        .unwrap();
    while c.status("the-kid").await.is_err() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.terminate("the-kid", "enough").await.unwrap();
    let out: String = h.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, "Terminated");
    r.shutdown().await;
}

crate::on_every_backend!(
    cancellation_lets_the_code_clean_up,
    cancelling_before_the_first_turn_runs_no_step,
    termination_is_immediate,
    terminating_a_child_fails_the_parent_step,
);
