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

/// The limits the document states are the ones the code enforces (utoipa takes them as
/// literals: this keeps the two in step).
#[test]
fn the_documents_limits_are_the_codes() {
    let doc: serde_json::Value =
        serde_json::from_str(&ratchet_server::openapi().to_pretty_json().unwrap()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let max_items = |schema: &str, property: &str| {
        schemas[schema]["properties"][property]["maxItems"]
            .as_u64()
            .unwrap_or_else(|| panic!("{schema}.{property} has no maxItems"))
    };
    let as_u64 = |n: usize| n as u64;
    assert_eq!(
        max_items("AppendInput", "events"),
        as_u64(ratchet::MAX_EVENTS_PER_APPEND)
    );
    assert_eq!(max_items("EventInput", "tags"), as_u64(ratchet::MAX_TAGS));
    assert_eq!(max_items("ItemInput", "tags"), as_u64(ratchet::MAX_TAGS));
    assert_eq!(
        max_items("ItemInput", "types"),
        as_u64(ratchet::MAX_QUERY_TYPES)
    );
    assert_eq!(
        max_items("QueryInput", "query"),
        as_u64(ratchet::MAX_QUERY_ITEMS)
    );
    assert_eq!(
        max_items("ConditionInput", "fail_if_events_match"),
        as_u64(ratchet::MAX_QUERY_ITEMS)
    );
    let limits = ratchet_server::ServerLimits::default();
    for (schema, property) in [
        ("StartBatch", "instances"),
        ("EnqueueBatch", "tasks"),
        ("ManyIds", "ids"),
        ("HeartbeatBody", "tasks"),
        ("CompleteBody", "results"),
        ("ReleaseBody", "tasks"),
    ] {
        assert_eq!(
            max_items(schema, property),
            as_u64(limits.max_batch),
            "{schema}"
        );
    }
    assert_eq!(
        schemas["QueryInput"]["properties"]["limit"]["maximum"],
        serde_json::json!(limits.max_page)
    );
    assert_eq!(
        schemas["Tag"]["maxLength"],
        serde_json::json!(ratchet::MAX_TAG_BYTES)
    );
    assert_eq!(
        schemas["EventType"]["maxLength"],
        serde_json::json!(ratchet::MAX_EVENT_TYPE_BYTES)
    );
    // Unsigned 32-bit numbers are not `int32` (which stops at 2^31 - 1).
    let burst = &schemas["Limits"]["properties"]["burst"];
    assert_eq!(
        (burst["format"].clone(), burst["maximum"].clone()),
        (serde_json::json!("int64"), serde_json::json!(u32::MAX))
    );
}
