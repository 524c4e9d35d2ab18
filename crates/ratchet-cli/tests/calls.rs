//! A worker SIGKILLed in the middle of a declarative workflow's `call: http`: another worker
//! takes the call over when its lease runs out, the workflow's `try` retries it with the same
//! `Idempotency-Key`, and nothing is recorded twice; on SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ratchet::{InstanceStatus, Store};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use common::{run, text, Worker};

/// A plain-HTTP service that holds the first request it gets (never answers it) and answers
/// every later one `{"ok":true}`; it keeps each request's `Idempotency-Key`.
async fn held_then_answered() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let keys = Arc::new(Mutex::new(Vec::new()));
    let seen = keys.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0_u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let key = head
                    .lines()
                    .find_map(|l| l.strip_prefix("idempotency-key:"))
                    .unwrap_or("")
                    .trim()
                    .to_string();
                let first = {
                    let mut keys = seen.lock().unwrap();
                    keys.push(key);
                    keys.len() == 1
                };
                if first {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return;
                }
                let body = r#"{"ok":true}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    (base, keys)
}

async fn a_call_killed_midway_is_retried_once_with_its_key(
    args: Vec<String>,
    store: Arc<dyn Store>,
) {
    let (base, keys) = held_then_answered().await;
    let dir = tempfile::tempdir().unwrap();
    let definition = dir.path().join("held.yaml");
    std::fs::write(
        &definition,
        format!(
            r#"document: {{dsl: '1.0.0', namespace: calls, name: held, version: '1.0.0'}}
do:
  - attempt:
      try:
        - get:
            call: http
            with:
              method: get
              endpoint: {base}/held
      catch:
        retry:
          delay: {{milliseconds: 100}}
          limit:
            attempt: {{count: 3}}
"#
        ),
    )
    .unwrap();
    let out = run(&args, &["workflows", "apply", definition.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let worker = |label: &str| Worker::start(&args, label, &["--lease-ms", "1500"]);
    let mut first = worker("first");
    let out = run(&args, &["instances", "start", "calls/held", "--id", "held"]);
    assert!(out.status.success(), "{}", text(&out));
    // The call is in flight, held by the service: kill the worker running it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while keys.lock().unwrap().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call never came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill();
    let _second = worker("second");
    let out = run(
        &args,
        &["instances", "wait", "held", "--timeout-secs", "60"],
    );
    assert!(out.status.success(), "{}", text(&out));

    let record = store.instance_get("held").await.unwrap().unwrap();
    assert_eq!(record.status, InstanceStatus::Completed, "{record:?}");
    assert_eq!(record.output, Some(serde_json::json!({"ok": true})));
    let keys = keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(!keys[0].is_empty() && keys[0] == keys[1], "{keys:?}");
    // The lost attempt failed once (its worker lost), the retry's answer was recorded once.
    let history = store.history_read("held", None).await.unwrap();
    let named = |name: &str| history.iter().filter(|h| h.event.kind() == name).count();
    assert_eq!(named("ActivityScheduled"), 2, "{history:?}");
    assert_eq!(named("ActivityFailed"), 1, "{history:?}");
    assert_eq!(named("ActivityCompleted"), 1, "{history:?}");
    assert_eq!(named("TimerFired"), 1, "{history:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_call_killed_midway_is_retried_once_with_its_key() {
    let (args, store, _dir) = common::sqlite().await;
    a_call_killed_midway_is_retried_once_with_its_key(args, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_call_killed_midway_is_retried_once_with_its_key() {
    let Some((args, store)) = common::postgres().await else {
        return;
    };
    a_call_killed_midway_is_retried_once_with_its_key(args, store).await;
}
