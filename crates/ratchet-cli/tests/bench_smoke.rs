//! `ratchet bench` end to end: every scenario runs for about a second (`events`: each of its
//! operations for a moment; `workflows`: a few workflows of each path) on SQLite and on
//! PostgreSQL, completes with zero failures and writes its JSON, and `bench report` turns the
//! files into markdown and charts. Speed is never asserted here; the bench measures it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Each scenario, shortened to about a second.
const SCENARIOS: &[&[&str]] = &[
    &["fanout", "--duration", "1s", "--warmup", "0s"],
    &[
        "fanout",
        "--workflow",
        "yaml",
        "--duration",
        "1s",
        "--warmup",
        "0s",
    ],
    &[
        "fanout",
        "--workflow",
        "http",
        "--against-rust",
        "--rounds",
        "1",
        "--duration",
        "1s",
        "--warmup",
        "0s",
    ],
    &[
        "http",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--starts",
        "20",
        "--clients",
        "4",
    ],
    &["signals", "serial", "--instances", "4"],
    &[
        "signals",
        "parallel",
        "--instances",
        "24",
        "--concurrency",
        "4",
        "--signallers",
        "2",
    ],
    &[
        "signals",
        "ladder",
        "--rungs",
        "1,4,16",
        "--rung-duration",
        "300ms",
    ],
    &["signals", "burst", "--instances", "30"],
    &["signals", "burst", "--instances", "30", "--delayed"],
    &["signals", "soak", "--duration", "1s", "--concurrency", "4"],
    &["tasks", "drain", "--count", "2000", "--workers", "2"],
    &[
        "tasks",
        "steady",
        "--rate",
        "200",
        "--duration",
        "1s",
        "--workers",
        "2",
    ],
];

/// Runs one scenario with `--json` and checks what it wrote.
fn run(scenario: &[&str], backend: &[&str], json: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_ratchet"))
        .arg("bench")
        .args(scenario)
        .args(backend)
        .arg("--quiet")
        .arg("--json")
        .arg(json)
        .output()
        .expect("run ratchet bench");
    let what = format!("ratchet bench {} {}", scenario.join(" "), backend.join(" "));
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("the JSON file")).unwrap();
    let correctness = &report["correctness"];
    for counter in ["failed", "timed_out", "stuck"] {
        assert_eq!(correctness[counter], 0, "{what}: {counter} in {report}");
    }
    assert!(
        report["units"].as_u64().unwrap() > 0,
        "{what} measured nothing: {report}"
    );
    // `fanout --workflow yaml` reports as `fanout-yaml`.
    let named = report["scenario"].as_str().unwrap_or_default();
    assert!(named.starts_with(scenario[0]), "{what}: {named}");
    let expected_backend = if backend.contains(&"postgres") {
        "postgres"
    } else {
        "sqlite"
    };
    assert_eq!(report["backend"], expected_backend, "{what}");
    if expected_backend == "postgres" {
        assert!(
            report["postgres"]["commits"].as_u64().unwrap() > 0,
            "{what}: no PostgreSQL statistics in {report}"
        );
    }
    if scenario.contains(&"--against-rust") {
        assert_eq!(named, "fanout-http-vs-rust", "{what}");
        for figure in [
            "rust orchestrations/s",
            "share of rust (whole run)",
            "share of rust (lowest round)",
        ] {
            let value = report["figures"][figure].as_f64().unwrap_or_default();
            assert!(value > 0.0, "{what}: {figure} in {report}");
        }
        // Read from /proc (Linux), in ticks of 10 ms: a short run's may be zero, not missing.
        if cfg!(target_os = "linux") {
            for shape in ["rust", "declarative"] {
                let figure = format!("bench process cpu ms per orchestration ({shape})");
                let value = report["figures"][&figure].as_f64();
                assert!(
                    value.is_some_and(|v| v >= 0.0),
                    "{what}: {figure} in {report}"
                );
            }
        }
    }
}

