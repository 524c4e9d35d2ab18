//! `ratchet bench`: the published scenarios of the systems Ratchet replaces, run against
//! Ratchet on either backend, optionally through a proxy that simulates a distant database.
//!
//! A crate of its own, out of the operator's path: the `ratchet-bench` binary (which
//! `ratchet bench` runs) is the only process that installs the counting allocator its
//! bytes-per-operation figures need, so `ratchet worker` and every other command allocate
//! without it. It is an application, not an API, and keeps `anyhow` for its errors.
#![deny(missing_docs)]

/// Prints a line; a closed stdout (`ratchet bench ... | head`) ends the program quietly
/// instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            std::process::exit(0);
        }
    }};
}

mod env;
mod events;
mod fanout;
mod http;
pub mod insurance;
mod measure;
pub use measure::{CountingAllocator, COUNTING_ALLOCATOR};
mod pgstats;
mod proxy;
mod report;
mod signals;
mod tasks;
mod workflows;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Subcommand;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::time::Instant;

pub(crate) use env::{BenchEnv, Common};
pub(crate) use measure::{Correctness, Latencies, Report};

/// `ratchet bench ...`
#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Closed loop of fan-out orchestrations: each schedules N activities and joins them.
    Fanout(fanout::FanoutArgs),
    /// The fan-out closed loop through `ratchet server`'s HTTP API, beside the in-process
    /// client on the same run; and the latency one start adds over HTTP.
    Http(http::HttpArgs),
    /// Instances that wait for a signal and complete: serial, parallel, ladder, burst, soak.
    Signals(signals::SignalArgs),
    /// Standalone tasks: drain a bulk-enqueued backlog, or keep up with a steady rate.
    Tasks(tasks::TaskArgs),
    /// The event store on a course-enrollment dataset: appends (single, batched,
    /// conditional), reads by tag and type, projections; at one or more client counts.
    Events(events::EventArgs),
    /// The insurance example (examples/workflows/insurance.yaml), a declarative workflow:
    /// signals drive each from quote to policy, or it is cancelled into its compensation.
    Workflows(workflows::WorkflowArgs),
    /// Turn JSON files of runs into a markdown table and SVG charts.
    Report(report::ReportArgs),
}

/// Measure Ratchet: the published scenarios of the systems it replaces, on SQLite or
/// PostgreSQL, optionally through a simulated distant database.
#[derive(clap::Parser, Debug)]
#[command(name = "ratchet bench", bin_name = "ratchet bench", version)]
pub struct Cli {
    /// The PostgreSQL server for `--backend postgres` (each run makes a schema of its own).
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    #[command(subcommand)]
    command: BenchCommand,
}

/// Runs the bench command of `cli`.
///
/// # Errors
///
/// A run that could not be set up, or that had failures.
pub async fn main(cli: Cli) -> anyhow::Result<()> {
    run(cli.command, cli.database_url.as_deref()).await
}

async fn run(cmd: BenchCommand, database_url: Option<&str>) -> anyhow::Result<()> {
    let reports = match cmd {
        BenchCommand::Fanout(args) => vec![fanout::run(args, database_url).await?],
        BenchCommand::Http(args) => vec![http::run(args, database_url).await?],
        BenchCommand::Signals(args) => vec![signals::run(args, database_url).await?],
        BenchCommand::Tasks(args) => vec![tasks::run(args, database_url).await?],
        BenchCommand::Events(args) => events::run(args, database_url).await?,
        BenchCommand::Workflows(args) => workflows::run(args, database_url).await?,
        BenchCommand::Report(args) => return report::run(args),
    };
    for report in &reports {
        if !report.correctness.ok() {
            bail!(
                "the run had failures{}: {} failed, {} timed out, {} stuck",
                report
                    .mode
                    .as_ref()
                    .map_or_else(String::new, |m| format!(" ({m})")),
                report.correctness.failed,
                report.correctness.timed_out,
                report.correctness.stuck
            );
        }
    }
    Ok(())
}

