//! Who may change the schema: only `migrate` (and a worker or the demo that is asked to);
//! every other command checks the schema and says what to run, so a read-only role and a
//! worker role with the grants of docs/operations.md can use Ratchet, and a mistyped SQLite
//! path is an error rather than a new database.

use ratchet_store_postgres::testing::session as admin;

use super::common::{ratchet, run, text, Worker};

/// How many schemas are named `schema` (0 or 1).
async fn exists(pg: &ratchet_store_postgres::tokio_postgres::Client, schema: &str) -> i64 {
    pg.query_one(
        "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
        &[&schema],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_migrate_creates_the_postgres_schema() {
    let Some(url) = ratchet_store_postgres::testing::database_url() else {
        return;
    };
    let schema = ratchet_store_postgres::testing::fresh_schema();
    let args = vec![
        "--database-url".into(),
        url.clone(),
        "--schema".into(),
        schema.clone(),
    ];
    let listed = run(&args, &["instances", "list"]);
    assert!(!listed.status.success());
    assert!(
        text(&listed).contains("ratchet migrate"),
        "says what to run: {}",
        text(&listed)
    );
    let pg = admin(&url).await;
    assert_eq!(
        exists(&pg, &schema).await,
        0,
        "instances list created nothing"
    );
    let migrated = run(&args, &["migrate"]);
    assert!(migrated.status.success(), "{}", text(&migrated));
    assert_eq!(exists(&pg, &schema).await, 1);
    assert!(run(&args, &["instances", "list"]).status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_sqlite_path_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mistyped.db");
    let args = vec!["--db".to_string(), path.display().to_string()];
    for command in [
        &["tasks", "list"][..],
        &["instances", "show", "x"],
        &["queues", "list"],
    ] {
        let out = run(&args, command);
        assert!(!out.status.success(), "{command:?} succeeded");
        assert!(
            text(&out).contains("no such file"),
            "{command:?}: {}",
            text(&out)
        );
        assert!(!path.exists(), "{command:?} created the file");
    }
    assert!(run(&args, &["migrate"]).status.success());
    assert!(run(&args, &["tasks", "list"]).status.success());
}

/// The roles of docs/operations.md: a read-only one lists and shows but changes nothing, a
/// worker one runs workers and enqueues; neither can migrate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_role_and_a_worker_role_do_what_their_grants_allow() {
    let _one = super::ONE_AT_A_TIME.lock().await;
    let Some((args, _store)) = super::common::postgres().await else {
        return;
    };
    let (url, schema) = (args[1].clone(), args[3].clone());
    let pg = admin(&url).await;
    let suffix = &schema["ratchet_test_".len()..];
    let (reader, worker) = (format!("ro_{suffix}"), format!("wk_{suffix}"));
    pg.batch_execute(&format!(
        "CREATE ROLE {reader} NOLOGIN;
         GRANT USAGE ON SCHEMA {schema} TO {reader};
         GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {reader};
         CREATE ROLE {worker} NOLOGIN;
         GRANT USAGE ON SCHEMA {schema} TO {worker};
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {worker};
         GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {worker};"
    ))
    .await
    .unwrap();
    // The session takes the role at connect (the test's user may SET ROLE to it).
    let as_role = |role: &str| {
        let sep = if url.contains('?') { '&' } else { '?' };
        vec![
            "--database-url".to_string(),
            format!("{url}{sep}options=-c%20role%3D{role}"),
            "--schema".to_string(),
            schema.clone(),
        ]
    };
    let (ro, wk) = (as_role(&reader), as_role(&worker));
    for command in [
        &["instances", "list"][..],
        &["tasks", "list"],
        &["queues", "list"],
    ] {
        let out = run(&ro, command);
        assert!(
            out.status.success(),
            "read-only {command:?}: {}",
            text(&out)
        );
    }
    // A worker on the read-only role refuses to start, naming what it lacks, instead of
    // running and failing every claim. (Spawned: a worker that starts would never exit.)
    let mut child = ratchet(&ro)
        .args(["worker", "--queue", "default=1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("a worker on a read-only role started");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out).contains("may not do a worker's writes")
            && text(&out).contains("INSERT on")
            && text(&out).contains("tasks_id_seq")
            && !text(&out).contains("ready on"),
        "{}",
        text(&out)
    );
    let refused = run(&ro, &["tasks", "enqueue", "work", "--input", "{}"]);
    assert!(!refused.status.success());
    assert_eq!(
        text(&refused).matches("database error").count(),
        1,
        "the cause's prefix, once: {}",
        text(&refused)
    );
    assert!(
        text(&refused).contains("permission denied"),
        "{}",
        text(&refused)
    );
    for role in [&ro, &wk] {
        let out = run(role, &["migrate"]);
        assert!(!out.status.success(), "migrate: {}", text(&out));
        assert!(text(&out).contains("permission denied"), "{}", text(&out));
    }
    let enqueued = run(&wk, &["tasks", "enqueue", "work", "--input", r#"{"ms":1}"#]);
    assert!(enqueued.status.success(), "{}", text(&enqueued));
    let id = String::from_utf8_lossy(&enqueued.stdout).trim().to_string();
    let mut running = Worker::start(&wk, "role", &["--lease-ms", "2000"]);
    let waited = run(&wk, &["tasks", "wait", &id, "--timeout-secs", "30"]);
    assert!(waited.status.success(), "{}", text(&waited));
    assert!(run(&ro, &["tasks", "show", &id]).status.success());
    running.stop();
    pg.batch_execute(&format!(
        "DROP OWNED BY {reader}, {worker}; DROP ROLE {reader}; DROP ROLE {worker};"
    ))
    .await
    .unwrap();
}

/// A password never reaches the screen, whichever way the connection string gives it; a
/// failure is told once per cause, and without a backtrace unless asked for (`-v`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_never_printed_and_causes_are_told_once() {
    for url in [
        "postgres://app:s3cret@127.0.0.1:1/db",
        "postgres://app@127.0.0.1:1/db?password=s3cret",
        "host=127.0.0.1 port=1 user=app password=s3cret dbname=db",
        "host=127.0.0.1 port=1 user=app password='s3cret word' dbname=db",
    ] {
        let args = vec!["--database-url".to_string(), url.to_string()];
        let out = ratchet(&args)
            .args(["instances", "list"])
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let printed = text(&out);
        assert!(!out.status.success());
        assert!(!printed.contains("s3cret"), "{url}: {printed}");
        assert!(
            printed.contains("postgres://app@127.0.0.1:1/db"),
            "{printed}"
        );
        assert_eq!(
            printed.matches("Connection refused").count(),
            1,
            "{printed}"
        );
        assert!(!printed.contains("backtrace"), "{printed}");
        let verbose = run(&args, &["-v", "instances", "list"]);
        assert!(!text(&verbose).contains("s3cret"), "{}", text(&verbose));
    }
}
