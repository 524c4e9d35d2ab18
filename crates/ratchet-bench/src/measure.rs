//! What a benchmark run measures and reports: latency histograms, counters, the machine, and
//! the JSON every scenario writes.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies recorded in microseconds, from 1 µs to 1 hour.
#[derive(Clone)]
pub(crate) struct Latencies(Histogram<u64>);

impl Latencies {
    pub(crate) fn new() -> Self {
        Self(
            Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("constant histogram bounds are valid"),
        )
    }

    pub(crate) fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
        self.0.saturating_record(us);
    }

    pub(crate) fn merge(&mut self, other: &Latencies) {
        let _ = self.0.add(&other.0);
    }

    pub(crate) fn count(&self) -> u64 {
        self.0.len()
    }

    /// Milliseconds at percentile `p` (0 to 100).
    fn ms(&self, p: f64) -> f64 {
        self.0.value_at_percentile(p) as f64 / 1000.0
    }

    pub(crate) fn summary(&self) -> LatencySummary {
        LatencySummary {
            count: self.count(),
            avg_ms: if self.count() == 0 {
                0.0
            } else {
                self.0.mean() / 1000.0
            },
            p50_ms: self.ms(50.0),
            p95_ms: self.ms(95.0),
            p99_ms: self.ms(99.0),
            max_ms: self.0.max() as f64 / 1000.0,
        }
    }
}

/// Latency percentiles in milliseconds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct LatencySummary {
    pub(crate) count: u64,
    pub(crate) avg_ms: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p95_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

/// What went wrong: a run with any of it fails.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Correctness {
    /// Units that ended other than successfully.
    pub(crate) failed: u64,
    /// Units whose wait timed out.
    pub(crate) timed_out: u64,
    /// Units not finished after the run drained.
    pub(crate) stuck: u64,
    /// Late writes the store refused for a stale fence (not a failure: the fence working).
    pub(crate) stale_refused: u64,
}

impl Correctness {
    pub(crate) fn ok(&self) -> bool {
        self.failed == 0 && self.timed_out == 0 && self.stuck == 0
    }
}

/// The machine a run ran on.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Machine {
    pub(crate) cores: usize,
    pub(crate) memory_bytes: u64,
    pub(crate) os: String,
    pub(crate) arch: String,
}

impl Machine {
    pub(crate) fn here() -> Self {
        let memory_kb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|n| n.parse::<u64>().ok())
            })
            .unwrap_or(0);
        Self {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: memory_kb * 1024,
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
        }
    }
}

/// This process's resident memory in bytes (0 where unknown).
pub(crate) fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// CPU time this process has used so far, every thread, user and system (`None` where
/// `/proc` is not there): the difference of two readings is what a stretch of work cost.
pub(crate) fn process_cpu() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which may hold spaces and ends at the last `)`.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 2..)?
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|t| t.parse::<u64>().ok());
    // utime and stime (fields 14 and 15 in proc(5)), in the kernel's USER_HZ: 100 a second.
    let total = ticks(11)?.checked_add(ticks(12)?)?;
    Some(std::time::Duration::from_millis(total.saturating_mul(10)))
}

/// The allocator the `ratchet` binary runs on (mimalloc), counting: a few uncontended atomic
/// additions per allocation. The `ratchet-bench` binary installs it.
pub static COUNTING_ALLOCATOR: CountingAllocator = stats_alloc::StatsAlloc::new(mimalloc::MiMalloc);

/// The type of [`COUNTING_ALLOCATOR`].
pub type CountingAllocator = stats_alloc::StatsAlloc<mimalloc::MiMalloc>;

/// Allocations made by the whole process so far (every thread): the difference of two
/// snapshots is what a stretch of work allocated.
pub(crate) fn allocations() -> stats_alloc::Stats {
    // Counts only where the binary made it the global allocator (ratchet-bench does).
    COUNTING_ALLOCATOR.stats()
}

/// One step of a scenario that varies its load (a ladder rung, a soak interval).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Step {
    /// The concurrency of a rung, or the second of a soak.
    pub(crate) at: f64,
    pub(crate) throughput_per_s: f64,
    pub(crate) latency: LatencySummary,
    /// Resident memory at the end of the step.
    #[serde(default)]
    pub(crate) memory_bytes: u64,
}

/// Everything a run reports, written with `--json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Report {
    pub(crate) scenario: String,
    pub(crate) mode: Option<String>,
    pub(crate) ratchet_version: String,
    pub(crate) backend: String,
    /// The round trip the proxy adds, as asked.
    pub(crate) rtt_ms: u64,
    /// `SELECT 1` through the proxy, as measured (PostgreSQL).
    pub(crate) measured_rtt_ms: Option<f64>,
    pub(crate) machine: Option<Machine>,
    /// Every flag the scenario ran with.
    pub(crate) params: BTreeMap<String, serde_json::Value>,
    /// What one unit is: "orchestration", "signal round trip", "task".
    pub(crate) unit: String,
    pub(crate) units: u64,
    pub(crate) seconds: f64,
    pub(crate) throughput_per_s: f64,
    /// Named figures that only some scenarios have (activities/s, enqueue rate, ...).
    pub(crate) figures: BTreeMap<String, f64>,
    /// Latency of one unit, end to end.
    pub(crate) latency: LatencySummary,
    /// Other latencies by name (phases of a signal, enqueue to start, ...).
    pub(crate) latencies: BTreeMap<String, LatencySummary>,
    pub(crate) round_trips_per_unit: f64,
    pub(crate) commits_per_unit: f64,
    pub(crate) steps: Vec<Step>,
    pub(crate) correctness: Correctness,
    pub(crate) postgres: Option<super::pgstats::PgReport>,
}

impl Report {
    pub(crate) fn param(&mut self, name: &str, value: impl Serialize) {
        self.params.insert(
            name.to_string(),
            serde_json::to_value(value).unwrap_or(serde_json::Value::Null),
        );
    }
}
