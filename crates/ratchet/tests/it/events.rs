//! The event store end to end: subscriptions, projections, appends as orchestration steps,
//! bad input, and the course-enrollment example raced by 16 clients in 4 processes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ratchet::{
    append_events, AppendOutcome, Error, EventQuery, EventStore, NewEvent, OrchestrationContext,
    OrchestrationError, Position, Projector, QueryItem, RuntimeConfig, Store, StoredEvent,
};
use serde_json::json;

use crate::harness::{fast, start, WAIT};

#[path = "../../examples/enrollment/domain.rs"]
#[allow(dead_code)]
mod enrollment;

fn tagged(t: &str) -> EventQuery {
    EventQuery::item(QueryItem::new(Vec::<String>::new(), [t]))
}

async fn next(
    stream: &mut (impl futures::Stream<Item = ratchet::Result<StoredEvent>> + Unpin),
) -> StoredEvent {
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("an event within the wait")
        .expect("the stream goes on")
        .expect("no read error")
}

async fn subscriptions_follow_live_and_resume(store: Arc<dyn Store>) {
    let events = EventStore::new(store.clone());
    let mut live = Box::pin(events.subscribe(tagged("room:1"), None));
    events
        .append(vec![
            NewEvent::new("Said", ["room:1"], json!("a")),
            NewEvent::new("Said", ["room:2"], json!("elsewhere")),
        ])
        .await
        .unwrap();
    let first = next(&mut live).await;
    assert_eq!(
        (first.position, first.payload.clone()),
        (Position(1), json!("a"))
    );
    // Appended while the subscriber waits: pushed (or polled) to it, in order.
    for word in ["b", "c"] {
        events
            .append(vec![NewEvent::new("Said", ["room:1"], json!(word))])
            .await
            .unwrap();
    }
    let (b, c) = (next(&mut live).await, next(&mut live).await);
    assert_eq!((b.payload, c.payload), (json!("b"), json!("c")));
    assert!(b.position < c.position);
    // Resuming from a position skips what was seen, repeats nothing.
    let mut resumed = Box::pin(events.subscribe(tagged("room:1"), Some(b.position)));
    assert_eq!(next(&mut resumed).await.position, c.position);
    // A finite read ends at the head.
    let all: Vec<_> = events.read_all(tagged("room:1"), None).collect().await;
    assert_eq!(all.len(), 3);
    assert_eq!(
        events.head().await.unwrap(),
        Position(4),
        "the head counts every event"
    );
}

