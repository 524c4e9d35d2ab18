//! Schedules fired by `ratchet worker` processes sharing one database, on SQLite and on
//! PostgreSQL: three workers and a schedule every second for ten seconds give ten fires,
//! each tick once, though the worker that fired the first ticks is SIGKILLed between two;
//! and after 30 s with no worker alive, each catch-up policy fires what it says.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{postgres, run, sqlite, text, Worker};
use ratchet::{Client, FireRecord, InstanceStatus, Store, Timestamp};

/// These tests run worker processes on a 2-core machine: one at a time keeps the fire
/// delays they print meaningful.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn rfc3339(t: Timestamp) -> String {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(t.as_millis() as u64);
    humantime::format_rfc3339_millis(at).to_string()
}

/// Creates a schedule with `ratchet schedules create NAME ARGS...`.
fn create(args: &[String], name: &str, extra: &[&str]) {
    let mut command = vec!["schedules", "create", name];
    command.extend_from_slice(extra);
    let out = run(args, &command);
    assert!(out.status.success(), "create {name}: {}", text(&out));
}

/// Every fire of `name`, oldest first.
async fn fires(client: &Client, name: &str) -> Vec<FireRecord> {
    let mut f = client
        .schedule_fires(name, Timestamp(i64::MIN), Timestamp(i64::MAX), 1000)
        .await
        .unwrap();
    f.reverse();
    f
}

async fn wait_for_fires(client: &Client, name: &str, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while fires(client, name).await.len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: fewer than {n} fires"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The `p`th percentile of `sorted`.
fn percentile(sorted: &[i64], p: f64) -> i64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn ten_ticks_fire_once_across_three_workers_and_a_sigkill(
    backend: &str,
    args: Vec<String>,
    store: Arc<dyn Store>,
) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let client = Client::new(store.clone());
    let worker = ["--lease-ms", "2000", "--poll-ms", "200"];
    let mut first = Worker::start(&args, "first", &worker);
    // Ten ticks: the first a few seconds out, on a whole second.
    let now = Timestamp::now().as_millis();
    let start = Timestamp((now / 1000 + 3) * 1000);
    let end = Timestamp(start.as_millis() + 9_000);
    create(
        &args,
        "tick",
        &[
            "--spec",
            "every 1s",
            "--workflow",
            "fanout",
            "--input",
            r#"{"activities":1}"#,
            "--overlap",
            "allow_all",
            "--start-at",
            &rfc3339(start),
            "--end-at",
            &rfc3339(end),
        ],
    );
    // The first worker alone fires the first ticks; two more join; then the first is killed
    // between two ticks.
    wait_for_fires(&client, "tick", 3).await;
    let others = [
        Worker::start(&args, "second", &worker),
        Worker::start(&args, "third", &worker),
    ];
    wait_for_fires(&client, "tick", 5).await;
    first.kill();
    let killed_after = fires(&client, "tick").await.len();
    wait_for_fires(&client, "tick", 10).await;
    // Time for a late duplicate to show, were there one.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let all = fires(&client, "tick").await;
    let ticks: Vec<i64> = all.iter().map(|f| f.nominal.as_millis()).collect();
    let expected: Vec<i64> = (0..10).map(|i| start.as_millis() + i * 1_000).collect();
    assert_eq!(ticks, expected, "each of the ten ticks once: {all:?}");
    for f in &all {
        let id = f.run.as_deref().expect("every tick started a run");
        assert_eq!(
            id,
            format!("tick@{}", rfc3339(f.nominal).replace(".000Z", "Z"))
        );
        let outcome = client.wait(id, Duration::from_secs(60)).await.unwrap();
        assert_eq!(outcome.status, InstanceStatus::Completed, "{id}");
    }
    let mut late: Vec<i64> = all
        .iter()
        .map(|f| f.actual.as_millis() - f.nominal.as_millis())
        .collect();
    late.sort_unstable();
    println!(
        "{backend}: 10 ticks on 3 workers (the first killed after {killed_after} fires): fired late by p50 {} ms, p99 {} ms, max {} ms",
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        late[late.len() - 1]
    );
    drop(others);
}

async fn each_catch_up_policy_after_30_s_without_a_worker(
    args: Vec<String>,
    store: Arc<dyn Store>,
) {
    let client = Client::new(store.clone());
    let worker = ["--poll-ms", "200"];
    for (name, catch_up) in [
        ("skip", "skip"),
        ("last3", "last 3"),
        ("within10s", "within 10s"),
    ] {
        create(
            &args,
            name,
            &[
                "--spec",
                "every 1s",
                "--task",
                "work",
                "--overlap",
                "allow_all",
                "--catch-up",
                catch_up,
            ],
        );
    }
    let mut alive = Worker::start(&args, "before", &worker);
    for name in ["skip", "last3", "within10s"] {
        wait_for_fires(&client, name, 2).await;
    }
    alive.kill();
    let down_at = Timestamp::now();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let back = Worker::start(&args, "after", &worker);
    tokio::time::sleep(Duration::from_secs(3)).await;
    for name in ["skip", "last3", "within10s"] {
        let out = run(&args, &["schedules", "pause", name]);
        assert!(out.status.success(), "{}", text(&out));
    }
    drop(back);
    for (name, caught_up) in [("skip", 0), ("last3", 3), ("within10s", 5)] {
        let all = fires(&client, name).await;
        let after: Vec<&FireRecord> = all.iter().filter(|f| f.actual > down_at).collect();
        // A tick fired more than 5 s after its time was caught up; later ones were on time.
        let late: Vec<i64> = after
            .iter()
            .map(|f| f.actual.as_millis() - f.nominal.as_millis())
            .filter(|late| *late > 5_000)
            .collect();
        assert_eq!(late.len(), caught_up, "{name}: caught-up ticks: {late:?}");
        assert!(
            late.iter().all(|l| *l <= 10_000 || name == "last3"),
            "{name}: only ticks within the window: {late:?}"
        );
        let ticks: Vec<i64> = all.iter().map(|f| f.nominal.as_millis()).collect();
        let mut unique = ticks.clone();
        unique.dedup();
        assert_eq!(ticks, unique, "{name}: no tick twice");
        let stored = client.schedule(name).await.unwrap();
        assert!(
            stored.missed >= 20,
            "{name}: the ticks of the outage not caught up are counted: {}",
            stored.missed
        );
        println!(
            "catch-up {name}: {} fired after the outage, {caught_up} of them caught up, {} missed",
            after.len(),
            stored.missed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_ten_ticks_fire_once_across_three_workers_and_a_sigkill() {
    let (args, store, _dir) = sqlite().await;
    ten_ticks_fire_once_across_three_workers_and_a_sigkill("sqlite", args, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_ten_ticks_fire_once_across_three_workers_and_a_sigkill() {
    let Some((args, store)) = postgres().await else {
        return;
    };
    ten_ticks_fire_once_across_three_workers_and_a_sigkill("postgres", args, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_each_catch_up_policy_after_30_s_without_a_worker() {
    let (args, store, _dir) = sqlite().await;
    each_catch_up_policy_after_30_s_without_a_worker(args, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_each_catch_up_policy_after_30_s_without_a_worker() {
    let Some((args, store)) = postgres().await else {
        return;
    };
    each_catch_up_policy_after_30_s_without_a_worker(args, store).await;
}
