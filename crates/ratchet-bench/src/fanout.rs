//! `ratchet bench fanout`: a closed loop of orchestrations that each fan out to N activities
//! and join them, started and awaited by a client; the shape of the published 18 orch/s.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use ratchet::{
    ActivityContext, ActivityError, Client, InstanceFilter, InstanceStatus, OrchestrationContext,
    OrchestrationError, Ratchet, RuntimeConfig, Store, StoreStats,
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
    /// Instead of the closed loop: start this many orchestrations while no worker runs, then
    /// time the worker draining them (still at most --in-flight at once).
    #[arg(long)]
    backlog: Option<u64>,
    /// The orchestration as Rust code, or as a declarative workflow (the Serverless Workflow
    /// DSL in YAML: a `fork` of the activities, then a jq `add`) run by the interpreter, or
    /// as a declarative workflow whose branches are `call: http` to a local server that
    /// answers after --activity-ms.
    #[arg(long, value_enum, default_value = "rust")]
    workflow: Written,
    /// Run each turn only after the results it reads are committed (no fed turns), to
    /// compare.
    #[arg(long)]
    no_fed_turns: bool,
    /// With `--workflow yaml|http`: alternate it with the Rust fan-out of the same shape, in
    /// one process on one store, --rounds times each for --duration (every other round
    /// starting with the declarative one), and report its throughput as a share of the Rust
    /// one's, with each round's (what the machine does meanwhile weighs on both alike).
    #[arg(long)]
    against_rust: bool,
    /// Rounds of each shape with --against-rust.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
}

/// How the fan-out orchestration is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Written {
    /// `async fn` with `join_all`.
    Rust,
    /// YAML, compiled by `ratchet-workflow`.
    Yaml,
    /// YAML whose branches call a local HTTP server (`call: http`).
    Http,
}

/// The declarative fan-out: `activities` branches of `bench_sleep`, their outputs summed.
fn yaml(activities: u32) -> String {
    let mut source = String::from(
        "document: {dsl: '1.0.0', namespace: bench, name: fanout, version: '1.0.0'}\n\
         do:\n  - all:\n      fork:\n        branches:\n",
    );
    for i in 0..activities {
        source.push_str(&format!(
            "          - b{i}:\n              call: bench_sleep\n              with: {{i: {i}, ms: '${{ .activity_ms }}'}}\n"
        ));
    }
    source.push_str("  - sum:\n      set: '${ add // 0 }'\n");
    source
}

/// The declarative fan-out of calls: `activities` branches of `call: http` to `base`, which
/// answers `/sleep/{i}?ms=` with `i` after `ms` milliseconds, their outputs summed.
fn http_yaml(activities: u32, base: &str) -> String {
    let mut source = String::from(
        "document: {dsl: '1.0.0', namespace: bench, name: fanout, version: '1.0.0'}\n\
         do:\n  - all:\n      fork:\n        branches:\n",
    );
    for i in 0..activities {
        source.push_str(&format!(
            "          - b{i}:\n              call: http\n              with:\n                method: get\n                endpoint: {base}/sleep/{i}?ms={{activity_ms}}\n"
        ));
    }
    source.push_str("  - sum:\n      set: '${ add // 0 }'\n");
    source
}

/// A local HTTP server for the `http` fan-out: `/sleep/{i}?ms=N` answers `i` after N
/// milliseconds. It runs on a thread and a runtime of its own, as a service apart from the
/// worker would, so that it does not take the worker's threads; hyper's HTTP/1 server alone
/// (no router), since its CPU is the machine's that the worker measured shares. Its base URL.
async fn sleep_server() -> anyhow::Result<String> {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("bench-http-service".into())
        .spawn(move || {
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(std_listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!(error = %e, "the bench's HTTP service could not listen");
                        return;
                    }
                };
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        // Out of descriptors, say: try again shortly rather than spin.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    // Answers go out at once, as a service's would (no Nagle delay).
                    let _ = tcp.set_nodelay(true);
                    let io = hyper_util::rt::TokioIo::new(tcp);
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(sleep_then_answer);
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(io, service)
                            .await;
                    });
                }
            });
        })?;
    Ok(format!("http://{addr}"))
}

