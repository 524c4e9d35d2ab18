//! `ratchet bench tasks`: standalone tasks. `drain` bulk-enqueues a backlog and times its
//! burn-down by the workers (River's `bench` shape); `steady` enqueues at a fixed rate while
//! the workers run and measures enqueue-to-start and enqueue-to-complete (the published 27.8
//! tasks/s, p99 68.5 ms shape).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::bail;
use ratchet::{
    Client, QueueConfig, Ratchet, RuntimeConfig, Store, StoreStats, TaskContext, TaskError,
    TaskFilter, TaskOptions, TaskRequest, TaskState, Timestamp,
};
use tokio::time::Instant;

use super::{parse_duration, BenchEnv, Common, Latencies, Progress, Report};

const QUEUE: &str = "bench";

/// Which task load.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Bulk-enqueue --count tasks, then time the workers draining them.
    Drain,
    /// Enqueue --rate tasks per second while the workers run.
    Steady,
    /// The database's weather (postgres): drains of --count back to back for --before, then
    /// for --snapshot with a snapshot held elsewhere, then for --after while vacuum catches
    /// up, with a forced VACUUM (truncating) and an ANALYZE of the empty table; the rate of
    /// every 5-second window, and whether each stayed at least a third of the rate before.
    Weather,
}

#[derive(clap::Args, Debug)]
pub(crate) struct TaskArgs {
    /// drain or steady.
    #[arg(value_enum)]
    mode: Mode,
    #[command(flatten)]
    common: Common,
    /// Tasks to drain.
    #[arg(long, default_value_t = 100_000)]
    count: u64,
    /// Tasks per enqueue call when filling the backlog.
    #[arg(long, default_value_t = 5_000)]
    batch: usize,
    /// Worker runtimes in this process, each with connections of its own.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Tasks each worker runs at once.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Tasks enqueued per second (steady).
    #[arg(long, default_value_t = 1000)]
    rate: u64,
    /// How long to enqueue and measure (steady).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// How long to enqueue at the same rate first, without measuring: connections opened,
    /// statements prepared, caches warm (steady). Its latencies are reported apart.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,
    /// Drain --count tasks this many times back to back, on the same tables and workers
    /// (drain). Each later round is enqueued to become ready at once when it is all in.
    #[arg(long, default_value_t = 1)]
    rounds: u64,
    /// Hold a snapshot for the whole drain, as a long transaction elsewhere would: nothing
    /// deleted meanwhile can be vacuumed (postgres only).
    #[arg(long)]
    hold_snapshot: bool,
    /// How long to drain before the snapshot (weather).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    before: Duration,
    /// How long the snapshot is held while the drains go on (weather).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    snapshot: Duration,
    /// How long to drain after the snapshot ends (weather).
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    after: Duration,
}

/// Runs the workers; the handler records when each task started.
struct Workers {
    ratchets: Vec<Ratchet>,
    stores: Vec<Arc<dyn Store>>,
    ran: Arc<AtomicU64>,
    to_start: Arc<Mutex<Latencies>>,
}

impl Workers {
    async fn start(env: &BenchEnv, args: &TaskArgs) -> anyhow::Result<Self> {
        let ran = Arc::new(AtomicU64::new(0));
        let to_start = Arc::new(Mutex::new(Latencies::new()));
        let mut ratchets = Vec::new();
        let mut stores = Vec::new();
        for _ in 0..args.workers.max(1) {
            let store = env.store().await?;
            let (ran, to_start) = (ran.clone(), to_start.clone());
            let config = RuntimeConfig {
                lease: Duration::from_secs(30),
                heartbeat: Duration::from_secs(10),
                commit_batch: 2048,
                task_retention: None,
                ..RuntimeConfig::default()
            };
            let ratchet = Ratchet::builder()
                .store(store.clone())
                .config(config)
                .queue_with(
                    QUEUE,
                    QueueConfig {
                        concurrency: args.concurrency.max(1),
                        prefetch: args.concurrency.max(1),
                    },
                )
                .task("bench_noop", move |_ctx: TaskContext, enqueued_us: i64| {
                    let (ran, to_start) = (ran.clone(), to_start.clone());
                    async move {
                        if enqueued_us > 0 {
                            let waited = (now_us() - enqueued_us).max(0) as u64;
                            to_start
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .record(Duration::from_micros(waited));
                        }
                        ran.fetch_add(1, Ordering::Relaxed);
                        Ok::<_, TaskError>(())
                    }
                })
                .start()
                .await?;
            ratchets.push(ratchet);
            stores.push(store);
        }
        Ok(Self {
            ratchets,
            stores,
            ran,
            to_start,
        })
    }

