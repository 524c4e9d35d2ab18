//! The planner's bad day, on PostgreSQL: a queue table is empty and full many times a minute,
//! so its statistics are always wrong somewhere. Here `tasks` and `inbox` are bloated by a
//! drain that vacuum may not clean (autovacuum is off for them), then `ANALYZE`d while
//! empty, so the planner believes they hold about one row while their indexes hold tens of
//! thousands of dead entries. Every statement of the hot path must still read a bounded
//! number of blocks for each call (`pg_stat_statements`, blocks counted, not time).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ratchet::{Ratchet, Store, TaskContext, TaskError, TaskRequest};
use ratchet_store_postgres::testing::session;
use ratchet_store_postgres::tokio_postgres::Client;

use crate::basics::{double, fan_out};
use crate::harness::{start, WAIT};

/// Tasks drained before the bad day: enough that a read of a whole index or table is two
/// orders of magnitude above a probe by key.
const BLOATING_TASKS: u32 = 160_000;
/// Fan-outs of five activities drained before the bad day.
const BLOATING_FANOUTS: u32 = 2_000;
/// Tasks and fan-outs run on the bad day.
const MEASURED_TASKS: u32 = 2_000;
const MEASURED_FANOUTS: u32 = 200;
/// A backlog enqueued on the bad day with no worker running, then drained by one that claims
/// a few at a time: a claim that reads every ready task to sort them (a bitmap scan, chosen
/// on statistics that say the table holds one row) rather than the index in order reads the
/// whole backlog for each few it takes.
const BACKLOG_TASKS: u32 = 20_000;
const BACKLOG_CONCURRENCY: usize = 4;
/// Tasks that run long enough to be heartbeated, all at once, and for how long each.
const LONG_TASKS: u32 = 64;
const LONG_TASK: Duration = Duration::from_millis(1_200);
/// The most blocks a statement of the hot path may read, over the bad day, per item of work
/// done (a task, an activity, an orchestration). A probe by key reads a few blocks per row;
/// one read of a bloated index, a block for each of its tens of thousands of entries, which
/// even at one read per batch comes to hundreds of blocks per item.
const BLOCKS_PER_ITEM: f64 = 30.0;

/// Whether the server tracks statements (the test script's server loads
/// `pg_stat_statements`); a server of the user's own may not, and the test is then skipped.
async fn statements_tracked(client: &Client) -> bool {
    let loaded: String = client
        .query_one("SELECT current_setting('shared_preload_libraries')", &[])
        .await
        .unwrap()
        .get(0);
    if !loaded.contains("pg_stat_statements") {
        assert!(
            std::env::var("RATCHET_TEST_PG_RESTART").is_err(),
            "the test script's server should load pg_stat_statements"
        );
        eprintln!("skipped: the server does not load pg_stat_statements");
        return false;
    }
    // Tests run side by side: one of them creates the extension.
    let _ = client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await;
    true
}

/// What a statement of the schema had done so far: (calls, blocks read or hit, rows).
type Counts = std::collections::HashMap<(i64, String), (i64, i64, i64)>;

