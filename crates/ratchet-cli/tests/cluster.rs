//! Several `ratchet worker` processes sharing one PostgreSQL database: the work spreads over
//! all of them, a SIGKILLed one's work is taken over after its lease, and notifications start
//! work without waiting for the poll.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{check_fanouts, postgres, start_fanouts, Worker};
use ratchet::{Client, HistoryEvent, Store};

/// These tests run worker processes on a 2-core machine: one at a time keeps their leases
/// (and the timings they assert nothing about) sane.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_share_500_fanouts_exactly_once() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some((args, store)) = postgres().await else {
        return;
    };
    let workers: Vec<Worker> = ["w1", "w2", "w3"]
        .iter()
        .map(|label| Worker::start(&args, label, &["--lease-ms", "5000"]))
        .collect();
    let store: Arc<dyn Store> = store;
    let started = Instant::now();
    let ids = start_fanouts(store.clone(), 500, 5, 5).await;
    let by_label = check_fanouts(store.clone(), &ids, 5, Duration::from_secs(120)).await;
    println!(
        "500 fan-outs of 5 on 3 workers in {:?}; activities per worker: {by_label:?}",
        started.elapsed()
    );
    assert_eq!(by_label.values().sum::<usize>(), 2500);
    for w in &workers {
        assert!(
            by_label.get(&w.label).copied().unwrap_or(0) > 0,
            "{} ran nothing: {by_label:?}",
            w.label
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_leases_are_taken_over() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some((args, pg)) = postgres().await else {
        return;
    };
    let lease = ["--lease-ms", "2000"];
    let mut doomed = Worker::start(&args, "doomed", &lease);
    let store: Arc<dyn Store> = pg.clone();
    // Only the doomed worker runs at first, so it holds leases when it dies.
    let ids = start_fanouts(store.clone(), 40, 4, 1500).await;
    let held = loop {
        let held = leases_held_by(&args, &doomed.owner).await;
        if held > 0 {
            break held;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Killed before the others start: starting a process can outlast the doomed one's
    // activities on a loaded machine, and it would have finished them all itself.
    doomed.kill();
    let killed_at = Instant::now();
    let survivors = [
        Worker::start(&args, "s1", &lease),
        Worker::start(&args, "s2", &lease),
    ];
    let by_label = check_fanouts(store, &ids, 4, Duration::from_secs(90)).await;
    println!(
        "the killed worker held {held} task lease(s); all 40 fan-outs done {:?} after the kill; activities per worker: {by_label:?}",
        killed_at.elapsed()
    );
    assert!(
        survivors.iter().any(|s| by_label.contains_key(&s.label)),
        "the survivors took the work over: {by_label:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_starts_work_without_waiting_for_the_poll() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some((args, store)) = postgres().await else {
        return;
    };
    let _worker = Worker::start(&args, "idle", &["--poll-ms", "10000"]);
    // Let the worker's first claim find nothing, so it sleeps for its 10 s poll.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let store: Arc<dyn Store> = store;
    let client = Client::new(store.clone());
    let started = Instant::now();
    let handle = client
        .start(
            "fanout",
            serde_json::json!({ "activities": 1, "activity_ms": 0 }),
        )
        .await
        .unwrap();
    let id = handle.id().to_string();
    let outcome = handle.wait(Duration::from_secs(30)).await.unwrap();
    let round = started.elapsed();
    let record = store.instance_get(&id).await.unwrap().unwrap();
    let history = store.history_read(&id, None).await.unwrap();
    let HistoryEvent::TurnStarted { at } = history[0].event else {
        panic!("history opens with a turn: {:?}", history[0].event)
    };
    let began = at.since(record.created_at);
    println!("started from another process: first turn {began:?} after creation, result back in {round:?}");
    assert!(outcome.output.is_some());
    assert!(
        began < Duration::from_secs(3) && round < Duration::from_secs(3),
        "waited for the 10 s poll: began after {began:?}, result after {round:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_behind_pgbouncer_in_transaction_mode() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(url) = std::env::var("RATCHET_TEST_PGBOUNCER_URL")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("skipped: RATCHET_TEST_PGBOUNCER_URL is not set (./scripts/test sets it when it can run PgBouncer)");
        return;
    };
    // PgBouncer hands each transaction to any server connection: no session state, no
    // prepared statements, no LISTEN. `--no-notify` is what works there.
    let schema = ratchet_store_postgres::testing::fresh_schema();
    let args = vec![
        "--database-url".to_string(),
        url.clone(),
        "--schema".into(),
        schema.clone(),
        "--no-notify".into(),
    ];
    let out = common::ratchet(&args)
        .args([
            "demo",
            "--orders",
            "4",
            "--step-ms",
            "20",
            "--quiet",
            "--no-serve",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the demo failed behind PgBouncer:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = ratchet::PostgresStore::connect_with(
        &url,
        ratchet::PostgresConfig {
            schema,
            ..ratchet::PostgresConfig::default()
        }
        .pgbouncer(),
    )
    .await
    .unwrap();
    let all = store.instance_list(Default::default()).await.unwrap();
    assert_eq!(all.len(), 4);
    assert!(
        all.iter()
            .all(|r| r.status == ratchet::InstanceStatus::Completed),
        "{all:?}"
    );
}

/// Task leases held by `owner`, read straight from the database.
async fn leases_held_by(args: &[String], owner: &str) -> i64 {
    let (client, connection) = ratchet_store_postgres::tokio_postgres::connect(
        &args[1],
        ratchet_store_postgres::tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let sql = format!(
        "SELECT count(*) FROM {}.tasks WHERE lease_owner = $1",
        args[3]
    );
    client.query_one(&sql, &[&owner]).await.unwrap().get(0)
}
