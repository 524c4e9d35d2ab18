use std::sync::Arc;

use ratchet::{
    ActivityContext, ActivityError, Error, InstanceFilter, InstanceStatus, Limits,
    OrchestrationContext, OrchestrationError, Ratchet, RuntimeConfig, StartOptions, Store,
};
use serde::Deserialize;

use crate::harness::{fast, start, WAIT};

#[derive(Deserialize)]
struct Order {
    id: String,
    qty: u32,
}

async fn typed(_ctx: OrchestrationContext, order: Order) -> Result<String, OrchestrationError> {
    Ok(format!("{}x{}", order.id, order.qty))
}

async fn nothing_written(store: &Arc<dyn Store>) {
    assert!(
        store
            .instance_list(InstanceFilter::default())
            .await
            .unwrap()
            .is_empty(),
        "a refused start wrote nothing"
    );
}

async fn bad_starts_are_refused_and_write_nothing(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.orchestration("typed", typed)).await;
    let c = r.client();
    assert!(
        matches!(c.start("nope", ()).await, Err(Error::UnknownOrchestration(n)) if n == "nope")
    );
    match c
        .start("typed", serde_json::json!({ "id": "a", "qty": "three" }))
        .await
    {
        Err(Error::InvalidInput(m)) => assert!(m.contains("typed"), "{m}"),
        other => panic!("expected InvalidInput, got {:?}", other.err()),
    }
    // Ids are printable: no control characters, no bidi overrides or zero-width characters
    // (which make two ids look alike), in normal form C; the refusal names the field.
    for id in [
        "",
        "bad\nid",
        "order-1\u{202E}gpj.exe",
        "order\u{200B}-1",
        "e\u{301}",
    ] {
        match c
            .start_with(
                "typed",
                serde_json::json!({"id": "a", "qty": 1}),
                StartOptions::id(id),
            )
            .await
        {
            Err(Error::Limit(e)) => assert_eq!(e.field, "id", "{id:?}: {e}"),
            other => panic!("{id:?}: expected Limit, got {:?}", other.err()),
        }
    }
    match c.start("ty\u{2066}ped", ()).await {
        Err(Error::Limit(e)) => assert_eq!(e.field, "name", "{e}"),
        other => panic!("expected Limit, got {:?}", other.err()),
    }
    let injection = "x'; DROP TABLE instances; --";
    assert!(matches!(
        c.start(injection, ()).await,
        Err(Error::UnknownOrchestration(_))
    ));
    let huge = "x".repeat(2 << 20);
    match c
        .start("typed", serde_json::json!({ "id": huge, "qty": 1 }))
        .await
    {
        Err(Error::PayloadTooLarge { size, limit, .. }) => assert!(size > limit),
        other => panic!("expected PayloadTooLarge, got {:?}", other.err()),
    }
    nothing_written(&store).await;
    // The store is intact and still works after all that.
    let out: String = c
        .start_with(
            "typed",
            serde_json::json!({"id": "ok", "qty": 2}),
            StartOptions::id(injection),
        )
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, "okx2");
    r.shutdown().await;
}

async fn unknown_activity_fails_the_instance_clearly(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration("caller", |ctx: OrchestrationContext, _: ()| async move {
            let _: () = ctx.activity("missing", ()).await?;
            Ok(())
        })
    })
    .await;
    let outcome = r
        .client()
        .start("caller", ())
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let e = outcome.error.unwrap();
    assert_eq!(e.kind, "UnknownActivity");
    assert!(e.message.contains("\"missing\""));
    r.shutdown().await;
}

async fn malformed_signal_payload_is_an_error_in_the_code(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration("strict", |ctx: OrchestrationContext, _: ()| async move {
            match ctx.signal::<u32>("n").await {
                Err(OrchestrationError::Payload { message }) => Ok(message),
                other => Ok(format!("unexpected {other:?}")),
            }
        })
    })
    .await;
    let h = r.client().start("strict", ()).await.unwrap();
    r.client()
        .signal(h.id(), "n", "not a number")
        .await
        .unwrap();
    let out: String = h.wait(WAIT).await.unwrap().into_result().unwrap();
    assert!(out.contains("signal \"n\""), "{out}");
    r.shutdown().await;
}

