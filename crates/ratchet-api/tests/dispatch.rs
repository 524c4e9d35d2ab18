//! Every operation the route table names is one `dispatch` answers by name (the Python
//! module's native client calls the API only through it), on a real SQLite store.

use ratchet_api::routes::ROUTES;
use ratchet_api::{dispatch, Call, LocalApi};

#[tokio::test]
async fn every_operation_is_dispatched_by_its_name() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = ratchet_store_sqlite::SqliteStore::open(dir.path().join("api.db"))
        .await
        .expect("the store opens");
    let api = LocalApi::new(ratchet_runtime::Client::new(std::sync::Arc::new(store)));
    for route in ROUTES {
        if route.operation.ends_with("_stream") {
            continue;
        }
        // No arguments: most refuse them, but each by its own checks, never as unknown.
        if let Err(e) = dispatch(&api, route.operation, &Call::default()).await {
            let detail = e.problem().map(|p| p.detail.clone()).unwrap_or_default();
            assert!(
                !detail.starts_with("no operation"),
                "{} is not dispatched",
                route.operation
            );
        }
    }
    let unknown = dispatch(&api, "instances_launch", &Call::default()).await;
    assert_eq!(unknown.err().and_then(|e| e.status()), Some(404));
    // A call with its arguments answers as the route does.
    let started = dispatch(
        &api,
        "instances_start",
        &Call {
            body: serde_json::json!({"name": "greet", "input": "Ada", "id": "i-1"}),
            ..Call::default()
        },
    )
    .await
    .expect("started");
    assert_eq!(started["id"], "i-1");
    let shown = dispatch(
        &api,
        "instances_show",
        &Call {
            segments: vec!["i-1".into()],
            ..Call::default()
        },
    )
    .await
    .expect("shown");
    assert_eq!(
        (shown["status"].as_str(), shown["input"].as_str()),
        (Some("Pending"), Some("Ada"))
    );
    assert!(shown["created_at"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
}
