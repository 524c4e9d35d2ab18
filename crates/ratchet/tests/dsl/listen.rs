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

const VITALS: &str = r#"
document: {dsl: '1.0.0', namespace: wait, name: vitals, version: '1.0.0'}
do:
  - alarm:
      listen:
        to:
          any:
            - with:
                type: temperature
                source: https://hospital.example
                data: ${ .celsius > 38 }
              correlate:
                patient: {from: '${ .subject }', expect: '${ .patient }'}
        read: data
      timeout:
        after: {seconds: 20}
"#;

const PAIR: &str = r#"
document: {dsl: '1.0.0', namespace: wait, name: pair, version: '1.0.0'}
do:
  - pair:
      listen:
        to:
          all:
            - with: {type: ordered}
              correlate: {order: {from: '${ .data.order }'}}
            - with: {type: paid}
              correlate: {order: {from: '${ .data.order }'}}
        read: data
"#;

const READINGS: &str = r#"
document: {dsl: '1.0.0', namespace: wait, name: readings, version: '1.0.0'}
do:
  - collect:
      listen:
        to:
          any:
            - with: {type: reading, source: '${ "meter-" + $workflow.input.meter }'}
          until: '( . | length ) >= 3'
        read: data
  - closing:
      listen:
        to:
          any:
            - with: {type: reading, source: '${ "meter-" + $workflow.input.meter }'}
          until:
            one:
              with: {type: closed, subject: '${ $workflow.input.meter }'}
        read: data
"#;

/// A CloudEvent, as `ratchet events append --cloudevent` and the API take one.
fn cloud(id: u32, kind: &str, source: &str, subject: &str, data: Value) -> ratchet::NewEvent {
    ratchet::NewEvent::from_cloud_event(json!({
        "specversion": "1.0", "id": id.to_string(), "source": source, "type": kind,
        "subject": subject, "data": data
    }))
    .unwrap()
}

/// Waits until instance `id` has read the store's head: events appended from then on count.
async fn listening(c: &ratchet::Client, id: &str, steps: usize) {
    let deadline = std::time::Instant::now() + WAIT;
    while c
        .history(id)
        .await
        .unwrap()
        .iter()
        .filter(|h| h.event.kind() == "ActivityCompleted")
        .count()
        < steps
    {
        if std::time::Instant::now() > deadline {
            let history = c.history(id).await.unwrap();
            let kinds: Vec<_> = history.iter().map(|h| format!("{:?}", h.event)).collect();
            panic!("{id} never listened: {kinds:#?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn listens_filter_correlate_and_consume_until(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.workflow(Workflow::compile(VITALS).unwrap(), 1)
            .workflow(Workflow::compile(PAIR).unwrap(), 1)
            .workflow(Workflow::compile(READINGS).unwrap(), 1)
    })
    .await;
    let c = r.client();
    let append = |events: Vec<ratchet::NewEvent>| {
        let c = c.clone();
        async move { c.events().append(events).await.unwrap() }
    };

    // Attributes, `data` by expression, and a correlation expected from the input: three
    // near misses, then the one.
    let v = c
        .start_with(
            "wait/vitals",
            json!({"patient": "p1"}),
            StartOptions::id("v1"),
        )
        .await
        .unwrap();
    listening(c, "v1", 1).await;
    let hospital = "https://hospital.example";
    append(vec![
        cloud(1, "temperature", hospital, "p2", json!({"celsius": 40})),
        cloud(2, "temperature", hospital, "p1", json!({"celsius": 37})),
        cloud(
            3,
            "temperature",
            "https://elsewhere.example",
            "p1",
            json!({"celsius": 41}),
        ),
        cloud(4, "temperature", hospital, "p1", json!("not an object")),
        cloud(5, "temperature", hospital, "p1", json!({"celsius": 39.5})),
    ])
    .await;
    let out: Value = v.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!({"celsius": 39.5}));

    // `all`: the first event's correlation is what the second must carry.
    let p = c
        .start_with("wait/pair", json!({}), StartOptions::id("p1"))
        .await
        .unwrap();
    listening(c, "p1", 1).await;
    append(vec![
        cloud(6, "paid", "shop", "-", json!({"order": 2})),
        cloud(7, "ordered", "shop", "-", json!({"order": 1})),
        cloud(8, "paid", "shop", "-", json!({"order": 1})),
    ])
    .await;
    let out: Value = p.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!([{"order": 1}, {"order": 1}]));

    // `until` an expression of what was consumed, then `until` an ending event (not in the
    // output); another meter's readings are not consumed.
    let m = c
        .start_with(
            "wait/readings",
            json!({"meter": "m1"}),
            StartOptions::id("m1"),
        )
        .await
        .unwrap();
    listening(c, "m1", 1).await;
    append(vec![
        cloud(9, "reading", "meter-m1", "m1", json!(1)),
        cloud(10, "reading", "meter-m2", "m2", json!(99)),
        cloud(11, "reading", "meter-m1", "m1", json!(2)),
        cloud(12, "reading", "meter-m1", "m1", json!(3)),
    ])
    .await;
    // The second listen begins after the first: its head is read after these.
    listening(c, "m1", 6).await;
    append(vec![
        cloud(13, "reading", "meter-m1", "m1", json!(4)),
        cloud(14, "closed", "meter-m1", "m2", json!(null)),
        cloud(15, "reading", "meter-m1", "m1", json!(5)),
        cloud(16, "closed", "meter-m1", "m1", json!(null)),
        cloud(17, "reading", "meter-m1", "m1", json!(6)),
    ])
    .await;
    let out: Value = m.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!([4, 5]));
    r.shutdown().await;
}

