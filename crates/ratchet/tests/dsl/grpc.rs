//! `call: grpc` against a local gRPC service over HTTP/2: its `.proto` read from the
//! worker's `--grpc-protos` directory, the arguments sent as a protobuf message, the answer
//! read back as JSON, a gRPC error status raised as the communication error. The service
//! here writes and reads protobuf by hand, so the test does not share Ratchet's codec.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use ratchet::workflow::{CallConfig, Workflow};
use ratchet::{InstanceStatus, StartOptions, Store};
use serde_json::{json, Value};

use crate::harness::{start, WAIT};

const GREET_PROTO: &str = r#"
syntax = "proto3";
package GreeterApi;
service Greeter {
  rpc SayHello (HelloRequest) returns (HelloReply);
}
message HelloRequest { string name = 1; }
message HelloReply { string message = 1; int32 count = 2; }
"#;

const GREET: &str = r#"
document: {dsl: '1.0.0', namespace: rpc, name: greet, version: '1.0.0'}
do:
  - greet:
      call: grpc
      with:
        proto:
          endpoint: file://app/greet.proto
        service:
          name: GreeterApi.Greeter
          host: greeter.test
          port: PORT
          authentication:
            bearer: {token: grpc-token}
        method: SayHello
        arguments:
          name: ${ .name }
"#;

/// What the service saw: the names it was asked to greet, and each request's headers.
#[derive(Default)]
struct Seen {
    names: Vec<String>,
    headers: Vec<HashMap<String, String>>,
}

/// The string of field 1 of a protobuf message (`HelloRequest.name`).
fn field_one(message: &[u8]) -> String {
    if message.first() != Some(&0x0a) {
        return String::new();
    }
    let len = message.get(1).copied().unwrap_or(0) as usize;
    String::from_utf8_lossy(message.get(2..2 + len).unwrap_or_default()).into_owned()
}

/// `HelloReply{message, count}` as protobuf, in a gRPC frame.
fn reply(message: &str, count: u8) -> Vec<u8> {
    let mut m = vec![0x0a, message.len() as u8];
    m.extend_from_slice(message.as_bytes());
    m.extend_from_slice(&[0x10, count]);
    let mut frame = vec![0];
    frame.extend_from_slice(&(m.len() as u32).to_be_bytes());
    frame.extend_from_slice(&m);
    frame
}

async fn serve(seen: Arc<Mutex<Seen>>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let name = field_one(body.get(5..).unwrap_or_default());
    let count = {
        let mut s = seen.lock().unwrap();
        s.names.push(name.clone());
        s.headers.push(headers);
        s.names.len() as u8
    };
    if path != "/GreeterApi.Greeter/SayHello" {
        return Response::builder()
            .header("content-type", "application/grpc")
            .header("grpc-status", "12")
            .body(Full::new(Bytes::new()))
            .unwrap();
    }
    if name == "nobody" {
        // An error answers with its status in the headers and no message.
        return Response::builder()
            .header("content-type", "application/grpc")
            .header("grpc-status", "5")
            .header("grpc-message", "no%20such%20user")
            .body(Full::new(Bytes::new()))
            .unwrap();
    }
    Response::builder()
        .header("content-type", "application/grpc")
        .body(Full::new(Bytes::from(reply(
            &format!("Hello, {name}"),
            count,
        ))))
        .unwrap()
}

/// A gRPC service on a free loopback port (HTTP/2 without TLS).
async fn greeter() -> (SocketAddr, Arc<Mutex<Seen>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shared = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let seen = shared.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let seen = seen.clone();
                    async move { Ok::<_, Infallible>(serve(seen, req).await) }
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    (addr, seen)
}

async fn a_grpc_method_is_called_from_its_proto(store: Arc<dyn Store>) {
    let (addr, seen) = greeter().await;
    let protos = std::env::temp_dir().join(format!("ratchet-grpc-{}", addr.port()));
    std::fs::create_dir_all(protos.join("app")).unwrap();
    std::fs::write(protos.join("app/greet.proto"), GREET_PROTO).unwrap();
    let calls = CallConfig {
        resolve: vec![("greeter.test".into(), addr)],
        proto_dir: Some(protos.clone()),
        ..CallConfig::default()
    };
    // The DSL's schema takes a port as written, a number.
    let greet = Workflow::compile(&GREET.replace("PORT", &addr.port().to_string())).unwrap();
    let r = start(&store, |b| b.workflow(greet.clone(), 1).calls(calls)).await;
    let c = r.client();
    let run = |id: &'static str, name: &'static str| {
        let c = c.clone();
        async move {
            c.start_with("rpc/greet", json!({"name": name}), StartOptions::id(id))
                .await
                .unwrap()
                .wait(WAIT)
                .await
                .unwrap()
        }
    };
    let out: Value = run("g1", "ada").await.into_result().unwrap();
    assert_eq!(out, json!({"message": "Hello, ada", "count": 1}));
    {
        let s = seen.lock().unwrap();
        assert_eq!(s.names, ["ada"]);
        let h = &s.headers[0];
        assert_eq!(h["content-type"], "application/grpc");
        assert_eq!(h["authorization"], "Bearer grpc-token");
        assert!(h.contains_key("idempotency-key"), "{h:?}");
    }

    // A gRPC error status is the communication error, its status and message named.
    let failed = run("g2", "nobody").await;
    assert_eq!(failed.status, InstanceStatus::Failed);
    let error = failed.error.unwrap().details.unwrap();
    assert!(
        error["type"].as_str().unwrap().ends_with("/communication"),
        "{error}"
    );
    let detail = error["detail"].as_str().unwrap();
    assert!(
        detail.contains("NOT_FOUND") && detail.contains("no such user"),
        "{error}"
    );
    r.shutdown().await;

    // A worker without --grpc-protos reads no .proto file, and says so.
    let r = start(&store, |b| b.workflow(greet, 1)).await;
    let failed = r
        .client()
        .start_with("rpc/greet", json!({"name": "ada"}), StartOptions::id("g3"))
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap();
    let error = failed.error.unwrap();
    assert!(error.message.contains("--grpc-protos"), "{error:?}");
    r.shutdown().await;
    std::fs::remove_dir_all(protos).unwrap();
}

crate::on_every_backend!(a_grpc_method_is_called_from_its_proto);
