//! Crash test: SIGKILL the demo mid-run, run it again, and check that every order completes
//! with each activity's completion in history exactly once; on SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ratchet::{InstanceStatus, SqliteStore, Store};

fn demo(store_args: &[String]) -> Command {
    let mut cmd = common::ratchet(store_args);
    cmd.args([
        "demo",
        "--orders",
        "12",
        "--step-ms",
        "250",
        "--lease-ms",
        "1000",
        "--quiet",
        "--no-serve",
    ]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

#[tokio::test]
async fn sqlite_sigkill_mid_run_then_resume_loses_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.db");
    let args = vec!["--db".to_string(), db.display().to_string()];
    // (`--db` beats a DATABASE_URL in the environment.)
    let mut first = demo(&args).spawn().unwrap();
    let store = loop {
        if let Ok(store) = SqliteStore::open(&db).await {
            break store;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    kill_mid_run_then_resume(&args, &mut first, Arc::new(store)).await;
}

#[tokio::test]
async fn postgres_sigkill_mid_run_then_resume_loses_and_repeats_nothing() {
    let Some((args, store)) = common::postgres().await else {
        return;
    };
    let mut first = demo(&args).spawn().unwrap();
    kill_mid_run_then_resume(&args, &mut first, store).await;
}

async fn kill_mid_run_then_resume(
    args: &[String],
    first: &mut std::process::Child,
    store: Arc<dyn Store>,
) {
    // Wait until some order is past its first activities, then kill -9 mid-run.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let list = store
            .instance_list(Default::default())
            .await
            .unwrap_or_default();
        if list.len() == 12
            && list
                .iter()
                .any(|r| r.custom_status.as_ref().and_then(|s| s.as_str()) == Some("shipping"))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the demo made no progress"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.kill().unwrap(); // SIGKILL on Unix
    first.wait().unwrap();

    let before = store.instance_list(Default::default()).await.unwrap();
    assert_eq!(before.len(), 12, "all orders were started before the kill");
    let unfinished = before.iter().filter(|r| !r.status.is_finished()).count();
    assert!(
        unfinished > 0,
        "the kill must land mid-run for this test to mean anything"
    );

    let second = demo(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(
        second.status.success(),
        "second run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(stdout.contains("resumed"), "{stdout}");

    for rec in store.instance_list(Default::default()).await.unwrap() {
        assert_eq!(
            rec.status,
            InstanceStatus::Completed,
            "{} did not complete: {:?}",
            rec.id,
            rec.error
        );
        let output = rec.output.clone().unwrap();
        let items = output["tracking"].as_array().unwrap().len();
        assert!(output["receipt"]
            .as_str()
            .unwrap()
            .starts_with("pay-order-"));
        assert_eq!(output["delivered"], "front door");
        common::assert_each_step_once(store.as_ref(), &rec.id, 2 + items).await;
    }
}
