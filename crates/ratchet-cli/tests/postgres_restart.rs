//! PostgreSQL restarts while workers run: they reconnect and everything completes. A test
//! binary of its own, so that no other test is running when the server goes down.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{check_fanouts, postgres, ratchet, start_fanouts, Worker};
use ratchet::{Store, TaskOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_ride_out_a_postgres_restart() {
    let Some(restart) = std::env::var("RATCHET_TEST_PG_RESTART")
        .ok()
        .filter(|c| !c.is_empty())
    else {
        eprintln!(
            "skipped: RATCHET_TEST_PG_RESTART is not set (./scripts/test sets it when it runs its own server)"
        );
        return;
    };
    let Some((args, pg)) = postgres().await else {
        return;
    };
    // A claim or commit whose answer the restart loses leaves leases a live worker holds
    // without knowing; they are taken over after the lease plus the stall grace.
    let lease = ["--lease-ms", "2000", "--stall-grace-ms", "5000"];
    let _workers = [
        Worker::start(&args, "a", &lease),
        Worker::start(&args, "b", &lease),
    ];
    let store: Arc<dyn Store> = pg;
    let ids = start_fanouts(store.clone(), 100, 4, 400).await;
    // A task that runs after the restart, and a `tasks wait` for it that is running across it.
    let task = ratchet::Client::new(store.clone())
        .enqueue_with(
            "work",
            serde_json::json!({ "ms": 10 }),
            TaskOptions::default().delay(Duration::from_secs(3)),
        )
        .await
        .unwrap()
        .id();
    let mut wait = ratchet(&args);
    wait.args([
        "tasks",
        "wait",
        &task.0.to_string(),
        "--timeout-secs",
        "120",
    ]);
    let waiting = tokio::task::spawn_blocking(move || wait.output());
    // Restart while activities run and turns commit.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new("sh")
            .args(["-c", &restart])
            .stdout(std::process::Stdio::null())
            .status()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(status.success(), "restarting PostgreSQL failed");
    let restarted = Instant::now();
    let by_label = check_fanouts(store, &ids, 4, Duration::from_secs(120)).await;
    let waited = waiting.await.unwrap().unwrap();
    assert!(
        waited.status.success(),
        "`tasks wait` did not ride out the restart: {}",
        String::from_utf8_lossy(&waited.stderr)
    );
    println!(
        "all 100 fan-outs done {:?} after the restart; activities per worker: {by_label:?}",
        restarted.elapsed()
    );
}
