//! The store conformance suite, and this backend's own checks, against a real PostgreSQL.
#![allow(clippy::unwrap_used)]

use ratchet_store::{Store, StoreError};
use ratchet_store_postgres::testing::{database_url, fresh_schema, fresh_store, session};
use ratchet_store_postgres::{PostgresConfig, PostgresStore, SCHEMA_VERSION};

ratchet_store::conformance_suite!(optional: fresh_store());

#[path = "conformance/sslmode.rs"]
mod sslmode;

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

    let client = session(&url).await;
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

/// Functions are applied again, all of them, whenever what the schema last got differs
/// from this build's function files: a changed or missing function comes back and a
/// leftover one (an older signature) goes.
#[tokio::test]
async fn changed_functions_are_applied_again_on_connect() {
    let Some(url) = database_url() else {
        return;
    };
    let config = PostgresConfig {
        schema: fresh_schema(),
        ..PostgresConfig::default()
    };
    let schema = config.schema.clone();
    PostgresStore::connect_with(&url, config.clone())
        .await
        .unwrap();
    let client = session(&url).await;
    let functions = |name: &'static str| {
        let client = &client;
        let schema = schema.clone();
        async move {
            let row = client
                .query_one(
                    "SELECT count(*) FROM pg_proc WHERE pronamespace = $1::text::regnamespace
                     AND proname = $2",
                    &[&schema, &name],
                )
                .await
                .unwrap();
            row.get::<_, i64>(0)
        }
    };
    let applied = || {
        let client = &client;
        let schema = schema.clone();
        async move {
            let row = client
                .query_one(
                    &format!("SELECT sha256 FROM {schema}.ratchet_functions"),
                    &[],
                )
                .await
                .unwrap();
            row.get::<_, String>(0)
        }
    };
    let first = applied().await;
    assert_eq!(first.len(), 64);
    assert_eq!(functions("task_take").await, 1);
    client
        .batch_execute(&format!(
            "DROP FUNCTION {schema}.task_state;
             CREATE FUNCTION {schema}.task_take(p_now bigint) RETURNS int LANGUAGE sql AS 'SELECT 1';"
        ))
        .await
        .unwrap();
    // The same digest: nothing is looked at again.
    PostgresStore::connect_with(&url, config.clone())
        .await
        .unwrap();
    assert_eq!(functions("task_state").await, 0);
    client
        .batch_execute(&format!(
            "UPDATE {schema}.ratchet_functions SET sha256 = 'older'"
        ))
        .await
        .unwrap();
    let store = PostgresStore::connect_with(&url, config).await.unwrap();
    assert_eq!(applied().await, first);
    assert_eq!(functions("task_state").await, 1, "the missing one is back");
    assert_eq!(
        functions("task_take").await,
        1,
        "the leftover overload is gone"
    );
    ratchet_store::conformance::tasks_run_by_priority_then_time(&store).await;
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
        super::session(&ratchet_store_postgres::testing::database_url().unwrap()).await
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

    /// Each read shape is prepared once per connection and kept, but only the most recently
    /// used shapes are: a caller who may read can send a query of a new shape each time (a
    /// number of items, of types per item, a direction), and each kept statement costs
    /// memory here and on the server. A shape pushed out is prepared again when it comes
    /// back (two round trips instead of one).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_shapes_kept_prepared_are_the_recent_ones_only() {
        let config = ratchet_store_postgres::PostgresConfig {
            pool_size: 1,
            ..ratchet_store_postgres::PostgresConfig::default()
        };
        let Some(store) = ratchet_store_postgres::testing::fresh_store_with(config).await else {
            return;
        };
        // A read of `n` types, 50 to an item: each type is a lookup of its own, so each
        // `n` is a shape of its own.
        let shape = |n: usize| {
            let types: Vec<String> = (0..n).map(|i| format!("T{i}")).collect();
            let mut query = EventQuery::all();
            for chunk in types.chunks(50) {
                query = query.or(QueryItem::new(chunk.to_vec(), Vec::<String>::new()));
            }
            EventRead::forward(query, None, 10)
        };
        let trips = |store: &ratchet_store_postgres::PostgresStore| store.stats().round_trips;
        store.event_read(shape(1)).await.unwrap();
        let before = trips(&store);
        store.event_read(shape(1)).await.unwrap();
        assert_eq!(
            trips(&store) - before,
            1,
            "a shape read again is kept prepared"
        );
        // 200 other shapes.
        for n in 2..=201 {
            store.event_read(shape(n)).await.unwrap();
        }
        let before = trips(&store);
        store.event_read(shape(1)).await.unwrap();
        assert_eq!(
            trips(&store) - before,
            2,
            "a shape used long ago is prepared again: the kept ones are bounded"
        );
        let before = trips(&store);
        store.event_read(shape(201)).await.unwrap();
        assert_eq!(trips(&store) - before, 1, "a recent shape is still kept");
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
/// calls, except the two small SQL functions PostgreSQL inlines into Ratchet's own
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
    let client = session(&url).await;
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
    assert_eq!(unset, ["task_records", "task_state"]);
}

/// Along the fed path, neither the start's opening event nor the results a turn ran on are
/// written to the inbox: they go straight into the turn's history. A row written and deleted
/// in one transaction would still leave a dead entry at the head of the inbox's index, for
/// every claim to walk until vacuum removes it (or for as long as an old snapshot holds it).
#[tokio::test]
async fn the_fed_path_writes_no_inbox_row() {
    let Some(url) = database_url() else {
        return;
    };
    let Some(store) = fresh_store().await else {
        return;
    };
    let client = session(&url).await;
    // Every inbox row draws its id from this sequence; `is_called` turns true with the first.
    let drawn = format!(
        "SELECT is_called, last_value FROM {}.inbox_id_seq",
        store.config().schema
    );
    let before: (bool, i64) = {
        let row = client.query_one(&drawn, &[]).await.unwrap();
        (row.get(0), row.get(1))
    };
    ratchet_store::conformance::fed_path_commits_start_to_finish(&store).await;
    let row = client.query_one(&drawn, &[]).await.unwrap();
    assert_eq!((row.get(0), row.get(1)), before, "no inbox id was drawn");

    // The same start with its first turn refused (another life than the start drew) leaves
    // the instance its opening event, as a start alone would: this reads the same sequence.
    ratchet_store::conformance::turns_that_ran_on_their_start_commit_with_it(&store).await;
    let row = client.query_one(&drawn, &[]).await.unwrap();
    assert!(
        row.get::<_, bool>(0),
        "the refused start wrote its opening event"
    );
}

