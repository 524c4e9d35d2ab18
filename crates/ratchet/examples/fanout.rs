//! Counts the store round trips and commits of 5-activity fan-out orchestrations started and
//! awaited one at a time in the same process:
//! `cargo run --release -p ratchet --example fanout` (SQLite), or with a PostgreSQL URL as
//! its argument: `cargo run --release -p ratchet --example fanout -- postgres://...`.

use std::time::{Duration, Instant};

use ratchet::{ActivityContext, ActivityError, OrchestrationContext, OrchestrationError, Ratchet};

async fn work(_ctx: ActivityContext, i: u32) -> Result<u32, ActivityError> {
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(i)
}

async fn fan_out(ctx: OrchestrationContext, n: u32) -> Result<u32, OrchestrationError> {
    let calls = (0..n).map(|i| ctx.activity::<u32>("work", i));
    let all = ratchet::join_all(calls)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    Ok(all.iter().sum())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("ratchet-fanout-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let builder = match std::env::args().nth(1) {
        // A schema of its own, so the run starts from empty tables.
        Some(url) => Ratchet::builder().postgres_with(
            url,
            ratchet::PostgresConfig {
                schema: format!("ratchet_fanout_{}", std::process::id()),
                ..Default::default()
            },
        ),
        None => Ratchet::builder().sqlite(dir.join("fanout.db")),
    };
    let ratchet = builder
        .orchestration("fan_out", fan_out)
        .activity("work", work)
        .start()
        .await?;
    // One run first, so that every connection statement is prepared before counting.
    let warm = ratchet.client().start("fan_out", 5u32).await?;
    warm.wait(Duration::from_secs(10)).await?;
    let runs = 50;
    let before = ratchet.stats();
    let started = Instant::now();
    for _ in 0..runs {
        let handle = ratchet.client().start("fan_out", 5u32).await?;
        let sum: u32 = handle.wait(Duration::from_secs(10)).await?.into_result()?;
        assert_eq!(sum, 10);
    }
    let elapsed = started.elapsed();
    let after = ratchet.stats();
    println!(
        "{runs} sequential 5-activity fan-outs: {:.2} round trips and {:.2} commits per orchestration, {:.1} ms each",
        (after.round_trips - before.round_trips) as f64 / f64::from(runs),
        (after.commits - before.commits) as f64 / f64::from(runs),
        elapsed.as_secs_f64() * 1000.0 / f64::from(runs),
    );
    ratchet.shutdown().await;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
