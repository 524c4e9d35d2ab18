//! `ratchet workflows` as a user meets it: validate without a database, apply (new, the same
//! again, a changed version refused, a new version), list, show and delete, and a worker that
//! loads what was applied and runs it, started by name from the CLI; graphs drawn from a file
//! and from a run.

use std::sync::Arc;

use ratchet::Store;

use super::common::{run, text, Worker};

const GREET: &str = r#"document:
  dsl: '1.0.0'
  namespace: demo
  name: greet
  version: '1.0.0'
do:
  - step:
      call: fanout_step
      with:
        i: ${ .n }
        ms: 0
  - done:
      set: '${ {step: .i, version: "1.0.0"} }'
"#;

const BROKEN: &str = r#"document: {dsl: '1.0.0', namespace: demo, name: broken, version: '1.0.0'}
do:
  - first:
      call: mcp
  - second:
      set: ${ .a + }
      then: nowhere
"#;

/// GREET as version `version`: its document and the version its output names.
fn versioned(version: &str) -> String {
    GREET
        .replace("version: '1.0.0'", &format!("version: '{version}'"))
        .replace(r#"version: "1.0.0""#, &format!(r#"version: "{version}""#))
}

/// Starts demo/greet as `id` from the CLI and waits for it: the wait's output.
fn start_and_wait(args: &[String], id: &str, input: &str) -> std::process::Output {
    let out = run(
        args,
        &[
            "instances",
            "start",
            "demo/greet",
            "--id",
            id,
            "--input",
            input,
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    run(args, &["instances", "wait", id, "--timeout-secs", "30"])
}

pub(crate) async fn workflows_are_applied_listed_and_run_by_a_worker(
    args: Vec<String>,
    store: Arc<dyn Store>,
) {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        path.display().to_string()
    };
    let greet = write("greet.yaml", GREET);
    let broken = write("broken.yaml", BROKEN);

    // Every error at once, with file, line and column; no database is needed.
    let out = run(
        &["--db".into(), "/nonexistent/dir/x.db".into()],
        &["workflows", "validate", &broken, &greet],
    );
    assert!(!out.status.success());
    let said = text(&out);
    for expected in [
        format!("{broken}:4:13: task `first`: `call: mcp` is not supported"),
        format!("{broken}:6:12: task `second`: `set`: syntax error"),
        format!("{broken}:7:13: task `second`: `then: nowhere` names no task"),
        format!("{greet}: ok (demo/greet 1.0.0)"),
    ] {
        assert!(said.contains(&expected), "missing {expected:?} in:\n{said}");
    }

    let apply = |path: &str| run(&args, &["workflows", "apply", path]);
    let out = apply(&greet);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("demo/greet 1.0.0 stored as revision 1"),
        "{}",
        text(&out)
    );
    let out = apply(&greet);
    assert!(
        text(&out).contains("unchanged (revision 1)"),
        "{}",
        text(&out)
    );
    // The same version with other content is refused: instances keep what they started on.
    let changed = write("changed.yaml", &GREET.replace("ms: 0", "ms: 1"));
    let out = apply(&changed);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("new document.version"),
        "{}",
        text(&out)
    );
    let v2 = write("v2.yaml", &versioned("2.0.0"));
    let out = apply(&v2);
    assert!(
        text(&out).contains("demo/greet 2.0.0 stored as revision 2"),
        "{}",
        text(&out)
    );
    let out = apply(&broken);
    assert!(!out.status.success());
    assert!(text(&out).contains("broken.yaml:4:13"), "{}", text(&out));

    let out = run(&args, &["workflows", "list"]);
    let listed = text(&out);
    assert!(
        listed.contains("demo/greet") && listed.contains("2.0.0"),
        "{listed}"
    );
    assert!(
        !listed.contains("demo/broken"),
        "nothing of a broken definition is stored"
    );
    let out = run(
        &args,
        &["workflows", "show", "demo/greet", "--version", "1.0.0"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), GREET);
    let out = run(
        &args,
        &[
            "workflows",
            "show",
            "demo/greet",
            "--version",
            "1.0.0",
            "--canonical",
        ],
    );
    let canonical = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(canonical.contains("call: \"fanout_step\""), "{canonical}");
    assert_eq!(
        ratchet::workflow::Workflow::compile(&canonical).unwrap(),
        ratchet::workflow::Workflow::compile(GREET).unwrap(),
        "the canonical form is the same workflow"
    );

    // A worker loads the stored workflows; a start by name runs the newest version.
    let mut worker = Worker::start(&args, "w", &[]);
    let out = start_and_wait(&args, "g1", r#"{"n": 7}"#);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("g1: Completed")
            && said.contains(r#""step": 7"#)
            && said.contains(r#""version": "2.0.0""#),
        "{said}"
    );
    // A version applied while the worker runs: it picks it up within seconds.
    let v3 = write("v3.yaml", &versioned("3.0.0"));
    let out = apply(&v3);
    assert!(
        text(&out).contains("stored as revision 3"),
        "{}",
        text(&out)
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let workers = store.worker_list().await.unwrap();
        let runs_v3 = workers.iter().any(|w| {
            w.about
                .orchestrations
                .iter()
                .any(|(name, versions)| name == "demo/greet" && versions.contains(&3))
        });
        if runs_v3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never ran revision 3"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let out = start_and_wait(&args, "g2", r#"{"n": 8}"#);
    assert!(
        text(&out).contains(r#""version": "3.0.0""#),
        "{}",
        text(&out)
    );
    worker.stop();

    // Graphs: of a file (no database needed), to a file or standard output; of a run.
    let svg = dir.path().join("greet.svg");
    let out = run(
        &["--db".into(), "/nonexistent/dir/x.db".into()],
        &[
            "workflows",
            "render",
            &greet,
            "-o",
            &svg.display().to_string(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("(4 nodes, 3 edges, 0 crossings)"),
        "{}",
        text(&out)
    );
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawn.starts_with("<svg") && drawn.contains(">step<") && drawn.contains("call fanout_step")
    );
    let out = run(&args, &["workflows", "render", &greet]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        drawn,
        "the same bytes every time"
    );
    let out = run(&args, &["workflows", "render", &broken]);
    assert!(!out.status.success());
    assert!(text(&out).contains("broken.yaml:4:13"), "{}", text(&out));
    let out = run(&args, &["workflows", "render", "--instance", "g2"]);
    let drawn = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        drawn.contains(">fanout_step<") && drawn.contains("status-completed"),
        "{drawn}"
    );
    let out = run(&args, &["workflows", "render", "--instance", "nobody"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("no instance nobody"), "{}", text(&out));
}

const SLOW: &str = r#"document: {dsl: '1.0.0', namespace: demo, name: slow, version: '1.0.0'}
do:
  - slow:
      call: fanout_step
      with: {i: 1, ms: 1500}
  - pause:
      listen:
        to:
          one:
            with:
              type: go
  - last:
      call: fanout_step
      with: {i: 2, ms: 0}
  - done:
      set: '${ {second: .i} }'
"#;

/// A worker SIGKILLed while a declarative workflow's activity runs: a second worker takes
/// the instance over once the lease expires, replays it from history and finishes it, each
/// step recorded once.
pub(crate) async fn a_declarative_workflow_survives_a_killed_worker(
    args: Vec<String>,
    store: Arc<dyn Store>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.yaml");
    std::fs::write(&path, SLOW).unwrap();
    let out = run(&args, &["workflows", "apply", &path.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let fast = ["--lease-ms", "1000"];
    let mut first = Worker::start(&args, "first", &fast);
    let out = run(&args, &["instances", "start", "demo/slow", "--id", "s1"]);
    assert!(out.status.success(), "{}", text(&out));
    // Mid-activity: the step runs for 1.5 s.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    first.kill();
    let mut second = Worker::start(&args, "second", &fast);
    let out = run(
        &args,
        &["instances", "signal", "s1", "go", "--payload", "{}"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = run(&args, &["instances", "wait", "s1", "--timeout-secs", "30"]);
    let said = text(&out);
    assert!(
        said.contains("s1: Completed") && said.contains(r#""second": 2"#),
        "{said}"
    );
    let history = store.history_read("s1", None).await.unwrap();
    let scheduled = history
        .iter()
        .filter(|r| matches!(r.event, ratchet::HistoryEvent::ActivityScheduled { .. }))
        .count();
    assert_eq!(scheduled, 2, "each call recorded once: {history:?}");
    second.stop();
}

const WAITS: &str = r#"document: {dsl: '1.0.0', namespace: demo, name: waits, version: '1.0.0'}
do:
  - pause:
      listen:
        to:
          one:
            with:
              type: go
  - done:
      set: '${ {waited: true} }'
"#;

/// `workflows delete`: one version, then the rest; unknown names refused; a deleted
/// revision's number never given again; a workflow an instance runs on refused until
/// --force, after which the worker that holds it in memory runs the instance to its end.
pub(crate) async fn workflows_are_deleted_from_the_cli(args: Vec<String>, store: Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        path.display().to_string()
    };
    let said = |command: &[&str]| {
        let out = run(&args, command);
        (out.status.success(), text(&out))
    };
    let greet = write("greet.yaml", GREET);
    let v2 = write("v2.yaml", &versioned("2.0.0"));
    for path in [&greet, &v2] {
        let (ok, out) = said(&["workflows", "apply", path]);
        assert!(ok, "{out}");
    }

    let (ok, out) = said(&["workflows", "delete", "demo/greet", "--version", "1.0.0"]);
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "deleted demo/greet 1.0.0 (revision 1)");
    let (_, listed) = said(&["workflows", "list"]);
    assert!(
        listed.contains("2.0.0") && !listed.contains("1.0.0"),
        "{listed}"
    );
    let (ok, out) = said(&["workflows", "delete", "demo/nobody"]);
    assert!(
        !ok && out.contains("not found: workflow demo/nobody"),
        "{out}"
    );
    let (ok, out) = said(&["workflows", "delete", "demo/greet", "--version", "1.0.0"]);
    assert!(!ok && out.contains("demo/greet version 1.0.0"), "{out}");
    let (ok, out) = said(&["workflows", "delete", "greet"]);
    assert!(!ok && out.contains("namespace/name"), "{out}");
    let (ok, out) = said(&["workflows", "delete", "demo/greet"]);
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "deleted demo/greet 2.0.0 (revision 2)");
    let (_, listed) = said(&["workflows", "list"]);
    assert!(!listed.contains("demo/greet"), "{listed}");
    // Applied again, the first version gets a new number: a worker that still holds
    // revision 1 or 2 never takes it for one of those.
    let (_, out) = said(&["workflows", "apply", &greet]);
    assert!(out.contains("stored as revision 3"), "{out}");

    // An instance runs on demo/waits: refused, nothing deleted, until --force.
    let waits = write("waits.yaml", WAITS);
    let (ok, out) = said(&["workflows", "apply", &waits]);
    assert!(ok, "{out}");
    let mut worker = Worker::start(&args, "w", &[]);
    let (ok, out) = said(&["instances", "start", "demo/waits", "--id", "d1"]);
    assert!(ok, "{out}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let d1 = store.instance_get("d1").await.unwrap();
        if d1
            .as_ref()
            .is_some_and(|d| d.status == ratchet::InstanceStatus::Running)
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "d1 never ran: {d1:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (ok, out) = said(&["workflows", "delete", "demo/waits"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("demo/waits is in use by 1 unfinished instance(s)") && out.contains("--force"),
        "{out}"
    );
    let (_, listed) = said(&["workflows", "list"]);
    assert!(
        listed.contains("demo/waits"),
        "nothing was deleted: {listed}"
    );
    let (ok, out) = said(&["workflows", "delete", "demo/waits", "--force"]);
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "deleted demo/waits 1.0.0 (revision 1)");
    // The worker loaded the revision before it was deleted and runs d1 to its end.
    let (ok, out) = said(&["instances", "signal", "d1", "go", "--payload", "{}"]);
    assert!(ok, "{out}");
    let (_, out) = said(&["instances", "wait", "d1", "--timeout-secs", "30"]);
    assert!(
        out.contains("d1: Completed") && out.contains(r#""waited": true"#),
        "{out}"
    );
    worker.stop();
}