async fn projections_return_the_condition_that_protects_them(store: Arc<dyn Store>) {
    let events = EventStore::new(store);
    events
        .append(vec![
            NewEvent::new("Opened", ["account:a"], json!(100)),
            NewEvent::new("Opened", ["account:b"], json!(5)),
        ])
        .await
        .unwrap();
    let balance = |account: &str| {
        Projector::new(
            tagged(&format!("account:{account}")),
            0_i64,
            |sum: &mut i64, e: &StoredEvent| {
                *sum += e.payload.as_i64().unwrap_or(0);
            },
        )
    };
    let (mut a, mut b) = (balance("a"), balance("b"));
    let condition = events.project(&mut [&mut a, &mut b]).await.unwrap();
    assert_eq!((*a.state(), *b.state()), (100, 5));
    assert_eq!(condition.after, Some(Position(2)));
    // An event outside both boundaries does not invalidate the decision.
    events
        .append(vec![NewEvent::new("Opened", ["account:c"], json!(1))])
        .await
        .unwrap();
    let transfer = vec![
        NewEvent::new("Moved", ["account:a"], json!(-50)),
        NewEvent::new("Moved", ["account:b"], json!(50)),
    ];
    events
        .append_if(transfer.clone(), condition.clone())
        .await
        .unwrap();
    // The same decision again is stale: the transfer itself changed both accounts.
    match events.append_if(transfer, condition).await {
        Err(Error::AppendConflict { position }) => assert_eq!(position, Position(4)),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let page = events.read(tagged("account:a"), None, 10).await.unwrap();
    assert_eq!(page.events.len(), 2, "the stale transfer appended nothing");
    // A read's head turns into a condition too.
    let seen = events.read(tagged("account:b"), None, 10).await.unwrap();
    events
        .append_if(
            vec![NewEvent::new("Closed", ["account:b"], json!(0))],
            tagged("account:b").after(seen.head),
        )
        .await
        .unwrap();
}

async fn ledger(
    ctx: OrchestrationContext,
    id: String,
) -> Result<Vec<AppendOutcome>, OrchestrationError> {
    let tag = format!("ledger:{id}");
    let opened = append_events(
        &ctx,
        vec![NewEvent::new("Opened", [tag.clone()], json!(id))],
        None,
    )
    .await?;
    ctx.sleep(Duration::from_millis(20)).await?;
    // Conditional on nothing else in this ledger since the first step.
    let AppendOutcome::Appended { last, .. } = opened else {
        return Err(OrchestrationError::new("Unexpected", format!("{opened:?}")));
    };
    let closed = append_events(
        &ctx,
        vec![NewEvent::new("Closed", [tag.clone()], json!(id))],
        Some(tagged(&tag).after(last)),
    )
    .await?;
    Ok(vec![opened, closed])
}

async fn orchestrations_append_once_per_step(store: Arc<dyn Store>) {
    // A one-instance cache: with several instances running, turns replay from history.
    let config = RuntimeConfig {
        cache_size: 1,
        ..fast()
    };
    let ratchet = start(&store, |b| b.config(config).orchestration("ledger", ledger)).await;
    let client = ratchet.client();
    let mut handles = Vec::new();
    for i in 0..6 {
        handles.push(client.start("ledger", format!("l{i}")).await.unwrap());
    }
    for h in handles {
        let outcomes: Vec<AppendOutcome> = h.wait(WAIT).await.unwrap().into_result().unwrap();
        assert!(
            outcomes
                .iter()
                .all(|o| matches!(o, AppendOutcome::Appended { .. })),
            "{outcomes:?}"
        );
    }
    let events = client.events();
    for i in 0..6 {
        let page = events
            .read(tagged(&format!("ledger:l{i}")), None, 10)
            .await
            .unwrap();
        let kinds: Vec<_> = page.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["Opened", "Closed"], "each step appended once");
    }
    ratchet.shutdown().await;
}