/// Prints the report as a table and writes its JSON when asked.
pub(crate) fn finish(report: &mut Report, common: &Common) -> anyhow::Result<()> {
    show(report);
    write_json(common, report)
}

/// Stamps the report with this version and machine, and prints it as a table.
pub(crate) fn show(report: &mut Report) {
    report.ratchet_version = env!("CARGO_PKG_VERSION").into();
    report.machine = Some(measure::Machine::here());
    print_report(report);
}

/// Writes `value` (a report, or a list of them) to `--json` when asked.
pub(crate) fn write_json(common: &Common, value: &impl serde::Serialize) -> anyhow::Result<()> {
    if let Some(path) = &common.json {
        let text = serde_json::to_string_pretty(value)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        out!("wrote {}", path.display());
    }
    Ok(())
}

fn print_report(r: &Report) {
    let title = match &r.mode {
        Some(mode) => format!("{} {mode}", r.scenario),
        None => r.scenario.clone(),
    };
    let rtt = match (r.rtt_ms, r.measured_rtt_ms) {
        (0, _) => String::new(),
        (asked, Some(measured)) => {
            format!(", +{asked} ms round trip (SELECT 1 measured {measured:.1} ms)")
        }
        (asked, None) => format!(", +{asked} ms round trip"),
    };
    out!("\n{title} on {}{rtt}", r.backend);
    let row = |name: &str, value: String| out!("  {name:<34} {value}");
    row(
        &format!("{}s", r.unit),
        format!("{} in {:.2} s", r.units, r.seconds),
    );
    row(
        "throughput",
        format!("{:.1} {}s/s", r.throughput_per_s, r.unit),
    );
    for (name, value) in &r.figures {
        row(name, format!("{value:.2}"));
    }
    let lat = |l: &measure::LatencySummary| {
        format!(
            "avg {:.2}  p50 {:.2}  p95 {:.2}  p99 {:.2}  max {:.2} ms",
            l.avg_ms, l.p50_ms, l.p95_ms, l.p99_ms, l.max_ms
        )
    };
    if r.latency.count > 0 {
        row("latency", lat(&r.latency));
    }
    for (name, l) in &r.latencies {
        row(name, lat(l));
    }
    row(
        &format!("round trips / commits per {}", r.unit),
        format!("{:.2} / {:.2}", r.round_trips_per_unit, r.commits_per_unit),
    );
    for s in &r.steps {
        row(
            &format!("  at {}", s.at),
            format!(
                "{:.1}/s  p50 {:.2}  p95 {:.2}  p99 {:.2} ms  rss {:.0} MiB",
                s.throughput_per_s,
                s.latency.p50_ms,
                s.latency.p95_ms,
                s.latency.p99_ms,
                s.memory_bytes as f64 / 1048576.0
            ),
        );
    }
    let c = &r.correctness;
    row(
        "failed / timed out / stuck",
        format!("{} / {} / {}", c.failed, c.timed_out, c.stuck),
    );
    row(
        "stale writes refused (fencing)",
        c.stale_refused.to_string(),
    );
    if let Some(pg) = &r.postgres {
        row(
            "pg commits / rollbacks",
            format!("{} / {}", pg.commits, pg.rollbacks),
        );
        row(
            "pg blocks hit / read",
            format!("{} / {}", pg.blks_hit, pg.blks_read),
        );
        row(
            "pg tuples ins / upd / del",
            format!(
                "{} / {} / {}",
                pg.tup_inserted, pg.tup_updated, pg.tup_deleted
            ),
        );
        row(
            &format!("pg WAL bytes (per {})", r.unit),
            format!("{} ({:.0})", pg.wal_bytes, pg.wal_bytes_per_unit),
        );
        let waits: Vec<String> = pg
            .wait_events
            .iter()
            .map(|(e, n)| {
                format!(
                    "{e} {:.0}%",
                    100.0 * *n as f64 / pg.wait_samples.max(1) as f64
                )
            })
            .collect();
        row("pg busy connections were in", waits.join(", "));
        let dead: Vec<String> = pg
            .dead_tuples
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(t, n)| format!("{t} {n}"))
            .collect();
        row("pg dead tuples left", dead.join(", "));
    }
}

