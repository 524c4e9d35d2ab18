//! The store conformance suite, and this backend's own checks, against a real PostgreSQL.
#![allow(clippy::unwrap_used)]

use ratchet_store::{Store, StoreError};
use ratchet_store_postgres::testing::{database_url, fresh_schema, fresh_store};
use ratchet_store_postgres::{PostgresConfig, PostgresStore, SCHEMA_VERSION};

ratchet_store::conformance_suite!(optional: fresh_store());

#[tokio::test]
async fn every_statement_prepares() {
    let Some(store) = fresh_store().await else {
        return;
    };
    let names = PostgresStore::statement_names();
    assert!(names.len() > 10);
    for name in names {
        store
            .prepare(&name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[tokio::test]
async fn migrating_twice_is_a_no_op_and_a_newer_schema_is_refused() {
    let Some(url) = database_url() else {
        return;
    };
    let config = PostgresConfig {
        schema: fresh_schema(),
        ..PostgresConfig::default()
    };
    let first = PostgresStore::connect_with(&url, config.clone())
        .await
        .unwrap();
    assert_eq!(first.schema_version().await.unwrap(), SCHEMA_VERSION);
    let again = PostgresStore::connect_with(&url, config.clone())
        .await
        .unwrap();
    assert_eq!(again.schema_version().await.unwrap(), SCHEMA_VERSION);
    // Without migrating on connect, an up-to-date schema is accepted.
    PostgresStore::connect_with(
        &url,
        PostgresConfig {
            migrate: false,
            ..config.clone()
        },
    )
    .await
    .unwrap();

    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "INSERT INTO {}.ratchet_schema (version) VALUES (99)",
            config.schema
        ))
        .await
        .unwrap();
    match PostgresStore::connect_with(&url, config.clone()).await {
        Err(StoreError::SchemaTooNew {
            found: 99,
            supported,
        }) => assert_eq!(supported, SCHEMA_VERSION),
        other => panic!("expected SchemaTooNew, got {:?}", other.err()),
    }

    let empty = PostgresConfig {
        schema: fresh_schema(),
        migrate: false,
        ..PostgresConfig::default()
    };
    match PostgresStore::connect_with(&url, empty).await {
        Err(StoreError::SchemaTooOld { found: 0, .. }) => {}
        other => panic!("expected SchemaTooOld, got {:?}", other.err()),
    }
}

#[tokio::test]
async fn a_bad_url_or_schema_is_a_clear_error() {
    let bad_schema = PostgresConfig {
        schema: "x; drop table y".into(),
        ..PostgresConfig::default()
    };
    match PostgresStore::connect_with("postgres://localhost/db", bad_schema).await {
        Err(StoreError::Invalid(m)) => assert!(m.contains("schema"), "{m}"),
        other => panic!("expected Invalid, got {:?}", other.err()),
    }
    match PostgresStore::connect("not a url").await {
        Err(StoreError::Invalid(m)) => assert!(m.contains("database URL"), "{m}"),
        other => panic!("expected Invalid, got {:?}", other.err()),
    }
}

#[tokio::test]
async fn unnamed_statements_work_like_prepared_ones() {
    // What runs behind PgBouncer in transaction mode: no prepared statements, no LISTEN.
    let Some(store) =
        ratchet_store_postgres::testing::fresh_store_with(PostgresConfig::default().pgbouncer())
            .await
    else {
        return;
    };
    assert!(store.wakeups().is_none(), "polling only");
    ratchet_store::conformance::completion_delivers_and_locks(&store).await;
}

mod events {
    //! What the event store must hold beside other transactions on the same database.
    use std::time::Duration;

    use ratchet_core::Timestamp;
    use ratchet_store::{
        AppendCondition, AppendOutcome, EventAppend, EventQuery, EventRead, NewEvent, Position,
        QueryItem, Store,
    };
    use ratchet_store_postgres::testing::fresh_store;
    use serde_json::json;

    const NOW: Timestamp = Timestamp(1_000);

    fn booking(after: Option<Position>) -> EventAppend {
        EventAppend {
            events: vec![NewEvent::new("Booked", ["seat:1"], json!(1))],
            condition: Some(AppendCondition {
                fail_if_events_match: EventQuery::item(QueryItem::new(["Booked"], ["seat:1"])),
                after,
            }),
            idempotency_key: None,
        }
    }

    async fn client() -> tokio_postgres::Client {
        let url = ratchet_store_postgres::testing::database_url().unwrap();
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_open_unrelated_transaction_does_not_weaken_conditions() {
        let Some(store) = fresh_store().await else {
            return;
        };
        // Another session holds a transaction open with an xid and a snapshot: the kind
        // that makes snapshot-based checks look at stale data.
        let mut other = client().await;
        let open = other.transaction().await.unwrap();
        open.batch_execute(&format!(
            "CREATE TEMP TABLE t (x int); INSERT INTO t VALUES (1); \
             SELECT count(*) FROM {}.events",
            store.config().schema
        ))
        .await
        .unwrap();
        let head = store
            .event_read(EventRead::forward(EventQuery::all(), None, 10))
            .await
            .unwrap()
            .head;
        let first = store
            .event_append(vec![booking(Some(head))], NOW)
            .await
            .unwrap();
        assert!(
            matches!(first[0], AppendOutcome::Appended { .. }),
            "{first:?}"
        );
        let second = store
            .event_append(vec![booking(Some(head))], NOW)
            .await
            .unwrap();
        assert_eq!(
            second[0],
            AppendOutcome::Conflict {
                position: Position(1)
            }
        );
        open.rollback().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_late_commit_is_never_skipped_and_holds_back_later_appends() {
        let Some(store) = fresh_store().await else {
            return;
        };
        // An outbox append in a caller's transaction that stays open.
        let mut caller = client().await;
        let tx = caller.transaction().await.unwrap();
        let early = store
            .event_append_in(
                &tx,
                &[EventAppend {
                    events: vec![NewEvent::new("Early", ["k:v"], json!(1))],
                    ..EventAppend::default()
                }],
                NOW,
            )
            .await
            .unwrap();
        assert_eq!(
            early[0],
            AppendOutcome::Appended {
                first: Position(1),
                last: Position(1)
            }
        );
        // A later append waits for it rather than taking a position a reader could see first.
        let later = {
            let store = store.clone();
            tokio::spawn(async move {
                let plain = EventAppend {
                    events: vec![NewEvent::new("Later", ["k:v"], json!(2))],
                    ..EventAppend::default()
                };
                store.event_append(vec![plain], NOW).await.unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let page = store
            .event_read(EventRead::forward(EventQuery::all(), None, 10))
            .await
            .unwrap();
        assert!(
            page.events.is_empty(),
            "nothing visible before the commit: {page:?}"
        );
        assert!(
            !later.is_finished(),
            "the later append waits for the open one"
        );
        tx.commit().await.unwrap();
        let later = later.await.unwrap();
        assert_eq!(
            later[0],
            AppendOutcome::Appended {
                first: Position(2),
                last: Position(2)
            }
        );
        let page = store
            .event_read(EventRead::forward(EventQuery::all(), Some(Position(0)), 10))
            .await
            .unwrap();
        let kinds: Vec<_> = page.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["Early", "Later"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appending_under_a_stale_snapshot_is_refused() {
        let Some(store) = fresh_store().await else {
            return;
        };
        let mut caller = client().await;
        let tx = caller
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .start()
            .await
            .unwrap();
        let err = store
            .event_append_in(&tx, &[booking(None)], NOW)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("READ COMMITTED"), "{err}");
    }
}

/// Every function fixes its search path, so a role's search path cannot redirect what it
/// calls, except the three small SQL functions PostgreSQL inlines into Ratchet's own
/// statements (a SET clause would stop the inlining that lets their filters reach indexes).
#[tokio::test]
async fn every_function_sets_its_search_path() {
    let Some(url) = database_url() else {
        return;
    };
    let Some(store) = fresh_store().await else {
        return;
    };
    let schema = store.config().schema.clone();
    let (client, connection) = ratchet_store_postgres::tokio_postgres::connect(
        &url,
        ratchet_store_postgres::tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT p.proname::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = $1
               AND NOT coalesce(p.proconfig::text[] @> ARRAY['search_path=pg_catalog, pg_temp'], false)
             ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap();
    let unset: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(unset, ["task_records", "task_state", "visible_events"]);
}
