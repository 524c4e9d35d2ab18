//! The store conformance suite, and this backend's own checks, against a real PostgreSQL.
#![allow(clippy::unwrap_used)]

use ratchet_store::{Store, StoreError};
use ratchet_store_postgres::testing::{database_url, fresh_schema, fresh_store};
use ratchet_store_postgres::{PostgresConfig, PostgresStore, SCHEMA_VERSION};

ratchet_store::conformance_suite!(optional: fresh_store());

#[tokio::test]
async fn every_statement_prepares() {
    let Some(store) = fresh_store().await else {
        return;
    };
    let names = PostgresStore::statement_names();
    assert!(names.len() > 10);
    for name in names {
        store
            .prepare(&name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[tokio::test]
async fn migrating_twice_is_a_no_op_and_a_newer_schema_is_refused() {
    let Some(url) = database_url() else {
        return;
    };
    let config = PostgresConfig {
        schema: fresh_schema(),
        ..PostgresConfig::default()
    };
    let first = PostgresStore::connect_with(&url, config.clone())
        .await
        .unwrap();
    assert_eq!(first.schema_version().await.unwrap(), SCHEMA_VERSION);
    let again = PostgresStore::connect_with(&url, config.clone())
        .await
        .unwrap();
    assert_eq!(again.schema_version().await.unwrap(), SCHEMA_VERSION);
    // Without migrating on connect, an up-to-date schema is accepted.
    PostgresStore::connect_with(
        &url,
        PostgresConfig {
            migrate: false,
            ..config.clone()
        },
    )
    .await
    .unwrap();

    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "INSERT INTO {}.ratchet_schema (version) VALUES (99)",
            config.schema
        ))
        .await
        .unwrap();
    match PostgresStore::connect_with(&url, config.clone()).await {
        Err(StoreError::SchemaTooNew {
            found: 99,
            supported,
        }) => assert_eq!(supported, SCHEMA_VERSION),
        other => panic!("expected SchemaTooNew, got {:?}", other.err()),
    }

    let empty = PostgresConfig {
        schema: fresh_schema(),
        migrate: false,
        ..PostgresConfig::default()
    };
    match PostgresStore::connect_with(&url, empty).await {
        Err(StoreError::SchemaTooOld { found: 0, .. }) => {}
        other => panic!("expected SchemaTooOld, got {:?}", other.err()),
    }
}

#[tokio::test]
async fn a_bad_url_or_schema_is_a_clear_error() {
    let bad_schema = PostgresConfig {
        schema: "x; drop table y".into(),
        ..PostgresConfig::default()
    };
    match PostgresStore::connect_with("postgres://localhost/db", bad_schema).await {
        Err(StoreError::Invalid(m)) => assert!(m.contains("schema"), "{m}"),
        other => panic!("expected Invalid, got {:?}", other.err()),
    }
    match PostgresStore::connect("not a url").await {
        Err(StoreError::Invalid(m)) => assert!(m.contains("database URL"), "{m}"),
        other => panic!("expected Invalid, got {:?}", other.err()),
    }
}

#[tokio::test]
async fn unnamed_statements_work_like_prepared_ones() {
    // What runs behind PgBouncer in transaction mode: no prepared statements, no LISTEN.
    let Some(store) =
        ratchet_store_postgres::testing::fresh_store_with(PostgresConfig::default().pgbouncer())
            .await
    else {
        return;
    };
    assert!(store.wakeups().is_none(), "polling only");
    ratchet_store::conformance::completion_delivers_and_locks(&store).await;
}
