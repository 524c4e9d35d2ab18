//! The CLI as a user meets it: the README's walkthrough, refused zeros, JSON lines with RFC
//! 3339 times, inputs from files and standard input, bounded enqueues, short messages, and
//! quiet, colourless logs.

use std::io::Write as _;
use std::process::Stdio;

use super::common::{ratchet, run, text, Worker};

/// A migrated SQLite file in a directory kept for the test.
fn sqlite() -> (Vec<String>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let args = vec![
        "--db".to_string(),
        dir.path().join("cli.db").display().to_string(),
    ];
    let out = run(&args, &["migrate"]);
    assert!(out.status.success(), "{}", text(&out));
    (args, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walkthrough_runs_on_the_queue_its_worker_serves() {
    let _one = super::ONE_AT_A_TIME.lock().await;
    let (args, _dir) = sqlite();
    let mut worker = Worker::start(&args, "mail", &["--queue", "mail=16"]);
    let out = run(
        &args,
        &[
            "tasks",
            "enqueue",
            "work",
            "--queue",
            "mail",
            "--input",
            r#"{"ms":10}"#,
            "--count",
            "20",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("enqueued 20"), "{}", text(&out));
    let listed = run(&args, &["tasks", "list", "--json"]);
    let ids: Vec<i64> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids.len(), 20);
    for id in ids {
        let waited = run(
            &args,
            &["tasks", "wait", &id.to_string(), "--timeout-secs", "30"],
        );
        assert!(waited.status.success(), "{}", text(&waited));
    }
    assert_eq!(worker.stop(), 20);
}

#[test]
fn a_worker_says_which_queues_it_serves() {
    let (args, _dir) = sqlite();
    let mut child = ratchet(&args)
        .args([
            "worker", "--label", "q", "--queue", "mail=3", "--queue", "bulk=1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        line.contains("mail (3 at once), bulk (1 at once)"),
        "{line}"
    );
}

#[test]
fn zeros_that_mean_nothing_are_refused() {
    let (args, _dir) = sqlite();
    for command in [
        &["tasks", "enqueue", "work", "--count", "0"][..],
        &["tasks", "enqueue", "work", "--max-attempts", "0"],
        &["worker", "--lease-ms", "0"],
        &["worker", "--poll-ms", "0"],
    ] {
        let out = run(&args, command);
        assert!(!out.status.success(), "{command:?} was accepted");
        assert!(
            text(&out).contains("invalid value '0'"),
            "{command:?}: {}",
            text(&out)
        );
    }
    let listed = run(&args, &["tasks", "list", "--json"]);
    assert!(listed.stdout.is_empty(), "nothing was enqueued");
}

#[test]
fn lists_and_shows_speak_json_lines_with_rfc3339_times() {
    let (args, _dir) = sqlite();
    let started = run(
        &args,
        &[
            "instances",
            "start",
            "fanout",
            "--input",
            r#"{"activities":1}"#,
        ],
    );
    assert!(started.status.success(), "{}", text(&started));
    let id = String::from_utf8_lossy(&started.stdout).trim().to_string();
    let enqueued = run(&args, &["tasks", "enqueue", "work"]);
    let task = String::from_utf8_lossy(&enqueued.stdout).trim().to_string();
    for command in [
        &["instances", "list", "--json"][..],
        &["instances", "show", &id, "--json"],
        &["tasks", "list", "--json"],
        &["tasks", "show", &task, "--json"],
        &["queues", "list", "--json"],
    ] {
        let out = run(&args, command);
        assert!(out.status.success(), "{command:?}: {}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.trim().is_empty(), "{command:?}");
        for line in stdout.lines() {
            let value: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{command:?}: not JSON ({e}): {line}"));
            if let Some(created) = value.get("created_at") {
                let created = created.as_str().unwrap();
                assert!(
                    created.len() == 24 && created.ends_with('Z') && created.as_bytes()[10] == b'T',
                    "{command:?}: {created}"
                );
            }
        }
    }
    let missing = run(&args, &["tasks", "show", "999"]);
    assert!(!missing.status.success());
    assert!(
        text(&missing).contains("task 999 not found"),
        "{}",
        text(&missing)
    );
    assert!(!text(&missing).contains("instance"), "{}", text(&missing));
}

#[test]
fn inputs_come_from_files_and_standard_input() {
    let (args, dir) = sqlite();
    let big = serde_json::json!({ "ms": 1, "note": "x".repeat(200_000) });
    let path = dir.path().join("input.json");
    std::fs::write(&path, big.to_string()).unwrap();
    let from_file = run(
        &args,
        &[
            "tasks",
            "enqueue",
            "work",
            "--input",
            &format!("@{}", path.display()),
        ],
    );
    assert!(from_file.status.success(), "{}", text(&from_file));
    let mut piped = ratchet(&args)
        .args(["tasks", "enqueue", "work", "--input", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    piped
        .stdin
        .take()
        .unwrap()
        .write_all(br#"{"ms":2}"#)
        .unwrap();
    let from_stdin = piped.wait_with_output().unwrap();
    assert!(from_stdin.status.success(), "{}", text(&from_stdin));
    let id = String::from_utf8_lossy(&from_file.stdout)
        .trim()
        .to_string();
    let shown = run(&args, &["tasks", "show", &id, "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(value["input"], big);
    let id = String::from_utf8_lossy(&from_stdin.stdout)
        .trim()
        .to_string();
    let shown = run(&args, &["tasks", "show", &id, "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(value["input"], serde_json::json!({ "ms": 2 }));
}

#[test]
fn a_large_count_is_enqueued_in_bounded_calls() {
    let (args, _dir) = sqlite();
    let out = run(&args, &["tasks", "enqueue", "work", "--count", "12001"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("enqueued 12001, 0 duplicate(s)"),
        "{}",
        text(&out)
    );
    let listed = run(&args, &["queues", "list", "--json"]);
    let queue: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(queue["counts"]["available"], 12001);
}

#[test]
fn messages_stay_short_and_logs_plain() {
    let (args, dir) = sqlite();
    let long = "n".repeat(100_000);
    let out = run(&args, &["tasks", "enqueue", &long]);
    assert!(!out.status.success());
    assert!(
        text(&out).len() < 1_000,
        "{} bytes echoed",
        text(&out).len()
    );
    // A log line written to a file or a pipe carries no colour codes.
    let fresh = vec![
        "--db".to_string(),
        dir.path().join("fresh.db").display().to_string(),
    ];
    let migrated = ratchet(&fresh)
        .arg("migrate")
        .env("RATCHET_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&migrated.stderr);
    assert!(stderr.contains("applying SQLite migration"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "colour codes: {stderr:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_command_prints_no_warning() {
    let Some((args, _store)) = super::common::postgres().await else {
        return;
    };
    for command in [
        &["instances", "list"][..],
        &["tasks", "list"],
        &["queues", "list"],
    ] {
        let out = run(&args, command);
        assert!(out.status.success(), "{command:?}: {}", text(&out));
        assert!(
            out.stderr.is_empty(),
            "{command:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