/// `bench events` on the tiny dataset, every operation at two client counts for a moment:
/// one report per pair, each with operations done, and only conflicts where they must be.
fn run_events(backend: &[&str], json: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_ratchet"))
        .args(["bench", "events", "--dataset", "tiny", "--clients", "1,4"])
        .args(["--duration", "200ms", "--warmup", "0s", "--quiet", "--json"])
        .arg(json)
        .args(backend)
        .output()
        .expect("run ratchet bench events");
    let what = format!("ratchet bench events {}", backend.join(" "));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{what} failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for target in ["≥ 8,000 events/s", "p50 < 1 ms on medium"] {
        assert!(
            stdout.contains(target),
            "{what}: no target {target} in {stdout}"
        );
    }
    let reports: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(json).expect("the JSON file")).unwrap();
    let ops = [
        "read-tag",
        "read-type",
        "project",
        "decide",
        "append-if-conflict",
        "append-if",
        "append",
        "append-batch",
    ];
    let mut seen = Vec::new();
    for r in &reports {
        let op = r["mode"].as_str().unwrap();
        seen.push((op.to_string(), r["params"]["clients"].as_u64().unwrap()));
        assert_eq!(r["scenario"], "events");
        assert!(
            backend.contains(&r["backend"].as_str().unwrap()),
            "{what}: {r}"
        );
        for counter in ["failed", "timed_out", "stuck"] {
            assert_eq!(
                r["correctness"][counter], 0,
                "{what} {op}: {counter} in {r}"
            );
        }
        let units = r["units"].as_u64().unwrap();
        assert!(units > 0, "{what} {op} measured nothing: {r}");
        let figure = |name: &str| r["figures"][name].as_f64().unwrap();
        let conflicts = figure("conflicts");
        match op {
            "append-if-conflict" => assert_eq!(conflicts, units as f64, "{what}: {r}"),
            "append-if" | "decide" => assert!(conflicts < units as f64, "{what}: {r}"),
            _ => assert_eq!(conflicts, 0.0, "{what} {op}: {r}"),
        }
        if op != "append-if-conflict" {
            assert!(figure("events/s") > 0.0, "{what} {op}: no events: {r}");
        }
        assert!(figure("bytes allocated / op") > 0.0, "{what} {op}: {r}");
        assert!(figure("database MiB") > 0.0, "{what} {op}: {r}");
        assert!(
            r["round_trips_per_unit"].as_f64().unwrap() > 0.0,
            "{what} {op}: {r}"
        );
        assert_eq!(r["params"]["dataset"], "tiny");
        if backend.contains(&"postgres") {
            assert!(
                r["postgres"]["commits"].as_u64().unwrap() > 0,
                "{what} {op}: no PostgreSQL statistics in {r}"
            );
        }
    }
    let expected: Vec<(String, u64)> = ops
        .iter()
        .flat_map(|op| [1, 4].map(|c| (op.to_string(), c)))
        .collect();
    assert_eq!(
        seen, expected,
        "{what}: one report per operation and client count"
    );
}

