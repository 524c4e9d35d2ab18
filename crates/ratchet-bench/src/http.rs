//! `ratchet bench http`: the fan-out closed loop through `ratchet server`'s HTTP API (start,
//! then a long-poll wait), beside the same loop through the in-process client on the same
//! runtime and store; and the latency of one start each way.
//!
//! The server runs in this process on a loopback port, as `ratchet server` would; the clients
//! are plain HTTP/1.1 connections from a pool.

use std::time::Duration;

use ratchet::{OrchestrationContext, OrchestrationError};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::fanout::{fan_out_worker, Shape};
use super::{closed_loop, parse_duration, BenchEnv, Common, Latencies, Outcome, Progress};

#[derive(clap::Args, Debug)]
pub(crate) struct HttpArgs {
    #[command(flatten)]
    common: Common,
    /// HTTP clients, each keeping one unit (a start and its wait) in flight.
    #[arg(long, default_value_t = 20)]
    clients: usize,
    /// Starts per request (`POST /v1/instances/batch`) instead of one; a unit is then the
    /// batch, its starts awaited together.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// How long to measure each way.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// How long to run each way first without measuring.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,
    /// Activities per orchestration.
    #[arg(long, default_value_t = 5)]
    activities: u32,
    /// How long each activity sleeps, in milliseconds.
    #[arg(long, default_value_t = 10)]
    activity_ms: u64,
    /// Single starts timed one after another, each way.
    #[arg(long, default_value_t = 300)]
    starts: usize,
}

/// An orchestration that returns at once: what a lone start costs, without its work.
async fn noop(_ctx: OrchestrationContext, _: ()) -> Result<(), OrchestrationError> {
    Ok(())
}

pub(crate) async fn run(
    args: HttpArgs,
    database_url: Option<&str>,
) -> anyhow::Result<super::Report> {
    let mut env = BenchEnv::open(&args.common, database_url).await?;
    let store = env.store().await?;
    let shape = Shape {
        activities: args.activities,
        activity_ms: args.activity_ms,
    };
    let in_flight = args.clients * args.batch.max(1);
    let ratchet = fan_out_worker(store.clone(), in_flight, args.activities, true, |b| {
        b.orchestration("bench_noop", noop)
    })
    .await?;
    let client = ratchet.client().clone();

    // The server, on a port of its own.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = ratchet_server::router(ratchet_server::ServerState::new(client.clone()));
    let limits = ratchet_server::ServerLimits::default();
    let server = tokio::spawn(async move {
        ratchet_server::serve(listener, app, &limits, async {
            let _ = stopped.await;
        })
        .await
    });
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.clients * 2)
        .build()?;
    let expected: u64 = (0..u64::from(args.activities)).sum();

    // In process.
    let in_process = {
        let client = client.clone();
        move || {
            let client = client.clone();
            async move {
                let Ok(handle) = client.start("bench_fanout", shape).await else {
                    return Outcome::Failed;
                };
                match handle.wait(Duration::from_secs(120)).await {
                    Ok(o) => match o.into_result::<u64>() {
                        Ok(sum) if sum == expected => Outcome::Ok,
                        _ => Outcome::Failed,
                    },
                    Err(ratchet::Error::Timeout(_)) => Outcome::TimedOut,
                    Err(_) => Outcome::Failed,
                }
            }
        }
    };
    let units = in_flight;
    closed_loop(
        units,
        Instant::now() + args.warmup,
        None,
        in_process.clone(),
    )
    .await;
    let progress = Progress::timed(args.common.quiet, "in-process", args.duration);
    let local = closed_loop(
        units,
        Instant::now() + args.duration,
        Some(progress.counter()),
        in_process,
    )
    .await;
    progress.finish();

    // Over HTTP.
    let batch = args.batch.max(1);
    let over_http = {
        let (http, base) = (http.clone(), base.clone());
        move || {
            let (http, base) = (http.clone(), base.clone());
            async move { http_unit(&http, &base, shape, batch, expected).await }
        }
    };
    closed_loop(
        args.clients,
        Instant::now() + args.warmup,
        None,
        over_http.clone(),
    )
    .await;
    env.begin_stats().await?;
    let before = store.stats();
    let progress = Progress::timed(args.common.quiet, "http", args.duration);
    let remote = closed_loop(
        args.clients,
        Instant::now() + args.duration,
        Some(progress.counter()),
        over_http,
    )
    .await;
    progress.finish();
    let after = store.stats();

    // One start at a time, each way.
    let mut local_starts = Latencies::new();
    let mut http_starts = Latencies::new();
    let mut start_failures = 0;
    for _ in 0..args.starts {
        let t = Instant::now();
        match client.start("bench_noop", ()).await {
            Ok(_) => local_starts.record(t.elapsed()),
            Err(_) => start_failures += 1,
        }
        let t = Instant::now();
        let started = http
            .post(format!("{base}/v1/instances"))
            .json(&json!({"name": "bench_noop"}))
            .send()
            .await;
        match started {
            Ok(r) if r.status().as_u16() == 201 => http_starts.record(t.elapsed()),
            _ => start_failures += 1,
        }
    }
    let _ = stop.send(());
    let _ = server.await;
    ratchet.shutdown().await;

    let orchestrations = remote.ok * batch as u64;
    let per = |n: u64| n as f64 / orchestrations.max(1) as f64;
    let throughput = orchestrations as f64 / remote.seconds.max(f64::EPSILON);
    let local_throughput = local.ok as f64 / local.seconds.max(f64::EPSILON);
    let mut report = super::Report {
        scenario: "http".into(),
        unit: "orchestration".into(),
        units: orchestrations,
        seconds: remote.seconds,
        throughput_per_s: throughput,
        round_trips_per_unit: per(after.round_trips - before.round_trips),
        commits_per_unit: per(after.commits - before.commits),
        latency: remote.latencies.summary(),
        ..super::Report::default()
    };
    report
        .figures
        .insert("in-process orchestrations/s".into(), local_throughput);
    report.figures.insert(
        "http / in-process".into(),
        throughput / local_throughput.max(f64::EPSILON),
    );
    let (local_p50, http_p50) = (local_starts.summary().p50_ms, http_starts.summary().p50_ms);
    report
        .figures
        .insert("start p50 added by http ms".into(), http_p50 - local_p50);
    report
        .latencies
        .insert("in-process fan-out".into(), local.latencies.summary());
    report
        .latencies
        .insert("start in-process".into(), local_starts.summary());
    report
        .latencies
        .insert("start http".into(), http_starts.summary());
    report.correctness.failed =
        remote.correctness.failed + local.correctness.failed + start_failures;
    report.correctness.timed_out = remote.correctness.timed_out + local.correctness.timed_out;
    report.correctness.stale_refused = after.stale_refused - before.stale_refused;
    report.param("clients", args.clients);
    report.param("batch", batch);
    report.param("activities", args.activities);
    report.param("activity_ms", args.activity_ms);
    report.param("duration_s", args.duration.as_secs_f64());
    report.param("starts", args.starts);
    drop(ratchet);
    drop(store);
    env.finish(&mut report).await?;
    super::finish(&mut report, &args.common)?;
    Ok(report)
}

