//! `catch.retry` whole: `when` and `exceptWhen`, `jitter` drawn from history, `limit.duration`
//! and `limit.attempt.duration`, each attempt seen in what the instance ran.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ratchet::workflow::Workflow;
use ratchet::{Client, HistoryEvent, InstanceStatus, StartOptions, Store};
use serde_json::{json, Value};

use crate::harness::{start, WAIT};
use crate::ran;

/// Fails with the detail its input names; retried unless that is `fatal` or `final`, then
/// handled.
const PICKY: &str = r#"
document: {dsl: '1.0.0', namespace: retries, name: picky, version: '1.0.0'}
do:
  - guarded:
      try:
        - fail:
            raise:
              error:
                type: https://serverlessworkflow.io/spec/1.0.0/errors/communication
                status: 503
                detail: ${ .kind }
      catch:
        as: failure
        retry:
          when: ${ .detail != "fatal" }
          exceptWhen: ${ $failure.detail == "final" }
          delay: {milliseconds: 10}
          limit: {attempt: {count: 3}}
        do:
          - handled:
              set:
                detail: ${ $failure.detail }
"#;

/// No delay of its own: each wait is the jitter's, between 100 and 300 ms.
const JITTERY: &str = r#"
document: {dsl: '1.0.0', namespace: retries, name: jittery, version: '1.0.0'}
do:
  - guarded:
      try:
        - fail:
            raise:
              error: {type: https://example.test/errors/down, status: 503}
      catch:
        retry:
          delay: PT0S
          jitter: {from: {milliseconds: 100}, to: {milliseconds: 300}}
          limit: {attempt: {count: 3}}
        do:
          - handled:
              set: {done: true}
"#;

/// Retried every 100 ms for as long as 500 ms allow, however many attempts that is.
const PATIENT: &str = r#"
document: {dsl: '1.0.0', namespace: retries, name: patient, version: '1.0.0'}
do:
  - guarded:
      try:
        - fail:
            raise:
              error: {type: https://example.test/errors/down, status: 503}
      catch:
        retry:
          delay: {milliseconds: 100}
          limit: {duration: {milliseconds: 500}}
        do:
          - handled:
              set: {done: true}
"#;

/// Each attempt waits half a minute but may run only 200 ms.
const HURRIED: &str = r#"
document: {dsl: '1.0.0', namespace: retries, name: hurried, version: '1.0.0'}
do:
  - guarded:
      try:
        - slow:
            wait: PT30S
      catch:
        as: failure
        errors:
          with: {type: https://serverlessworkflow.io/spec/1.0.0/errors/timeout}
        retry:
          delay: {milliseconds: 10}
          limit: {attempt: {count: 2, duration: {milliseconds: 200}}}
        do:
          - handled:
              set:
                type: ${ $failure.type }
                status: ${ $failure.status }
                instance: ${ $failure.instance }
"#;

/// Runs `source` as instance `id` on `input` until it completes; its output.
async fn run_to_end(store: &Arc<dyn Store>, source: &str, id: &str, input: Value) -> Value {
    let workflow = Workflow::compile(source).unwrap();
    let name = workflow.orchestration_name();
    let r = start(store, |b| b.workflow(workflow, 1)).await;
    let outcome = r
        .client()
        .start_with(&name, input, StartOptions::id(id))
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(
        outcome.status,
        InstanceStatus::Completed,
        "{id}: {outcome:?}"
    );
    r.shutdown().await;
    outcome.output.unwrap_or(Value::Null)
}

/// An instance id of its own: what ran is kept per id for the whole test process, whose
/// tests run on both backends at once.
fn unique(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{name}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// How many times `task` ran in `instance`.
fn ran_times(instance: &str, task: &str) -> usize {
    ran::tasks(instance).iter().filter(|t| *t == task).count()
}

async fn a_retry_runs_only_when_its_conditions_hold(store: Arc<dyn Store>) {
    ran::record();
    for (kind, attempts) in [("flaky", 3), ("fatal", 1), ("final", 1)] {
        let id = unique(kind);
        let out = run_to_end(&store, PICKY, &id, json!({"kind": kind})).await;
        assert_eq!(out, json!({"detail": kind}), "{id}");
        assert_eq!(
            ran_times(&id, "fail"),
            attempts,
            "{id}: {:?}",
            ran::tasks(&id)
        );
        assert_eq!(ran_times(&id, "handled"), 1, "{id}");
    }
}

async fn jitter_comes_from_history_and_stays_in_its_range(store: Arc<dyn Store>) {
    ran::record();
    let id = unique("jittery");
    let out = run_to_end(&store, JITTERY, &id, json!({})).await;
    assert_eq!(out, json!({"done": true}));
    assert_eq!(ran_times(&id, "fail"), 3);
    let history = Client::new(store.clone()).history(&id).await.unwrap();
    // Each back-off's timer fires between 100 and 300 ms after the turn that set it, and
    // each draws one random value recorded in history.
    let mut turn_at = None;
    let mut waits = Vec::new();
    let mut drawn = 0;
    for record in &history {
        match &record.event {
            HistoryEvent::TurnStarted { at } => turn_at = Some(at.as_millis()),
            HistoryEvent::TimerCreated { fire_at, .. } => {
                waits.push(fire_at.as_millis() - turn_at.unwrap());
            }
            HistoryEvent::ValueRecorded { .. } => drawn += 1,
            _ => {}
        }
    }
    assert_eq!(waits.len(), 2, "{history:?}");
    assert!(waits.iter().all(|w| (100..=300).contains(w)), "{waits:?}");
    assert_eq!(drawn, 2, "{history:?}");
}

async fn retries_stop_when_their_duration_has_passed(store: Arc<dyn Store>) {
    ran::record();
    let id = unique("patient");
    let out = run_to_end(&store, PATIENT, &id, json!({})).await;
    assert_eq!(out, json!({"done": true}));
    // Attempts 100 ms apart within 500 ms: at most five, and more than one.
    let attempts = ran_times(&id, "fail");
    assert!((2..=5).contains(&attempts), "{attempts} attempts");
}

async fn an_attempt_past_its_duration_fails_with_a_timeout_and_is_retried(store: Arc<dyn Store>) {
    ran::record();
    let id = unique("hurried");
    let out = run_to_end(&store, HURRIED, &id, json!({})).await;
    assert_eq!(
        out,
        json!({
            "type": "https://serverlessworkflow.io/spec/1.0.0/errors/timeout",
            "status": 408,
            "instance": "/do/0/guarded/try",
        })
    );
    assert_eq!(ran_times(&id, "slow"), 2, "{:?}", ran::tasks(&id));
}

crate::on_every_backend!(
    a_retry_runs_only_when_its_conditions_hold,
    jitter_comes_from_history_and_stays_in_its_range,
    retries_stop_when_their_duration_has_passed,
    an_attempt_past_its_duration_fails_with_a_timeout_and_is_retried
);