/// `/sleep/{i}?ms=N`: `i` as JSON after N milliseconds (at most a minute); 404 otherwise.
async fn sleep_then_answer(
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<http_body_util::Full<bytes::Bytes>>, std::convert::Infallible> {
    let uri = request.uri();
    let i = uri
        .path()
        .strip_prefix("/sleep/")
        .and_then(|i| i.parse::<u64>().ok());
    let ms = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.strip_prefix("ms="))
        .and_then(|ms| ms.parse::<u64>().ok());
    let (Some(i), Some(ms)) = (i, ms) else {
        let mut missing = hyper::Response::new(http_body_util::Full::default());
        *missing.status_mut() = hyper::StatusCode::NOT_FOUND;
        return Ok(missing);
    };
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms.min(60_000))).await;
    }
    let mut answer =
        hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(i.to_string())));
    answer.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(answer)
}

/// The Rust fan-out's orchestration name.
const RUST_FANOUT: &str = "bench_fanout";

/// The orchestration name the closed loop starts.
fn started_name(args: &FanoutArgs) -> &'static str {
    match args.workflow {
        Written::Rust => RUST_FANOUT,
        Written::Yaml | Written::Http => "bench/fanout",
    }
}

/// What each fan-out orchestration does: its input.
#[derive(Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Shape {
    pub(crate) activities: u32,
    pub(crate) activity_ms: u64,
}

