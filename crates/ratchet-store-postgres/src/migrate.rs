//! The schema: embedded migrations applied in order, one migrator at a time per schema, then
//! the functions.
//!
//! Numbered migrations carry tables and indexes only. The functions live in `functions/`,
//! one file per concept, and are applied again, all of them, whenever their text differs
//! from what the schema last got (a SHA-256 kept in `ratchet_functions`): changing a
//! function is an edit of its file, not a migration.

use deadpool_postgres::Object;
use ratchet_store::{Result, StoreError};
use tokio_postgres::SimpleQueryMessage;

use crate::convert::{db_err, Failure, Res};

/// Migrations in order; the schema version is the number applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_tables.sql"),
    include_str!("../migrations/0002_instances.sql"),
    include_str!("../migrations/0003_tasks.sql"),
    include_str!("../migrations/0004_claim_and_commit.sql"),
    include_str!("../migrations/0005_events.sql"),
    include_str!("../migrations/0006_claim_cursor.sql"),
    include_str!("../migrations/0007_worker_queues.sql"),
    include_str!("../migrations/0008_api_tokens.sql"),
    include_str!("../migrations/0009_worker_about.sql"),
    include_str!("../migrations/0010_workflows.sql"),
    include_str!("../migrations/0011_workflow_tombstones.sql"),
    include_str!("../migrations/0012_console_indexes.sql"),
    include_str!("../migrations/0013_schedules.sql"),
    include_str!("../migrations/0014_schedule_settled.sql"),
    include_str!("../migrations/0015_key_lookups.sql"),
    include_str!("../migrations/0016_ready_for_claims_only.sql"),
    include_str!("../migrations/0017_inbox_key.sql"),
];

/// The function files, in the order they are created (a SQL function's body is checked
/// when it is created, so what it calls comes first).
const FUNCTIONS: &[&str] = &[
    include_str!("../functions/instances.sql"),
    include_str!("../functions/tasks.sql"),
    include_str!("../functions/claim_and_commit.sql"),
    include_str!("../functions/events.sql"),
];

/// Where each table lives on a Citus cluster, applied after the migrations on a coordinator.
const CITUS_PLACEMENT: &str = include_str!("../citus/placement.sql");

/// Settings of the functions on a Citus coordinator, applied after them.
const CITUS_FUNCTIONS: &str = include_str!("../citus/functions.sql");

/// Every function file, in `schema`, as one script.
fn functions(schema: &str) -> String {
    in_schema(&FUNCTIONS.join("\n"), schema)
}

