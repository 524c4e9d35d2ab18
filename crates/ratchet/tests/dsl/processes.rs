//! `run: shell` and `run: script`: run only by a worker whose allow-list names them, with
//! their input, arguments and environment (and nothing of the worker's), on a time limit.

use std::sync::Arc;

use ratchet::workflow::{ProcessConfig, ProcessKind, Workflow};
use ratchet::{InstanceOutcome, InstanceStatus, StartOptions, Store};
use serde_json::{json, Value};

use crate::harness::{start, WAIT};

const PROCESSES: &str = r#"
document: {dsl: '1.0.0', namespace: run, name: processes, version: '1.0.0'}
do:
  - shell:
      input:
        from: ${ .message }
      run:
        shell:
          stdin: ${ . }
          command: |
            input=$(cat)
            echo "STDIN was: $input"
            echo "ARGS are $1 $2"
          arguments: [Foo, '${ $workflow.input.second }']
      export:
        as: '{shell: .}'
  - all:
      run:
        shell:
          command: 'echo out; echo err >&2; exit 3'
        return: all
      export:
        as: '$context + {all: .}'
  - env:
      run:
        shell:
          command: env
          environment: {FOO: bar}
      export:
        as: '$context + {env: .}'
  - python:
      run:
        script:
          language: python
          code: |
            import sys
            print(sys.argv[1] + " from python")
          arguments: [hello]
      export:
        as: '$context + {python: .}'
  - javascript:
      run:
        script:
          language: js
          code: |
            import { readFileSync } from 'node:fs';
            const stdin = readFileSync(process.stdin.fd, 'utf8');
            console.log(process.argv[2], stdin, process.env.foo);
          stdin: from stdin
          environment: {foo: bar}
          arguments: [hello]
      export:
        as: '$context + {javascript: .}'
  - done:
      set: ${ $context }
"#;

const FAILS: &str = r#"
document: {dsl: '1.0.0', namespace: run, name: fails, version: '1.0.0'}
do:
  - exit:
      run:
        shell:
          command: 'echo broken >&2; exit 3'
"#;

const SLOW: &str = r#"
document: {dsl: '1.0.0', namespace: run, name: slow, version: '1.0.0'}
do:
  - sleep:
      run:
        shell:
          command: 'sleep 30'
      timeout:
        after: {milliseconds: 300}
"#;

async fn outcome(r: &ratchet::Ratchet, name: &str, id: &str) -> InstanceOutcome {
    r.client()
        .start_with(
            name,
            json!({"second": "Bar", "message": "Hello World"}),
            StartOptions::id(id),
        )
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap()
}

async fn processes_run_only_where_allowed(store: Arc<dyn Store>) {
    let every = |b: ratchet::Builder| {
        b.workflow(Workflow::compile(PROCESSES).unwrap(), 1)
            .workflow(Workflow::compile(FAILS).unwrap(), 1)
            .workflow(Workflow::compile(SLOW).unwrap(), 1)
    };
    let r = start(&store, |b| {
        every(b).processes(ProcessConfig {
            allow: [
                ProcessKind::Shell,
                ProcessKind::Python,
                ProcessKind::Javascript,
            ]
            .into(),
        })
    })
    .await;
    let out: Value = outcome(&r, "run/processes", "p1")
        .await
        .into_result()
        .unwrap();
    assert_eq!(out["shell"], "STDIN was: Hello World\nARGS are Foo Bar\n");
    assert_eq!(
        out["all"],
        json!({"code": 3, "stdout": "out\n", "stderr": "err\n"})
    );
    let env = out["env"].as_str().unwrap();
    assert!(env.lines().any(|l| l == "FOO=bar"), "{env}");
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    // Nothing of the worker's environment (cargo gives the test process CARGO_*).
    assert!(!env.contains("CARGO"), "{env}");
    assert_eq!(out["python"], "hello from python\n");
    assert_eq!(out["javascript"], "hello from stdin bar\n");

    // Another exit code than 0 fails the task, with what the process wrote to stderr.
    let failed = outcome(&r, "run/fails", "f1").await;
    assert_eq!(failed.status, InstanceStatus::Failed);
    let error = failed.error.unwrap().details.unwrap();
    assert_eq!(error["status"], 500, "{error}");
    let detail = error["detail"].as_str().unwrap();
    assert!(detail.contains("exited with code 3: broken"), "{error}");

    // Past its timeout, it is killed and the task fails with the timeout error.
    let started = std::time::Instant::now();
    let slow = outcome(&r, "run/slow", "s1").await;
    assert_eq!(slow.status, InstanceStatus::Failed);
    let error = slow.error.unwrap().details.unwrap();
    assert_eq!(error["status"], 408, "{error}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    r.shutdown().await;

    // A worker not told to run shell commands refuses, saying how to allow them.
    let r = start(&store, every).await;
    let refused = outcome(&r, "run/fails", "f2").await;
    assert_eq!(refused.status, InstanceStatus::Failed);
    let error = refused.error.unwrap();
    assert!(error.message.contains("--allow-run shell"), "{error:?}");
    r.shutdown().await;
}

crate::on_every_backend!(processes_run_only_where_allowed);
