//! `ratchet bench events`: the event store on a course-enrollment dataset (the Dynamic
//! Consistency Boundary example), loaded before timing and kept throughout. Each operation
//! runs as a closed loop at each client count; every pair is one report.

mod dataset;
mod op;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::bail;
use ratchet::{EventStore, Position};
use tokio::time::Instant;

use super::measure::{allocations, resident_bytes};
use super::{parse_duration, BenchEnv, Common, Latencies, Progress, Report};
use dataset::Size;
use op::{Op, Scene};

#[derive(clap::Args, Debug)]
pub(crate) struct EventArgs {
    #[command(flatten)]
    common: Common,
    /// tiny (5 courses, 10 students, 20 enrollments), small (500, 5,000, 25,000) or medium
    /// (1,000, 10,000, 50,000).
    #[arg(long, value_enum, default_value_t = Size::Small)]
    dataset: Size,
    /// The operations, comma-separated, run in the order given (default: all, reads first:
    /// read-tag, read-type, project, decide, append-if-conflict, append-if, append, append-batch).
    #[arg(long, value_enum, value_delimiter = ',')]
    op: Vec<Op>,
    /// Clients running operations at once; a comma-separated list runs each (1,10,100).
    #[arg(long, value_delimiter = ',', default_value = "16")]
    clients: Vec<usize>,
    /// How long to measure each operation at each client count.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    duration: Duration,
    /// Measure this many operations (in all clients) instead of --duration.
    #[arg(long)]
    ops: Option<u64>,
    /// How long to run each first without measuring (statements prepared, caches warm).
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    warmup: Duration,
    /// Events per bulk append when loading the dataset.
    #[arg(long, default_value_t = 5_000)]
    load_batch: usize,
}

/// A small, fast generator: each client has its own, so they draw without sharing.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        // splitmix64 of the seed: nearby seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Self((z ^ (z >> 31)) | 1)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        if n == 0 {
            0
        } else {
            ((u128::from(x) * u128::from(n)) >> 64) as u64
        }
    }
}

/// When a closed loop stops.
enum Stop {
    At(Instant),
    /// After this many more operations.
    Count(AtomicU64),
}

impl Stop {
    fn another(&self) -> bool {
        match self {
            Stop::At(t) => Instant::now() < *t,
            Stop::Count(left) => left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok(),
        }
    }
}

/// What a closed loop of one operation measured.
#[derive(Clone)]
struct Tally {
    latencies: Latencies,
    ok: u64,
    events: u64,
    conflicts: u64,
    failed: u64,
    first_error: Option<String>,
}

impl Tally {
    fn new() -> Self {
        Self {
            latencies: Latencies::new(),
            ok: 0,
            events: 0,
            conflicts: 0,
            failed: 0,
            first_error: None,
        }
    }

