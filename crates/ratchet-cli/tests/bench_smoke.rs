//! `ratchet bench` end to end: every scenario runs for about a second on SQLite and on
//! PostgreSQL, completes with zero failures and writes its JSON, and `bench report` turns the
//! files into markdown and charts. Speed is never asserted here; the bench measures it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Each scenario, shortened to about a second.
const SCENARIOS: &[&[&str]] = &[
    &["fanout", "--duration", "1s", "--warmup", "0s"],
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
    assert_eq!(report["scenario"], scenario[0], "{what}");
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
    for scenario in ["fanout", "signals", "tasks", "ladder", "drain", "steady"] {
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