/// The runtime of an orchestration scenario keeping up to `in_flight` instances alive: room
/// for all of them (and more), every one cached, leases long enough that a loaded machine
/// never loses one, and large group commits.
pub(crate) fn orchestration_config(in_flight: usize) -> ratchet::RuntimeConfig {
    ratchet::RuntimeConfig {
        max_orchestrations: (in_flight * 2).max(256),
        cache_size: (in_flight * 4).max(10_000),
        lease: Duration::from_secs(30),
        heartbeat: Duration::from_secs(10),
        commit_batch: 1024,
        ..ratchet::RuntimeConfig::default()
    }
}

/// Parses "10s", "500ms", "2m" or a bare number of seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, "s"),
    };
    let n: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (like 10s, 500ms, 2m)"))?;
    let seconds = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("{text:?}: use ms, s or m")),
    };
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(format!("{text:?} is not a duration"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A progress bar over a known time span (or hidden with --quiet).
pub(crate) struct Progress {
    bar: ProgressBar,
    done: Arc<AtomicU64>,
    ticker: tokio::task::JoinHandle<()>,
}

impl Progress {
    pub(crate) fn timed(quiet: bool, what: &str, span: Duration) -> Self {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(span.as_millis() as u64)
        };
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{spinner}} {what} [{{bar:30}}] {{elapsed}}  {{msg}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        let done = Arc::new(AtomicU64::new(0));
        let (b, d) = (bar.clone(), done.clone());
        let start = Instant::now();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let elapsed = start.elapsed();
                b.set_position(elapsed.as_millis() as u64);
                let n = d.load(Ordering::Relaxed);
                b.set_message(format!(
                    "{n} done, {:.0}/s",
                    n as f64 / elapsed.as_secs_f64().max(0.001)
                ));
            }
        });
        Self { bar, done, ticker }
    }

    /// The counter the work bumps.
    pub(crate) fn counter(&self) -> Arc<AtomicU64> {
        self.done.clone()
    }

    pub(crate) fn finish(self) {
        self.ticker.abort();
        self.bar.finish_and_clear();
    }
}

/// How one unit of a closed loop ended.
pub(crate) enum Outcome {
    Ok,
    Failed,
    TimedOut,
}

/// What a closed loop measured.
pub(crate) struct LoopResult {
    pub(crate) latencies: Latencies,
    pub(crate) ok: u64,
    pub(crate) correctness: Correctness,
    pub(crate) seconds: f64,
}

/// Keeps `concurrency` units in flight until `until`: each worker starts the next unit as
/// soon as its last one ended, and records its latency.
pub(crate) async fn closed_loop<F, Fut>(
    concurrency: usize,
    until: Instant,
    done: Option<Arc<AtomicU64>>,
    unit: F,
) -> LoopResult
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send,
{
    let unit = Arc::new(unit);
    let merged = Arc::new(Mutex::new((Latencies::new(), 0u64, Correctness::default())));
    let start = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (unit, merged, done) = (unit.clone(), merged.clone(), done.clone());
            tokio::spawn(async move {
                let mut local = (Latencies::new(), 0u64, Correctness::default());
                while Instant::now() < until {
                    let t = Instant::now();
                    match unit().await {
                        Outcome::Ok => {
                            local.0.record(t.elapsed());
                            local.1 += 1;
                            if let Some(done) = &done {
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Outcome::Failed => local.2.failed += 1,
                        Outcome::TimedOut => local.2.timed_out += 1,
                    }
                }
                let mut m = merged.lock().unwrap_or_else(|p| p.into_inner());
                m.0.merge(&local.0);
                m.1 += local.1;
                m.2.failed += local.2.failed;
                m.2.timed_out += local.2.timed_out;
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
    let seconds = start.elapsed().as_secs_f64();
    let m = merged.lock().unwrap_or_else(|p| p.into_inner()).clone();
    LoopResult {
        latencies: m.0,
        ok: m.1,
        correctness: m.2,
        seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5h").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