/// Connections of `schema` (by their application name) waiting on a lock.
async fn waiting_on_locks(
    admin: &ratchet_store_postgres::tokio_postgres::Client,
    app: &str,
) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = $1 AND wait_event_type = 'Lock'",
            &[&app],
        )
        .await
        .unwrap()
        .get(0)
}

/// A session holds `LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE`. A call that times out on the
/// client is cancelled on the server too (no statement of ours is left waiting), and with the
/// session's lock_timeout the server gives up on the lock by itself.
#[tokio::test]
async fn a_call_stuck_behind_a_lock_ends_on_the_server_too() {
    use std::time::Duration;
    let Some(url) = database_url() else {
        return;
    };
    let app = format!("ratchet-{}", &fresh_schema()[13..]);
    let sep = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{sep}application_name={app}");
    let schema = fresh_schema();
    let store = |config: PostgresConfig| {
        let url = url.clone();
        let schema = schema.clone();
        async move {
            PostgresStore::connect_with(&url, PostgresConfig { schema, ..config })
                .await
                .unwrap()
        }
    };
    // Only the client's deadline, no server-side limits: the cancel must free the session.
    let cancelled = store(PostgresConfig {
        call_timeout: Duration::from_secs(1),
        statement_timeout: None,
        lock_timeout: None,
        ..PostgresConfig::default()
    })
    .await;
    let mut admin = session(&url).await;
    let admin_tx = admin.transaction().await.unwrap();
    admin_tx
        .batch_execute(&format!(
            "LOCK TABLE {schema}.tasks IN ACCESS EXCLUSIVE MODE"
        ))
        .await
        .unwrap();
    let watcher = session(&database_url().unwrap()).await;
    let now = ratchet_core::Timestamp::now();
    let refused = cancelled.task_get(ratchet_store::TaskId(1), now).await;
    assert!(
        matches!(&refused, Err(StoreError::Backend(e)) if e.to_string().contains("did not answer")),
        "{refused:?}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while waiting_on_locks(&watcher, &app).await > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the timed-out statement still waits on the server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // With the default session limits, the server itself gives up after lock_timeout.
    let limited = store(PostgresConfig {
        lock_timeout: Some(Duration::from_millis(300)),
        ..PostgresConfig::default()
    })
    .await;
    let refused = limited.task_get(ratchet_store::TaskId(1), now).await;
    assert!(
        matches!(&refused, Err(StoreError::Backend(e)) if e.to_string().contains("lock timeout")),
        "{refused:?}"
    );
    admin_tx.rollback().await.unwrap();
    assert!(limited
        .task_get(ratchet_store::TaskId(1), now)
        .await
        .unwrap()
        .is_none());
    assert!(cancelled
        .task_get(ratchet_store::TaskId(1), now)
        .await
        .unwrap()
        .is_none());
}

/// TLS with libpq's sslmodes, against a server whose certificate the CA in
/// `RATCHET_TEST_PG_TLS_CA` signed for 127.0.0.1 and localhost (`./scripts/test` makes one).
#[tokio::test]
async fn tls_encrypts_and_checks_what_sslmode_asks() {
    let Some(url) = database_url() else {
        return;
    };
    let (Ok(ca), Ok(other_ca)) = (
        std::env::var("RATCHET_TEST_PG_TLS_CA"),
        std::env::var("RATCHET_TEST_PG_TLS_OTHER_CA"),
    ) else {
        eprintln!("skipped: RATCHET_TEST_PG_TLS_CA is not set (./scripts/test sets it for its own server)");
        return;
    };
    let given: ratchet_store_postgres::tokio_postgres::Config = url.parse().unwrap();
    let port = given.get_ports().first().copied().unwrap_or(5432);
    let user = given.get_user().unwrap_or("postgres").to_string();
    let dbname = given.get_dbname().unwrap_or("postgres").to_string();
    let password = given
        .get_password()
        .map(|p| format!(" password='{}'", String::from_utf8_lossy(p)))
        .unwrap_or_default();
    // Key-value strings, the host name given apart from the address it resolves to.
    let conninfo = |host: &str, app: &str, tls: &str| {
        format!(
            "host={host} hostaddr=127.0.0.1 port={port} user={user} dbname={dbname}{password} application_name={app} {tls}"
        )
    };
    let connect = |info: String| async move {
        PostgresStore::connect_with(
            &info,
            PostgresConfig {
                schema: fresh_schema(),
                ..PostgresConfig::default()
            },
        )
        .await
    };
    let app = format!("tls_{}", &fresh_schema()[13..]);
    let encrypted = connect(conninfo("localhost", &app, "sslmode=require"))
        .await
        .unwrap();
    let watcher = session(&url).await;
    let ssl: bool = watcher
        .query_one(
            "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .get(0);
    assert!(ssl, "every connection of the store is encrypted");
    drop(encrypted);
    let verified = format!("sslmode=verify-full sslrootcert={ca}");
    connect(conninfo("localhost", &app, &verified))
        .await
        .unwrap();
    connect(conninfo("127.0.0.1", &app, &verified))
        .await
        .unwrap();
    let refused = |r: Result<PostgresStore, StoreError>| match r {
        Err(e) => e.to_string(),
        Ok(_) => panic!("connected"),
    };
    let wrong_ca = refused(
        connect(conninfo(
            "localhost",
            &app,
            &format!("sslmode=verify-full sslrootcert={other_ca}"),
        ))
        .await,
    );
    assert!(
        wrong_ca.to_lowercase().contains("certificate"),
        "{wrong_ca}"
    );
    let wrong_host = refused(connect(conninfo("wrong.invalid", &app, &verified)).await);
    assert!(
        wrong_host.to_lowercase().contains("certificate"),
        "{wrong_host}"
    );
    // verify-ca checks the chain, not the name.
    connect(conninfo(
        "wrong.invalid",
        &app,
        &format!("sslmode=verify-ca sslrootcert={ca}"),
    ))
    .await
    .unwrap();
}

/// A server that accepts the connection and never answers: connecting fails after the
/// connect timeout, and says so.
#[tokio::test]
async fn a_server_that_never_answers_is_a_connect_timeout() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let refused = PostgresStore::connect_with(
        &format!("postgres://app:s3cret@127.0.0.1:{port}/db"),
        PostgresConfig {
            connect_timeout: std::time::Duration::from_millis(500),
            ..PostgresConfig::default()
        },
    )
    .await;
    let Err(e) = refused else {
        panic!("connected to a silent server")
    };
    let message = e.to_string();
    assert!(
        message.contains("did not answer within the connect timeout"),
        "{message}"
    );
    assert!(!message.contains("s3cret"));
    drop(silent);
}

/// Whether `client` is connected to a Citus cluster. There the instances live on the worker
/// nodes, whose buffers `EXPLAIN (ANALYZE, BUFFERS)` on the coordinator does not count: the
/// tests that count an instance statement's buffers run on PostgreSQL only.
async fn on_citus(client: &ratchet_store_postgres::tokio_postgres::Client) -> bool {
    let citus: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_extension WHERE extname = 'citus'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    citus > 0
}

/// On a Citus coordinator, every statement of a claim and of a group commit runs on one
/// node: those on instances name the instances of one shard, and the claim's questions
/// about the whole inbox go to each shard's node in turn. With
/// `citus.multi_task_query_log_level = error` set on `claim` and `commit_batch` (and so on
/// the functions they call), a statement Citus would split over several shards fails its
/// call. The scenarios claim (the walk past a window of events included) and commit turns,
/// results, timers, children and their results to parents, continue-as-new and starts, of
/// instances spread over the shards. Skipped without Citus ([`citus_session`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_citus_claims_and_commits_run_each_statement_on_one_node() {
    let Some(client) = citus_session().await else {
        return;
    };
    let store = strict_store(&client).await;
    // That the setting bites: a statement over every shard fails under it.
    let refused = client
        .batch_execute(&format!(
            "BEGIN; SET LOCAL citus.multi_task_query_log_level = error;
             SELECT count(*) FROM {}.inbox;",
            store.config().schema
        ))
        .await;
    client.batch_execute("ROLLBACK").await.unwrap();
    assert!(
        refused.is_err(),
        "a multi-shard statement ran under the setting"
    );
    use ratchet_store::conformance as c;
    // Results of many instances, and turns they fed.
    c::concurrent_commits_apply_each_completion_once(&store).await;
    // Starts and the turns that ran on them; children, taken ids, results to parents;
    // continue-as-new; timers.
    c::turns_that_ran_on_their_start_commit_with_it(&strict_store(&client).await).await;
    c::taken_child_id_fails_parent_step(&strict_store(&client).await).await;
    c::child_result_reaches_parent(&strict_store(&client).await).await;
    c::continue_as_new_starts_next_execution(&strict_store(&client).await).await;
    c::timers_become_visible_at_their_time(&strict_store(&client).await).await;
    // Claims that walk on past a window of events they cannot take.
    c::claims_reach_instances_behind_a_window_they_cannot_take(&strict_store(&client).await).await;
}

