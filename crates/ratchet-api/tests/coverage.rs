//! The API is written once: every operation of the server's OpenAPI document
//! (`docs/openapi.json`, which the server's own test keeps equal to what it serves) has a
//! route the HTTP client calls, at the same method and path, and every route the client calls
//! is in the document. Operations not typed yet are listed by name, and the list is held to
//! the document too: a new route without a client method fails here.

use std::collections::BTreeMap;

use ratchet_api::routes::{NOT_YET_TYPED, ROUTES};

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
fn every_documented_operation_has_a_client_route_or_is_listed_as_not_typed_yet() {
    let documented = documented();
    let mut missing = Vec::new();
    for (id, (method, path)) in &documented {
        let routed = ROUTES.iter().any(|r| r.operation == id);
        let listed = NOT_YET_TYPED.contains(&id.as_str());
        assert!(
            !(routed && listed),
            "{id} has a client route: take it off NOT_YET_TYPED"
        );
        if !routed && !listed {
            missing.push(format!("{id} ({method} {path})"));
        }
    }
    assert!(
        missing.is_empty(),
        "operations with no method of ratchet_api::Api: {missing:?}"
    );
    for id in NOT_YET_TYPED {
        assert!(
            documented.contains_key(*id),
            "NOT_YET_TYPED names {id}, which the server no longer has"
        );
    }
}

#[test]
fn no_route_is_listed_twice() {
    let mut seen = std::collections::BTreeSet::new();
    for route in ROUTES {
        assert!(seen.insert(route.operation), "{} twice", route.operation);
    }
}
