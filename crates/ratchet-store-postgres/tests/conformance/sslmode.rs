//! Every `sslmode` as libpq means it, against two small servers of the test run's own
//! (`./scripts/test` starts them, see `pg_start_tls_clusters` in scripts/postgres.sh): one
//! with a self-signed X.509 v1 certificate, as Citus makes for itself, where role
//! `ratchet_tls_only` is refused without TLS and `ratchet_plain_only` with it; one without
//! TLS.

use ratchet_store_postgres::testing::fresh_schema;
use ratchet_store_postgres::{PostgresConfig, PostgresStore};

use super::session;

/// The two servers' URLs, `None` (after saying why) when the tests should skip.
fn servers() -> Option<(String, String)> {
    match (
        std::env::var("RATCHET_TEST_PG_TLS_V1_URL"),
        std::env::var("RATCHET_TEST_PG_NO_TLS_URL"),
    ) {
        (Ok(v1), Ok(plain)) => Some((v1, plain)),
        _ => {
            eprintln!(
                "skipped: RATCHET_TEST_PG_TLS_V1_URL and RATCHET_TEST_PG_NO_TLS_URL are not set \
                 (./scripts/test starts those servers where openssl and the server binaries are installed)"
            );
            None
        }
    }
}

/// Connects a store as `user` to the server at `url` (by the name localhost, at 127.0.0.1),
/// with `tls` added to the connection string: whether every connection it made is
/// encrypted, or why it could not connect.
async fn encrypted(url: &str, user: &str, tls: &str) -> Result<bool, String> {
    let given: ratchet_store_postgres::tokio_postgres::Config = url.parse().unwrap();
    let port = given.get_ports().first().copied().unwrap_or(5432);
    let schema = fresh_schema();
    let app = format!("sslmode_{}", &schema[13..]);
    let store = PostgresStore::connect_with(
        &format!(
            "host=localhost hostaddr=127.0.0.1 port={port} user={user} dbname=postgres application_name={app} {tls}"
        ),
        PostgresConfig {
            schema,
            pool_size: 1,
            ..PostgresConfig::default()
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let row = session(url)
        .await
        .query_one(
            "SELECT count(*), bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap();
    let (connections, ssl): (i64, Option<bool>) = (row.get(0), row.get(1));
    assert!(connections >= 1, "{tls}: the store holds a connection");
    drop(store);
    Ok(ssl.unwrap_or_default())
}

/// `require` and `prefer` (the default) encrypt without checking the certificate: a
/// self-signed v1 certificate is no obstacle, as it is none to libpq.
#[tokio::test]
async fn require_and_prefer_encrypt_to_a_self_signed_v1_certificate() {
    let Some((v1, _)) = servers() else {
        return;
    };
    for tls in ["sslmode=require", "sslmode=prefer", ""] {
        assert_eq!(
            encrypted(&v1, "postgres", tls).await,
            Ok(true),
            "{tls:?} encrypts"
        );
    }
}

/// `verify-ca` and `verify-full` refuse a v1 certificate, which they cannot check, whatever
/// roots they are given: the system's, or the certificate itself.
#[tokio::test]
async fn verify_modes_refuse_a_self_signed_v1_certificate() {
    let Some((v1, _)) = servers() else {
        return;
    };
    let cert = std::env::var("RATCHET_TEST_PG_TLS_V1_CERT").unwrap();
    for tls in [
        format!("sslmode=verify-ca sslrootcert={cert}"),
        format!("sslmode=require sslrootcert={cert}"),
        format!("sslmode=verify-full sslrootcert={cert}"),
    ] {
        let refused = encrypted(&v1, "postgres", &tls).await.unwrap_err();
        assert!(refused.contains("not X.509 v3"), "{tls}: {refused}");
    }
    // The system's roots (a machine may have none: that is refused too).
    for tls in ["sslmode=verify-ca", "sslmode=verify-full"] {
        let refused = encrypted(&v1, "postgres", tls).await.unwrap_err();
        assert!(refused.contains("certificate"), "{tls}: {refused}");
    }
}

/// `prefer` falls back to plain text where the server has no TLS, and where the server
/// refuses the encrypted connection; `require` does not.
#[tokio::test]
async fn prefer_falls_back_to_plain_text() {
    let Some((v1, plain)) = servers() else {
        return;
    };
    assert_eq!(encrypted(&plain, "postgres", "").await, Ok(false));
    assert_eq!(
        encrypted(&plain, "postgres", "sslmode=prefer").await,
        Ok(false)
    );
    let refused = encrypted(&plain, "postgres", "sslmode=require")
        .await
        .unwrap_err();
    assert!(refused.contains("TLS"), "{refused}");
    assert_eq!(
        encrypted(&v1, "ratchet_plain_only", "sslmode=prefer").await,
        Ok(false),
        "refused with TLS, connected without"
    );
    let refused = encrypted(&v1, "ratchet_plain_only", "sslmode=require")
        .await
        .unwrap_err();
    assert!(refused.contains("pg_hba.conf"), "{refused}");
}

/// `allow` tries plain text first and TLS (unchecked) only when the server refuses it;
/// `disable` never tries TLS.
#[tokio::test]
async fn allow_tries_plain_text_first_and_disable_only_that() {
    let Some((v1, plain)) = servers() else {
        return;
    };
    assert_eq!(encrypted(&v1, "postgres", "sslmode=allow").await, Ok(false));
    assert_eq!(
        encrypted(&v1, "ratchet_tls_only", "sslmode=allow").await,
        Ok(true),
        "refused without TLS, connected with"
    );
    assert_eq!(
        encrypted(&plain, "postgres", "sslmode=allow").await,
        Ok(false)
    );
    assert_eq!(
        encrypted(&v1, "postgres", "sslmode=disable").await,
        Ok(false)
    );
    let refused = encrypted(&v1, "ratchet_tls_only", "sslmode=disable")
        .await
        .unwrap_err();
    assert!(refused.contains("pg_hba.conf"), "{refused}");
}