crate::on_every_backend!(
    listens_wait_for_any_or_all,
    listens_filter_correlate_and_consume_until,
    schedule_on_starts_a_workflow_per_event
);

const ONBOARD: &str = r#"
document: {dsl: '1.0.0', namespace: wait, name: onboard, version: '1.0.0'}
schedule:
  on:
    one:
      with: {type: user.created, source: https://accounts.example}
do:
  - greet:
      set:
        user: ${ .data.name }
"#;

/// `schedule.on`: a trigger instance starts the workflow once per matching event, with the
/// event as its input; applying the same definition again starts no second trigger.
async fn schedule_on_starts_a_workflow_per_event(store: Arc<dyn Store>) {
    let onboard = Workflow::compile(ONBOARD).unwrap();
    let r = start(&store, |b| b.workflow(onboard.clone(), 1)).await;
    let c = r.client();
    let sync = ratchet::workflow::sync_schedule(c, &onboard).await.unwrap();
    let ratchet::workflow::ScheduleSync::Trigger {
        instance,
        started: true,
    } = sync
    else {
        panic!("{sync:?}")
    };
    listening(c, &instance, 1).await;
    let accounts = "https://accounts.example";
    c.events()
        .append(vec![
            cloud(1, "user.created", accounts, "u1", json!({"name": "ada"})),
            cloud(
                2,
                "user.created",
                "https://spam.example",
                "u2",
                json!({"name": "eve"}),
            ),
            cloud(3, "user.deleted", accounts, "u1", json!({"name": "ada"})),
            cloud(4, "user.created", accounts, "u3", json!({"name": "grace"})),
        ])
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let started = loop {
        let done = c
            .list(ratchet::InstanceFilter {
                name: Some("wait/onboard".into()),
                statuses: vec![InstanceStatus::Completed],
                ..Default::default()
            })
            .await
            .unwrap();
        if done.len() >= 2 || std::time::Instant::now() > deadline {
            break done;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut users: Vec<Value> = started
        .iter()
        .map(|i| i.output.clone().unwrap_or_default()["user"].clone())
        .collect();
    users.sort_by_key(|u| u.to_string());
    assert_eq!(users, [json!("ada"), json!("grace")]);
    assert!(started.iter().all(|i| i.id.starts_with("wait/onboard:on:")));
    // The same definition again: the same trigger, not a second one.
    let again = ratchet::workflow::sync_schedule(c, &onboard).await.unwrap();
    assert!(
        matches!(&again, ratchet::workflow::ScheduleSync::Trigger { instance: i, started: false } if *i == instance),
        "{again:?}"
    );
    r.shutdown().await;
}