impl Shape {
    fn of(args: &FanoutArgs) -> Self {
        Self {
            activities: args.activities,
            activity_ms: args.activity_ms,
        }
    }
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

/// What `bench_sleep` takes: `(i, ms)` from Rust, or `{i, ms}` from the declarative fan-out.
#[derive(Deserialize)]
#[serde(untagged)]
enum SleepInput {
    Tuple(u64, u64),
    Named { i: u64, ms: u64 },
}

async fn sleep(_ctx: ActivityContext, input: SleepInput) -> Result<u64, ActivityError> {
    let (i, ms) = match input {
        SleepInput::Tuple(i, ms) | SleepInput::Named { i, ms } => (i, ms),
    };
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    Ok(i)
}

/// The worker: the fan-out orchestration and its activity, at most `in_flight` at once.
async fn start_worker(store: Arc<dyn Store>, args: &FanoutArgs) -> anyhow::Result<Ratchet> {
    let workflow = match args.workflow {
        Written::Rust => None,
        Written::Yaml => Some(ratchet::workflow::Workflow::compile(&yaml(
            args.activities,
        ))?),
        Written::Http => {
            let base = sleep_server().await?;
            Some(ratchet::workflow::Workflow::compile(&http_yaml(
                args.activities,
                &base,
            ))?)
        }
    };
    fan_out_worker(
        store,
        args.in_flight,
        args.activities,
        !args.no_fed_turns,
        move |b| match workflow {
            Some(w) => b.workflow(w, 1),
            None => b,
        },
    )
    .await
}

/// A runtime of `bench_fanout` (and its activity `bench_sleep`) sized for `in_flight`
/// orchestrations of `activities` each, with whatever `more` registers.
pub(crate) async fn fan_out_worker(
    store: Arc<dyn Store>,
    in_flight: usize,
    activities: u32,
    fed_turns: bool,
    more: impl FnOnce(ratchet::Builder) -> ratchet::Builder,
) -> anyhow::Result<Ratchet> {
    let room = in_flight.max(1);
    let config = RuntimeConfig {
        max_activities: (room * activities as usize * 2).max(256),
        fed_turns,
        ..orchestration_config(room)
    };
    let builder = Ratchet::builder()
        .store(store)
        .config(config)
        .orchestration(RUST_FANOUT, fan_out)
        .activity("bench_sleep", sleep);
    Ok(more(builder).start().await?)
}

/// Instances not finished yet (at most `limit` counted).
async fn unfinished(client: &Client, limit: u32) -> anyhow::Result<u64> {
    let open = client
        .list(InstanceFilter {
            statuses: vec![InstanceStatus::Pending, InstanceStatus::Running],
            limit: Some(limit),
            ..InstanceFilter::default()
        })
        .await?;
    Ok(open.len() as u64)
}

/// Ends a measured run: the store's figures at its end and the instances left unfinished,
/// then the worker stopped and the store closed before the report is written.
async fn wind_down(
    progress: Progress,
    ratchet: Ratchet,
    store: Arc<dyn Store>,
) -> anyhow::Result<(StoreStats, u64)> {
    progress.finish();
    let after = store.stats();
    let active = unfinished(ratchet.client(), 100_000).await?;
    ratchet.shutdown().await;
    Ok((after, active))
}

/// One unit of the closed loop: starts `name` with `shape`, waits for it, checks its sum.
fn unit_of(
    client: Client,
    name: &'static str,
    shape: Shape,
) -> impl Fn() -> BoxFuture<'static, Outcome> + Clone + Send + Sync + 'static {
    let expected: u64 = (0..u64::from(shape.activities)).sum();
    move || {
        let client = client.clone();
        async move {
            let handle = match client.start(name, shape).await {
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
        .boxed()
    }
}

pub(crate) async fn run(args: FanoutArgs, database_url: Option<&str>) -> anyhow::Result<Report> {
    if args.against_rust && args.workflow == Written::Rust {
        anyhow::bail!("--against-rust compares --workflow yaml or http with the Rust fan-out");
    }
    if args.against_rust && args.backlog.is_some() {
        anyhow::bail!("--against-rust runs the closed loop, not --backlog");
    }
    let mut env = BenchEnv::open(&args.common, database_url).await?;
    let store = env.store().await?;
    if let Some(count) = args.backlog {
        return drain_backlog(env, store, &args, count).await;
    }
    let room = args.in_flight.max(1);
    let ratchet = start_worker(store.clone(), &args).await?;
    if args.against_rust {
        return against_rust(env, store, ratchet, &args).await;
    }
    let unit = unit_of(
        ratchet.client().clone(),
        started_name(&args),
        Shape::of(&args),
    );
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
    let (after, active) = wind_down(progress, ratchet, store).await?;

    let mut report =
        orchestration_report(&args, result.ok, result.seconds, result.ok, &before, &after);
    loop_figures(
        &mut report,
        &args,
        &result.latencies,
        &result.correctness,
        active,
    );
    env.finish(&mut report).await?;
    super::finish(&mut report, &args.common)?;
    Ok(report)
}

/// `bench workflows calls`: the fan-out of 5 `call: http` (10 ms answers, 20 in flight)
/// against the Rust fan-out, 6 rounds of 10 s each (with 3, runs within an hour spread over
/// 11 points of share on PostgreSQL; with 6, over 5).
pub(crate) async fn calls_against_rust(
    common: Common,
    database_url: Option<&str>,
) -> anyhow::Result<Report> {
    let args = FanoutArgs {
        common,
        in_flight: 20,
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(1),
        activities: 5,
        activity_ms: 10,
        backlog: None,
        workflow: Written::Http,
        no_fed_turns: false,
        against_rust: true,
        rounds: 6,
    };
    run(args, database_url).await
}

/// `--against-rust`: the declarative fan-out and the Rust one alternate on one worker, round
/// by round; the report is the declarative one's, with the Rust one's throughput and the
/// share beside it.
async fn against_rust(
    mut env: BenchEnv,
    store: Arc<dyn Store>,
    ratchet: Ratchet,
    args: &FanoutArgs,
) -> anyhow::Result<Report> {
    let room = args.in_flight.max(1);
    let shape = Shape::of(args);
    let client = ratchet.client().clone();
    let shapes = [
        unit_of(client.clone(), RUST_FANOUT, shape),
        unit_of(client, started_name(args), shape),
    ];
    if !args.warmup.is_zero() {
        for unit in &shapes {
            closed_loop(room, Instant::now() + args.warmup, None, unit.clone()).await;
        }
    }
    env.begin_stats().await?;
    let before = store.stats();
    let span = args.duration * 2 * args.rounds;
    let progress = Progress::timed(args.common.quiet, "fanout", span);
    // Per shape: orchestrations, seconds, latencies, what went wrong.
    let mut done = [(0_u64, 0.0_f64); 2];
    let mut latencies = [super::Latencies::new(), super::Latencies::new()];
    let mut correctness = super::Correctness::default();
    let mut shares = Vec::new();
    let mut round_rates = Vec::new();
    // Per shape: this process's CPU (the worker, the client and the local service; on
    // SQLite the store's work too), or `None` once a reading failed.
    let mut cpu = [Some(Duration::ZERO); 2];
    for round in 0..args.rounds {
        let mut rates = [0.0_f64; 2];
        // Every other round starts with the declarative shape, so that neither shape always
        // runs on the store the other has just grown, or in the cleanup it leaves.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let unit = &shapes[k];
            let cpu_before = super::measure::process_cpu();
            let result = closed_loop(
                room,
                Instant::now() + args.duration,
                Some(progress.counter()),
                unit.clone(),
            )
            .await;
            cpu[k] = match (cpu[k], cpu_before, super::measure::process_cpu()) {
                (Some(sum), Some(before), Some(after)) => Some(sum + after.saturating_sub(before)),
                _ => None,
            };
            done[k].0 += result.ok;
            done[k].1 += result.seconds;
            rates[k] = result.ok as f64 / result.seconds.max(f64::EPSILON);
            latencies[k].merge(&result.latencies);
            correctness.failed += result.correctness.failed;
            correctness.timed_out += result.correctness.timed_out;
        }
        shares.push(rates[1] / rates[0].max(f64::EPSILON));
        round_rates.push([rates[0].round(), rates[1].round()]);
    }
    let (after, active) = wind_down(progress, ratchet, store).await?;

    // The store's figures (round trips, commits, WAL) are per orchestration of both shapes:
    // they ran on one store.
    let all = done[0].0 + done[1].0;
    let (units, seconds) = done[1];
    let mut report = orchestration_report(args, units, seconds, all, &before, &after);
    report.scenario = format!("{}-vs-rust", report.scenario);
    report.param("store figures per orchestration of", "both shapes");
    loop_figures(&mut report, args, &latencies[1], &correctness, active);
    let rust = done[0].0 as f64 / done[0].1.max(f64::EPSILON);
    report.figures.insert("rust orchestrations/s".into(), rust);
    report
        .figures
        .insert("rust p50 ms".into(), latencies[0].summary().p50_ms);
    report.figures.insert(
        "share of rust (whole run)".into(),
        report.throughput_per_s / rust.max(f64::EPSILON),
    );
    report.figures.insert(
        "share of rust (lowest round)".into(),
        shares.iter().copied().fold(f64::INFINITY, f64::min),
    );
    // Where a share below one comes from: what each shape's orchestrations cost this process
    // (on PostgreSQL the database's CPU is apart from it).
    for (k, shape) in [(0, "rust"), (1, "declarative")] {
        if let (Some(spent), ok @ 1..) = (cpu[k], done[k].0) {
            report.figures.insert(
                format!("bench process cpu ms per orchestration ({shape})"),
                spent.as_secs_f64() * 1000.0 / ok as f64,
            );
        }
    }
    report.param("rounds", args.rounds);
    report.param("orchestrations/s by round (rust, declarative)", round_rates);
    env.describe(&mut report);
    report.postgres = env.end_stats(all).await?;
    env.close().await?;
    super::finish(&mut report, &args.common)?;
    Ok(report)
}

/// What every mode reports: `units` orchestrations done in `seconds`, and the store's work
/// between `before` and `after`, per orchestration of the `store_units` that ran on it.
fn orchestration_report(
    args: &FanoutArgs,
    units: u64,
    seconds: f64,
    store_units: u64,
    before: &StoreStats,
    after: &StoreStats,
) -> Report {
    let per = |n: u64| {
        if store_units == 0 {
            0.0
        } else {
            n as f64 / store_units as f64
        }
    };
    let mut report = Report {
        scenario: match args.workflow {
            Written::Rust => "fanout".into(),
            Written::Yaml => "fanout-yaml".into(),
            Written::Http => "fanout-http".into(),
        },
        unit: "orchestration".into(),
        units,
        seconds,
        throughput_per_s: units as f64 / seconds.max(f64::EPSILON),
        round_trips_per_unit: per(after.round_trips - before.round_trips),
        commits_per_unit: per(after.commits - before.commits),
        ..Report::default()
    };
    report.correctness.stale_refused = after.stale_refused - before.stale_refused;
    report.figures.insert(
        "activities/s".into(),
        report.throughput_per_s * f64::from(args.activities),
    );
    report.param("in_flight", args.in_flight);
    report.param("activities", args.activities);
    report.param("activity_ms", args.activity_ms);
    report
}

/// What a closed loop adds to its report: its latencies, what went wrong (`stuck`: not
/// finished once it ended), and how long it ran and warmed up.
fn loop_figures(
    report: &mut Report,
    args: &FanoutArgs,
    latencies: &super::Latencies,
    correctness: &super::Correctness,
    stuck: u64,
) {
    report.latency = latencies.summary();
    report.correctness.failed = correctness.failed;
    report.correctness.timed_out = correctness.timed_out;
    report.correctness.stuck = stuck;
    report.param("duration_s", args.duration.as_secs_f64());
    report.param("warmup_s", args.warmup.as_secs_f64());
}

/// `--backlog`: starts `count` orchestrations with no worker running (many starts in flight,
/// so the store batches them), then times one worker draining them all.
async fn drain_backlog(
    mut env: BenchEnv,
    store: Arc<dyn Store>,
    args: &FanoutArgs,
    count: u64,
) -> anyhow::Result<Report> {
    let shape = Shape::of(args);
    let name = started_name(args);
    let starter = Client::new(store.clone());
    let span = |per_second: f64| Duration::from_secs_f64((count as f64 / per_second).max(1.0));
    let progress = Progress::timed(args.common.quiet, "start", span(5_000.0));
    let started_at = Instant::now();
    let mut starts = futures::stream::iter(0..count)
        .map(|_| {
            let starter = starter.clone();
            async move { starter.start(name, shape).await.map(|_| ()) }
        })
        .buffer_unordered(512);
    let mut start_failures = 0_u64;
    while let Some(started) = starts.next().await {
        if started.is_err() {
            start_failures += 1;
        }
        progress.counter().fetch_add(1, Ordering::Relaxed);
    }
    progress.finish();
    let start_seconds = started_at.elapsed().as_secs_f64();

    env.begin_stats().await?;
    let before = store.stats();
    let progress = Progress::timed(args.common.quiet, "drain", span(1_000.0));
    let drain_started = Instant::now();
    let ratchet = start_worker(store.clone(), args).await?;
    // Generous: a drain slower than 20 per second is a failure to report, not to wait out.
    let deadline = drain_started + Duration::from_secs(60 + count / 20);
    let mut left = count;
    while left > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Whether any is left is cheap to ask (one index entry); how many is not.
        left = unfinished(&starter, 1).await?;
    }
    let seconds = drain_started.elapsed().as_secs_f64();
    progress.finish();
    let after = store.stats();
    ratchet.shutdown().await;
    let stuck = unfinished(&starter, u32::try_from(count).unwrap_or(u32::MAX)).await?;
    let failed = starter
        .list(InstanceFilter {
            statuses: vec![InstanceStatus::Failed],
            limit: Some(u32::try_from(count).unwrap_or(u32::MAX)),
            ..InstanceFilter::default()
        })
        .await?
        .len() as u64;
    drop(ratchet);
    drop(store);

    let drained = count - stuck;
    let mut report = orchestration_report(args, drained, seconds, drained, &before, &after);
    report.correctness.failed = failed + start_failures;
    report.correctness.stuck = stuck;
    report.figures.insert("start seconds".into(), start_seconds);
    report.figures.insert(
        "started/s".into(),
        count as f64 / start_seconds.max(f64::EPSILON),
    );
    report.param("backlog", count);
    env.finish(&mut report).await?;
    super::finish(&mut report, &args.common)?;
    Ok(report)
}
