//! Counts the store round trips and commits that 1,000 standalone tasks cost from one bulk
//! enqueue to their completion, run by a worker in the same process:
//! `cargo run --release -p ratchet --example tasks` (SQLite), or with a PostgreSQL URL as its
//! argument: `cargo run --release -p ratchet --example tasks -- postgres://...`.

use std::time::{Duration, Instant};

use ratchet::{Ratchet, TaskContext, TaskError, TaskRequest, TaskState};

async fn noop(_ctx: TaskContext, n: u32) -> Result<u32, TaskError> {
    Ok(n)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("ratchet-tasks-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let builder = match std::env::args().nth(1) {
        // A schema of its own, so the run starts from empty tables.
        Some(url) => Ratchet::builder().postgres_with(
            url,
            ratchet::PostgresConfig {
                schema: format!("ratchet_tasks_{}", std::process::id()),
                ..Default::default()
            },
        ),
        None => Ratchet::builder().sqlite(dir.join("tasks.db")),
    };
    let ratchet = builder
        .task("noop", noop)
        .queue("default", 256)
        .start()
        .await?;
    let client = ratchet.client();
    // A first task, so that statements are prepared before counting.
    let warm = client.enqueue("noop", 0).await?.id();
    client.task_wait(warm, Duration::from_secs(10)).await?;

    let count = 1_000u32;
    let before = ratchet.stats();
    let started = Instant::now();
    let requests = (0..count)
        .map(|n| TaskRequest::new("noop", n))
        .collect::<ratchet::Result<Vec<_>>>()?;
    client.enqueue_many(requests).await?;
    // Each progress read is a round trip of this program's, counted and taken off below.
    let mut polls = 0;
    let done = loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        polls += 1;
        let stats = client.queues().await?;
        let completed = stats
            .iter()
            .find(|q| q.queue == "default")
            .map_or(0, |q| q.count(TaskState::Completed));
        // The warm-up task and all of these.
        if completed > u64::from(count) {
            break started.elapsed();
        }
    };
    let after = ratchet.stats();
    println!(
        "{count} tasks, one bulk enqueue to completion: {} round trips and {} commits ({} of the round trips were this program's progress reads), {:.0} tasks/s",
        after.round_trips - before.round_trips - polls,
        after.commits - before.commits,
        polls,
        f64::from(count) / done.as_secs_f64(),
    );
    ratchet.shutdown().await;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