async fn echo(_ctx: ActivityContext, n: u64) -> Result<u64, ActivityError> {
    Ok(n)
}

async fn limits_fail_instances_with_clear_errors(store: Arc<dyn Store>) {
    let config = RuntimeConfig {
        limits: Limits {
            max_fan_out: 5,
            max_history: 30,
        },
        max_payload_bytes: 1_000,
        ..fast()
    };
    let r = Ratchet::builder()
        .store(store.clone())
        .config(config)
        .orchestration("wide", |ctx: OrchestrationContext, n: u64| async move {
            let calls = (0..n).map(|i| ctx.activity::<u64>("echo", i));
            let all: Result<Vec<u64>, _> = ratchet::join_all(calls).await.into_iter().collect();
            Ok(all?.len())
        })
        .orchestration("long", |ctx: OrchestrationContext, n: u64| async move {
            for i in 0..n {
                let _: u64 = ctx.activity("echo", i).await?;
            }
            Ok(n)
        })
        .orchestration("big", |_ctx: OrchestrationContext, n: usize| async move {
            Ok("y".repeat(n))
        })
        .activity("echo", echo)
        .start()
        .await
        .unwrap();
    let c = r.client();
    let ok: usize = c
        .start("wide", 5u64)
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(ok, 5);
    let wide = c
        .start("wide", 6u64)
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(wide.status, InstanceStatus::Failed);
    assert_eq!(wide.error.as_ref().unwrap().kind, "LimitExceeded");
    assert!(wide.error.unwrap().message.contains("fan-out"));
    let long = c
        .start_with("long", 10u64, StartOptions::id("long"))
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(long.status, InstanceStatus::Failed);
    assert!(long.error.unwrap().message.contains("history"));
    let stored = r.client().history("long").await.unwrap().len();
    assert!(stored <= 30 + 3, "only the failing turn itself (start, its event, the failure) goes past the limit: {stored}");
    let big = c
        .start("big", 5_000usize)
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(big.status, InstanceStatus::Failed);
    assert!(big.error.unwrap().message.contains("over the limit"));
    r.shutdown().await;
}

/// A value nested `depth` levels deep: `[[[...0...]]]`.
fn nested(depth: usize) -> serde_json::Value {
    (0..depth).fold(serde_json::json!(0), |v, _| serde_json::json!([v]))
}

/// Values nested deeper than stored values may (100 levels) are refused where they come in:
/// each would be written, wrapped deeper still in history or a row, and never read back.
async fn values_nested_too_deep_are_refused_where_they_come_in(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration(
            "echo",
            |ctx: OrchestrationContext, _: serde_json::Value| async move {
                let deep: serde_json::Value = ctx.activity("deep", ()).await?;
                Ok::<_, OrchestrationError>(deep)
            },
        )
        .orchestration(
            "waits",
            |ctx: OrchestrationContext, _: serde_json::Value| async move {
                let v: serde_json::Value = ctx.signal("go").await?;
                Ok::<_, OrchestrationError>(v)
            },
        )
        .orchestration(
            "cancel_deep",
            |ctx: OrchestrationContext, _: serde_json::Value| async move {
                match ctx.signal::<serde_json::Value>("never").await {
                    Err(e) if e.is_cancelled() => Ok(nested(120)),
                    other => other,
                }
            },
        )
        .activity("deep", |_ctx: ActivityContext, _: ()| async move {
            Ok::<_, ActivityError>(nested(120))
        })
    })
    .await;
    let c = r.client();
    match c.start("waits", nested(101)).await {
        Err(Error::InvalidInput(m)) => assert!(m.contains("deeper than 100"), "{m}"),
        other => panic!("{:?}", other.map(|h| h.id().to_string())),
    }
    nothing_written(&store).await;
    let fine = c.start("waits", nested(100)).await.unwrap();
    match c.signal(fine.id(), "go", nested(101)).await {
        Err(Error::InvalidInput(m)) => assert!(m.contains("signal payload"), "{m}"),
        other => panic!("{other:?}"),
    }
    let event = ratchet::NewEvent::new("Deep", ["k:v"], nested(101));
    assert!(matches!(
        c.events().append(vec![event]).await,
        Err(Error::InvalidInput(_))
    ));
    // So does what an orchestration returns once cancelled, and a reason over 32 KiB.
    let cancelled = c.start("cancel_deep", ()).await.unwrap();
    let long = "r".repeat(40_000);
    match c.cancel(cancelled.id(), &long).await {
        Err(Error::Limit(l)) => {
            assert_eq!(l.field, "reason");
            assert!(l.rule.contains("40000 bytes"), "{l}");
        }
        other => panic!("{other:?}"),
    }
    c.cancel(cancelled.id(), "stop").await.unwrap();
    let id = cancelled.id().to_string();
    let outcome = cancelled.wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let e = outcome.error.unwrap();
    assert!(e.message.contains("deeper than 100"), "{e}");
    let history = c.history(&id).await.unwrap();
    assert!(history
        .iter()
        .all(|h| !format!("{:?}", h.event).contains("rrrr")));
    // An activity's result nested too deep fails the activity, not the history.
    let outcome = c.start("echo", ()).await.unwrap().wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let e = outcome.error.unwrap();
    assert!(e.message.contains("deeper than 100"), "{e}");
    r.shutdown().await;
}