async fn counts(client: &Client, schema: &str) -> Counts {
    client
        .query(
            "SELECT queryid, query, calls, shared_blks_hit + shared_blks_read, rows
             FROM pg_stat_statements WHERE query LIKE '%' || $1 || '.%'",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| ((r.get(0), r.get(1)), (r.get(2), r.get(3), r.get(4))))
        .collect()
}

/// Tasks run so far, by the handler: the test waits on it rather than reading the queue's
/// statistics, which count every result and would be measured with the hot path.
static RAN: AtomicU32 = AtomicU32::new(0);

async fn noop(_ctx: TaskContext, _: ()) -> Result<(), TaskError> {
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// A task long enough for its lease to be renewed a few times (the test's lease is 1.5 s,
/// renewed every 300 ms).
async fn long(_ctx: TaskContext, _: ()) -> Result<(), TaskError> {
    tokio::time::sleep(LONG_TASK).await;
    RAN.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// Enqueues `count` tasks of `name`, 5,000 to a call.
async fn enqueue(client: &ratchet::Client, name: &str, count: u32) {
    for first in (0..count).step_by(5_000) {
        let requests = (first..count.min(first + 5_000))
            .map(|_| TaskRequest::new(name, ()).unwrap())
            .collect();
        client.enqueue_many(requests).await.unwrap();
    }
}

/// Waits until the tasks that ran reach `target`, failing after `patience`: `what` did not
/// finish.
async fn wait_ran(target: u32, patience: Duration, what: &str) {
    let deadline = Instant::now() + patience;
    while RAN.load(Ordering::SeqCst) < target {
        assert!(Instant::now() < deadline, "{what} did not finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Enqueues `count` no-op tasks and waits until they ran.
async fn drain_tasks(r: &Ratchet, count: u32) {
    let target = RAN.load(Ordering::SeqCst) + count;
    enqueue(r.client(), "noop", count).await;
    wait_ran(target, Duration::from_secs(300), "the tasks").await;
}

/// Runs `count` fan-outs of five activities, 50 at a time.
async fn drain_fanouts(r: &Ratchet, count: u32) {
    let c = r.client();
    for _ in 0..count / 50 {
        let started = futures::future::join_all((0..50).map(|_| c.start("fan", 5))).await;
        for handle in started {
            let out: Vec<i64> = handle
                .unwrap()
                .wait(WAIT)
                .await
                .unwrap()
                .into_result()
                .unwrap();
            assert_eq!(out, vec![0, 2, 4, 6, 8]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_statements_read_few_blocks_on_a_bloated_queue_with_empty_statistics() {
    let Some(url) = ratchet_store_postgres::testing::database_url() else {
        return;
    };
    let Some(pg) = ratchet_store_postgres::testing::fresh_store().await else {
        return;
    };
    let client = session(&url).await;
    if !statements_tracked(&client).await {
        return;
    }
    let schema = pg.config().schema.clone();
    let store: Arc<dyn Store> = Arc::new(pg);
    for table in ["tasks", "task_results", "inbox", "instances", "history"] {
        client
            .batch_execute(&format!(
                "ALTER TABLE {schema}.{table} SET (autovacuum_enabled = false)"
            ))
            .await
            .unwrap();
    }
    let r = start(&store, |b| {
        b.task("noop", noop)
            .orchestration("fan", fan_out)
            .activity("double", double)
    })
    .await;
    drain_tasks(&r, BLOATING_TASKS).await;
    drain_fanouts(&r, BLOATING_FANOUTS).await;
    // The bad day: statistics taken while the queue tables are empty. (ANALYZE also
    // invalidates every plan cached on them: the workers plan again, on these.)
    client
        .batch_execute(&format!(
            "ANALYZE {schema}.tasks; ANALYZE {schema}.inbox; ANALYZE {schema}.instances; \
             ANALYZE {schema}.history; ANALYZE {schema}.task_results"
        ))
        .await
        .unwrap();
    let estimated: f32 = client
        .query_one(
            &format!("SELECT reltuples FROM pg_class WHERE oid = '{schema}.tasks'::regclass"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(estimated < 1.0, "tasks analysed empty: {estimated} rows");
    let before = counts(&client, &schema).await;
    drain_tasks(&r, MEASURED_TASKS).await;
    drain_fanouts(&r, MEASURED_FANOUTS).await;
    let items = f64::from(MEASURED_TASKS + MEASURED_FANOUTS * 6);
    r.shutdown().await;
    let after = counts(&client, &schema).await;
    judge(
        &client,
        &schema,
        &before,
        &after,
        items,
        "a drain and fan-outs",
    )
    .await;

    // A backlog: enqueued while no worker runs, then drained a few at a time.
    let plain = ratchet::Client::new(store.clone());
    enqueue(&plain, "noop", BACKLOG_TASKS).await;
    // Column statistics of a busy moment, with the row count of a moment the queue looked
    // empty: what an autovacuum `ANALYZE` leaves when it samples a drain between batches.
    // (`ANALYZE` of an empty table leaves the column statistics it had.)
    client
        .batch_execute(&format!("ANALYZE {schema}.tasks"))
        .await
        .unwrap();
    let set = client
        .batch_execute(&format!(
            "UPDATE pg_class SET reltuples = 1 WHERE oid = '{schema}.tasks'::regclass"
        ))
        .await;
    if let Err(e) = set {
        assert!(
            std::env::var("RATCHET_TEST_PG_RESTART").is_err(),
            "the test script's server lets its superuser set statistics: {e}"
        );
        eprintln!("the backlog is skipped: the role may not set statistics ({e})");
        return;
    }
    let before = counts(&client, &schema).await;
    let target = RAN.load(Ordering::SeqCst) + BACKLOG_TASKS;
    let r = start(&store, |b| {
        b.task("noop", noop).queue("default", BACKLOG_CONCURRENCY)
    })
    .await;
    wait_ran(target, Duration::from_secs(300), "the backlog").await;
    r.shutdown().await;
    let after = counts(&client, &schema).await;
    judge(
        &client,
        &schema,
        &before,
        &after,
        f64::from(BACKLOG_TASKS),
        "a backlog",
    )
    .await;
    // Long tasks, their leases renewed by heartbeats on the same statistics.
    let before = counts(&client, &schema).await;
    let target = RAN.load(Ordering::SeqCst) + LONG_TASKS;
    let r = start(&store, |b| b.task("long", long).queue("default", 64)).await;
    enqueue(&plain, "long", LONG_TASKS).await;
    wait_ran(target, Duration::from_secs(120), "the long tasks").await;
    r.shutdown().await;
    let after = counts(&client, &schema).await;
    // Judged per lease renewed: how many heartbeats a task gets depends on how long it runs.
    let (mut calls, mut blocks, mut renewed) = (0, 0, 0);
    for (key, (c, b, r)) in &after {
        if key.1.contains("WITH beat AS") {
            let (c0, b0, r0) = before.get(key).copied().unwrap_or_default();
            (calls, blocks, renewed) = (calls + c - c0, blocks + b - b0, renewed + r - r0);
        }
    }
    assert!(calls > 0 && renewed > 0, "the long tasks were heartbeated");
    let per_lease = blocks as f64 / renewed as f64;
    eprintln!("heartbeats: {calls} calls, {renewed} leases, {per_lease:.1} blocks a lease");
    assert!(
        per_lease <= BLOCKS_PER_ITEM,
        "a heartbeat read {per_lease:.1} blocks per lease it renewed on the bad day \
         ({blocks} blocks, {calls} calls)"
    );
}

/// Fails when a statement of the hot path read more than [`BLOCKS_PER_ITEM`] blocks per item
/// of work between `before` and `after`.
async fn judge(
    client: &Client,
    schema: &str,
    before: &Counts,
    after: &Counts,
    items: f64,
    what: &str,
) {
    // A call of a PL/pgSQL function counts the blocks of the statements it runs, which are
    // counted on their own: only those are judged.
    let functions: Vec<String> = client
        .query(
            "SELECT p.proname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
             WHERE p.pronamespace = $1::text::regnamespace AND l.lanname = 'plpgsql'",
            &[&schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| format!("{schema}.{}(", r.get::<_, String>(0)))
        .collect();
    assert!(functions.len() > 5, "{functions:?}");
    let mut worst = Vec::new();
    for (key, (calls, blocks, rows)) in after {
        if functions.iter().any(|f| key.1.contains(f)) {
            continue;
        }
        let (calls0, blocks0, rows0) = before.get(key).copied().unwrap_or_default();
        let calls = calls - calls0;
        if calls == 0 {
            continue;
        }
        let per_item = (blocks - blocks0) as f64 / items;
        let per_call = (blocks - blocks0) as f64 / calls as f64;
        worst.push((per_item, per_call, calls, rows - rows0, key.1.clone()));
    }
    worst.sort_by(|a, b| b.0.total_cmp(&a.0));
    let line = |(per_item, per_call, calls, rows, query): &(f64, f64, i64, i64, String)| {
        let query: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
        let query: String = query.chars().take(150).collect();
        format!(
            "{per_item:>7.1} blocks/item {per_call:>8.0} blocks/call {calls:>5} calls \
             {rows:>6} rows  {query}"
        )
    };
    eprintln!(
        "{what}:\n{}",
        worst
            .iter()
            .take(15)
            .map(line)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        worst.len() > 5,
        "the hot path's statements were seen ({what})"
    );
    let over: Vec<String> = worst
        .iter()
        .filter(|w| w.0 > BLOCKS_PER_ITEM)
        .map(line)
        .collect();
    assert!(
        over.is_empty(),
        "statements read more than {BLOCKS_PER_ITEM} blocks per item on the bad day ({what}):\n{}",
        over.join("\n")
    );
}
