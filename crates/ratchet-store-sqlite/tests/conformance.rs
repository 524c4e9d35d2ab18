//! The store conformance suite against a real SQLite file.

use ratchet_store_sqlite::SqliteStore;

async fn fresh() -> SqliteStore {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path().join("test.db"))
        .await
        .expect("open");
    // Keep the directory for the test's lifetime.
    std::mem::forget(dir);
    store
}

ratchet_store::conformance_suite!(fresh());

#[tokio::test]
async fn every_statement_prepares() {
    let store = fresh().await;
    let names = SqliteStore::statement_names();
    assert!(names.len() > 20);
    for name in names {
        store
            .prepare(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[tokio::test]
async fn reopening_migrates_once_and_refuses_newer_schema() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("m.db");
    drop(SqliteStore::open(&path).await.expect("first open"));
    drop(
        SqliteStore::open(&path)
            .await
            .expect("second open is a no-op"),
    );
    let conn = rusqlite::Connection::open(&path).expect("raw open");
    conn.execute("INSERT INTO ratchet_schema (version) VALUES (99)", [])
        .expect("bump");
    drop(conn);
    match SqliteStore::open(&path).await {
        Err(ratchet_store::StoreError::SchemaTooNew { found: 99, .. }) => {}
        other => panic!("expected SchemaTooNew, got {:?}", other.err()),
    }
}

#[tokio::test]
async fn a_version_1_database_migrates_and_keeps_its_tasks() {
    use std::time::Duration;

    use ratchet_core::{ActivityOptions, Timestamp};
    use ratchet_store::{
        CommitBatch, CompletionResult, Lease, Store, TaskClaim, TaskCompletion, TaskResult,
    };

    let t0 = Timestamp(1_000_000);
    let until = t0.plus(Duration::from_secs(30));
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("v1.db");
    let conn = rusqlite::Connection::open(&path).expect("raw open");
    conn.execute_batch(include_str!("../migrations/0001_init.sql"))
        .expect("0001");
    conn.execute_batch(
        "CREATE TABLE ratchet_schema (version INTEGER NOT NULL);
         INSERT INTO ratchet_schema (version) VALUES (1);",
    )
    .expect("version 1");
    let options = serde_json::to_string(&ActivityOptions::default()).expect("options");
    let insert = "INSERT INTO tasks (name, input, options, instance, execution, seq, visible_at, \
                  lease_owner, lease_until, fence, created_at) \
                  VALUES ('act', ?1, ?2, 'a', 0, ?1, ?3, ?4, ?5, ?6, ?3)";
    // A ready task, a task leased until `until`, and a third, finished and gone, whose id
    // must not be handed out again.
    conn.execute(
        insert,
        rusqlite::params![0, options, t0.0, None::<String>, None::<i64>, 0],
    )
    .expect("ready task");
    conn.execute(
        insert,
        rusqlite::params![1, options, t0.0, "old", until.0, 1],
    )
    .expect("leased task");
    conn.execute(
        insert,
        rusqlite::params![2, options, t0.0, None::<String>, None::<i64>, 0],
    )
    .expect("third task");
    conn.execute("DELETE FROM tasks WHERE seq = 2", [])
        .expect("finish it");
    drop(conn);

    let store = SqliteStore::open(&path).await.expect("migrating open");
    assert_eq!(ratchet_store_sqlite::SCHEMA_VERSION, 10);
    let claim = |now: Timestamp| {
        TaskClaim::activities(
            Lease {
                owner: "new".into(),
                until: now.plus(Duration::from_secs(30)),
            },
            10,
            vec!["act".into()],
            now,
        )
    };
    let ready = store.task_claim(claim(t0)).await.expect("claim");
    assert_eq!(ready.len(), 1, "the leased task keeps its lease");
    let task = &ready[0];
    assert_eq!(
        (task.queue.as_str(), task.attempt, task.fence.0),
        (ratchet_store::ACTIVITY_QUEUE, 1, 1)
    );
    assert_eq!(
        task.owner.as_ref().map(|o| (o.instance.as_str(), o.seq)),
        Some(("a", 0))
    );
    let done = store
        .commit(CommitBatch {
            completions: vec![TaskCompletion::of(
                task,
                TaskResult::Completed(serde_json::json!(0)),
            )],
            now: t0,
            ..CommitBatch::default()
        })
        .await
        .expect("commit");
    assert_eq!(done.completions, vec![CompletionResult::Applied]);
    let taken = store.task_claim(claim(until)).await.expect("claim");
    assert_eq!(
        taken
            .iter()
            .map(|t| (t.fence.0, t.input.clone()))
            .collect::<Vec<_>>(),
        vec![(2, serde_json::json!(1))],
        "the expired lease is taken over under a new fence"
    );
    let fresh = store
        .task_enqueue(
            vec![ratchet_store::NewTask::standalone(
                "job".into(),
                serde_json::json!(null),
                &ratchet_core::TaskOptions::default(),
                t0,
            )],
            t0,
        )
        .await
        .expect("enqueue");
    assert_eq!(fresh[0].id().0, 4, "task ids are never reused");
}

/// Two strictly sequential conditional appends with the same `after`, while another
/// connection holds a read transaction open on the file (an old snapshot): the second fails.
#[tokio::test]
async fn an_open_read_transaction_does_not_weaken_conditions() {
    use ratchet_store::{
        AppendCondition, AppendOutcome, EventAppend, EventQuery, EventRead, NewEvent, Position,
        QueryItem, Store,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("e.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let mut other = rusqlite::Connection::open(&path).expect("raw open");
    let open = other.transaction().expect("begin");
    let seen: i64 = open
        .query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .expect("read inside the open transaction");
    assert_eq!(seen, 0);
    let head = store
        .event_read(EventRead::forward(EventQuery::all(), None, 10))
        .await
        .expect("read")
        .head;
    let booking = || EventAppend {
        events: vec![NewEvent::new("Booked", ["seat:1"], serde_json::json!(1))],
        condition: Some(AppendCondition {
            fail_if_events_match: EventQuery::item(QueryItem::new(["Booked"], ["seat:1"])),
            after: Some(head),
        }),
        idempotency_key: None,
    };
    let now = ratchet_core::Timestamp(1);
    let first = store
        .event_append(vec![booking()], now)
        .await
        .expect("append");
    assert!(
        matches!(first[0], AppendOutcome::Appended { .. }),
        "{first:?}"
    );
    let second = store
        .event_append(vec![booking()], now)
        .await
        .expect("append");
    assert_eq!(
        second[0],
        AppendOutcome::Conflict {
            position: Position(1)
        }
    );
    open.rollback().expect("rollback");
}

/// A prefix with more matches than this backend sorts (it then filters a walk of creation
/// times instead) lists the same instances, in the same order, page by page.
#[tokio::test]
async fn a_wide_id_prefix_lists_what_a_narrow_one_would() {
    use ratchet_core::Timestamp;
    use ratchet_store::{IfExists, InstanceFilter, NewInstance, Store};

    let store = fresh().await;
    let new = |id: String| NewInstance {
        id,
        name: "wf".into(),
        input: serde_json::json!(null),
        parent: None,
        if_exists: IfExists::Fail,
        trace: None,
    };
    // 10,500 ids under `w-`, created a millisecond apart, and a few others.
    for chunk in 0..21 {
        let batch = (0..500)
            .map(|i| new(format!("w-{:05}", chunk * 500 + i)))
            .collect();
        store
            .instance_create(batch, None, Timestamp(1_000_000 + chunk))
            .await
            .unwrap();
    }
    store
        .instance_create(
            vec![new("x-1".into()), new("v-1".into())],
            None,
            Timestamp(2_000_000),
        )
        .await
        .unwrap();
    let page = |prefix: &str, after: Option<(Timestamp, String)>| {
        let store = store.clone();
        let filter = InstanceFilter {
            id_prefix: Some(prefix.into()),
            after,
            limit: Some(3),
            ..InstanceFilter::default()
        };
        async move {
            store
                .instance_list(filter)
                .await
                .unwrap()
                .into_iter()
                .map(|r| (r.created_at, r.id))
                .collect::<Vec<_>>()
        }
    };
    let wide = page("w-", None).await;
    let ids: Vec<&str> = wide.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(ids, ["w-10499", "w-10498", "w-10497"], "newest first");
    assert_eq!(page("w-1049", None).await, wide, "a narrow prefix agrees");
    let next = page("w-", wide.last().cloned()).await;
    let ids: Vec<&str> = next.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(ids, ["w-10496", "w-10495", "w-10494"]);
    // The chunk boundary: ids of an older millisecond follow.
    let at_boundary = page("w-", Some((Timestamp(1_000_020), "w-10000".into()))).await;
    let ids: Vec<&str> = at_boundary.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(ids, ["w-09999", "w-09998", "w-09997"]);
}

/// The log is copied into the file by the store's own checkpointing thread, not by the
/// commits: with nobody else checkpointing (the writer's backstop is far above what this
/// writes), the file grows by what was committed, and the data reads back.
#[tokio::test]
async fn the_log_is_checkpointed_in_the_background() {
    use std::time::{Duration, Instant};

    use ratchet_core::Timestamp;
    use ratchet_store::{IfExists, NewInstance, Store};

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("c.db");
    let store = SqliteStore::open(&path).await.expect("open");
    let size = || std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    // The migration's own pages are checkpointed first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = size();
    let padding = "x".repeat(10_000);
    let instances = (0..200)
        .map(|i| NewInstance {
            id: format!("i{i}"),
            name: "o".into(),
            input: serde_json::json!({ "padding": padding }),
            parent: None,
            if_exists: IfExists::Fail,
            trace: None,
        })
        .collect();
    store
        .instance_create(instances, None, Timestamp(1_000_000))
        .await
        .expect("create");
    let deadline = Instant::now() + Duration::from_secs(10);
    while size() < before + 1_500_000 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        size() >= before + 1_500_000,
        "the file grew from {before} to {} bytes: the log was not checkpointed",
        size()
    );
    let read = store.instance_get("i199").await.expect("read");
    assert!(read.is_some(), "the last instance reads back");
}
