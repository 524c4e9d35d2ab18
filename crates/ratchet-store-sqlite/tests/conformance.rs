//! The store conformance suite against a real SQLite file.

use ratchet_store_sqlite::SqliteStore;

async fn fresh() -> SqliteStore {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(dir.path().join("test.db"))
        .await
        .expect("open");
    // Keep the directory for the test's lifetime.
    std::mem::forget(dir);
    store
}

ratchet_store::conformance_suite!(fresh());

#[tokio::test]
async fn every_statement_prepares() {
    let store = fresh().await;
    let names = SqliteStore::statement_names();
    assert!(names.len() > 20);
    for name in names {
        store
            .prepare(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[tokio::test]
async fn reopening_migrates_once_and_refuses_newer_schema() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("m.db");
    drop(SqliteStore::open(&path).await.expect("first open"));
    drop(
        SqliteStore::open(&path)
            .await
            .expect("second open is a no-op"),
    );
    let conn = rusqlite::Connection::open(&path).expect("raw open");
    conn.execute("INSERT INTO ratchet_schema (version) VALUES (99)", [])
        .expect("bump");
    drop(conn);
    match SqliteStore::open(&path).await {
        Err(ratchet_store::StoreError::SchemaTooNew { found: 99, .. }) => {}
        other => panic!("expected SchemaTooNew, got {:?}", other.err()),
    }
}
