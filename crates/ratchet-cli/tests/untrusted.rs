//! Untrusted input on a running fleet. Hostile workflows: a `ratchet server` and two `ratchet worker`
//! processes on PostgreSQL run stored workflows whose expressions, after a `listen`, would
//! stop the process (`halt`), recurse forever, build a billion elements, nest a hundred
//! thousand parentheses or run four megabytes long. Some are written straight into the
//! table (as a definition stored before the rules existed), some applied through the API
//! with expressions that only go wrong on the signal's data. Every process stays up, each
//! instance fails with a named error, and after every process is restarted nothing about
//! them has changed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use ratchet::{InstanceFilter, InstanceStatus, NewWorkflow, Store, Timestamp};
use serde_json::{json, Value};

use common::Server;

fn definition(name: &str, expression: &str) -> String {
    format!(
        "document: {{dsl: '1.0.0', namespace: hostile, name: {name}, version: '1.0.0'}}
do:
  - wait:
      listen:
        to:
          one:
            with: {{type: go}}
  - bomb:
      set:
        v: '${{ {expression} }}'
"
    )
}

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_workflows_fail_their_instances_and_no_process() {
    let Some((args, store)) = common::postgres().await else {
        return;
    };
    let migrated = common::run(&args, &["migrate"]);
    assert!(migrated.status.success(), "{}", common::text(&migrated));

    // Stored before the rules: written straight into the table.
    let stored = [
        ("halting", "halt".to_string()),
        ("recursing", "def f: 1 + f; f".to_string()),
        ("billion", "[range(1e9)]".to_string()),
        (
            "parentheses",
            format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000)),
        ),
        ("long", format!("1{}", " + 1".repeat(1 << 20))),
    ];
    for (name, expression) in &stored {
        let source = definition(name, expression);
        let new = NewWorkflow {
            namespace: "hostile".into(),
            name: (*name).into(),
            version: "1.0.0".into(),
            hash: "0".repeat(64),
            source,
        };
        store.workflow_put(new, Timestamp::now()).await.unwrap();
    }

    let mut server = Server::start(&args, &["--no-worker"]);
    let mut workers = [
        common::Worker::start(&args, "a", &[]),
        common::Worker::start(&args, "b", &[]),
    ];
    // Applied through the API: they compile, and go wrong on what the signal brings.
    let applied = [
        (
            "recursing-on-data",
            ".n as $n | def f: if $n == null then 0 else 1 + f end; f",
        ),
        ("billion-on-data", "[range(.n // 0)]"),
        (
            "doubling-on-data",
            "reduce range(.n // 0) as $i (\"x\"; . + .)",
        ),
    ];
    for (name, expression) in applied {
        let (status, body) = post(
            &server.base,
            "/v1/workflows",
            json!({"source": definition(name, expression)}),
        )
        .await;
        assert!(status < 300, "apply {name}: {status} {body}");
    }
    // What each instance fails with.
    let expected: Vec<(&str, &str, &str)> = stored
        .iter()
        .map(|(name, _)| (*name, "DefinitionInvalid", ""))
        .chain([
            ("recursing-on-data", "ExpressionBudget", "recursion"),
            ("billion-on-data", "ExpressionBudget", "budget"),
            ("doubling-on-data", "ExpressionBudget", "string"),
        ])
        .collect();
    for (name, kind, _) in &expected {
        // The workers say what they run on their next heartbeat after loading it.
        let start = json!({"name": format!("hostile/{name}"), "id": name, "input": {}});
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let (status, body) = loop {
            let (status, body) = post(&server.base, "/v1/instances", start.clone()).await;
            if status != 422 || std::time::Instant::now() > deadline {
                break (status, body);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(status < 300, "start {name}: {status} {body}");
        let (status, body) = post(
            &server.base,
            &format!("/v1/instances/{name}/signals"),
            json!({"name": "go", "payload": {"n": 1_000_000_000}}),
        )
        .await;
        // One whose definition no longer compiles may have failed already, at its first
        // turn: the signal then finds it finished.
        let finished = status == 409 && *kind == "DefinitionInvalid";
        assert!(status < 300 || finished, "signal {name}: {status} {body}");
    }

    let client = ratchet::Client::new(store.clone() as std::sync::Arc<dyn Store>)
        .with_poll_interval(Duration::from_millis(200));
    let mut histories = Vec::new();
    for (name, kind, why) in &expected {
        let outcome = client.wait(name, Duration::from_secs(60)).await.unwrap();
        assert_eq!(outcome.status, InstanceStatus::Failed, "{name}");
        let error = outcome.error.unwrap();
        assert_eq!(&error.kind, kind, "{name}: {error}");
        assert!(error.message.contains(why), "{name}: {error}");
        histories.push(store.history_read(name, None).await.unwrap());
    }
    assert!(server.alive(), "the server stayed up");
    for w in &mut workers {
        assert!(
            w.child.try_wait().unwrap().is_none(),
            "worker {} stayed up",
            w.label
        );
    }

    // Every process restarted: the instances are as they were, and the processes stay up.
    server.stop();
    for w in &mut workers {
        w.stop();
    }
    let mut server = Server::start(&args, &["--no-worker"]);
    let mut workers = [
        common::Worker::start(&args, "a2", &[]),
        common::Worker::start(&args, "b2", &[]),
    ];
    let health = reqwest::get(format!("{}/healthz", server.base))
        .await
        .unwrap();
    assert!(health.status().is_success());
    for ((name, kind, _), before) in expected.iter().zip(&histories) {
        let outcome = client.wait(name, Duration::from_secs(10)).await.unwrap();
        assert_eq!(outcome.status, InstanceStatus::Failed, "{name}");
        assert_eq!(&outcome.error.unwrap().kind, kind, "{name}");
        let after = store.history_read(name, None).await.unwrap();
        assert_eq!(&after, before, "{name}: history unchanged");
    }
    let all = store
        .instance_list(InstanceFilter::default())
        .await
        .unwrap();
    assert_eq!(all.len(), expected.len());
    assert!(server.alive());
    for w in &mut workers {
        assert!(w.child.try_wait().unwrap().is_none());
        w.stop();
    }
    server.stop();
}

/// The request bodies that once broke the server (fuzz/regressions/request_bodies, kept
/// from the issues and from fuzzing), sent to a real `ratchet server`: each is answered
/// without a server error, and the server stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_that_broke_the_server_are_answered() {
    let (args, _store, _dir) = common::sqlite().await;
    let migrated = common::run(&args, &["migrate"]);
    assert!(migrated.status.success(), "{}", common::text(&migrated));
    let mut server = Server::start(&args, &[]);
    let fuzz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let routes: Vec<(String, String)> = std::fs::read_to_string(fuzz.join("routes.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let mut cases: Vec<_> = std::fs::read_dir(fuzz.join("regressions/request_bodies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    assert!(!cases.is_empty());
    let http = reqwest::Client::new();
    for case in cases {
        let data = std::fs::read(&case).unwrap();
        let Some((pick, body)) = data.split_first() else {
            continue;
        };
        let (method, path) = &routes[usize::from(*pick) % routes.len()];
        let response = http
            .request(method.parse().unwrap(), format!("{}{path}", server.base))
            .header("content-type", "application/json")
            .body(body.to_vec())
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.display()));
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert!(
            !status.is_server_error() || status.as_u16() == 503,
            "{}: {method} {path} answered {status}: {text}",
            case.display()
        );
        assert!(server.alive(), "{}: the server died", case.display());
    }
    for path in ["/v1/tasks", "/v1/schedules", "/v1/instances", "/healthz"] {
        let response = reqwest::get(format!("{}{path}", server.base))
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
    }
    server.stop();
}
