//! The checked-in OpenAPI document is the one the code generates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn docs_openapi_json_is_in_sync_with_the_code() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let checked_in = std::fs::read_to_string(&path).expect("docs/openapi.json");
    let generated = ratchet_server::openapi().to_pretty_json().unwrap();
    assert!(
        checked_in.trim_end() == generated.trim_end(),
        "docs/openapi.json is stale: run `cargo run -- server --print-openapi > docs/openapi.json`"
    );
    let doc: serde_json::Value = serde_json::from_str(&generated).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    // Every operation has an id of its own, and every error answer is a problem.
    let mut ids = std::collections::BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().expect("an operation id");
            assert!(
                ids.insert(id.to_string()),
                "{method} {path}: duplicate id {id}"
            );
            for (status, response) in op["responses"].as_object().unwrap() {
                if status.starts_with('4') || status.starts_with('5') {
                    assert!(
                        response["content"]
                            .get("application/problem+json")
                            .is_some(),
                        "{method} {path} {status} is not a problem"
                    );
                }
            }
        }
    }
    assert!(ids.len() >= 30, "{ids:?}");
}

/// The document says what every route can answer: a token refused (401, 403) wherever one
/// is asked for, and it is asked for (not optional) everywhere but the probes and whoami; a
/// malformed or unacceptable request (400, 422) wherever a route takes input; a body too
/// large (413) wherever it takes one; the server at its limits (503) everywhere.
#[test]
fn every_answer_a_route_can_give_is_listed() {
    let doc: serde_json::Value =
        serde_json::from_str(&ratchet_server::openapi().to_pretty_json().unwrap()).unwrap();
    assert_eq!(doc["security"], serde_json::json!([{"bearer": []}]));
    for (path, item) in doc["paths"].as_object().unwrap() {
        let public = ["/healthz", "/readyz", "/v1/whoami"].contains(&path.as_str());
        for (method, op) in item.as_object().unwrap() {
            let has = |status: &str| op["responses"].get(status).is_some();
            let at = format!("{method} {path}");
            if public {
                assert_eq!(op["security"], serde_json::json!([]), "{at}");
            } else {
                assert!(
                    op.get("security").is_none(),
                    "{at}: asks as the document does"
                );
                assert!(has("401") && has("403"), "{at}");
            }
            let input = op["parameters"].as_array().is_some_and(|p| !p.is_empty())
                || op.get("requestBody").is_some();
            if input {
                assert!(has("400") && has("422"), "{at}");
            }
            if op.get("requestBody").is_some() {
                assert!(has("413"), "{at}");
            }
            assert!(has("503"), "{at}");
        }
    }
}
