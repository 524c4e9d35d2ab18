//! `call: http` as a durable step: retried by the workflow's `try` on durable timers, one
//! `Idempotency-Key` for every attempt of a call, the answer recorded once.

use std::sync::Arc;
use std::time::Duration;

use ratchet::workflow::Workflow;
use ratchet::{InstanceStatus, StartOptions, Store};
use serde_json::{json, Value};

use crate::harness::{start, WAIT};
use crate::standin::{self, Step};

const FLAKY: &str = r#"
document: {dsl: '1.0.0', namespace: calls, name: flaky, version: '1.0.0'}
do:
  - attempt:
      try:
        - get:
            call: http
            with:
              method: get
              endpoint: https://standin.test/script/{script}
            timeout:
              after: {seconds: 2}
      catch:
        retry:
          delay: {milliseconds: 100}
          backoff: {exponential: {}}
          limit:
            attempt: {count: 4}
"#;

/// Fails twice (500, 503), hangs the third until its timeout, answers the fourth: over
/// HTTPS (reqwest) and over plain HTTP (the worker's own HTTP/1 path).
async fn a_failing_call_is_retried_on_durable_timers_with_one_key(store: Arc<dyn Store>) {
    for scheme in ["https", "http"] {
        retried_with_one_key(&store, scheme).await;
    }
}

/// `source` (a workflow named `name`) with its calls over `scheme` and the name
/// `{name}-{scheme}`.
fn over(source: &str, name: &str, scheme: &str) -> Workflow {
    Workflow::compile(
        &source
            .replace("https://", &format!("{scheme}://"))
            .replace(&format!("name: {name}"), &format!("name: {name}-{scheme}")),
    )
    .unwrap()
}

async fn retried_with_one_key(store: &Arc<dyn Store>, scheme: &str) {
    let standin = standin::start().await;
    standin.script(
        "flaky",
        vec![
            Step::Status(500),
            Step::Status(503),
            Step::Hang(Duration::from_secs(6)),
            Step::Status(200),
        ],
    );
    let r = start(store, |b| {
        b.calls(standin.calls())
            .workflow(over(FLAKY, "flaky", scheme), 1)
    })
    .await;
    let c = r.client();
    let id = format!("flaky-{scheme}");
    let handle = c
        .start_with(
            &format!("calls/flaky-{scheme}"),
            json!({"script": "flaky"}),
            StartOptions::id(&id),
        )
        .await
        .unwrap();
    let outcome = handle.wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.output, Some(json!({"status": 200})));
    let seen = standin.seen("/script/flaky");
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(seen.iter().all(|s| s.method == "GET"), "{seen:?}");
    let keys: Vec<&str> = seen
        .iter()
        .map(|s| {
            s.headers
                .get("idempotency-key")
                .map(String::as_str)
                .unwrap_or("")
        })
        .collect();
    assert!(!keys[0].is_empty(), "{keys:?}");
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    // Three waits between four attempts, each a durable timer; each attempt's answer recorded
    // once: three answers (500, 503, 200) and one timeout.
    let history = c.history(&id).await.unwrap();
    let named = |name: &str| history.iter().filter(|h| h.event.kind() == name).count();
    assert_eq!(named("TimerFired"), 3, "{history:?}");
    assert_eq!(named("ActivityCompleted"), 3, "{history:?}");
    assert_eq!(named("ActivityFailed"), 1, "{history:?}");
    r.shutdown().await;

    // A second run of the same definition sends a new key; its answer comes from its own call.
    standin.script("again", vec![Step::Status(200)]);
    let r = start(store, |b| {
        b.calls(standin.calls())
            .workflow(over(FLAKY, "flaky", scheme), 1)
    })
    .await;
    let again = r
        .client()
        .start_with(
            &format!("calls/flaky-{scheme}"),
            json!({"script": "again"}),
            StartOptions::id(format!("again-{scheme}")),
        )
        .await
        .unwrap();
    let out: Value = again.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!({"status": 200}));
    let second = standin.seen("/script/again");
    assert_eq!(second.len(), 1);
    assert_ne!(
        second[0].headers.get("idempotency-key").map(String::as_str),
        Some(keys[0])
    );
    r.shutdown().await;
}

const SHAPES: &str = r#"
document: {dsl: '1.0.0', namespace: calls, name: shapes, version: '1.0.0'}
do:
  - response:
      call: http
      with:
        method: get
        endpoint: https://petstore.swagger.io/v2/pet/{petId}
        headers:
          x-request: ${ "pet-" + (.petId | tostring) }
        output: response
      export:
        as: '${ {response: .} }'
  - raw:
      call: http
      with:
        method: get
        endpoint:
          uri: ${ "https://petstore.swagger.io/v2/pet/" + ($context.response.content.id | tostring) }
        output: raw
      export:
        as: '${ $context + {raw: .} }'
  - missing:
      try:
        - lost:
            call: http
            with:
              method: get
              endpoint: https://petstore.swagger.io/v2/pet/none
      catch:
        as: failure
        do:
          - keep:
              set:
                response: ${ $context.response }
                raw: ${ $context.raw }
                failure: ${ $failure | del(.response) }
"#;

/// What each `output` gives, and what a non-2xx answer raises; what the service sees: over
/// HTTPS (reqwest) and over plain HTTP (the worker's own HTTP/1 path) alike.
async fn calls_answer_as_their_output_says(store: Arc<dyn Store>) {
    for scheme in ["https", "http"] {
        answered_as_output_says(&store, scheme).await;
    }
}