/// An error as large as a user may make it: a 3 MiB message, and details nested 200 deep.
fn huge_error() -> ratchet::ErrorInfo {
    ratchet::ErrorInfo::new("Huge", "x".repeat(3 << 20)).with_details(nested(200))
}

/// Errors have limits too: an activity's or an orchestration's error with a 3 MiB message and
/// details nested 200 deep is kept cut (its message to 28 KiB, its details dropped, both said
/// in the message) instead of writing megabytes per attempt or a history no one can read back.
async fn huge_errors_are_kept_cut_and_history_stays_readable(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration(
            "calls_huge",
            |ctx: OrchestrationContext, _: serde_json::Value| async move {
                let v: serde_json::Value = ctx.activity("huge", ()).await?;
                Ok::<_, OrchestrationError>(v)
            },
        )
        .orchestration(
            "fails_huge",
            |_ctx: OrchestrationContext, _: serde_json::Value| async move {
                Err::<(), _>(OrchestrationError::Application(huge_error()))
            },
        )
        .activity("huge", |_ctx: ActivityContext, _: ()| async move {
            Err::<(), _>(ActivityError {
                info: huge_error(),
                retryable: false,
                snooze: None,
            })
        })
    })
    .await;
    let c = r.client();
    for name in ["calls_huge", "fails_huge"] {
        let outcome = c.start(name, ()).await.unwrap().wait(WAIT).await.unwrap();
        assert_eq!(outcome.status, InstanceStatus::Failed, "{name}");
        let e = outcome.error.unwrap();
        assert!(
            e.message.len() < 70_000,
            "{name}: {} bytes",
            e.message.len()
        );
        assert!(
            e.message.contains("xxxx"),
            "{name}: the message's start is kept"
        );
        assert!(
            e.message.contains("3145728 bytes"),
            "{name}: {}",
            &e.message[e.message.len() - 300..]
        );
        assert!(e.message.contains("details were dropped"), "{name}");
        assert!(e.details.is_none(), "{name}");
        // Stored, it reads back: the history and the instance.
        let history = c.history(&outcome.id).await.unwrap();
        let stored: usize = history
            .iter()
            .map(|h| serde_json::to_vec(&h.event).unwrap().len())
            .sum();
        assert!(stored < 200_000, "{name}: history of {stored} bytes");
        let record = c.status(&outcome.id).await.unwrap();
        assert_eq!(record.error.unwrap(), e);
    }
    r.shutdown().await;
}

crate::on_every_backend!(
    bad_starts_are_refused_and_write_nothing,
    unknown_activity_fails_the_instance_clearly,
    malformed_signal_payload_is_an_error_in_the_code,
    limits_fail_instances_with_clear_errors,
    values_nested_too_deep_are_refused_where_they_come_in,
    huge_errors_are_kept_cut_and_history_stays_readable,
);
