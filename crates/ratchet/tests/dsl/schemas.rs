//! `input.schema`, `output.schema` and `export.schema`: data that does not match fails with
//! the DSL's validation error, naming where; data that matches goes on.

use std::sync::Arc;

use ratchet::workflow::Workflow;
use ratchet::{InstanceStatus, StartOptions, Store};
use serde_json::{json, Value};

use crate::harness::{start, WAIT};

const CHECKED: &str = r#"
document: {dsl: '1.0.0', namespace: data, name: checked, version: '1.0.0'}
input:
  schema:
    format: json
    document:
      type: object
      required: [amount]
      properties:
        amount: {type: number, minimum: 0}
do:
  - price:
      set:
        total: ${ .amount * 2 }
        code: ${ .code }
      output:
        schema:
          document:
            type: object
            properties:
              code: {type: string, pattern: '^[A-Z]{3}$'}
"#;

async fn data_is_checked_against_its_schemas(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.workflow(Workflow::compile(CHECKED).unwrap(), 1)
    })
    .await;
    let c = r.client();
    let run = |id: &'static str, input: Value| {
        let c = c.clone();
        async move {
            c.start_with("data/checked", input, StartOptions::id(id))
                .await
                .unwrap()
                .wait(WAIT)
                .await
                .unwrap()
        }
    };
    let ok = run("ok", json!({"amount": 4, "code": "EUR"})).await;
    assert_eq!(ok.status, InstanceStatus::Completed, "{ok:?}");
    assert_eq!(ok.output, Some(json!({"total": 8, "code": "EUR"})));

    let bad_input = run("bad-input", json!({"amount": -1})).await;
    assert_eq!(bad_input.status, InstanceStatus::Failed);
    let error = bad_input.error.unwrap().details.unwrap();
    assert_eq!(
        error["type"],
        "https://serverlessworkflow.io/spec/1.0.0/errors/validation"
    );
    assert_eq!(error["status"], 400);
    let detail = error["detail"].as_str().unwrap();
    assert!(
        detail.contains("the workflow's input") && detail.contains("/amount"),
        "{detail}"
    );

    let bad_output = run("bad-output", json!({"amount": 1, "code": "euro"})).await;
    assert_eq!(bad_output.status, InstanceStatus::Failed);
    let error = bad_output.error.unwrap().details.unwrap();
    assert_eq!(error["instance"], "/do/0/price");
    let detail = error["detail"].as_str().unwrap();
    assert!(
        detail.contains("task `price`'s output") && detail.contains("/code"),
        "{detail}"
    );
    r.shutdown().await;
}

crate::on_every_backend!(data_is_checked_against_its_schemas);