/// A fresh store whose claims and group commits fail any statement Citus would split over
/// shards.
async fn strict_store(client: &ratchet_store_postgres::tokio_postgres::Client) -> PostgresStore {
    let store = fresh_store().await.unwrap();
    let schema = store.config().schema.clone();
    client
        .batch_execute(&format!(
            "DO $$ DECLARE f regprocedure; BEGIN
                 FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
                          WHERE p.pronamespace = '{schema}'::regnamespace
                            AND p.proname IN ('claim', 'commit_batch') LOOP
                     EXECUTE format('ALTER FUNCTION %s SET citus.multi_task_query_log_level = error', f);
                 END LOOP;
             END $$;"
        ))
        .await
        .unwrap();
    store
}

/// A session on the test server when it is a Citus coordinator; `None` (after saying so)
/// elsewhere, unless `RATCHET_REQUIRE_CITUS=1` (as the test script sets on the cluster):
/// then a server without Citus fails the test.
async fn citus_session() -> Option<ratchet_store_postgres::tokio_postgres::Client> {
    let url = database_url()?;
    let client = session(&url).await;
    if !on_citus(&client).await {
        let required = std::env::var("RATCHET_REQUIRE_CITUS").is_ok_and(|v| v == "1");
        assert!(!required, "RATCHET_REQUIRE_CITUS=1 but {url} has no Citus");
        eprintln!("skipped: not a Citus coordinator");
        return None;
    }
    Some(client)
}