    fn add(&mut self, other: &Tally) {
        self.latencies.merge(&other.latencies);
        self.ok += other.ok;
        self.events += other.events;
        self.conflicts += other.conflicts;
        self.failed += other.failed;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}

/// `clients` loops of `op`, each starting its next operation when its last one ended.
async fn drive(
    op: Op,
    scene: &Arc<Scene>,
    clients: usize,
    stop: Stop,
    seed: u64,
    done: Option<Arc<AtomicU64>>,
) -> (Tally, f64) {
    let stop = Arc::new(stop);
    let merged = Arc::new(Mutex::new(Tally::new()));
    let started = Instant::now();
    let loops: Vec<_> = (0..clients)
        .map(|i| {
            let (scene, stop, merged, done) =
                (scene.clone(), stop.clone(), merged.clone(), done.clone());
            tokio::spawn(async move {
                let mut rng = Rng::new(seed.wrapping_mul(1_000_003).wrapping_add(i as u64));
                let mut local = Tally::new();
                while stop.another() {
                    let t = Instant::now();
                    match op::once(op, &scene, &mut rng).await {
                        Ok(d) => {
                            local.latencies.record(t.elapsed());
                            local.ok += 1;
                            local.events += d.events;
                            local.conflicts += u64::from(d.conflict);
                            if let Some(done) = &done {
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(e) => {
                            local.failed += 1;
                            local.first_error.get_or_insert_with(|| format!("{e:#}"));
                        }
                    }
                }
                merged.lock().unwrap_or_else(|p| p.into_inner()).add(&local);
            })
        })
        .collect();
    for l in loops {
        let _ = l.await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let tally = merged.lock().unwrap_or_else(|p| p.into_inner()).clone();
    (tally, seconds)
}

/// The store's last position.
async fn head(events: &EventStore) -> anyhow::Result<u64> {
    Ok(events.head().await?.0)
}

pub(crate) async fn run(
    args: EventArgs,
    database_url: Option<&str>,
) -> anyhow::Result<Vec<Report>> {
    if args.clients.is_empty() || args.clients.contains(&0) {
        bail!("--clients must be positive");
    }
    if args.ops == Some(0) {
        bail!("--ops must be positive");
    }
    let ops: Vec<Op> = if args.op.is_empty() {
        Op::ALL.to_vec()
    } else {
        args.op.clone()
    };
    let mut env = BenchEnv::open(&args.common, database_url).await?;
    let (courses, students, enrollments) = args.dataset.counts();
    let loader = env.store().await?;
    let loaded = dataset::load(
        loader.as_ref(),
        args.dataset,
        args.load_batch,
        &mut Rng::new(1),
    )
    .await?;
    drop(loader);
    out!(
        "loaded the {} dataset: {} events ({courses} courses, {students} students, \
         {enrollments} enrollments) in {:.2} s, {:.0} events/s",
        args.dataset.name(),
        loaded.events,
        loaded.seconds,
        loaded.events as f64 / loaded.seconds.max(f64::EPSILON)
    );
    let dataset = Dataset {
        size: args.dataset,
        courses,
        students,
        enrollments,
        course_positions: Arc::new(loaded.course_positions),
        loaded_events: loaded.events,
        load_events_per_s: loaded.events as f64 / loaded.seconds.max(f64::EPSILON),
        next_student: Arc::new(AtomicU64::new(students)),
    };
    let mut reports = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        for (j, &clients) in args.clients.iter().enumerate() {
            let seed = (i * 1000 + j) as u64;
            let mut report = step(&mut env, &args, &dataset, *op, clients, seed).await?;
            env.describe(&mut report);
            super::show(&mut report);
            reports.push(report);
        }
    }
    env.close().await?;
    print_summary(&reports, args.dataset);
    super::write_json(&args.common, &reports)?;
    Ok(reports)
}

/// The loaded dataset, as every step sees it.
struct Dataset {
    size: Size,
    courses: u64,
    students: u64,
    enrollments: u64,
    course_positions: Arc<Vec<Position>>,
    loaded_events: u64,
    load_events_per_s: f64,
    /// The next id the plain appends register, across steps.
    next_student: Arc<AtomicU64>,
}

/// One operation at one client count, on a store of its own (so that PostgreSQL's
/// statistics of the step are flushed when its connections close): warm-up, then measured.
async fn step(
    env: &mut BenchEnv,
    args: &EventArgs,
    dataset: &Dataset,
    op: Op,
    clients: usize,
    seed: u64,
) -> anyhow::Result<Report> {
    let store = env.store().await?;
    let events = EventStore::new(store.clone());
    let in_store = head(&events).await?;
    let scene = Arc::new(Scene {
        events,
        courses: dataset.courses,
        students: dataset.students,
        course_positions: dataset.course_positions.clone(),
        dataset_head: dataset.loaded_events,
        next_student: dataset.next_student.clone(),
    });
    if !args.warmup.is_zero() {
        let until = Stop::At(Instant::now() + args.warmup);
        drive(op, &scene, clients, until, seed + 7, None).await;
    }
    env.begin_stats().await?;
    let before = store.stats();
    let allocated = allocations();
    let what = format!("{} x{clients}", op.name());
    let progress = Progress::timed(args.common.quiet, &what, args.duration);
    let stop = match args.ops {
        Some(n) => Stop::Count(AtomicU64::new(n)),
        None => Stop::At(Instant::now() + args.duration),
    };
    let (tally, seconds) = drive(op, &scene, clients, stop, seed, Some(progress.counter())).await;
    progress.finish();
    let allocated = allocations() - allocated;
    let after = store.stats();
    drop(scene);
    drop(store);
    if let Some(e) = &tally.first_error {
        tracing::warn!(op = op.name(), failed = tally.failed, "first failure: {e}");
    }

    let units = tally.ok;
    let per = |n: f64| if units == 0 { 0.0 } else { n / units as f64 };
    let mut report = Report {
        scenario: "events".into(),
        mode: Some(op.name().into()),
        unit: "op".into(),
        units,
        seconds,
        throughput_per_s: units as f64 / seconds.max(f64::EPSILON),
        latency: tally.latencies.summary(),
        round_trips_per_unit: per((after.round_trips - before.round_trips) as f64),
        commits_per_unit: per((after.commits - before.commits) as f64),
        ..Report::default()
    };
    report.correctness.failed = tally.failed;
    report.correctness.stale_refused = after.stale_refused - before.stale_refused;
    // Allocations are the whole process's (the clients, the event store's merging of
    // appends, the database driver), counted by the global allocator.
    let figures = [
        ("events/s", tally.events as f64 / seconds.max(f64::EPSILON)),
        ("conflicts", tally.conflicts as f64),
        (
            "bytes allocated / op",
            per(allocated.bytes_allocated as f64),
        ),
        (
            "allocations / op",
            per((allocated.allocations + allocated.reallocations) as f64),
        ),
        ("resident MiB", resident_bytes() as f64 / 1_048_576.0),
        ("events in the store", in_store as f64),
        ("load events/s", dataset.load_events_per_s),
    ];
    for (name, value) in figures {
        report.figures.insert(name.into(), value);
    }
    report.param("dataset", dataset.size.name());
    report.param("courses", dataset.courses);
    report.param("students", dataset.students);
    report.param("enrollments", dataset.enrollments);
    report.param("op", op.name());
    report.param("clients", clients);
    report.param("duration_s", args.duration.as_secs_f64());
    report.param("ops", args.ops);
    report.param("warmup_s", args.warmup.as_secs_f64());
    report.param("load_batch", args.load_batch);
    report.postgres = env.end_stats(units).await?;
    report.figures.insert(
        "database MiB".into(),
        env.database_bytes().await? as f64 / 1_048_576.0,
    );
    Ok(report)
}

/// The target of an operation, and whether this run met it (`None`: the target is for
/// another client count or dataset).
fn target(r: &Report, dataset: Size) -> Option<(&'static str, Option<bool>)> {
    let figure = |name: &str| r.figures.get(name).copied().unwrap_or(0.0);
    let clients = r.params.get("clients").and_then(serde_json::Value::as_u64);
    Some(match r.mode.as_deref()? {
        "append" => ("≥ 8,000 events/s", Some(figure("events/s") >= 8_000.0)),
        "append-batch" => ("≥ 50,000 events/s", Some(figure("events/s") >= 50_000.0)),
        "append-if" => (
            "≥ 5,000/s at 16 clients",
            (clients == Some(16)).then_some(r.throughput_per_s >= 5_000.0),
        ),
        "read-tag" => (
            "p50 < 1 ms on medium",
            (dataset == Size::Medium).then_some(r.latency.p50_ms < 1.0),
        ),
        _ => return None,
    })
}

fn print_summary(reports: &[Report], dataset: Size) {
    let Some(first) = reports.first() else {
        return;
    };
    out!(
        "\nevents on {}, dataset {} (figures per operation)",
        first.backend,
        dataset.name()
    );
    out!(
        "  {:<19} {:>7} {:>9} {:>10} {:>8} {:>8} {:>6} {:>9} {:>9}  target",
        "op",
        "clients",
        "ops/s",
        "events/s",
        "p50 ms",
        "p99 ms",
        "rt/op",
        "bytes/op",
        "conflicts"
    );
    for r in reports {
        let figure = |name: &str| r.figures.get(name).copied().unwrap_or(0.0);
        let target = match target(r, dataset) {
            Some((t, Some(true))) => format!("{t}: met"),
            Some((t, Some(false))) => format!("{t}: MISSED"),
            Some((t, None)) => format!("({t})"),
            None => String::new(),
        };
        out!(
            "  {:<19} {:>7} {:>9.0} {:>10.0} {:>8.2} {:>8.2} {:>6.2} {:>9.0} {:>9.0}  {target}",
            r.mode.as_deref().unwrap_or_default(),
            r.params
                .get("clients")
                .map_or_else(String::new, |c| c.to_string()),
            r.throughput_per_s,
            figure("events/s"),
            r.latency.p50_ms,
            r.latency.p99_ms,
            r.round_trips_per_unit,
            figure("bytes allocated / op"),
            figure("conflicts"),
        );
    }
    if let Some(db) = reports.last().and_then(|r| r.figures.get("database MiB")) {
        out!("  database at the end: {db:.1} MiB");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_stay_in_range_and_spread() {
        let mut rng = Rng::new(3);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[rng.below(10) as usize] += 1;
        }
        assert!(seen.iter().all(|n| (800..1200).contains(n)), "{seen:?}");
        assert_eq!(rng.below(0), 0);
    }
}
