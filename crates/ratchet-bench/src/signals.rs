//! `ratchet bench signals`: instances that start, wait for a signal and complete; the shape of
//! the published 25.7 signal round trips/s.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::bail;
use ratchet::{
    Client, InstanceFilter, InstanceStatus, OrchestrationContext, OrchestrationError, Ratchet,
};
use tokio::time::Instant;

use super::measure::{resident_bytes, Step};
use super::{
    closed_loop, orchestration_config, parse_duration, BenchEnv, Common, Correctness, Latencies,
    Outcome, Progress, Report,
};

/// Which shape of signal load.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One instance after another: the latency of each phase.
    Serial,
    /// Many instances, a few at a time, signalled by a pool of signallers: throughput.
    Parallel,
    /// A closed loop at rising concurrency: throughput and p95 per rung.
    Ladder,
    /// Many waiting instances signalled at once.
    Burst,
    /// A steady closed loop for a long time: drift of latency and memory.
    Soak,
}

#[derive(clap::Args, Debug)]
pub(crate) struct SignalArgs {
    /// serial, parallel, ladder, burst or soak.
    #[arg(value_enum)]
    mode: Mode,
    #[command(flatten)]
    common: Common,
    /// Instances (serial: 16, parallel: 96, burst: 120).
    #[arg(long)]
    instances: Option<usize>,
    /// Instances alive at once (parallel, soak).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Tasks sending the signals (parallel).
    #[arg(long, default_value_t = 8)]
    signallers: usize,
    /// The ladder's rungs.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64,256,1024")]
    rungs: Vec<usize>,
    /// How long each rung runs (ladder).
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    rung_duration: Duration,
    /// Wait a second between the instances waiting and the burst of signals (burst).
    #[arg(long)]
    delayed: bool,
    /// How long the soak runs.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    duration: Duration,
}

async fn wait_for_go(ctx: OrchestrationContext, _: ()) -> Result<u64, OrchestrationError> {
    ctx.signal::<u64>("go").await
}

/// One signal round trip: start an instance, signal it (buffered if it is not waiting yet),
/// await its completion.
async fn round_trip(client: &Client) -> Outcome {
    let handle = match client.start("bench_wait", ()).await {
        Ok(h) => h,
        Err(_) => return Outcome::Failed,
    };
    if client.signal(handle.id(), "go", 7u64).await.is_err() {
        return Outcome::Failed;
    }
    match handle.wait(Duration::from_secs(120)).await {
        Ok(o) if o.status == InstanceStatus::Completed => Outcome::Ok,
        Err(ratchet::Error::Timeout(_)) => Outcome::TimedOut,
        _ => Outcome::Failed,
    }
}

pub(crate) async fn run(args: SignalArgs, database_url: Option<&str>) -> anyhow::Result<Report> {
    let mut env = BenchEnv::open(&args.common, database_url).await?;
    let store = env.store().await?;
    let widest = args
        .rungs
        .iter()
        .copied()
        .chain([args.concurrency, args.instances.unwrap_or(0)])
        .max()
        .unwrap_or(16)
        .max(16);
    if args.rungs.contains(&0) {
        bail!("--rungs must be positive");
    }
    let config = orchestration_config(widest);
    let ratchet = Ratchet::builder()
        .store(store.clone())
        .config(config)
        .orchestration("bench_wait", wait_for_go)
        .start()
        .await?;
    let client = ratchet.client().clone();
    // A few round trips first, so statements are prepared before anything is measured.
    closed_loop(4, Instant::now() + Duration::from_millis(300), None, {
        let client = client.clone();
        move || {
            let client = client.clone();
            async move { round_trip(&client).await }
        }
    })
    .await;
    env.begin_stats().await?;
    let before = store.stats();
    let mut report = match args.mode {
        Mode::Serial => serial(&client, &args).await?,
        Mode::Parallel => parallel(&client, &args).await,
        Mode::Ladder => ladder(&client, &args).await,
        Mode::Burst => burst(&client, &args).await?,
        Mode::Soak => soak(&client, &args).await,
    };
    let after = store.stats();
    report.correctness.stuck = stuck(&client).await?;
    report.correctness.stale_refused = after.stale_refused - before.stale_refused;
    ratchet.shutdown().await;
    drop((ratchet, client));
    drop(store);

    let units = report.units.max(1) as f64;
    let polls = report.figures.remove("status polls").unwrap_or(0.0);
    report.round_trips_per_unit = ((after.round_trips - before.round_trips) as f64 - polls) / units;
    report.commits_per_unit = (after.commits - before.commits) as f64 / units;
    report.scenario = "signals".into();
    report.unit = "signal round trip".into();
    report.mode = Some(format!("{:?}", args.mode).to_lowercase());
    report.param("mode", report.mode.clone());
    report.param("concurrency", args.concurrency);
    report.param("signallers", args.signallers);
    report.param("instances", args.instances);
    report.param("rungs", &args.rungs);
    report.param("rung_duration_s", args.rung_duration.as_secs_f64());
    report.param("delayed", args.delayed);
    report.param("duration_s", args.duration.as_secs_f64());
    env.finish(&mut report).await?;
    super::finish(&mut report, &args.common)?;
    Ok(report)
}