    fn stats(&self) -> StoreStats {
        self.stores.iter().fold(StoreStats::default(), |a, s| {
            let b = s.stats();
            StoreStats {
                round_trips: a.round_trips + b.round_trips,
                commits: a.commits + b.commits,
                stale_refused: a.stale_refused + b.stale_refused,
            }
        })
    }

    async fn stop(self) {
        for r in &self.ratchets {
            r.shutdown().await;
        }
    }
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

fn bench_options() -> TaskOptions {
    TaskOptions::default().queue(QUEUE)
}

pub(crate) async fn run(args: TaskArgs, database_url: Option<&str>) -> anyhow::Result<Report> {
    if args.batch == 0 || args.rate == 0 {
        bail!("--batch and --rate must be positive");
    }
    let mut env = BenchEnv::open(&args.common, database_url).await?;
    let client_store = env.store().await?;
    // The enqueueing side, like a web server's: a client of its own, checked by a registry
    // that knows the task.
    let client = Ratchet::builder()
        .store(client_store.clone())
        .task("bench_noop", |_ctx: TaskContext, _: i64| async move {
            Ok::<_, TaskError>(())
        })
        .client()
        .await?;
    // Prepare the statements the run uses before measuring.
    client
        .enqueue_with("bench_noop", 0i64, bench_options().queue("warmup"))
        .await?;
    let mut report = match args.mode {
        Mode::Drain => drain(&mut env, &client, &args).await?,
        Mode::Steady => steady(&mut env, &client, &args).await?,
        Mode::Weather => weather(&mut env, &client, &args).await?,
    };
    drop(client);
    drop(client_store);
    report.scenario = "tasks".into();
    report.unit = "task".into();
    report.mode = Some(format!("{:?}", args.mode).to_lowercase());
    report.param("mode", report.mode.clone());
    report.param("count", args.count);
    report.param("batch", args.batch);
    report.param("workers", args.workers);
    report.param("concurrency", args.concurrency);
    report.param("rate", args.rate);
    report.param("duration_s", args.duration.as_secs_f64());
    report.param("warmup_s", args.warmup.as_secs_f64());
    report.param("rounds", args.rounds);
    report.param("hold_snapshot", args.hold_snapshot);
    env.finish(&mut report).await?;
    super::finish(&mut report, &args.common)?;
    Ok(report)
}

/// Counts of the bench queue by state.
async fn counts(client: &Client) -> anyhow::Result<(u64, u64, u64)> {
    let stats = client.queues().await?;
    let q = stats.iter().find(|q| q.queue == QUEUE);
    Ok(q.map_or((0, 0, 0), |q| {
        (
            q.count(TaskState::Completed),
            q.count(TaskState::Dead),
            q.depth() + q.count(TaskState::Running),
        )
    }))
}

/// Enqueues `count` tasks in calls of `batch`, ready at `at` (now when `None`).
async fn fill(client: &Client, args: &TaskArgs, at: Option<Timestamp>) -> anyhow::Result<()> {
    let mut left = args.count;
    while left > 0 {
        let n = left.min(args.batch as u64);
        let options = match at {
            Some(at) => bench_options().run_at(at),
            None => bench_options(),
        };
        let batch = (0..n)
            .map(|_| Ok(TaskRequest::new("bench_noop", 0i64)?.options(options.clone())))
            .collect::<ratchet::Result<Vec<_>>>()?;
        client.enqueue_many(batch).await?;
        left -= n;
    }
    Ok(())
}

async fn drain(env: &mut BenchEnv, client: &Client, args: &TaskArgs) -> anyhow::Result<Report> {
    if args.rounds == 0 {
        bail!("--rounds must be positive");
    }
    let _snapshot = match args.hold_snapshot {
        true => Some(env.hold_snapshot().await?),
        false => None,
    };
    let total = args.count * args.rounds;
    let enqueue_started = Instant::now();
    fill(client, args, None).await?;
    let mut enqueue_seconds = enqueue_started.elapsed().as_secs_f64();

    env.begin_stats().await?;
    let progress = Progress::timed(
        args.common.quiet,
        "drain",
        Duration::from_secs_f64((total as f64 / 20_000.0).max(1.0)),
    );
    let workers = Workers::start(env, args).await?;
    let before = workers.stats();
    let deadline = Instant::now() + Duration::from_secs(60 + total / 500);
    let mut timed_out = false;
    let mut seconds = 0.0;
    let mut round_rates = Vec::new();
    for round in 0..args.rounds {
        let mut started = Instant::now();
        if round > 0 {
            // The round becomes ready at once, after it is all enqueued: time the drain alone.
            let lead = Duration::from_secs_f64(1.5 * enqueue_seconds / round as f64 + 0.5);
            let at = Timestamp::now().plus(lead);
            let filling = Instant::now();
            fill(client, args, Some(at)).await?;
            enqueue_seconds += filling.elapsed().as_secs_f64();
            started = filling + lead;
            tokio::time::sleep_until(started).await;
        }
        let target = args.count * (round + 1);
        while workers.ran.load(Ordering::Relaxed) < target {
            progress
                .counter()
                .store(workers.ran.load(Ordering::Relaxed), Ordering::Relaxed);
            if Instant::now() > deadline {
                timed_out = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let took = started.elapsed().as_secs_f64();
        seconds += took;
        round_rates.push(args.count as f64 / took.max(f64::EPSILON));
        if timed_out {
            break;
        }
    }
    progress.finish();
    // Let the last completions commit.
    let settle = Instant::now() + Duration::from_secs(30);
    let (mut completed, mut dead, mut waiting) = counts(client).await?;
    while completed + dead < total && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(50)).await;
        (completed, dead, waiting) = counts(client).await?;
    }
    let after = workers.stats();
    let ran = workers.ran.load(Ordering::Relaxed);
    workers.stop().await;

    let units = total.max(1) as f64;
    let mut report = Report {
        units: ran,
        seconds,
        throughput_per_s: ran as f64 / seconds.max(f64::EPSILON),
        round_trips_per_unit: (after.round_trips - before.round_trips) as f64 / units,
        commits_per_unit: (after.commits - before.commits) as f64 / units,
        ..Report::default()
    };
    report
        .figures
        .insert("enqueued/s".into(), total as f64 / enqueue_seconds);
    report
        .figures
        .insert("enqueue seconds".into(), enqueue_seconds);
    if args.rounds > 1 {
        for (i, rate) in round_rates.iter().enumerate() {
            report
                .figures
                .insert(format!("round {:02} tasks/s", i + 1), *rate);
        }
    }
    report.correctness.failed = dead;
    report.correctness.timed_out = u64::from(timed_out);
    report.correctness.stuck = waiting;
    report.correctness.stale_refused = after.stale_refused - before.stale_refused;
    if ran > total {
        // A task ran twice without a failure in between.
        report.correctness.failed += ran - total;
    }
    Ok(report)
}

/// The length of the windows `weather` measures the drain rate over.
const WINDOW: Duration = Duration::from_secs(5);

/// The phases of a `weather` run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Before,
    Snapshot,
    After,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::Snapshot => "snapshot",
            Phase::After => "after",
        }
    }
}