/// Runs `sql` under `EXPLAIN (ANALYZE, BUFFERS)`: the plan's lines, and the buffers its top
/// node read or found, nested statements included ("Buffers: shared hit=N read=M ...").
async fn explain_buffers(
    client: &ratchet_store_postgres::tokio_postgres::Client,
    sql: &str,
) -> (i64, Vec<String>) {
    let plan: Vec<String> = client
        .query(&format!("EXPLAIN (ANALYZE, BUFFERS) {sql}"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let line = plan
        .iter()
        .find(|l| l.contains("Buffers:"))
        .cloned()
        .unwrap_or_default();
    let number_after = |key: &str| -> i64 {
        line.split(key)
            .nth(1)
            .map(|rest| {
                rest.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (number_after("hit=") + number_after("read="), plan)
}

/// The fewest buffers `sql` reads in three runs, each rolled back, and that run's plan. One
/// run alone can follow a reset of the session's catalog caches (the tests running beside it
/// create schemas and functions), and then counts the catalog it reads again as well.
async fn fewest_buffers(
    client: &ratchet_store_postgres::tokio_postgres::Client,
    sql: &str,
) -> (i64, Vec<String>) {
    let mut fewest: Option<(i64, Vec<String>)> = None;
    for _ in 0..3 {
        client.batch_execute("BEGIN").await.unwrap();
        let run = explain_buffers(client, sql).await;
        client.batch_execute("ROLLBACK").await.unwrap();
        if fewest.as_ref().is_none_or(|(buffers, _)| run.0 < *buffers) {
            fewest = Some(run);
        }
    }
    fewest.unwrap()
}

/// A start of an instance of workflow `wf` with no input, as the claim tests create them.
fn wf_start(id: impl Into<String>) -> ratchet_store::NewInstance {
    ratchet_store::NewInstance {
        id: id.into(),
        name: "wf".into(),
        input: serde_json::json!(null),
        parent: None,
        if_exists: ratchet_store::IfExists::default(),
        trace: None,
    }
}

/// A call of the `claim` function at `now` (leases of 30 s) by `owner`, of up to `limit`
/// instances of workflow `wf`, and of up to 10 tasks of `tasks` (queue, name) when given.
fn claim_sql(
    schema: &str,
    now: ratchet_core::Timestamp,
    owner: &str,
    limit: i32,
    tasks: Option<(&str, &str)>,
) -> String {
    let (queues, limits, names) = match tasks {
        Some((queue, name)) => (
            format!("ARRAY['{queue}']"),
            "ARRAY[10]".to_string(),
            format!("ARRAY['{name}']"),
        ),
        None => ("NULL".into(), "NULL".into(), "NULL".into()),
    };
    format!(
        "SELECT * FROM {schema}.claim(p_now => {}, p_owner => '{owner}', p_until => {},
             p_limit => {limit}, p_reg_name => ARRAY['wf'], p_reg_version => ARRAY[NULL::integer],
             p_task_queues => {queues}, p_task_limits => {limits}, p_task_names => {names},
             p_task_from_queue => NULL, p_task_from_priority => NULL,
             p_task_from_ready => NULL, p_task_from_id => NULL)",
        now.0 + 1,
        now.0 + 30_000
    )
}

/// On Citus, a claim's call to a node that runs elsewhere (not sent whole to the node of its
/// key: a PL/pgSQL expression here, in production a shard with two placements or functions
/// set up before the nodes held the metadata) says so rather than answering for the shards
/// of the node it ran on (`inbox_due` and `inbox_walk` then ask every shard), and the calls
/// sent whole answer as every shard would. Skipped without Citus ([`citus_session`]).
#[tokio::test]
async fn on_citus_a_call_that_misses_its_node_falls_back_to_every_shard() {
    let Some(client) = citus_session().await else {
        return;
    };
    let store = fresh_store().await.unwrap();
    let schema = store.config().schema.clone();
    client
        .batch_execute(&format!(
            "INSERT INTO {schema}.inbox (instance, kind, visible_at, event)
             SELECT 'i' || (n % 7), 'signal', n * 10, '{{}}' FROM generate_series(1, 20) n;"
        ))
        .await
        .unwrap();
    let missed = client
        .batch_execute(&format!(
            "DO $$ BEGIN
                 IF ({schema}.inbox_due_on_node('1', 0, 10)).instances IS NOT NULL
                    OR {schema}.inbox_walk_on_node('1', '', 10) IS NOT NULL THEN
                     RAISE EXCEPTION 'a call that ran on the coordinator answered';
                 END IF;
             END $$;"
        ))
        .await;
    assert!(missed.is_ok(), "{missed:?}");
    // The claim's questions, answered by the nodes (each call sent whole) as by every shard.
    let row = client
        .query_one(
            &format!(
                "SELECT d.ids, d.walked, d.next_due, {schema}.inbox_walk('i2', 10)
                 FROM {schema}.inbox_due(100, 5) d"
            ),
            &[],
        )
        .await
        .unwrap();
    let mut ids: Vec<String> = row.get(0);
    ids.sort();
    assert_eq!(ids, ["i1", "i2", "i3", "i4", "i5"]);
    assert_eq!(row.get::<_, i64>(1), 5);
    assert_eq!(row.get::<_, Option<i64>>(2), Some(110));
    assert_eq!(row.get::<_, Vec<String>>(3), ["i3", "i4", "i5", "i6"]);
}

/// On a Citus coordinator, `migrate` puts the event store on one shard of its own, its two
/// functions colocated with it, distributes an instance's tables by its id, and leaves every
/// other table a plain table on the coordinator (the bookkeeping of migrations aside).
/// Skipped on PostgreSQL without Citus, unless `RATCHET_REQUIRE_CITUS=1` (as the test script
/// sets on the cluster).
#[tokio::test]
async fn on_citus_every_table_is_placed() {
    let Some(client) = citus_session().await else {
        return;
    };
    let Some(store) = fresh_store().await else {
        return;
    };
    let schema = store.config().schema.clone();
    let rows = client
        .query(
            "SELECT c.relname::text,
                    CASE WHEN p.logicalrelid IS NULL THEN 'plain'
                         WHEN p.repmodel = 't' THEN 'reference'
                         WHEN p.colocationid = 0 THEN 'coordinator'
                         WHEN p.partmethod = 'n' THEN 'single shard'
                         ELSE 'hash of ' || column_to_column_name(p.logicalrelid, p.partkey) END
             FROM pg_class c LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
             WHERE c.relnamespace = $1::text::regnamespace AND c.relkind = 'r'
               AND c.relname NOT IN ('ratchet_schema', 'ratchet_functions')
             ORDER BY 1",
            &[&schema],
        )
        .await
        .unwrap();
    let placed: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(placed.len(), 18, "{placed:?}");
    for (table, how) in &placed {
        let expected = match table.as_str() {
            "events" | "event_tags" | "event_head" | "event_appends" => "single shard",
            "instances" => "hash of id",
            "history" | "inbox" | "signal_dedup" => "hash of instance",
            _ => "plain",
        };
        assert_eq!(how, expected, "table {table} is placed as {how}");
    }
    // The event store's functions go whole to the node that holds it, and the claim's
    // questions of a node's shards of the inbox to that node.
    let delegated: Vec<String> = client
        .query(
            "SELECT p.proname::text FROM pg_dist_object o JOIN pg_proc p ON p.oid = o.objid
             WHERE o.classid = 'pg_proc'::regclass AND o.colocationid IS NOT NULL
               AND p.pronamespace = $1::text::regnamespace
             ORDER BY p.proname",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        delegated,
        [
            "event_append",
            "event_first_match",
            "inbox_due_on_node",
            "inbox_walk_on_node"
        ],
        "the functions sent whole to a node"
    );
}

/// A claim's cost does not grow with the tasks that are not ready: with 100,000 delayed tasks
/// in the queue (at three priorities) and 10 ready, taking them reads a bounded number of
/// buffers (counted by `EXPLAIN (ANALYZE, BUFFERS)`, not timed).
#[tokio::test]
async fn a_claim_reads_what_is_ready_not_the_whole_queue() {
    use ratchet_core::{TaskOptions, Timestamp};
    use ratchet_store::NewTask;
    let Some(url) = database_url() else {
        return;
    };
    let Some(store) = fresh_store().await else {
        return;
    };
    let schema = store.config().schema.clone();
    let now = Timestamp(1_000_000_000_000);
    let later = Timestamp(now.0 + 3_600_000);
    let task = |at: Timestamp, priority: i16| {
        NewTask::standalone(
            "job".into(),
            serde_json::json!(null),
            &TaskOptions::default()
                .queue("q")
                .priority(priority)
                .run_at(at),
            now,
        )
    };
    for _ in 0..10 {
        let delayed: Vec<NewTask> = (0..10_000).map(|i| task(later, (i % 3) as i16)).collect();
        store.task_enqueue(delayed, now).await.unwrap();
    }
    let ready: Vec<NewTask> = (0..10).map(|i| task(now, (i % 3) as i16)).collect();
    store.task_enqueue(ready, now).await.unwrap();
    let client = session(&url).await;
    client
        .batch_execute(&format!("ANALYZE {schema}.tasks"))
        .await
        .unwrap();
    // A first claim (of one task) compiles the function and plans its statements, which
    // reads the catalog; the one measured is the next.
    client
        .query(
            &format!(
                "SELECT * FROM {schema}.task_take({}, 'w', {}, ARRAY['q'], ARRAY[1], ARRAY['job'])",
                now.0,
                now.0 + 30_000
            ),
            &[],
        )
        .await
        .unwrap();
    let measured = format!(
        "SELECT * FROM {schema}.task_take({}, 'w', {}, ARRAY['q'], ARRAY[100], ARRAY['job'])",
        now.0,
        now.0 + 30_000
    );
    let (buffers, plan) = fewest_buffers(&client, &measured).await;
    client.query(&measured, &[]).await.unwrap();
    let leased: i64 = client
        .query_one(
            &format!("SELECT count(*) FROM {schema}.tasks WHERE lease_owner = 'w'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    // The first claim took one; the measured one, the nine left.
    let taken = leased - 1;
    eprintln!(
        "claim of {taken} read {buffers} buffers: {}",
        plan.join("\n")
    );
    assert_eq!(taken, 9, "the nine ready tasks left: {}", plan.join("\n"));
    assert!(
        buffers < 300,
        "a claim of 9 ready tasks among 100,000 delayed ones read {buffers} buffers"
    );
}

/// A claim's cost does not grow with the inbox in front of what it can take: behind 20,000
/// instances pinned to a version it lacks, two visible events each, a claim of the one
/// instance it can run reads a bounded number of buffers: its window of 296 events, then a
/// walk over 296 instances, about 3,600 (reading every visible event, as the claim did before
/// the walk, read 42,000, and more with every instance in front).
#[tokio::test]
async fn a_claim_behind_instances_it_cannot_take_reads_a_bounded_inbox() {
    let Some(url) = database_url() else {
        return;
    };
    if on_citus(&session(&url).await).await {
        eprintln!("skipped on Citus: the buffers are read on the workers");
        return;
    }
    let Some(store) = fresh_store().await else {
        return;
    };
    let schema = store.config().schema.clone();
    let client = session(&url).await;
    client
        .batch_execute(&format!(
            "INSERT INTO {schema}.instances (id, name, version, status, input, created_at, updated_at)
             SELECT 'pinned-' || lpad(n::text, 5, '0'), 'wf', 2, 'Running', 'null', 0, 0
             FROM generate_series(1, 20000) n;
             INSERT INTO {schema}.inbox (instance, kind, event, visible_at)
             SELECT 'pinned-' || lpad(n::text, 5, '0'), 'SignalReceived', 'null', 0
             FROM generate_series(1, 20000) n, generate_series(1, 2) e;
             ANALYZE {schema}.instances; ANALYZE {schema}.inbox;"
        ))
        .await
        .unwrap();
    let now = ratchet_core::Timestamp(1_000_000);
    store
        .instance_create(vec![wf_start("zz-late")], None, now)
        .await
        .unwrap();
    // The walk starts after the pinned ids, where this process's earlier walks stopped.
    let measured = format!(
        "{}, p_walk_from => 'pinned-19990')",
        claim_sql(&schema, now, "w", 10, None).trim_end_matches(')')
    );
    // A first claim plans the function's statements; the one measured is rolled back.
    let (buffers, plan) = fewest_buffers(&client, &measured).await;
    let row = client.query_one(&measured, &[]).await.unwrap();
    let leased: Vec<String> = row.get("i_id");
    eprintln!("claim read {buffers} buffers: {}", plan.join("\n"));
    assert_eq!(leased, vec!["zz-late".to_string()]);
    assert!(
        buffers < 8_000,
        "a claim behind 40,000 events it cannot take read {buffers} buffers"
    );
}

/// A standalone "job" task of queue "q", created at `at` and ready then.
fn ready_job(at: ratchet_core::Timestamp) -> ratchet_store::NewTask {
    ratchet_store::NewTask::standalone(
        "job".into(),
        serde_json::json!(null),
        &ratchet_core::TaskOptions::default().queue("q"),
        at,
    )
}

/// A fresh store whose queue "q" holds 20,000 tasks ready at `now`, enqueued while another
/// session holds a snapshot taken before them, so that vacuum can remove nothing they leave.
struct HeldSnapshot {
    store: PostgresStore,
    /// The session holding the snapshot, open while it lives.
    holder: ratchet_store_postgres::tokio_postgres::Client,
    /// A session for the test's own SQL.
    client: ratchet_store_postgres::tokio_postgres::Client,
    schema: String,
    now: ratchet_core::Timestamp,
}

/// [`HeldSnapshot`], or `None` without a PostgreSQL server to test on.
async fn twenty_thousand_under_a_held_snapshot() -> Option<HeldSnapshot> {
    let url = database_url()?;
    let store = fresh_store().await?;
    let schema = store.config().schema.clone();
    let holder = session(&url).await;
    holder
        .batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM {schema}.tasks"
        ))
        .await
        .unwrap();
    let now = ratchet_core::Timestamp(1_000_000_000_000);
    for _ in 0..4 {
        let batch = (0..5_000).map(|_| ready_job(now)).collect();
        store.task_enqueue(batch, now).await.unwrap();
    }
    let client = session(&url).await;
    Some(HeldSnapshot {
        store,
        holder,
        client,
        schema,
        now,
    })
}

/// A claim's cost does not grow with the tasks taken while another transaction holds an old
/// snapshot (so vacuum can remove none of the entries they left): started at the claim
/// cursor the earlier claim reported, taking 10 new tasks after 20,000 taken ones reads a
/// bounded number of buffers, where reading from the start walks the 20,000 (counted by
/// `EXPLAIN (ANALYZE, BUFFERS)`, not timed).
#[tokio::test]
async fn a_claim_under_a_held_snapshot_starts_past_what_it_took() {
    use ratchet_core::Timestamp;
    use ratchet_store::NewTask;
    let Some(HeldSnapshot {
        store,
        holder,
        client,
        schema,
        now,
    }) = twenty_thousand_under_a_held_snapshot().await
    else {
        return;
    };
    let take = |at: i64, limit: i32, from: &str| {
        format!(
            "SELECT * FROM {schema}.task_take({at}, 'w', {}, ARRAY['q'], ARRAY[{limit}],
                 ARRAY['job']{from})",
            at + 600_000
        )
    };
    let first = client
        .query_one(&take(now.0, 30_000, ""), &[])
        .await
        .unwrap();
    let taken: Vec<i64> = first.get("t_id");
    let reached: (Vec<i64>, Vec<i64>) = (first.get("c_ready"), first.get("c_id"));
    assert_eq!(taken.len(), 20_000);
    assert_eq!(
        reached,
        (vec![now.0], vec![i64::MAX]),
        "it read all that was ready"
    );

    let later = Timestamp(now.0 + 5_000);
    let fresh: Vec<NewTask> = (0..10).map(|_| ready_job(later)).collect();
    store.task_enqueue(fresh, later).await.unwrap();
    // As the store would: the position reached, or a second behind the claim, if earlier.
    let bound = format!(
        ", ARRAY['q'], ARRAY[0::smallint], ARRAY[{}::bigint], ARRAY[{}::bigint]",
        now.0.min(later.0 - 1_000),
        i64::MAX
    );
    // Warm the function's plans, then measure from the start (rolled back) and from the bound.
    client.batch_execute("BEGIN").await.unwrap();
    client.query(&take(later.0, 1, ""), &[]).await.unwrap();
    client.query(&take(later.0, 1, &bound), &[]).await.unwrap();
    client.batch_execute("ROLLBACK").await.unwrap();
    let (from_start, _) = fewest_buffers(&client, &take(later.0, 100, "")).await;
    let (from_cursor, plan) = fewest_buffers(&client, &take(later.0, 100, &bound)).await;
    client
        .query(&take(later.0, 100, &bound), &[])
        .await
        .unwrap();
    let row = client
        .query_one(
            &format!("SELECT count(*) FROM {schema}.tasks WHERE lease_owner IS NULL"),
            &[],
        )
        .await
        .unwrap();
    let left: i64 = row.get(0);
    eprintln!(
        "from the start: {from_start} buffers; from the cursor: {from_cursor}: {}",
        plan.join("\n")
    );
    assert_eq!(left, 0, "the bounded claim took the 10 new tasks");
    assert!(
        from_start > 5 * from_cursor,
        "reading from the start walks the 20,000 taken tasks: {from_start} buffers, against \
         {from_cursor} from the cursor"
    );
    assert!(
        from_cursor < 300,
        "a claim from its cursor read {from_cursor} buffers past 20,000 taken tasks"
    );
    drop(holder);
}

/// Without notifications (behind PgBouncer), tasks committed behind the claim cursor wait
/// for the next read from the start; when more wait than one claim takes, the claims after
/// that read go on from where it got, not from the cursor ahead of them.
#[tokio::test]
async fn a_read_from_the_start_that_fills_a_claim_is_continued() {
    use std::time::Duration;

    use ratchet_core::{TaskOptions, Timestamp};
    use ratchet_store::{Lease, NewTask, QueueClaim, TaskClaim};
    let Some(store) =
        ratchet_store_postgres::testing::fresh_store_with(PostgresConfig::default().pgbouncer())
            .await
    else {
        return;
    };
    let t0 = Timestamp(1_000_000_000_000);
    let job = |at: Timestamp| {
        NewTask::standalone(
            "job".into(),
            serde_json::json!(null),
            &TaskOptions::default().queue("q"),
            at,
        )
    };
    let take = |limit: u32, now: Timestamp| {
        let store = &store;
        async move {
            store
                .task_claim(TaskClaim {
                    lease: Lease {
                        owner: "w".into(),
                        until: now.plus(Duration::from_secs(600)),
                    },
                    queues: vec![QueueClaim {
                        queue: "q".into(),
                        limit,
                    }],
                    names: vec!["job".into()],
                    now,
                })
                .await
                .unwrap()
                .len()
        }
    };
    store.task_enqueue(vec![job(t0)], t0).await.unwrap();
    assert_eq!(take(10, t0).await, 1);
    assert_eq!(take(10, t0.plus(Duration::from_secs(5))).await, 0);
    let late: Vec<NewTask> = (0..50).map(|_| job(t0)).collect();
    store.task_enqueue(late, t0).await.unwrap();
    let mut taken = Vec::new();
    for step in 0..4 {
        let at = t0
            .plus(Duration::from_secs(11))
            .plus(Duration::from_millis(step));
        taken.push(take(20, at).await);
    }
    assert_eq!(taken, vec![20, 20, 10, 0]);
}

/// A rescan (every few seconds, for what claims may have passed over) does not walk every
/// task taken while another transaction holds an old snapshot: it starts at the floor the
/// last rescan reported, the first task it saw ready and unfinished. Taking 10 new tasks
/// after 20,000 taken ones reads a bounded number of buffers from there, where a rescan
/// from the start walks the 20,000 (counted by `EXPLAIN (ANALYZE, BUFFERS)`, not timed).
#[tokio::test]
async fn a_rescan_under_a_held_snapshot_starts_at_its_floor() {
    use ratchet_core::Timestamp;
    use ratchet_store::NewTask;
    let Some(HeldSnapshot {
        store,
        holder,
        client,
        schema,
        now,
    }) = twenty_thousand_under_a_held_snapshot().await
    else {
        return;
    };
    let take = |at: i64, limit: i32, from: Option<(i64, i64)>| {
        let (ready, id) = match from {
            Some((ready, id)) => (
                format!("ARRAY[{ready}::bigint]"),
                format!("ARRAY[{id}::bigint]"),
            ),
            None => ("'{}'::bigint[]".into(), "'{}'::bigint[]".into()),
        };
        let (queues, priorities) = match from {
            Some(_) => ("ARRAY['q']", "ARRAY[0::smallint]"),
            None => ("'{}'::text[]", "'{}'::smallint[]"),
        };
        format!(
            "SELECT * FROM {schema}.task_take({at}, 'w', {}, ARRAY['q'], ARRAY[{limit}],
                 ARRAY['job'], {queues}, {priorities}, {ready}, {id}, ARRAY['q'])",
            at + 600_000
        )
    };
    let first = client
        .query_one(&take(now.0, 30_000, None), &[])
        .await
        .unwrap();
    let taken: Vec<i64> = first.get("t_id");
    let floor: (Vec<Option<i64>>, Vec<Option<i64>>) =
        (first.get("c_floor_ready"), first.get("c_floor_id"));
    assert_eq!(taken.len(), 20_000);
    assert_eq!(floor.0, vec![Some(now.0)], "the first task was ready");

    let later = Timestamp(now.0 + 5_000);
    let fresh: Vec<NewTask> = (0..10).map(|_| ready_job(later)).collect();
    store.task_enqueue(fresh, later).await.unwrap();
    let first_fresh: i64 = client
        .query_one(
            &format!("SELECT min(id) FROM {schema}.tasks WHERE lease_owner IS NULL"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    // A rescan from the start finds the first fresh task: the 20,000 are leased, ahead.
    let at = later.0 + 1;
    client.batch_execute("BEGIN").await.unwrap();
    let found = client.query_one(&take(at, 1, None), &[]).await.unwrap();
    client.batch_execute("ROLLBACK").await.unwrap();
    let floor: (Vec<Option<i64>>, Vec<Option<i64>>) =
        (found.get("c_floor_ready"), found.get("c_floor_id"));
    assert_eq!(floor, (vec![Some(later.0)], vec![Some(first_fresh)]));
    let floor = (later.0, first_fresh);
    let (from_start, _) = fewest_buffers(&client, &take(at, 100, None)).await;
    let (from_floor, plan) = fewest_buffers(&client, &take(at, 100, Some(floor))).await;
    let rescan = client
        .query_one(&take(at, 100, Some(floor)), &[])
        .await
        .unwrap();
    let taken: Vec<i64> = rescan.get("t_id");
    eprintln!(
        "rescan from the start: {from_start} buffers; from the floor: {from_floor}: {}",
        plan.join("\n")
    );
    assert_eq!(
        taken.len(),
        10,
        "the rescan from the floor took the 10 new tasks"
    );
    assert!(
        from_start > 5 * from_floor,
        "a rescan from the start walks the 20,000 taken tasks: {from_start} buffers, against \
         {from_floor} from the floor"
    );
    assert!(
        from_floor < 300,
        "a rescan from its floor read {from_floor} buffers past 20,000 taken tasks"
    );
    drop(holder);
}

/// A task a rescan passes over because another transaction holds its row (a claim that
/// then rolls back) stays ahead of that queue's floor: the claims after it start past it,
/// the next rescan takes it.
#[tokio::test]
async fn a_task_locked_while_a_rescan_passed_it_is_taken_by_the_next() {
    use std::time::Duration;

    use ratchet_core::Timestamp;
    use ratchet_store::{Lease, QueueClaim, TaskClaim};
    let Some(url) = database_url() else {
        return;
    };
    let Some(store) = fresh_store().await else {
        return;
    };
    let schema = store.config().schema.clone();
    // The listener forgets every cursor when it connects: the claims come after that. And
    // the task is enqueued by a store that does not announce it, so that no notification
    // pulls the cursors back to it at a time of its own.
    let mut work = store.wakeups().expect("notifications are on").work;
    tokio::time::timeout(Duration::from_secs(30), work.wait_for(|n| *n > 0))
        .await
        .expect("the listener connects")
        .expect("the wake-ups stay open");
    let quiet = PostgresStore::connect_with(
        &url,
        PostgresConfig {
            schema: schema.clone(),
            notify: false,
            migrate: false,
            ..PostgresConfig::default()
        },
    )
    .await
    .unwrap();
    let t0 = Timestamp(1_000_000_000_000);
    let take = |now: Timestamp| {
        let store = &store;
        async move {
            store
                .task_claim(TaskClaim {
                    lease: Lease {
                        owner: "w".into(),
                        until: now.plus(Duration::from_secs(600)),
                    },
                    queues: vec![QueueClaim {
                        queue: "q".into(),
                        limit: 10,
                    }],
                    names: vec!["job".into()],
                    now,
                })
                .await
                .unwrap()
                .len()
        }
    };
    quiet.task_enqueue(vec![ready_job(t0)], t0).await.unwrap();
    let locker = session(&url).await;
    locker
        .batch_execute(&format!(
            "BEGIN; SELECT id FROM {schema}.tasks FOR NO KEY UPDATE"
        ))
        .await
        .unwrap();
    let rescan_at = t0.plus(Duration::from_secs(5));
    assert_eq!(take(rescan_at).await, 0, "the row is locked");
    locker.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(
        take(rescan_at.plus(Duration::from_secs(1))).await,
        0,
        "a claim from the cursor starts past it"
    );
    assert_eq!(
        take(rescan_at.plus(Duration::from_secs(10))).await,
        1,
        "the next rescan starts at or before it"
    );
}

/// An instance claim's cost does not grow with the pending instances it does not take: with
/// 20,000 started and none running, a poll for 10 reads the front of the inbox, not every
/// visible event (counted by `EXPLAIN (ANALYZE, BUFFERS)`, not timed).
#[tokio::test]
async fn an_instance_claim_reads_the_front_of_the_inbox_not_every_pending_instance() {
    use ratchet_core::Timestamp;
    let Some(url) = database_url() else {
        return;
    };
    if on_citus(&session(&url).await).await {
        eprintln!("skipped on Citus: the buffers are read on the workers");
        return;
    }
    let Some(store) = fresh_store().await else {
        return;
    };
    let schema = store.config().schema.clone();
    let now = Timestamp(1_000_000_000_000);
    for batch in 0..4 {
        let starts = (0..5_000)
            .map(|i| wf_start(format!("i-{batch}-{i}")))
            .collect();
        store.instance_create(starts, None, now).await.unwrap();
    }
    let client = session(&url).await;
    client
        .batch_execute(&format!(
            "ANALYZE {schema}.instances; ANALYZE {schema}.inbox"
        ))
        .await
        .unwrap();
    let claim = |owner: &str, limit: i32| claim_sql(&schema, now, owner, limit, None);
    // A first poll compiles the function and plans its statements, which reads the catalog;
    // the one measured is the next.
    client.query(&claim("first", 1), &[]).await.unwrap();
    let (buffers, plan) = fewest_buffers(&client, &claim("w", 10)).await;
    client.query(&claim("w", 10), &[]).await.unwrap();
    let leased: i64 = client
        .query_one(
            &format!("SELECT count(*) FROM {schema}.instances WHERE lease_owner = 'w'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    eprintln!(
        "claim of {leased} read {buffers} buffers: {}",
        plan.join("\n")
    );
    assert_eq!(leased, 10, "{}", plan.join("\n"));
    assert!(
        buffers < 3_000,
        "a poll for 10 among 20,000 pending instances read {buffers} buffers"
    );
}

/// Reading a few instances' events costs the same however many other instances wait: with
/// 20,000 pending and a plan made while the inbox was small, the events of one instance are
/// found by its id, not by walking every visible event (counted in buffers, not timed).
#[tokio::test]
async fn reading_an_instances_events_does_not_walk_the_other_pending_instances() {
    use ratchet_core::Timestamp;
    let Some(url) = database_url() else {
        return;
    };
    if on_citus(&session(&url).await).await {
        eprintln!("skipped on Citus: the buffers are read on the workers");
        return;
    }
    let Some(store) = fresh_store().await else {
        return;
    };
    let schema = store.config().schema.clone();
    let now = Timestamp(1_000_000_000_000);
    let client = session(&url).await;
    let read = |id: &str| {
        format!(
            "SELECT cardinality(e_id) FROM {schema}.visible_events(ARRAY['{id}'], {})",
            now.0 + 1
        )
    };
    // The session plans the read now, on an inbox of 100 analysed events, and keeps that plan
    // (one that finds the few instances' events by time is cheapest at that size).
    let few = (0..100).map(|i| wf_start(format!("few-{i}"))).collect();
    store.instance_create(few, None, now).await.unwrap();
    client
        .batch_execute(&format!("ANALYZE {schema}.inbox"))
        .await
        .unwrap();
    client.query(&read("none"), &[]).await.unwrap();
    for batch in 0..4 {
        let starts = (0..5_000)
            .map(|i| wf_start(format!("i-{batch}-{i}")))
            .collect();
        store.instance_create(starts, None, now).await.unwrap();
    }
    let found: i32 = client.query_one(&read("i-3-42"), &[]).await.unwrap().get(0);
    assert_eq!(found, 1, "the instance's start event");
    let (buffers, plan) = fewest_buffers(&client, &read("i-3-42")).await;
    eprintln!("reading one instance's events read {buffers} buffers");
    assert!(
        buffers < 50,
        "reading one instance's events among 20,000 pending read {buffers} buffers:\n{}",
        plan.join("\n")
    );
}

/// Work for a queue wakes the processes that serve it, one at once and the others only a
/// little later (in case it died or is full), and never a process serving other queues.
#[tokio::test]
async fn work_for_a_queue_wakes_one_server_first_and_no_other_queue() {
    use ratchet_core::{TaskOptions, Timestamp};
    use ratchet_store::{NewTask, WorkerAlive};
    use std::time::Duration;
    let Some(url) = database_url() else {
        return;
    };
    let config = PostgresConfig {
        schema: fresh_schema(),
        pool_size: 2,
        ..PostgresConfig::default()
    };
    let connect = || PostgresStore::connect_with(&url, config.clone());
    let (a, b, other, enqueuer) = (
        connect().await.unwrap(),
        connect().await.unwrap(),
        connect().await.unwrap(),
        connect().await.unwrap(),
    );
    let now = a.clock().await.unwrap();
    for (store, owner, queue) in [(&a, "a", "q"), (&b, "b", "q"), (&other, "other", "r")] {
        store
            .worker_alive(WorkerAlive {
                owner: owner.into(),
                until: Timestamp(now.0 + 60_000),
                stall_grace: Duration::from_secs(10),
                now,
                queues: vec![queue.into()],
                about: Default::default(),
            })
            .await
            .unwrap();
    }
    let mut heard: Vec<_> = [&a, &b, &other]
        .iter()
        .map(|s| s.wakeups().unwrap().work)
        .collect();
    // Each listener wakes everyone once when it connects; that is not what is tested.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for w in &mut heard {
        w.borrow_and_update();
    }
    let job = NewTask::standalone(
        "job".into(),
        serde_json::json!(null),
        &TaskOptions::default().queue("q"),
        now,
    );
    enqueuer.task_enqueue(vec![job], now).await.unwrap();
    // Both servers of q hear of it (one at once, one after the wait for a chosen process
    // that died or is full) ...
    for (name, w) in ["a", "b"].into_iter().zip(heard.iter_mut()) {
        tokio::time::timeout(Duration::from_secs(5), w.changed())
            .await
            .unwrap_or_else(|_| panic!("{name} serves q and was never woken"))
            .unwrap();
    }
    // ... and the process that serves only r does not.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !heard[2].has_changed().unwrap(),
        "a process serving only r was woken for work in q"
    );
}

/// A notifying write goes out before its notification, on a connection's first call too (when
/// the write must be prepared before it can be sent). A notification heard before its write is
/// done sends its hearers to read too early, and they sleep on with their wake-up spent: a
/// resumed schedule waited a minute for its dispatcher's fallback that way. Here the write is
/// held behind a lock; while it waits, nothing may be heard of it.
#[tokio::test]
async fn a_write_is_heard_of_only_once_it_is_done() {
    use ratchet_store::{EventAppend, NewEvent};
    use std::time::Duration;
    let Some(url) = database_url() else {
        return;
    };
    let schema = fresh_schema();
    let config = PostgresConfig {
        schema: schema.clone(),
        pool_size: 1,
        ..PostgresConfig::default()
    };
    let writer = PostgresStore::connect_with(&url, config.clone())
        .await
        .unwrap();
    let hearer = PostgresStore::connect_with(&url, config).await.unwrap();
    let mut heard = hearer.wakeups().unwrap().events;
    // The listener's first connect wakes every consumer once; let that pass.
    tokio::time::sleep(Duration::from_millis(500)).await;
    heard.borrow_and_update();
    let mut admin = session(&url).await;
    let held = admin.transaction().await.unwrap();
    held.batch_execute(&format!(
        "LOCK TABLE {schema}.events IN ACCESS EXCLUSIVE MODE"
    ))
    .await
    .unwrap();
    let now = writer.clock().await.unwrap();
    let write = tokio::spawn(async move {
        let append = EventAppend {
            events: vec![NewEvent::new("Held", ["k:v"], serde_json::json!({}))],
            ..EventAppend::default()
        };
        writer.event_append(vec![append], now).await
    });
    let early = tokio::time::timeout(Duration::from_millis(700), heard.changed()).await;
    assert!(
        early.is_err(),
        "the append's notification was heard while the append waited behind the lock"
    );
    held.rollback().await.unwrap();
    write.await.unwrap().unwrap();
    tokio::time::timeout(Duration::from_secs(10), heard.changed())
        .await
        .expect("the append is heard of once done")
        .unwrap();
}

/// A claim of tasks alone commits without waiting for its flush to disk (a lease lost in a
/// crash only runs the task again); a claim that leases an instance waits, so that no
/// turn's fence is ever handed out twice.
#[tokio::test]
async fn only_a_claim_of_tasks_alone_skips_the_flush() {
    use ratchet_core::Timestamp;
    let Some(url) = database_url() else {
        return;
    };
    let Some(store) = fresh_store().await else {
        return;
    };
    let schema = store.config().schema.clone();
    let now = Timestamp(1_000_000_000_000);
    store
        .instance_create(vec![wf_start("i")], None, now)
        .await
        .unwrap();
    let mut client = session(&url).await;
    // The server's own default may be off (the test script's throwaway cluster): this
    // session asks for flushes, as a production server gives by default.
    client
        .batch_execute("SET synchronous_commit = on")
        .await
        .unwrap();
    let claim = |limit: i32| claim_sql(&schema, now, "w", limit, Some(("q", "job")));
    // How many instances a statement's transaction leased, and what it commits with.
    let mut commits_with = async |sql: String| -> (i64, String) {
        let tx = client.transaction().await.unwrap();
        tx.batch_execute(&sql).await.unwrap();
        let leased: i64 = tx
            .query_one(
                &format!("SELECT count(*) FROM {schema}.instances WHERE lease_owner = 'w'"),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let setting: String = tx
            .query_one("SHOW synchronous_commit", &[])
            .await
            .unwrap()
            .get(0);
        tx.rollback().await.unwrap();
        (leased, setting)
    };
    assert_eq!(
        commits_with(claim(0)).await,
        (0, "off".to_string()),
        "tasks alone"
    );
    assert_eq!(
        commits_with(claim(10)).await,
        (1, "on".to_string()),
        "an instance leased"
    );
}
