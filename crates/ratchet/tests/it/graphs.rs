//! Graphs of instances drawn from their executed history, on every backend: a Rust
//! orchestration's fan-out side by side and joined, its child drawn inside its node, a
//! failed step coloured as failed; and a declarative workflow's run.

use std::sync::Arc;

use ratchet::graph::{self, Status};
use ratchet::{
    ActivityContext, ActivityError, ActivityOptions, OrchestrationContext, OrchestrationError,
    RetryPolicy, StartOptions, Store,
};
use serde_json::json;

use crate::harness::{start, WAIT};

async fn echo(_ctx: ActivityContext, n: u32) -> Result<u32, ActivityError> {
    Ok(n)
}

async fn refuse(_ctx: ActivityContext, _: ()) -> Result<(), ActivityError> {
    Err(ActivityError::non_retryable("Declined", "no"))
}

async fn child(ctx: OrchestrationContext, n: u32) -> Result<u32, OrchestrationError> {
    ctx.activity::<u32>("echo", n).await
}

async fn parent(ctx: OrchestrationContext, _: ()) -> Result<u32, OrchestrationError> {
    let fan = (0..4).map(|i| ctx.activity::<u32>("echo", i));
    let sum: u32 = ratchet::join_all(fan)
        .await
        .into_iter()
        .collect::<Result<Vec<u32>, _>>()?
        .into_iter()
        .sum();
    let once = ActivityOptions::default().retry(RetryPolicy::no_retry());
    // A failure it survives, drawn as failed.
    let _ = ctx.activity_with::<()>("refuse", (), once).await;
    let doubled: u32 = ctx.sub_orchestration("child", sum * 2).await?;
    Ok(doubled)
}

async fn an_instance_graph_shows_its_run(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration("parent", parent)
            .orchestration("child", child)
            .activity("echo", echo)
            .activity("refuse", refuse)
    })
    .await;
    let c = r.client();
    let h = c
        .start_with("parent", (), StartOptions::id("drawn"))
        .await
        .unwrap();
    let out: u32 = h.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, 12);

    let g = graph::instance(store.as_ref(), "drawn", Some("/i/"))
        .await
        .unwrap()
        .expect("the instance exists");
    let labels: Vec<&str> = g.nodes.iter().map(|n| n.label.as_str()).collect();
    assert_eq!(labels, ["start", "parallel", "refuse", "child", "end"]);
    let fan = g.nodes[1].body.as_ref().expect("the fan-out is a block");
    assert_eq!(fan.nodes.len(), 4);
    assert!(fan.nodes.iter().all(|n| n.status == Status::Completed));
    assert_eq!(g.nodes[2].status, Status::Failed);
    let sub = &g.nodes[3];
    assert_eq!(sub.status, Status::Completed);
    assert!(sub.link.as_deref().is_some_and(|l| l.starts_with("/i/")));
    let inner = sub.body.as_ref().expect("the child's run is drawn inside");
    assert!(inner.nodes.iter().any(|n| n.label == "echo"));
    assert_eq!(g.nodes[4].status, Status::Completed);

    let layout = graph::layout(&g);
    assert!(layout.problems().is_empty(), "{:?}", layout.problems());
    let svg = graph::svg(&layout);
    assert!(svg.contains("status-failed") && svg.contains("href=\"/i/"));

    assert!(graph::instance(store.as_ref(), "no-such", None)
        .await
        .unwrap()
        .is_none());
    r.shutdown().await;
}

async fn a_declarative_run_is_drawn_from_its_history(store: Arc<dyn Store>) {
    let source = "document: {dsl: '1.0.0', namespace: g, name: steps, version: '1.0.0'}\ndo:\n  - both:\n      fork:\n        branches:\n          - a:\n              call: echo\n              with: {n: 1}\n          - b:\n              call: echo\n              with: {n: 2}\n  - nap:\n      wait: {milliseconds: 50}\n";
    let w = ratchet::workflow::Workflow::compile(source).unwrap_or_else(|e| panic!("{e}"));
    let r = start(&store, |b| {
        b.workflow(w, 1).activity(
            "echo",
            |_c: ActivityContext, v: serde_json::Value| async move {
                Ok::<_, ActivityError>(v["n"].as_u64().unwrap_or(0))
            },
        )
    })
    .await;
    let h = r
        .client()
        .start_with("g/steps", json!({}), StartOptions::id("steps"))
        .await
        .unwrap();
    h.wait(WAIT).await.unwrap();
    let g = graph::instance(store.as_ref(), "steps", None)
        .await
        .unwrap()
        .unwrap();
    let labels: Vec<&str> = g.nodes.iter().map(|n| n.label.as_str()).collect();
    assert_eq!(labels, ["start", "parallel", "timer", "end"]);
    assert!(g.nodes.iter().all(|n| n.status == Status::Completed));
    r.shutdown().await;
}

crate::on_every_backend!(
    an_instance_graph_shows_its_run,
    a_declarative_run_is_drawn_from_its_history,
);