/// Drains back to back through a held snapshot and the vacuum after it, and reports the
/// drain rate of every 5-second window (see [`Mode::Weather`]).
async fn weather(env: &mut BenchEnv, client: &Client, args: &TaskArgs) -> anyhow::Result<Report> {
    let Some((direct, schema)) = env.postgres_direct() else {
        bail!("bench tasks weather needs --backend postgres");
    };
    if args.before < WINDOW {
        bail!("--before must be at least {WINDOW:?}: the windows after are judged against it");
    }
    let (direct, schema) = (direct.to_string(), schema.to_string());
    let admin = super::pgstats::connect(&direct).await?;
    let workers = Workers::start(env, args).await?;
    let started = Instant::now();
    let (snapshot_at, after_at) = (args.before, args.before + args.snapshot);
    let end = after_at + args.after;
    let phase_at = move |t: Duration| {
        if t < snapshot_at {
            Phase::Before
        } else if t < after_at {
            Phase::Snapshot
        } else {
            Phase::After
        }
    };
    // The sampler: tasks run in each window, with the phase the window began in.
    let ran = workers.ran.clone();
    let sampler = tokio::spawn(async move {
        let mut windows: Vec<(Phase, f64, f64)> = Vec::new();
        let mut last = ran.load(Ordering::Relaxed);
        let mut at = Instant::now();
        let mut tick = tokio::time::interval_at(at + WINDOW, WINDOW);
        while at.duration_since(started) < end {
            tick.tick().await;
            let now = Instant::now();
            let count = ran.load(Ordering::Relaxed);
            let rate = (count - last) as f64 / now.duration_since(at).as_secs_f64();
            windows.push((
                phase_at(at.duration_since(started)),
                now.duration_since(started).as_secs_f64(),
                rate,
            ));
            (last, at) = (count, now);
        }
        windows
    });
    let mut snapshot = None;
    let mut vacuum: Option<tokio::task::JoinHandle<anyhow::Result<f64>>> = None;
    let mut vacuum_seconds = None;
    let mut analysed_empty = false;
    let mut rounds = 0u64;
    let mut timed_out = false;
    while started.elapsed() < end {
        let phase = phase_at(started.elapsed());
        if phase == Phase::Snapshot && snapshot.is_none() {
            snapshot = Some(env.hold_snapshot().await?);
        }
        if phase == Phase::After && snapshot.is_some() {
            drop(snapshot.take());
            // Vacuum catches up meanwhile, as autovacuum would, truncating the table.
            let (direct, schema) = (direct.clone(), schema.clone());
            vacuum = Some(tokio::spawn(async move {
                let session = super::pgstats::connect(&direct).await?;
                let began = Instant::now();
                session
                    .batch_execute(&format!("VACUUM (TRUNCATE true) {schema}.tasks"))
                    .await?;
                Ok(began.elapsed().as_secs_f64())
            }));
        }
        if vacuum.as_ref().is_some_and(|v| v.is_finished()) {
            if let Some(handle) = vacuum.take() {
                vacuum_seconds = Some(handle.await??);
            }
        }
        // The queue is empty between rounds: once vacuum is done, the statistics are taken
        // now, as an autovacuum's ANALYZE at such a moment would take them.
        if vacuum_seconds.is_some() && !analysed_empty {
            admin
                .batch_execute(&format!("ANALYZE {schema}.tasks"))
                .await?;
            analysed_empty = true;
        }
        fill(client, args, None).await?;
        rounds += 1;
        if !wait_ran(&workers, args.count * rounds, Duration::from_secs(120)).await {
            timed_out = true;
            break;
        }
    }
    if let Some(handle) = vacuum.take() {
        vacuum_seconds = Some(handle.await??);
    }
    let windows = sampler.await?;
    let ran = workers.ran.load(Ordering::Relaxed);
    let stats = workers.stats();
    workers.stop().await;
    let mut before: Vec<f64> = windows
        .iter()
        .filter(|w| w.0 == Phase::Before)
        .map(|w| w.2)
        .collect();
    before.sort_by(f64::total_cmp);
    let before_rate = before.get(before.len() / 2).copied().unwrap_or(0.0);
    let mut report = Report {
        units: ran,
        seconds: started.elapsed().as_secs_f64(),
        throughput_per_s: ran as f64 / started.elapsed().as_secs_f64().max(f64::EPSILON),
        round_trips_per_unit: stats.round_trips as f64 / ran.max(1) as f64,
        commits_per_unit: stats.commits as f64 / ran.max(1) as f64,
        ..Report::default()
    };
    report
        .figures
        .insert("before: median window tasks/s".into(), before_rate);
    for phase in [Phase::Snapshot, Phase::After] {
        let rates: Vec<f64> = windows
            .iter()
            .filter(|w| w.0 == phase)
            .map(|w| w.2)
            .collect();
        let worst = rates.iter().copied().fold(f64::INFINITY, f64::min);
        if worst.is_finite() {
            report
                .figures
                .insert(format!("{}: worst window tasks/s", phase.name()), worst);
            report.figures.insert(
                format!("{}: worst window / before", phase.name()),
                worst / before_rate.max(f64::EPSILON),
            );
        }
    }
    if let Some(s) = vacuum_seconds {
        report.figures.insert("vacuum seconds".into(), s);
    }
    let low: Vec<String> = windows
        .iter()
        .filter(|w| w.2 < before_rate / 3.0)
        .map(|w| format!("{:.0}s {} {:.0}/s", w.1, w.0.name(), w.2))
        .collect();
    report
        .figures
        .insert("windows under a third of before".into(), low.len() as f64);
    if !args.common.quiet {
        for (phase, at, rate) in &windows {
            eprintln!("{at:>6.0}s {:<8} {rate:>9.0} tasks/s", phase.name());
        }
        match low.is_empty() {
            true => eprintln!(
                "every 5-second window kept at least a third of the rate before ({before_rate:.0}/s)"
            ),
            false => eprintln!(
                "windows under a third of the rate before ({before_rate:.0}/s): {}",
                low.join(", ")
            ),
        }
    }
    report.correctness.timed_out = u64::from(timed_out);
    report.correctness.stale_refused = stats.stale_refused;
    Ok(report)
}