/// `bench workflows` on a few workflows: a report per path (policy, cancel), each counting
/// every workflow as ended right (a policy issued after a retried payment; cancelled, with
/// its quote withdrawn by the compensation).
fn run_workflows(backend: &[&str], json: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_ratchet"))
        .args(["bench", "workflows", "both", "--workflows", "4"])
        .args(["--concurrency", "2", "--warmup", "1", "--quiet", "--json"])
        .arg(json)
        .args(backend)
        .output()
        .expect("run ratchet bench workflows");
    let what = format!("ratchet bench workflows {}", backend.join(" "));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{what} failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("3.33 workflows/s"), "{what}: {stdout}");
    let reports: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(json).expect("the JSON file")).unwrap();
    let paths: Vec<&str> = reports
        .iter()
        .map(|r| r["mode"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["policy", "cancel"], "{what}");
    for r in &reports {
        let path = r["mode"].as_str().unwrap();
        assert_eq!(r["scenario"], "workflows");
        assert!(
            backend.contains(&r["backend"].as_str().unwrap()),
            "{what}: {r}"
        );
        for counter in ["failed", "timed_out", "stuck"] {
            assert_eq!(
                r["correctness"][counter], 0,
                "{what} {path}: {counter} in {r}"
            );
        }
        assert_eq!(r["units"], 4, "{what} {path}: not all ended right: {r}");
        let signals = if path == "policy" { 2.0 } else { 0.0 };
        assert_eq!(r["figures"]["signals / workflow"], signals, "{what}: {r}");
        assert!(
            r["latency"]["p50_ms"].as_f64().unwrap() > 0.0,
            "{what}: {r}"
        );
        if backend.contains(&"postgres") {
            assert!(
                r["postgres"]["commits"].as_u64().unwrap() > 0,
                "{what} {path}: no PostgreSQL statistics in {r}"
            );
        }
    }
}

#[test]
fn every_scenario_runs_on_both_backends_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let mut backends: Vec<(&str, Vec<String>)> =
        vec![("sqlite", vec!["--backend".into(), "sqlite".into()])];
    if let Some(url) = ratchet_store_postgres::testing::database_url() {
        backends.push((
            "postgres",
            vec![
                "--backend".into(),
                "postgres".into(),
                "--database-url".into(),
                url,
            ],
        ));
    }
    let mut files: Vec<PathBuf> = Vec::new();
    for (name, args) in &backends {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for (i, scenario) in SCENARIOS.iter().enumerate() {
            let json = dir
                .path()
                .join(format!("{name}-{i}-{}.json", scenario.join("-")));
            run(scenario, &args, &json);
            files.push(json);
        }
        let json = dir.path().join(format!("{name}-events.json"));
        run_events(&args, &json);
        files.push(json);
        let json = dir.path().join(format!("{name}-workflows.json"));
        run_workflows(&args, &json);
        files.push(json);
        if *name == "postgres" {
            // Through the delaying proxy: the measured round trip includes what it adds.
            let json = dir.path().join("postgres-fanout-rtt.json");
            let mut with_rtt = args.clone();
            with_rtt.extend(["--rtt", "20"]);
            run(
                &["fanout", "--duration", "1s", "--warmup", "0s"],
                &with_rtt,
                &json,
            );
            let report: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            let measured = report["measured_rtt_ms"].as_f64().unwrap();
            assert!(
                measured >= 20.0,
                "SELECT 1 through the proxy took {measured} ms"
            );
            files.push(json);
        }
    }

    let out = dir.path().join("report");
    let status = Command::new(env!("CARGO_BIN_EXE_ratchet"))
        .args(["bench", "report", "--out"])
        .arg(&out)
        .args(&files)
        .status()
        .unwrap();
    assert!(status.success(), "ratchet bench report failed");
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    for scenario in [
        "fanout",
        "http",
        "signals",
        "tasks",
        "ladder",
        "drain",
        "steady",
        "events append-if, 4 clients, tiny dataset",
        "workflows policy",
        "workflows cancel",
    ] {
        assert!(markdown.contains(scenario), "no {scenario} in:\n{markdown}");
    }
    for chart in ["ladder-latency.svg", "throughput-vs-rtt.svg"] {
        let svg = std::fs::read_to_string(out.join(chart)).unwrap();
        assert!(
            svg.starts_with("<svg") || svg.contains("<svg"),
            "{chart} is not SVG"
        );
    }

    // A file that is not a report is refused with its name, not half-read.
    let bogus = dir.path().join("bogus.json");
    std::fs::write(&bogus, "{\"scenario\": 3}").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ratchet"))
        .args(["bench", "report", "--out"])
        .arg(dir.path().join("bogus-report"))
        .arg(&bogus)
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("bogus.json"));
}
