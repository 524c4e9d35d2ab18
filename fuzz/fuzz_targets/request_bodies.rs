//! Any request body sent to any route of the HTTP API is answered, never with a crash or a
//! server error: the first byte picks the route, the rest is the body. The server runs in
//! process on a SQLite file, with the sample handlers of `ratchet server`'s own kind absent:
//! what is exercised is reading, checking and refusing what is sent, and writing what is
//! accepted.
#![no_main]

use std::sync::OnceLock;

use http_body_util::BodyExt as _;
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt as _;

/// The routes inputs go to (`routes.txt`: the first byte of an input picks one).
fn routes() -> &'static [(String, String)] {
    static ROUTES: OnceLock<Vec<(String, String)>> = OnceLock::new();
    ROUTES.get_or_init(|| {
        include_str!("../routes.txt")
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .filter_map(|l| l.split_once(' '))
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect()
    })
}

struct Server {
    runtime: tokio::runtime::Runtime,
    app: axum::Router,
    _dir: tempfile::TempDir,
}

fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("fuzz.db");
        let app = runtime.block_on(async {
            let ratchet = ratchet::Ratchet::builder()
                .sqlite(path)
                .start()
                .await
                .expect("a runtime on SQLite");
            let client = ratchet.client().clone();
            // Kept running for the fuzzer's lifetime.
            std::mem::forget(ratchet);
            ratchet_server::router(ratchet_server::ServerState::new(client))
        });
        Server {
            runtime,
            app,
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((pick, body)) = data.split_first() else {
        return;
    };
    let routes = routes();
    let (method, path) = &routes[usize::from(*pick) % routes.len()];
    let s = server();
    let request = axum::http::Request::builder()
        .method(method.as_str())
        .uri(path.as_str())
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .body(axum::body::Body::from(body.to_vec()))
        .expect("a request");
    let status = s.runtime.block_on(async {
        let response = s.app.clone().oneshot(request).await.expect("an answer");
        let status = response.status();
        // Read the whole answer: writing it may be what fails.
        let _ = response.into_body().collect().await;
        status
    });
    assert!(
        !status.is_server_error() || status.as_u16() == 503,
        "{method} {path} with {:?} answered {status}",
        String::from_utf8_lossy(body)
    );
});
