//! Helpers for tests that run against a real PostgreSQL (feature `testing`).
//!
//! The server comes from `DATABASE_URL` (`./scripts/test` provisions one). Without it the
//! helpers return `None` and the test skips itself, saying so, unless
//! `RATCHET_REQUIRE_POSTGRES=1` is set (as the test script does): then a missing server fails
//! the test instead of hiding it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::{PostgresConfig, PostgresStore};

/// The test server's URL, `None` (after saying why) when the tests should skip.
///
/// # Panics
///
/// When `RATCHET_REQUIRE_POSTGRES=1` and `DATABASE_URL` is not set.
pub fn database_url() -> Option<String> {
    match std::env::var("DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            let required = std::env::var("RATCHET_REQUIRE_POSTGRES").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "RATCHET_REQUIRE_POSTGRES=1 but DATABASE_URL is not set: run ./scripts/test"
            );
            eprintln!(
                "skipped: no DATABASE_URL; ./scripts/test provisions PostgreSQL and runs these"
            );
            None
        }
    }
}

/// A new schema name of the form `ratchet_test_<random>`, which the test script drops.
pub fn fresh_schema() -> String {
    format!(
        "ratchet_test_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..16]
    )
}

/// A store in a schema of its own, migrated, with a small pool.
///
/// # Panics
///
/// When the server is configured but the store cannot connect.
pub async fn fresh_store() -> Option<PostgresStore> {
    fresh_store_with(PostgresConfig::default()).await
}

/// As [`fresh_store`], with `config` (its schema is replaced by a fresh one).
///
/// # Panics
///
/// When the server is configured but the store cannot connect.
pub async fn fresh_store_with(config: PostgresConfig) -> Option<PostgresStore> {
    let url = database_url()?;
    let config = PostgresConfig {
        schema: fresh_schema(),
        pool_size: config.pool_size.min(4),
        ..config
    };
    Some(
        PostgresStore::connect_with(&url, config)
            .await
            .expect("connect to the test PostgreSQL"),
    )
}

/// A plain session on the test server at `url` (no TLS), its connection driven in the
/// background: for what a test reads or sets up beside a store.
///
/// # Panics
///
/// When it cannot connect.
pub async fn session(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(connection);
    client
}