/// One unit over HTTP: `batch` starts (one request), then a wait for each.
async fn http_unit(
    http: &reqwest::Client,
    base: &str,
    shape: Shape,
    batch: usize,
    expected: u64,
) -> Outcome {
    let start = json!({"name": "bench_fanout", "input": shape});
    let ids: Vec<String> = if batch == 1 {
        let Ok(response) = http
            .post(format!("{base}/v1/instances"))
            .json(&start)
            .send()
            .await
        else {
            return Outcome::Failed;
        };
        match response.json::<Value>().await {
            Ok(v) => v["id"].as_str().map(str::to_string).into_iter().collect(),
            Err(_) => return Outcome::Failed,
        }
    } else {
        let body = json!({"instances": vec![start; batch]});
        let Ok(response) = http
            .post(format!("{base}/v1/instances/batch"))
            .json(&body)
            .send()
            .await
        else {
            return Outcome::Failed;
        };
        match response.json::<Vec<Value>>().await {
            Ok(items) => items
                .iter()
                .filter_map(|i| i["id"].as_str().map(str::to_string))
                .collect(),
            Err(_) => return Outcome::Failed,
        }
    };
    if ids.len() != batch {
        return Outcome::Failed;
    }
    let waits = ids.iter().map(|id| async move {
        let url = format!("{base}/v1/instances/{id}/wait?timeout_ms=60000");
        match http.get(url).send().await {
            Ok(r) => r.json::<Value>().await.ok(),
            Err(_) => None,
        }
    });
    for done in futures::future::join_all(waits).await {
        match done {
            Some(v) if v["status"] == "Completed" && v["output"] == expected => {}
            Some(v) if v["status"] == "Running" || v["status"] == "Pending" => {
                return Outcome::TimedOut
            }
            _ => return Outcome::Failed,
        }
    }
    Outcome::Ok
}