async fn bad_events_are_refused_and_append_nothing(store: Arc<dyn Store>) {
    let events = EventStore::new(store);
    let cases = [
        (NewEvent::new("", ["k:v"], json!(1)), "event type"),
        (NewEvent::new("A", ["no-separator"], json!(1)), "key:value"),
        (NewEvent::new("A", ["k:"], json!(1)), "value"),
        (
            NewEvent::new(
                "A",
                ["k:v"],
                json!("x".repeat(ratchet_store::MAX_EVENT_BYTES)),
            ),
            "bytes",
        ),
    ];
    for (bad, expected) in cases {
        let good = NewEvent::new("A", ["k:v"], json!(1));
        match events.append(vec![good, bad]).await {
            Err(Error::InvalidInput(m)) => assert!(m.contains(expected), "{m}"),
            // An event over the size limit is too large rather than malformed.
            Err(e @ Error::PayloadTooLarge { .. }) => {
                assert!(e.to_string().contains(expected), "{e}")
            }
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }
    match events.read(tagged("nope"), None, 10).await {
        Err(Error::InvalidInput(_)) => {}
        other => panic!("expected InvalidInput, got {other:?}"),
    }
    let page = events.read(EventQuery::all(), None, 10).await.unwrap();
    assert_eq!(page.head, Position(0), "nothing was appended");
}

/// One life of instance id "x": appends an event, waits for "go", returns its input and the
/// signal.
async fn life(ctx: OrchestrationContext, input: String) -> Result<String, OrchestrationError> {
    let tag = format!("life:{}", ctx.instance_id());
    append_events(
        &ctx,
        vec![NewEvent::new("Lived", [tag], json!(input))],
        None,
    )
    .await?;
    let go: String = ctx.signal("go").await?;
    Ok(format!("{input}:{go}"))
}

/// Waits until "x" has recorded its append step's result (so it waits for the signal).
async fn until_waiting(store: &Arc<dyn Store>) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let history = store.history_read("x", None).await.unwrap();
        if history
            .iter()
            .any(|h| matches!(h.event, ratchet::HistoryEvent::ActivityCompleted { .. }))
        {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "x never waited");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A restarted instance id is a new life: another process's cache of the old life is never
/// taken for it, and its steps' keys (the append step's idempotency key) are its own.
async fn every_life_of_an_id_is_its_own(store: Arc<dyn Store>) {
    use ratchet::{IfExists, StartOptions};
    let a = start(&store, |b| b.orchestration("life", life)).await;
    // Life 1 runs its first turns in A, which keeps it in its cache...
    a.client()
        .start_with("life", "old", StartOptions::id("x"))
        .await
        .unwrap();
    until_waiting(&store).await;
    // ...and ends elsewhere (terminated by another process), so A's cache entry stays.
    store
        .instance_terminate("x", "end of life 1", ratchet::Timestamp::now())
        .await
        .unwrap();
    // Life 2 starts in B and runs to the same point; then only A is left to run it.
    let b = start(&store, |b| b.orchestration("life", life)).await;
    b.client()
        .start_with(
            "life",
            "new",
            StartOptions::id("x").if_exists(IfExists::RestartIfFinished),
        )
        .await
        .unwrap();
    until_waiting(&store).await;
    b.shutdown().await;
    a.client().signal("x", "go", "went").await.unwrap();
    let out: String = a
        .client()
        .wait("x", WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, "new:went", "life 2 ran with its own input and state");
    let events = EventStore::new(store.clone())
        .read(tagged("life:x"), None, 100)
        .await
        .unwrap();
    let payloads: Vec<_> = events.events.iter().map(|e| e.payload.clone()).collect();
    assert_eq!(
        payloads,
        [json!("old"), json!("new")],
        "each life appended once"
    );
    a.shutdown().await;
}

crate::on_every_backend!(
    every_life_of_an_id_is_its_own,
    subscriptions_follow_live_and_resume,
    projections_return_the_condition_that_protects_them,
    orchestrations_append_once_per_step,
    bad_events_are_refused_and_append_nothing,
);

mod enrollment_race {
    //! 16 clients in 4 processes (the example program) race to over-fill courses.
    use std::process::Command;

    use super::enrollment::{census, define, Setup};
    use ratchet::EventStore;

    const SETUP: Setup = Setup {
        courses: 5,
        capacity: 3,
        students: 10,
        max_courses: 2,
    };

    fn example() -> std::path::PathBuf {
        // Tests run from target/<profile>/deps; `cargo test` builds examples beside it.
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().and_then(|d| d.parent()).unwrap();
        let path = dir
            .join("examples")
            .join(format!("enrollment{}", std::env::consts::EXE_SUFFIX));
        assert!(
            path.exists(),
            "{} missing: run through `cargo test`, which builds the examples",
            path.display()
        );
        path
    }

    async fn race(store: std::sync::Arc<dyn ratchet::Store>, db_args: Vec<String>) {
        let events = EventStore::new(store);
        define(&events, SETUP).await.unwrap();
        let children: Vec<_> = (0..4)
            .map(|p| {
                Command::new(example())
                    .args(&db_args)
                    .args(["clients", "--clients", "4", "--attempts", "25", "--seed"])
                    .arg(format!("{}", p + 1))
                    .args([
                        "--courses",
                        "5",
                        "--capacity",
                        "3",
                        "--students",
                        "10",
                        "--max-courses",
                        "2",
                    ])
                    .output()
            })
            .collect();
        for child in children {
            let out = child.unwrap();
            assert!(
                out.status.success(),
                "a client process failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let census = census(&events).await.unwrap();
        let total: u64 = census.per_course.values().sum();
        assert!(total > 0, "someone enrolled");
        for (course, n) in &census.per_course {
            assert!(
                *n <= u64::from(SETUP.capacity),
                "course {course} has {n} students"
            );
        }
        for (student, n) in &census.per_student {
            assert!(
                *n <= u64::from(SETUP.max_courses),
                "student {student} takes {n} courses"
            );
        }
        assert_eq!(census.repeats, 0, "nobody enrolled twice in one course");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("school.db");
        let store = ratchet::SqliteStore::open(&path).await.unwrap();
        race(
            std::sync::Arc::new(store),
            vec!["--db".into(), path.display().to_string()],
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let Some(url) = ratchet_store_postgres::testing::database_url() else {
            return;
        };
        let schema = ratchet_store_postgres::testing::fresh_schema();
        let config = ratchet::PostgresConfig {
            schema: schema.clone(),
            ..ratchet::PostgresConfig::default()
        };
        let store = ratchet::PostgresStore::connect_with(&url, config)
            .await
            .unwrap();
        race(
            std::sync::Arc::new(store),
            vec!["--database-url".into(), url, "--schema".into(), schema],
        )
        .await;
    }
}
