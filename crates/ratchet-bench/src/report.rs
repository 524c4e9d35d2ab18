//! `ratchet bench report`: several runs' JSON into one markdown table and SVG charts
//! (latency percentiles per ladder rung; throughput against the round trip to the database).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use plotters::prelude::*;

use super::measure::Report;

#[derive(clap::Args, Debug)]
pub(crate) struct ReportArgs {
    /// JSON files written by `ratchet bench ... --json`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Directory for report.md and the charts.
    #[arg(long, default_value = "bench-report")]
    out: PathBuf,
}

pub(crate) fn run(args: ReportArgs) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for path in &args.files {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        // One run per file, or a list of them (`bench events`: one per operation and client
        // count).
        let value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let reports = match value {
            serde_json::Value::Array(items) => items
                .into_iter()
                .map(serde_json::from_value)
                .collect::<Result<Vec<Report>, _>>(),
            one => serde_json::from_value(one).map(|r| vec![r]),
        }
        .with_context(|| format!("{} is not a report of `ratchet bench`", path.display()))?;
        runs.extend(reports.into_iter().map(|r| (path.clone(), r)));
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let medians = medians(&runs);
    let mut md = String::from(
        "## Median runs

",
    );
    md += &table(&medians);
    let ladders: Vec<&Median> = medians.iter().filter(|m| has_rungs(&m.run.1)).collect();
    if !ladders.is_empty() {
        let file = "ladder-latency.svg";
        ladder_chart(&args.out.join(file), &ladders)?;
        let _ = write!(md, "\n![latency per ladder rung]({file})\n");
    }
    let fanouts: Vec<&Median> = medians
        .iter()
        // A drain of pending starts is not a closed loop at some round trip.
        .filter(|m| m.run.1.scenario == "fanout" && !m.run.1.params.contains_key("backlog"))
        .collect();
    LineChart {
        file: "throughput-vs-rtt.svg",
        alt: "throughput against round trip",
        caption: "Fan-out throughput against database round trip",
        x_desc: "round trip to the database, ms",
        y_desc: "orchestrations / s",
        log_x: false,
    }
    .add(&mut md, &args.out, rtt_lines(&fanouts))?;
    let drains: Vec<&Median> = medians
        .iter()
        .filter(|m| is_single_drain(&m.run.1))
        .collect();
    LineChart {
        file: "throughput-vs-backlog.svg",
        alt: "throughput against backlog",
        caption: "Task drain throughput against backlog",
        x_desc: "tasks queued when the drain starts (log scale)",
        y_desc: "tasks / s",
        log_x: true,
    }
    .add(&mut md, &args.out, backlog_lines(&drains))?;
    let every: Vec<Median> = runs.iter().map(|run| Median { run, of: 1 }).collect();
    md += "\n## Every run\n\n";
    md += &table(&every);
    let path = args.out.join("report.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    out!("wrote {}", path.display());
    Ok(())
}

/// The run in the middle, by throughput, of the runs that share a scenario, mode, backend,
/// round trip and parameters (the targets count the median of 3).
struct Median<'a> {
    run: &'a (PathBuf, Report),
    /// How many runs it stands for.
    of: usize,
}

fn medians(runs: &[(PathBuf, Report)]) -> Vec<Median<'_>> {
    let mut groups: Vec<(String, Vec<&(PathBuf, Report)>)> = Vec::new();
    for run in runs {
        let r = &run.1;
        let key = format!(
            "{}|{:?}|{}|{}|{}",
            r.scenario,
            r.mode,
            r.backend,
            r.rtt_ms,
            serde_json::to_string(&r.params).unwrap_or_default()
        );
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(run),
            None => groups.push((key, vec![run])),
        }
    }
    groups
        .into_iter()
        .map(|(_, mut members)| {
            members.sort_by(|a, b| a.1.throughput_per_s.total_cmp(&b.1.throughput_per_s));
            Median {
                run: members[members.len() / 2],
                of: members.len(),
            }
        })
        .collect()
}

