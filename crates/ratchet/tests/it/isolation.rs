//! User code that panics fails its own instance only: the turns and completions that
//! commit with it (the group commit carries many instances' work) commit, and a start
//! whose first turn panics is answered with the failed instance, not an error. An activity
//! that panics fails its own step only, though the activities its turn scheduled with it
//! run together with it.

use std::sync::Arc;

use ratchet::{
    ActivityContext, ActivityError, ActivityOptions, InstanceStatus, OrchestrationContext,
    OrchestrationError, RetryPolicy, Store, TaskContext, TaskError, TaskOptions, TaskState,
};

use crate::harness::{start, WAIT};

async fn double(_ctx: ActivityContext, n: i64) -> Result<i64, ActivityError> {
    Ok(n * 2)
}

/// Panics in the turn its activity's result feeds: a fed turn, run inside the group
/// commit that also carries the other instances' results.
async fn panics_when_fed(ctx: OrchestrationContext, n: i64) -> Result<i64, OrchestrationError> {
    let d: i64 = ctx.activity("double", n).await?;
    if d > 0 {
        panic!("fed turn of {d}");
    }
    Ok(d)
}

async fn panics_at_once(_ctx: OrchestrationContext, n: i64) -> Result<i64, OrchestrationError> {
    if n > 0 {
        panic!("first turn of {n}");
    }
    Ok(n)
}

async fn fine(ctx: OrchestrationContext, n: i64) -> Result<i64, OrchestrationError> {
    let calls = (0..3).map(|i| ctx.activity::<i64>("double", n + i));
    let out = ratchet::join_all(calls).await;
    Ok(out.into_iter().collect::<Result<Vec<_>, _>>()?.iter().sum())
}

async fn a_panicking_turn_fails_its_own_instance_only(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration("panics_when_fed", panics_when_fed)
            .orchestration("panics_at_once", panics_at_once)
            .orchestration("fine", fine)
            .activity("double", double)
            .task("once", |_ctx: TaskContext, n: i64| async move {
                Ok::<_, TaskError>(n + 1)
            })
    })
    .await;
    let c = r.client();
    // A start whose first turn panics is a start: the instance exists and has failed.
    let first = c.start("panics_at_once", 1).await.unwrap();
    let outcome = first.wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let e = outcome.error.unwrap();
    assert_eq!(e.kind, "Panicked");
    assert!(e.message.contains("first turn of 1"), "{}", e.message);

    // Panicking fed turns among others' work, and tasks that may run once only.
    let mut panicky = Vec::new();
    let mut others = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..8 {
        panicky.push(c.start("panics_when_fed", i + 1).await.unwrap());
        others.push(c.start("fine", i).await.unwrap());
        let options = TaskOptions::default().max_attempts(1);
        tasks.push(c.enqueue_with("once", i, options).await.unwrap().id());
    }
    for (i, h) in panicky.into_iter().enumerate() {
        let outcome = h.wait(WAIT).await.unwrap();
        assert_eq!(outcome.status, InstanceStatus::Failed);
        let e = outcome.error.unwrap();
        assert_eq!(e.kind, "Panicked");
        assert!(
            e.message.contains(&format!("fed turn of {}", 2 * (i + 1))),
            "{}",
            e.message
        );
    }
    for (i, h) in others.into_iter().enumerate() {
        let i = i as i64;
        let out: i64 = h.wait(WAIT).await.unwrap().into_result().unwrap();
        assert_eq!(out, 2 * (3 * i + 3));
    }
    for (i, id) in tasks.into_iter().enumerate() {
        let done = c.task_wait(id, WAIT).await.unwrap();
        assert_eq!(
            done.state,
            TaskState::Completed,
            "task {i}: {:?}",
            done.error
        );
        assert_eq!(done.output, Some(serde_json::json!(i as i64 + 1)));
    }
    r.shutdown().await;
}

crate::on_every_backend!(
    a_panicking_turn_fails_its_own_instance_only,
    a_panicking_activity_fails_its_own_step_only
);

/// Doubles `n`, except 7, on which it panics.
async fn double_but_seven(_ctx: ActivityContext, n: i64) -> Result<i64, ActivityError> {
    if n == 7 {
        panic!("seven among its siblings");
    }
    Ok(n * 2)
}

/// Schedules `n` activities in one turn (more than one group of siblings when `n` is large),
/// and answers with the sum of those that completed and the failures of the others.
async fn wide(ctx: OrchestrationContext, n: i64) -> Result<(i64, Vec<String>), OrchestrationError> {
    let once = ActivityOptions::default().retry(RetryPolicy::no_retry());
    let calls = (0..n).map(|i| ctx.activity_with::<i64>("double_but_seven", i, once.clone()));
    let mut sum = 0;
    let mut failed = Vec::new();
    for result in ratchet::join_all(calls).await {
        match result {
            Ok(d) => sum += d,
            Err(OrchestrationError::Activity { error, .. }) => {
                failed.push(format!("{}: {}", error.kind, error.message));
            }
            Err(other) => return Err(other),
        }
    }
    Ok((sum, failed))
}

async fn a_panicking_activity_fails_its_own_step_only(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.orchestration("wide", wide)
            .activity("double_but_seven", double_but_seven)
    })
    .await;
    let c = r.client();
    for n in [8, 40] {
        let (sum, failed): (i64, Vec<String>) = c
            .start("wide", n)
            .await
            .unwrap()
            .wait(WAIT)
            .await
            .unwrap()
            .into_result()
            .unwrap();
        assert_eq!(
            sum,
            (0..n).filter(|i| *i != 7).map(|i| 2 * i).sum::<i64>(),
            "n = {n}"
        );
        assert_eq!(
            failed,
            vec!["Panic: seven among its siblings".to_string()],
            "n = {n}"
        );
    }
    r.shutdown().await;
}
