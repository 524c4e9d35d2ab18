//! Plain `http://` calls, which the worker sends on HTTP/1 connections of its own: kept
//! between calls, replaced when the service closed one meanwhile, and an answer past the
//! size limit refused while it streams in.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ratchet::workflow::{CallConfig, Workflow};
use ratchet::{InstanceStatus, StartOptions, Store};
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::harness::{start, WAIT};

/// A request the service read: the connection's number (from 1) and the path.
type Log = Arc<Mutex<Vec<(usize, String)>>>;

/// A hand-written HTTP/1.1 service, so that how it treats connections is in the test's
/// hands: `/stay` answers and keeps the connection, `/closes` answers (without saying it
/// will close) and closes it 50 ms later, `/big` streams 11 MiB in chunks.
async fn service() -> (std::net::SocketAddr, Log) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let log: Log = Arc::default();
    let seen = log.clone();
    tokio::spawn(async move {
        let mut connections = 0;
        while let Ok((mut socket, _)) = listener.accept().await {
            connections += 1;
            let (n, seen) = (connections, seen.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        let mut chunk = [0_u8; 1024];
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => buf.extend_from_slice(&chunk[..k]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end);
                    let path = head.split(' ').nth(1).unwrap_or("").to_string();
                    let count = {
                        let mut seen = seen.lock().unwrap();
                        seen.push((n, path.clone()));
                        seen.len()
                    };
                    if path == "/big" {
                        let _ = socket
                            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                            .await;
                        let chunk = vec![b'x'; 64 << 10];
                        for _ in 0..176 {
                            let size = format!("{:x}\r\n", chunk.len());
                            if socket.write_all(size.as_bytes()).await.is_err()
                                || socket.write_all(&chunk).await.is_err()
                                || socket.write_all(b"\r\n").await.is_err()
                            {
                                return;
                            }
                        }
                        let _ = socket.write_all(b"0\r\n\r\n").await;
                        return;
                    }
                    let body = format!(r#"{{"n":{count}}}"#);
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if socket.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                    if path == "/closes" {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        return;
                    }
                }
            });
        }
    });
    (addr, log)
}

const POOLED: &str = r#"
document: {dsl: '1.0.0', namespace: plain, name: pooled, version: '1.0.0'}
do:
  - a:
      call: http
      with: {method: get, endpoint: 'http://plain.test/stay'}
      export: {as: '${ {a: .n} }'}
  - b:
      call: http
      with: {method: get, endpoint: 'http://plain.test/stay'}
      export: {as: '${ $context + {b: .n} }'}
  - c:
      call: http
      with: {method: get, endpoint: 'http://plain.test/closes'}
      export: {as: '${ $context + {c: .n} }'}
  - pause:
      wait: {milliseconds: 300}
  - d:
      call: http
      with: {method: get, endpoint: 'http://plain.test/closes'}
  - all:
      set: '${ $context + {d: .n} }'
"#;

const BIG: &str = r#"
document: {dsl: '1.0.0', namespace: plain, name: big, version: '1.0.0'}
do:
  - get:
      call: http
      with: {method: get, endpoint: 'http://plain.test/big'}
"#;

fn calls(addr: std::net::SocketAddr) -> CallConfig {
    CallConfig {
        resolve: vec![("plain.test".into(), addr)],
        ..CallConfig::default()
    }
}

/// Calls in a row share one connection; the call after the service closed it goes out on a
/// new one and succeeds.
async fn plain_calls_keep_their_connection_and_replace_a_closed_one(store: Arc<dyn Store>) {
    let (addr, log) = service().await;
    let r = start(&store, |b| {
        b.calls(calls(addr))
            .workflow(Workflow::compile(POOLED).unwrap(), 1)
    })
    .await;
    let outcome = r
        .client()
        .start_with("plain/pooled", json!({}), StartOptions::id("pooled"))
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(outcome.status, InstanceStatus::Completed, "{outcome:?}");
    assert_eq!(
        outcome.output,
        Some(json!({"a": 1, "b": 2, "c": 3, "d": 4}))
    );
    let log = log.lock().unwrap().clone();
    let expected: Vec<(usize, String)> =
        [(1, "/stay"), (1, "/stay"), (1, "/closes"), (2, "/closes")]
            .iter()
            .map(|(n, p)| (*n, p.to_string()))
            .collect();
    assert_eq!(log, expected);
    r.shutdown().await;
}

/// An answer that grows past 10 MiB fails the call with the communication error, read no
/// further; the worker goes on.
async fn a_plain_answer_past_the_limit_fails_the_call(store: Arc<dyn Store>) {
    let (addr, _log) = service().await;
    let r = start(&store, |b| {
        b.calls(calls(addr))
            .workflow(Workflow::compile(BIG).unwrap(), 1)
            .workflow(Workflow::compile(POOLED).unwrap(), 1)
    })
    .await;
    let c = r.client();
    let outcome = c
        .start_with("plain/big", json!({}), StartOptions::id("big"))
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed, "{outcome:?}");
    let error = outcome.error.unwrap();
    let details = error.details.clone().unwrap();
    assert_eq!(
        details["type"], "https://serverlessworkflow.io/spec/1.0.0/errors/communication",
        "{error:?}"
    );
    let detail = details["detail"].as_str().unwrap();
    assert!(
        detail.contains("GET http://plain.test/big: the answer is larger than 10485760 bytes"),
        "{error:?}"
    );
    let next = c
        .start_with("plain/pooled", json!({}), StartOptions::id("after-big"))
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    assert_eq!(next.status, InstanceStatus::Completed, "{next:?}");
    r.shutdown().await;
}

crate::on_every_backend!(
    plain_calls_keep_their_connection_and_replace_a_closed_one,
    a_plain_answer_past_the_limit_fails_the_call
);