async fn stuck(client: &Client) -> anyhow::Result<u64> {
    let active = client
        .list(InstanceFilter {
            statuses: vec![InstanceStatus::Pending, InstanceStatus::Running],
            limit: Some(100_000),
            ..InstanceFilter::default()
        })
        .await?;
    Ok(active.len() as u64)
}

/// Waits until the instance's first turn committed (it is waiting), polling its status.
/// Returns how many reads it took.
async fn until_waiting(client: &Client, id: &str) -> anyhow::Result<u64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut polls = 0;
    loop {
        polls += 1;
        if client.status(id).await?.history_len > 0 {
            return Ok(polls);
        }
        if Instant::now() > deadline {
            bail!("instance {id} never started");
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

async fn serial(client: &Client, args: &SignalArgs) -> anyhow::Result<Report> {
    let n = args.instances.unwrap_or(16);
    let (mut start, mut publish, mut complete, mut total) = (
        Latencies::new(),
        Latencies::new(),
        Latencies::new(),
        Latencies::new(),
    );
    let mut report = Report::default();
    let mut polls = 0;
    let began = Instant::now();
    for _ in 0..n {
        let t0 = Instant::now();
        let handle = client.start("bench_wait", ()).await?;
        polls += until_waiting(client, handle.id()).await?;
        let t1 = Instant::now();
        client.signal(handle.id(), "go", 7u64).await?;
        let t2 = Instant::now();
        match handle.wait(Duration::from_secs(60)).await {
            Ok(o) if o.status == InstanceStatus::Completed => {}
            Ok(_) => report.correctness.failed += 1,
            Err(_) => report.correctness.timed_out += 1,
        }
        let t3 = Instant::now();
        start.record(t1 - t0);
        publish.record(t2 - t1);
        complete.record(t3 - t1);
        total.record(t3 - t0);
    }
    report.seconds = began.elapsed().as_secs_f64();
    report.units = n as u64;
    report.throughput_per_s = n as f64 / report.seconds;
    report.latency = complete.summary();
    report
        .latencies
        .insert("start (to waiting)".into(), start.summary());
    report
        .latencies
        .insert("signal publish".into(), publish.summary());
    report
        .latencies
        .insert("signal to completion".into(), complete.summary());
    report
        .latencies
        .insert("start to completion".into(), total.summary());
    report.figures.insert("status polls".into(), polls as f64);
    Ok(report)
}

async fn parallel(client: &Client, args: &SignalArgs) -> Report {
    let n = args.instances.unwrap_or(96);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let slots = Arc::new(tokio::sync::Semaphore::new(args.concurrency.max(1)));
    let merged = Arc::new(Mutex::new((Latencies::new(), Correctness::default())));
    let began = Instant::now();
    let signallers: Vec<_> = (0..args.signallers.max(1))
        .map(|_| {
            let (client, rx) = (client.clone(), rx.clone());
            tokio::spawn(async move {
                loop {
                    let next = rx.lock().await.recv().await;
                    let Some(id) = next else { break };
                    let _ = client.signal(&id, "go", 7u64).await;
                }
            })
        })
        .collect();
    let runs: Vec<_> = (0..n)
        .map(|_| {
            let (client, tx, slots, merged) =
                (client.clone(), tx.clone(), slots.clone(), merged.clone());
            tokio::spawn(async move {
                let Ok(_slot) = slots.acquire_owned().await else {
                    return;
                };
                let t = Instant::now();
                let outcome = match client.start("bench_wait", ()).await {
                    Ok(handle) => {
                        let _ = tx.send(handle.id().to_string());
                        handle.wait(Duration::from_secs(120)).await
                    }
                    Err(e) => Err(e),
                };
                let mut m = merged.lock().unwrap_or_else(|p| p.into_inner());
                match outcome {
                    Ok(o) if o.status == InstanceStatus::Completed => m.0.record(t.elapsed()),
                    Err(ratchet::Error::Timeout(_)) => m.1.timed_out += 1,
                    _ => m.1.failed += 1,
                }
            })
        })
        .collect();
    drop(tx);
    for r in runs {
        let _ = r.await;
    }
    for s in signallers {
        let _ = s.await;
    }
    let seconds = began.elapsed().as_secs_f64();
    let m = merged.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Report {
        units: m.0.count(),
        seconds,
        throughput_per_s: m.0.count() as f64 / seconds,
        latency: m.0.summary(),
        correctness: m.1,
        ..Report::default()
    }
}

async fn ladder(client: &Client, args: &SignalArgs) -> Report {
    let mut report = Report::default();
    let mut all = Latencies::new();
    for &rung in &args.rungs {
        let progress = Progress::timed(
            args.common.quiet,
            &format!("rung {rung}"),
            args.rung_duration,
        );
        let client = client.clone();
        let result = closed_loop(
            rung,
            Instant::now() + args.rung_duration,
            Some(progress.counter()),
            move || {
                let client = client.clone();
                async move { round_trip(&client).await }
            },
        )
        .await;
        progress.finish();
        report.steps.push(Step {
            at: rung as f64,
            throughput_per_s: result.ok as f64 / result.seconds,
            latency: result.latencies.summary(),
            memory_bytes: resident_bytes(),
        });
        all.merge(&result.latencies);
        report.units += result.ok;
        report.seconds += result.seconds;
        report.correctness.failed += result.correctness.failed;
        report.correctness.timed_out += result.correctness.timed_out;
    }
    let best = report
        .steps
        .iter()
        .map(|s| s.throughput_per_s)
        .fold(0.0, f64::max);
    report.throughput_per_s = best;
    report
        .figures
        .insert("best rung round trips/s".into(), best);
    report.latency = all.summary();
    report
}

async fn burst(client: &Client, args: &SignalArgs) -> anyhow::Result<Report> {
    let n = args.instances.unwrap_or(120);
    let mut handles = Vec::with_capacity(n);
    for _ in 0..n {
        handles.push(client.start("bench_wait", ()).await?);
    }
    // All waiting for their signal before it comes.
    let mut polls = 0;
    for h in &handles {
        polls += until_waiting(client, h.id()).await?;
    }
    if args.delayed {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let began = Instant::now();
    let ids: Vec<String> = handles.iter().map(|h| h.id().to_string()).collect();
    let sends = ids.iter().map(|id| client.signal(id, "go", 7u64));
    let sent = futures::future::join_all(sends).await;
    let mut report = Report::default();
    report.correctness.failed += sent.iter().filter(|r| r.is_err()).count() as u64;
    let waits = handles.into_iter().map(|h| async move {
        let r = h.wait(Duration::from_secs(120)).await;
        (r, began.elapsed())
    });
    let mut latencies = Latencies::new();
    for (outcome, at) in futures::future::join_all(waits).await {
        match outcome {
            Ok(o) if o.status == InstanceStatus::Completed => latencies.record(at),
            Err(ratchet::Error::Timeout(_)) => report.correctness.timed_out += 1,
            _ => report.correctness.failed += 1,
        }
    }
    report.seconds = began.elapsed().as_secs_f64();
    report.units = latencies.count();
    report.throughput_per_s = report.units as f64 / report.seconds;
    report.latency = latencies.summary();
    report.figures.insert("status polls".into(), polls as f64);
    Ok(report)
}

async fn soak(client: &Client, args: &SignalArgs) -> Report {
    let mut report = Report::default();
    let mut all = Latencies::new();
    let progress = Progress::timed(args.common.quiet, "soak", args.duration);
    let began = Instant::now();
    let end = began + args.duration;
    let mut second = 0.0;
    // One closed loop per second of the soak, so each second's latency stands alone.
    while Instant::now() < end {
        let client = client.clone();
        let until = (Instant::now() + Duration::from_secs(1)).min(end);
        let result = closed_loop(
            args.concurrency,
            until,
            Some(progress.counter()),
            move || {
                let client = client.clone();
                async move { round_trip(&client).await }
            },
        )
        .await;
        second += 1.0;
        report.steps.push(Step {
            at: second,
            throughput_per_s: result.ok as f64 / result.seconds.max(f64::EPSILON),
            latency: result.latencies.summary(),
            memory_bytes: resident_bytes(),
        });
        all.merge(&result.latencies);
        report.units += result.ok;
        report.correctness.failed += result.correctness.failed;
        report.correctness.timed_out += result.correctness.timed_out;
    }
    progress.finish();
    report.seconds = began.elapsed().as_secs_f64();
    report.throughput_per_s = report.units as f64 / report.seconds;
    report.latency = all.summary();
    if let (Some(first), Some(last)) = (report.steps.first(), report.steps.last()) {
        if first.latency.p50_ms > 0.0 {
            report.figures.insert(
                "p50 drift (last/first)".into(),
                last.latency.p50_ms / first.latency.p50_ms,
            );
        }
        report.figures.insert(
            "memory growth (MiB)".into(),
            (last.memory_bytes as f64 - first.memory_bytes as f64) / 1048576.0,
        );
    }
    report
}
