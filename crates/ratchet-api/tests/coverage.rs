//! The API is written once: every operation of the server's OpenAPI document
//! (`docs/openapi.json`, which the server's own test keeps equal to what it serves) has a
//! route the HTTP client calls, at the same method and path, and every route the client calls
//! is in the document. A route added to the server without a client method fails here, and so
//! does a client method whose route the server lacks.

use std::collections::BTreeMap;

use ratchet_api::routes::ROUTES;

/// `operationId` → (method, path), from the document.
fn documented() -> BTreeMap<String, (String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
    let text = std::fs::read_to_string(path).expect("docs/openapi.json is readable");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("the document is JSON");
    let mut ops = BTreeMap::new();
    for (path, methods) in doc["paths"].as_object().expect("paths") {
        for (method, op) in methods.as_object().expect("methods") {
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
            ops.insert(id.to_string(), (method.clone(), path.clone()));
        }
    }
    ops
}

#[test]
fn every_client_route_is_a_documented_operation_at_its_method_and_path() {
    let documented = documented();
    for route in ROUTES {
        let (method, path) = documented.get(route.operation).unwrap_or_else(|| {
            panic!(
                "the client calls {} ({} {}), which the server does not document",
                route.operation,
                route.method.as_str(),
                route.path
            )
        });
        assert_eq!(
            (method.as_str(), path.as_str()),
            (route.method.as_str(), route.path),
            "{} is elsewhere on the server",
            route.operation
        );
    }
}

#[test]
fn every_documented_operation_has_a_client_route() {
    let missing: Vec<String> = documented()
        .into_iter()
        .filter(|(id, _)| !ROUTES.iter().any(|r| r.operation == id))
        .map(|(id, (method, path))| format!("{id} ({method} {path})"))
        .collect();
    assert!(
        missing.is_empty(),
        "operations with no method of ratchet_api::Api: {missing:?}"
    );
}

#[test]
fn no_route_is_listed_twice() {
    let mut seen = std::collections::BTreeSet::new();
    for route in ROUTES {
        assert!(seen.insert(route.operation), "{} twice", route.operation);
    }
    // Every operation, no more: 58 routes in the document.
    assert_eq!(ROUTES.len(), documented().len());
}