/// What enqueueing at a fixed rate for a while gave.
struct Paced {
    /// Tasks asked for.
    total: u64,
    /// Calls that failed.
    failures: u64,
    /// How long each enqueue call itself took: the part of enqueue-to-start before any
    /// worker could see the task.
    calls: Latencies,
    /// From the first call to the last call's answer.
    seconds: f64,
}

/// Enqueues `--rate` tasks a second for `duration`, each its own call, as a web request
/// would make it; calls overlap when the database is slower than the rate.
async fn enqueue_paced(
    client: &Client,
    args: &TaskArgs,
    duration: Duration,
    progress: Option<(&Progress, &AtomicU64)>,
) -> Paced {
    let interval = Duration::from_secs_f64(1.0 / args.rate as f64);
    let total = (args.rate as f64 * duration.as_secs_f64()).round() as u64;
    let inflight = Arc::new(tokio::sync::Semaphore::new(512));
    let failures = Arc::new(AtomicU64::new(0));
    let calls = Arc::new(Mutex::new(Latencies::new()));
    let started = Instant::now();
    let mut sends = Vec::with_capacity(total as usize);
    for i in 0..total {
        tokio::time::sleep_until(started + interval * i as u32).await;
        let Ok(permit) = inflight.clone().acquire_owned().await else {
            break;
        };
        let (client, failures, calls) = (client.clone(), failures.clone(), calls.clone());
        sends.push(tokio::spawn(async move {
            let _permit = permit;
            let called = Instant::now();
            let request =
                TaskRequest::new("bench_noop", now_us()).map(|r| r.options(bench_options()));
            let sent = match request {
                Ok(r) => client.enqueue_many(vec![r]).await.map(|_| ()),
                Err(e) => Err(e),
            };
            if sent.is_err() {
                failures.fetch_add(1, Ordering::Relaxed);
            } else {
                calls
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .record(called.elapsed());
            }
        }));
        if let Some((progress, ran)) = progress {
            progress
                .counter()
                .store(ran.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }
    for s in sends {
        let _ = s.await;
    }
    let calls = calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Paced {
        total,
        failures: failures.load(Ordering::Relaxed),
        calls,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Waits until the workers ran `total` tasks, at most `patience`; whether they did.
async fn wait_ran(workers: &Workers, total: u64, patience: Duration) -> bool {
    let deadline = Instant::now() + patience;
    while workers.ran.load(Ordering::Relaxed) < total {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    true
}

async fn steady(env: &mut BenchEnv, client: &Client, args: &TaskArgs) -> anyhow::Result<Report> {
    let workers = Workers::start(env, args).await?;
    // The same load first, unmeasured: every pooled connection opened and its statements
    // prepared, as in a process that has been serving for a while. Its figures are reported
    // apart.
    let mut warm = None;
    if !args.warmup.is_zero() {
        let paced = enqueue_paced(client, args, args.warmup, None).await;
        wait_ran(&workers, paced.total, Duration::from_secs(30)).await;
        let to_start = std::mem::replace(
            &mut *workers.to_start.lock().unwrap_or_else(|p| p.into_inner()),
            Latencies::new(),
        );
        warm = Some((paced, to_start));
    }
    let warm_total = warm.as_ref().map_or(0, |(p, _)| p.total);
    let warm_ran = workers.ran.load(Ordering::Relaxed);
    let measured_from_us = now_us();
    env.begin_stats().await?;
    let before = workers.stats();
    let progress = Progress::timed(args.common.quiet, "steady", args.duration);
    let started = Instant::now();
    let paced = enqueue_paced(client, args, args.duration, Some((&progress, &workers.ran))).await;
    let total = paced.total;
    wait_ran(&workers, warm_ran + total, Duration::from_secs(30)).await;
    progress.finish();
    let seconds = started.elapsed().as_secs_f64();
    let after = workers.stats();
    let ran = workers.ran.load(Ordering::Relaxed) - warm_ran;
    let to_start = workers
        .to_start
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    workers.stop().await;
    // Enqueue to complete, from the tasks' records (milliseconds: the store's resolution);
    // a task's input is when it was enqueued, which tells the warm-up's apart.
    let everything = warm_total + total;
    let settle = Instant::now() + Duration::from_secs(30);
    let (mut completed, mut dead, mut waiting) = counts(client).await?;
    while completed + dead < everything && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(50)).await;
        (completed, dead, waiting) = counts(client).await?;
    }
    let done = client
        .tasks(TaskFilter {
            queue: Some(QUEUE.into()),
            states: vec![TaskState::Completed],
            limit: Some(u32::try_from(everything + 10).unwrap_or(u32::MAX)),
            ..TaskFilter::default()
        })
        .await?;
    let mut to_complete = Latencies::new();
    for t in &done {
        let measured = t.input.as_i64().is_some_and(|at| at >= measured_from_us);
        if let (true, Some(finished)) = (measured, t.finished_at) {
            to_complete.record(finished.since(Timestamp(t.created_at.0)));
        }
    }
    let units = total.max(1) as f64;
    let mut report = Report {
        units: ran,
        seconds,
        throughput_per_s: ran as f64 / seconds.max(f64::EPSILON),
        latency: to_start.summary(),
        round_trips_per_unit: (after.round_trips - before.round_trips) as f64 / units,
        commits_per_unit: (after.commits - before.commits) as f64 / units,
        ..Report::default()
    };
    report
        .latencies
        .insert("enqueue to start".into(), to_start.summary());
    report
        .latencies
        .insert("enqueue to complete".into(), to_complete.summary());
    report
        .latencies
        .insert("enqueue call".into(), paced.calls.summary());
    let mut failed = paced.failures;
    if let Some((warm, warm_to_start)) = warm {
        report
            .latencies
            .insert("warm-up enqueue to start".into(), warm_to_start.summary());
        report
            .latencies
            .insert("warm-up enqueue call".into(), warm.calls.summary());
        failed += warm.failures;
    }
    report.figures.insert(
        "enqueued/s".into(),
        total as f64 / paced.seconds.max(f64::EPSILON),
    );
    report.correctness.failed = dead + failed;
    report.correctness.stuck = waiting;
    report.correctness.stale_refused = after.stale_refused - before.stale_refused;
    Ok(report)
}