async fn answered_as_output_says(store: &Arc<dyn Store>, scheme: &str) {
    let standin = standin::start().await;
    let r = start(store, |b| {
        b.calls(standin.calls())
            .workflow(over(SHAPES, "shapes", scheme), 1)
    })
    .await;
    let handle = r
        .client()
        .start_with(
            &format!("calls/shapes-{scheme}"),
            json!({"petId": 2}),
            StartOptions::id(format!("shapes-{scheme}")),
        )
        .await
        .unwrap();
    let out: Value = handle.wait(WAIT).await.unwrap().into_result().unwrap();
    let response = &out["response"];
    assert_eq!(response["statusCode"], 200);
    assert_eq!(response["content"]["id"], 2);
    assert_eq!(response["request"]["method"], "GET");
    assert_eq!(
        response["request"]["uri"],
        format!("{scheme}://petstore.swagger.io/v2/pet/2")
    );
    assert_eq!(response["request"]["headers"]["x-request"], "pet-2");
    // What the service saw: the host by its name, the worker's agent, the key.
    let seen = standin.seen("/v2/pet/2");
    assert_eq!(seen.len(), 2, "{seen:?}");
    let headers = &seen[0].headers;
    assert_eq!(headers["host"], "petstore.swagger.io", "{headers:?}");
    assert!(headers["user-agent"].starts_with("ratchet/"), "{headers:?}");
    assert_eq!(headers["accept"], "*/*", "{headers:?}");
    assert_eq!(headers["x-request"], "pet-2", "{headers:?}");
    assert_eq!(headers["idempotency-key"].len(), 32, "{headers:?}");
    assert_eq!(response["headers"]["content-type"], "application/json");
    // Raw: the body as base64.
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(out["raw"].as_str().unwrap())
        .unwrap();
    let body: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(body["id"], 2);
    // A 404: the communication error, with the status and where it was raised.
    let failure = &out["failure"];
    assert_eq!(
        failure["type"],
        "https://serverlessworkflow.io/spec/1.0.0/errors/communication"
    );
    assert_eq!(failure["status"], 404);
    assert_eq!(failure["instance"], "/do/2/missing/try/0/lost");
    r.shutdown().await;
}

const FUNCTIONS: &str = r#"
document: {dsl: '1.0.0', namespace: calls, name: functions, version: '1.0.0'}
use:
  functions:
    getPetById:
      call: http
      with:
        method: get
        endpoint: https://petstore.swagger.io/v2/pet/{petId}
      output:
        as: .name
    describe:
      set:
        named: ${ .name }
        by: ${ $workflow.definition.name }
do:
  - first:
      call: getPetById
      with:
        petId: ${ .ids[0] }
      export:
        as: '${ {first: .} }'
  - second:
      call: describe
      with:
        name: ${ $context.first }
"#;

/// `use.functions`: a named task run on the call's `with`.
async fn functions_run_on_their_arguments(store: Arc<dyn Store>) {
    let standin = standin::start().await;
    let r = start(&store, |b| {
        b.calls(standin.calls())
            .workflow(Workflow::compile(FUNCTIONS).unwrap(), 1)
    })
    .await;
    let out: Value = r
        .client()
        .start_with(
            "calls/functions",
            json!({"ids": [1, 2]}),
            StartOptions::id("functions"),
        )
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, json!({"named": "Milou", "by": "functions"}));
    assert_eq!(standin.seen("/v2/pet/1").len(), 1);
    r.shutdown().await;
}

const DIGEST: &str = r#"
document: {dsl: '1.0.0', namespace: calls, name: digest, version: '1.0.0'}
do:
  - get:
      try:
        - ask:
            call: http
            with:
              method: post
              endpoint:
                uri: https://standin.test/digest
                authentication:
                  digest:
                    username: ratchet
                    password: ${ .password }
              body: {hello: world}
      catch:
        as: refused
        do:
          - say:
              set:
                status: ${ $refused.status }
                answered: ${ $refused.response.statusCode }
"#;

/// `digest` authentication: the call goes out without credentials, and again with the
/// response to the service's challenge (the same idempotency key on both); a wrong password
/// is the 401 the service gives it, as a communication error.
async fn digest_authentication_answers_the_challenge(store: Arc<dyn Store>) {
    for scheme in ["https", "http"] {
        let standin = standin::start().await;
        let r = start(&store, |b| {
            b.calls(standin.calls())
                .workflow(over(DIGEST, "digest", scheme), 1)
        })
        .await;
        let name = format!("calls/digest-{scheme}");
        let run = |id: String, password: &str| {
            let c = r.client().clone();
            let (name, input) = (name.clone(), json!({"password": password}));
            async move {
                c.start_with(&name, input, StartOptions::id(id))
                    .await
                    .unwrap()
                    .wait(WAIT)
                    .await
                    .unwrap()
                    .into_result::<Value>()
                    .unwrap()
            }
        };
        let out = run(format!("digest-{scheme}"), standin::PASSWORD).await;
        assert_eq!(out, json!({"by": "digest"}), "{scheme}");
        let seen = standin.seen("/digest");
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert!(seen.iter().all(|s| s.method == "POST"), "{seen:?}");
        assert!(!seen[0].headers.contains_key("authorization"), "{seen:?}");
        assert!(
            seen[1].headers["authorization"].starts_with("Digest username=\"ratchet\""),
            "{seen:?}"
        );
        assert_eq!(
            seen[0].headers.get("idempotency-key"),
            seen[1].headers.get("idempotency-key")
        );

        let refused = run(format!("digest-wrong-{scheme}"), "not-the-password").await;
        assert_eq!(refused, json!({"status": 401, "answered": 401}), "{scheme}");
        assert_eq!(standin.seen("/digest").len(), 4);
        r.shutdown().await;
    }
}

crate::on_every_backend!(
    a_failing_call_is_retried_on_durable_timers_with_one_key,
    calls_answer_as_their_output_says,
    functions_run_on_their_arguments,
    digest_authentication_answers_the_challenge
);