/// The SHA-256 of `sql`, in hex.
fn digest(sql: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(sql.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The schema version this code creates and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// SQL written for the schema `ratchet`, moved to `schema` (a name checked by
/// [`crate::PostgresConfig::validate`], so it needs no quoting).
pub(crate) fn in_schema(sql: &str, schema: &str) -> String {
    if schema == "ratchet" {
        sql.to_string()
    } else {
        sql.replace("ratchet.", &format!("{schema}."))
    }
}

/// Reads one integer with the simple protocol (no prepared statement, as PgBouncer needs).
async fn read_int(client: &Object, sql: &str) -> Res<i64> {
    for message in client.simple_query(sql).await? {
        if let SimpleQueryMessage::Row(row) = message {
            let text = row.get(0).unwrap_or("0");
            return text
                .parse()
                .map_err(|_| Failure::Store(StoreError::Corrupt(format!("not a number: {text}"))));
        }
    }
    Ok(0)
}

/// The schema version in the database; 0 when Ratchet never ran there.
pub(crate) async fn version(client: &Object, schema: &str) -> Res<i64> {
    let exists = read_int(
        client,
        &format!("SELECT count(*) FROM pg_tables WHERE schemaname = '{schema}' AND tablename = 'ratchet_schema'"),
    )
    .await?;
    if exists == 0 {
        return Ok(0);
    }
    read_int(
        client,
        &format!("SELECT coalesce(max(version), 0) FROM {schema}.ratchet_schema"),
    )
    .await
}

/// Refuses a schema this code cannot run on, without changing it.
pub(crate) async fn check(client: &Object, schema: &str) -> Result<()> {
    let found = version(client, schema).await.map_err(Failure::into_store)?;
    StoreError::check_schema(found, SCHEMA_VERSION)
}

/// Applies the missing migrations in one transaction; refuses a schema newer than this code.
pub(crate) async fn migrate(client: &mut Object, schema: &str) -> Result<()> {
    let citus = on_citus_coordinator(client)
        .await
        .map_err(Failure::into_store)?;
    let tx = client.transaction().await.map_err(db_err)?;
    // Processes starting together migrate one after the other; the later ones find nothing
    // left to do.
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock(hashtext('ratchet migrate {schema}'));
         CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.ratchet_schema (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now());
         CREATE TABLE IF NOT EXISTS {schema}.ratchet_functions (
             one boolean PRIMARY KEY DEFAULT true CHECK (one),
             sha256 text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now());"
    ))
    .await
    .map_err(db_err)?;
    let mut current = 0;
    for message in tx
        .simple_query(&format!(
            "SELECT coalesce(max(version), 0) FROM {schema}.ratchet_schema"
        ))
        .await
        .map_err(db_err)?
    {
        if let SimpleQueryMessage::Row(row) = message {
            current = row.get(0).and_then(|v| v.parse().ok()).unwrap_or(0);
        }
    }
    if current > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: current,
            supported: SCHEMA_VERSION,
        });
    }
    for (i, sql) in MIGRATIONS
        .iter()
        .enumerate()
        .skip(usize::try_from(current).unwrap_or(0))
    {
        tracing::info!(schema, version = i + 1, "applying PostgreSQL migration");
        tx.batch_execute(&in_schema(sql, schema))
            .await
            .map_err(db_err)?;
        tx.batch_execute(&format!(
            "INSERT INTO {schema}.ratchet_schema (version) VALUES ({})",
            i + 1
        ))
        .await
        .map_err(db_err)?;
    }
    if citus {
        tracing::info!(schema, "placing the tables on the Citus cluster");
        tx.batch_execute(&in_schema(CITUS_PLACEMENT, schema))
            .await
            .map_err(db_err)?;
    }
    let functions = functions(schema);
    // The Citus settings count too: a change to them applies the functions again.
    let sha256 = digest(&(functions.clone() + CITUS_FUNCTIONS));
    let mut applied = String::new();
    for message in tx
        .simple_query(&format!("SELECT sha256 FROM {schema}.ratchet_functions"))
        .await
        .map_err(db_err)?
    {
        if let SimpleQueryMessage::Row(row) = message {
            applied = row.get(0).unwrap_or_default().to_string();
        }
    }
    if applied != sha256 {
        tracing::info!(schema, sha256, "applying PostgreSQL functions");
        // Every function goes first, and every composite type the functions take (no table
        // holds one): one whose signature changed would otherwise stay beside its successor.
        tx.batch_execute(&format!(
            "DO $$ DECLARE f regprocedure; t regtype; BEGIN
                 FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
                          WHERE p.pronamespace = '{schema}'::regnamespace LOOP
                     EXECUTE 'DROP FUNCTION ' || f::text;
                 END LOOP;
                 FOR t IN SELECT ty.oid::regtype FROM pg_type ty
                          JOIN pg_class c ON c.oid = ty.typrelid AND c.relkind = 'c'
                          WHERE ty.typnamespace = '{schema}'::regnamespace LOOP
                     EXECUTE 'DROP TYPE ' || t::text;
                 END LOOP;
             END $$;"
        ))
        .await
        .map_err(db_err)?;
        tx.batch_execute(&functions).await.map_err(db_err)?;
        if citus {
            tx.batch_execute(&in_schema(CITUS_FUNCTIONS, schema))
                .await
                .map_err(db_err)?;
        }
        tx.batch_execute(&format!(
            "INSERT INTO {schema}.ratchet_functions (one, sha256) VALUES (true, '{sha256}')
             ON CONFLICT (one) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()"
        ))
        .await
        .map_err(db_err)?;
    }
    tx.commit().await.map_err(db_err)
}

/// Whether the database is a Citus coordinator: the extension is installed, and this node is
/// the one that holds the cluster's metadata (a worker node refuses placements).
async fn on_citus_coordinator(client: &Object) -> Res<bool> {
    if read_int(
        client,
        "SELECT count(*) FROM pg_extension WHERE extname = 'citus'",
    )
    .await?
        == 0
    {
        return Ok(false);
    }
    Ok(read_int(client, "SELECT citus_is_coordinator()::int").await? == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_substituted_everywhere() {
        let sql = in_schema(&MIGRATIONS.concat(), "t_1")
            + &functions("t_1")
            + &in_schema(CITUS_PLACEMENT, "t_1")
            + &in_schema(CITUS_FUNCTIONS, "t_1");
        assert!(
            !sql.contains("ratchet."),
            "a name was left in schema ratchet"
        );
        assert!(sql.contains("t_1.commit_batch"));
        assert!(
            sql.contains("'t_1.work'"),
            "notification channels follow the schema"
        );
    }

    #[test]
    fn numbered_migrations_carry_no_functions() {
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            assert!(
                !sql.to_uppercase().contains("CREATE FUNCTION")
                    && !sql.to_uppercase().contains("CREATE OR REPLACE FUNCTION"),
                "migration {} creates a function; it belongs in functions/",
                i + 1
            );
        }
        assert_eq!(digest("abc").len(), 64);
        assert_ne!(digest(&functions("a")), digest(&functions("b")));
    }
}