fn has_rungs(r: &Report) -> bool {
    r.mode.as_deref() == Some("ladder") && !r.steps.is_empty()
}

fn label(r: &Report) -> String {
    let mut l = r.scenario.clone();
    if let Some(mode) = &r.mode {
        l = format!("{l} {mode}");
    }
    l = format!("{l} ({}", r.backend);
    if r.rtt_ms > 0 {
        l = format!("{l}, +{} ms", r.rtt_ms);
    }
    l + ")"
}

fn table(runs: &[Median<'_>]) -> String {
    let mut md = String::from(
        "| run | of | backend | rtt ms | units | throughput /s | p50 ms | p95 ms | p99 ms | round trips / unit | commits / unit | failed / timed out / stuck | file |\n\
         |---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n",
    );
    for Median { run: (path, r), of } in runs {
        let mut name = match &r.mode {
            Some(mode) => format!("{} {mode}", r.scenario),
            None => r.scenario.clone(),
        };
        // The parameters that tell runs of one scenario apart.
        if let Some(n) = r.params.get("in_flight") {
            name = format!("{name}, {n} in flight");
        }
        if let Some(n) = r.params.get("backlog") {
            name = format!("{name}, drain of {n} started");
        }
        if r.params.get("delayed") == Some(&serde_json::Value::Bool(true)) {
            name += ", delayed";
        }
        if let Some(n) = r.params.get("clients") {
            name = format!("{name}, {n} clients");
        }
        if let Some(serde_json::Value::String(d)) = r.params.get("dataset") {
            name = format!("{name}, {d} dataset");
        }
        let _ = writeln!(
            md,
            "| {name} | {of} | {} | {} | {} {}s | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} / {} / {} | {} |",
            r.backend,
            r.rtt_ms,
            r.units,
            r.unit,
            r.throughput_per_s,
            r.latency.p50_ms,
            r.latency.p95_ms,
            r.latency.p99_ms,
            r.round_trips_per_unit,
            r.commits_per_unit,
            r.correctness.failed,
            r.correctness.timed_out,
            r.correctness.stuck,
            path.file_name().map_or_else(String::new, |f| f.to_string_lossy().into()),
        );
    }
    md
}

fn ladder_chart(path: &Path, runs: &[&Median<'_>]) -> anyhow::Result<()> {
    let runs: Vec<&Report> = runs.iter().map(|m| &m.run.1).collect();
    let steps: Vec<_> = runs.iter().flat_map(|r| &r.steps).collect();
    let max_at = steps.iter().map(|s| s.at).fold(1.0_f64, f64::max);
    let max_ms = steps
        .iter()
        .map(|s| s.latency.p95_ms)
        .fold(1.0_f64, f64::max);
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(draw)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Signal round trip latency per ladder rung",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((1.0..max_at * 1.5).log_scale(), 0.0..max_ms * 1.15)
        .map_err(draw)?;
    chart
        .configure_mesh()
        .x_desc("concurrency")
        .y_desc("ms")
        .draw()
        .map_err(draw)?;
    for (i, r) in runs.iter().enumerate() {
        for (percentile, style) in [("p50", 0), ("p95", 1)] {
            let color = Palette99::pick(i * 2 + style).to_rgba();
            let points: Vec<(f64, f64)> = r
                .steps
                .iter()
                .map(|s| {
                    let ms = if style == 0 {
                        s.latency.p50_ms
                    } else {
                        s.latency.p95_ms
                    };
                    (s.at, ms)
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(draw)?
                .label(format!("{} {percentile}", label(r)))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
                .map_err(draw)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(draw)?;
    root.present().map_err(draw)?;
    Ok(())
}

/// Throughput lines: `point` gives a run's line and x, or `None` to leave the run out.
fn throughput_lines(
    runs: &[&Median<'_>],
    point: impl Fn(&Report) -> Option<(String, f64)>,
) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut lines: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for m in runs {
        let r = &m.run.1;
        if let Some((line, x)) = point(r) {
            lines.entry(line).or_default().push((x, r.throughput_per_s));
        }
    }
    lines
}

/// One line per backend and number in flight: (measured round trip, throughput) points.
fn rtt_lines(runs: &[&Median<'_>]) -> BTreeMap<String, Vec<(f64, f64)>> {
    throughput_lines(runs, |r| {
        let in_flight = r.params.get("in_flight").map(|v| v.to_string());
        let line = format!("{}, {} in flight", r.backend, in_flight.unwrap_or_default());
        Some((line, r.measured_rtt_ms.unwrap_or(r.rtt_ms as f64)))
    })
}

/// A drain of one backlog (not rounds of them).
fn is_single_drain(r: &Report) -> bool {
    r.scenario == "tasks"
        && r.mode.as_deref() == Some("drain")
        && r.params
            .get("rounds")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(1)
            == 1
}

/// Drain throughput by backlog, one line per backend and worker count.
fn backlog_lines(runs: &[&Median<'_>]) -> BTreeMap<String, Vec<(f64, f64)>> {
    throughput_lines(runs, |r| {
        let count = r.params.get("count").and_then(serde_json::Value::as_f64)?;
        let workers = r.params.get("workers").map(|v| v.to_string());
        let line = format!("{}, {} workers", r.backend, workers.unwrap_or_default());
        Some((line, count))
    })
}

/// A chart of lines of (x, y) points, one per legend entry.
struct LineChart {
    /// The SVG's file name in the report's directory.
    file: &'static str,
    /// The image's text in the markdown.
    alt: &'static str,
    caption: &'static str,
    x_desc: &'static str,
    y_desc: &'static str,
    /// Powers of ten along x, evenly spaced.
    log_x: bool,
}

impl LineChart {
    /// Draws `lines` into `out` and links it from `md`, when some line has two points.
    fn add(
        &self,
        md: &mut String,
        out: &Path,
        lines: BTreeMap<String, Vec<(f64, f64)>>,
    ) -> anyhow::Result<()> {
        if lines.values().any(|points| points.len() > 1) {
            self.draw(&out.join(self.file), lines)?;
            let _ = write!(md, "\n![{}]({})\n", self.alt, self.file);
        }
        Ok(())
    }

    /// Draws `lines` to `path`; some line should have two points.
    fn draw(&self, path: &Path, lines: BTreeMap<String, Vec<(f64, f64)>>) -> anyhow::Result<()> {
        let x_of = |x: f64| if self.log_x { x.max(1.0).log10() } else { x };
        let by_backend: BTreeMap<String, Vec<(f64, f64)>> = lines
            .into_iter()
            .map(|(k, points)| (k, points.into_iter().map(|(x, y)| (x_of(x), y)).collect()))
            .collect();
        let x_label = |x: &f64| {
            if self.log_x {
                format!("{}", 10f64.powf(*x).round())
            } else {
                format!("{x}")
            }
        };
        let (min_x, max_x) = by_backend
            .values()
            .flatten()
            .map(|p| p.0)
            .fold((f64::MAX, 1.0_f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
        let x_range = if self.log_x {
            (min_x.floor() - 0.2)..(max_x.ceil() + 0.2)
        } else {
            0.0..max_x * 1.1
        };
        let max_tp = by_backend
            .values()
            .flatten()
            .map(|p| p.1)
            .fold(1.0_f64, f64::max);
        let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(draw)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(self.caption, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x_range, 0.0..max_tp * 1.15)
            .map_err(draw)?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .x_label_formatter(&x_label)
            .draw()
            .map_err(draw)?;
        for (i, (backend, mut points)) in by_backend.into_iter().enumerate() {
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(draw)?
                .label(backend)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart
                .draw_series(points.iter().map(|p| Circle::new(*p, 4, color.filled())))
                .map_err(draw)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(draw)?;
        root.present().map_err(draw)?;
        Ok(())
    }
}

/// Drawing errors carry the backend's error type; this keeps only the message.
fn draw<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {e}")
}
