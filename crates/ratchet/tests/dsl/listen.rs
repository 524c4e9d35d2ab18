//! `listen.to.any` and `listen.to.all`, signals and events of the event store together, and
//! what `read` gives.

use std::sync::Arc;
use std::time::Duration;

use ratchet::workflow::Workflow;
use ratchet::{InstanceStatus, StartOptions, Store};
use serde_json::{json, Value};

use crate::harness::{start, WAIT};

const EITHER: &str = r#"
document: {dsl: '1.0.0', namespace: wait, name: either, version: '1.0.0'}
do:
  - decision:
      listen:
        to:
          any:
            - with: {type: approved}
            - with:
                type: OrderCancelled
                tags: ['${ "order:" + .id }']
        read: envelope
      timeout:
        after: {milliseconds: '${ .wait }'}
"#;

const BOTH: &str = r#"
document: {dsl: '1.0.0', namespace: wait, name: both, version: '1.0.0'}
do:
  - both:
      listen:
        to:
          all:
            - with: {type: a}
            - with: {type: b}
        read: data
"#;

async fn listens_wait_for_any_or_all(store: Arc<dyn Store>) {
    let either = Workflow::compile(&EITHER.replace("'${ .wait }'", "5000")).unwrap();
    let r = start(&store, |b| {
        b.workflow(either, 1)
            .workflow(Workflow::compile(BOTH).unwrap(), 1)
    })
    .await;
    let c = r.client();
    let begin = |id: &'static str, name: &'static str, input: Value| {
        let c = c.clone();
        async move {
            c.start_with(name, input, StartOptions::id(id))
                .await
                .unwrap()
        }
    };

    // A signal meets it.
    let s = begin("s1", "wait/either", json!({"id": "s1"})).await;
    c.signal("s1", "approved", json!({"by": "ada"}))
        .await
        .unwrap();
    let out: Value = s.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!({"type": "approved", "data": {"by": "ada"}}));

    // An event of the store meets it, once it waits (the store's head read: the first
    // activity's answer).
    let e = begin("e1", "wait/either", json!({"id": "e1"})).await;
    let deadline = std::time::Instant::now() + WAIT;
    while !c
        .history("e1")
        .await
        .unwrap()
        .iter()
        .any(|h| h.event.kind() == "ActivityCompleted")
    {
        assert!(std::time::Instant::now() < deadline, "it never waited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.events()
        .append(vec![ratchet::NewEvent::new(
            "OrderCancelled",
            ["order:e1"],
            json!({"why": "late"}),
        )])
        .await
        .unwrap();
    let out: Value = e.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out["type"], "OrderCancelled");
    assert_eq!(out["data"], json!({"why": "late"}));
    assert_eq!(out["tags"], json!(["order:e1"]));

    // All of them, whatever the order they come in; `read: data`.
    let both = begin("b1", "wait/both", json!({})).await;
    c.signal("b1", "b", json!(2)).await.unwrap();
    c.signal("b1", "a", json!(1)).await.unwrap();
    let out: Value = both.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!([1, 2]));
    r.shutdown().await;

    // Nothing comes: the timeout error.
    let quick = Workflow::compile(&EITHER.replace("'${ .wait }'", "300")).unwrap();
    let r = start(&store, |b| b.workflow(quick, 1)).await;
    let outcome = r
        .client()
        .start_with("wait/either", json!({"id": "t1"}), StartOptions::id("t1"))
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let error = outcome.error.unwrap().details.unwrap();
    assert_eq!(error["status"], 408, "{error}");
    r.shutdown().await;
}

crate::on_every_backend!(listens_wait_for_any_or_all);
