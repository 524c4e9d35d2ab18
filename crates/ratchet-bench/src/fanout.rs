//! `ratchet bench fanout`: a closed loop of orchestrations that each fan out to N activities
//! and join them, started and awaited by a client; the shape of the published 18 orch/s.

use std::time::Duration;

use ratchet::{
    ActivityContext, ActivityError, InstanceFilter, InstanceStatus, OrchestrationContext,
    OrchestrationError, Ratchet, RuntimeConfig,
};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{
    closed_loop, orchestration_config, parse_duration, BenchEnv, Common, Outcome, Progress, Report,
};

#[derive(clap::Args, Debug)]
pub(crate) struct FanoutArgs {
    #[command(flatten)]
    common: Common,
    /// Orchestrations kept running at once.
    #[arg(long, default_value_t = 20)]
    in_flight: usize,
    /// How long to measure.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// How long to run first without measuring (statements prepared, caches warm).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,
    /// Activities per orchestration.
    #[arg(long, default_value_t = 5)]
    activities: u32,
    /// How long each activity sleeps, in milliseconds.
    #[arg(long, default_value_t = 10)]
    activity_ms: u64,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
struct Shape {
    activities: u32,
    activity_ms: u64,
}

async fn fan_out(ctx: OrchestrationContext, shape: Shape) -> Result<u64, OrchestrationError> {
    let calls =
        (0..shape.activities).map(|i| ctx.activity::<u64>("bench_sleep", (i, shape.activity_ms)));
    let all = ratchet::join_all(calls)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    Ok(all.iter().sum())
}

async fn sleep(_ctx: ActivityContext, (i, ms): (u64, u64)) -> Result<u64, ActivityError> {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    Ok(i)
}

pub(crate) async fn run(args: FanoutArgs, database_url: Option<&str>) -> anyhow::Result<Report> {
    let mut env = BenchEnv::open(&args.common, database_url).await?;
    let store = env.store().await?;
    let room = args.in_flight.max(1);
    let config = RuntimeConfig {
        max_activities: (room * args.activities as usize * 2).max(256),
        ..orchestration_config(room)
    };
    let ratchet = Ratchet::builder()
        .store(store.clone())
        .config(config)
        .orchestration("bench_fanout", fan_out)
        .activity("bench_sleep", sleep)
        .start()
        .await?;
    let client = ratchet.client().clone();
    let shape = Shape {
        activities: args.activities,
        activity_ms: args.activity_ms,
    };
    let expected: u64 = (0..u64::from(args.activities)).sum();
    let unit = move || {
        let client = client.clone();
        async move {
            let handle = match client.start("bench_fanout", shape).await {
                Ok(h) => h,
                Err(_) => return Outcome::Failed,
            };
            match handle.wait(Duration::from_secs(120)).await {
                Ok(outcome) => match outcome.into_result::<u64>() {
                    Ok(sum) if sum == expected => Outcome::Ok,
                    _ => Outcome::Failed,
                },
                Err(ratchet::Error::Timeout(_)) => Outcome::TimedOut,
                Err(_) => Outcome::Failed,
            }
        }
    };
    if !args.warmup.is_zero() {
        closed_loop(room, Instant::now() + args.warmup, None, unit.clone()).await;
    }
    env.begin_stats().await?;
    let before = store.stats();
    let progress = Progress::timed(args.common.quiet, "fanout", args.duration);
    let result = closed_loop(
        room,
        Instant::now() + args.duration,
        Some(progress.counter()),
        unit,
    )
    .await;
    progress.finish();
    let after = store.stats();
    let active = ratchet
        .client()
        .list(InstanceFilter {
            statuses: vec![InstanceStatus::Pending, InstanceStatus::Running],
            limit: Some(100_000),
            ..InstanceFilter::default()
        })
        .await?
        .len() as u64;
    ratchet.shutdown().await;
    drop(ratchet);
    drop(store);

    let units = result.ok;
    let per = |n: u64| {
        if units == 0 {
            0.0
        } else {
            n as f64 / units as f64
        }
    };
    let mut report = Report {
        scenario: "fanout".into(),
        unit: "orchestration".into(),
        units,
        seconds: result.seconds,
        throughput_per_s: units as f64 / result.seconds.max(f64::EPSILON),
        latency: result.latencies.summary(),
        round_trips_per_unit: per(after.round_trips - before.round_trips),
        commits_per_unit: per(after.commits - before.commits),
        correctness: result.correctness.clone(),
        ..Report::default()
    };
    report.correctness.stuck = active;
    report.correctness.stale_refused = after.stale_refused - before.stale_refused;
    report.figures.insert(
        "activities/s".into(),
        report.throughput_per_s * f64::from(args.activities),
    );
    report.param("in_flight", args.in_flight);
    report.param("duration_s", args.duration.as_secs_f64());
    report.param("warmup_s", args.warmup.as_secs_f64());
    report.param("activities", args.activities);
    report.param("activity_ms", args.activity_ms);
    env.finish(&mut report).await?;
    super::finish(&mut report, &args.common)?;
    Ok(report)
}
