use ratchet_store::{Result, StoreError};
use rusqlite::Connection;

use crate::convert::db_err;

/// Migrations in order; the schema version is the number of migrations applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_task_queue.sql"),
    include_str!("../migrations/0003_events.sql"),
    include_str!("../migrations/0004_api_tokens.sql"),
    include_str!("../migrations/0005_worker_about.sql"),
    include_str!("../migrations/0006_workflows.sql"),
    include_str!("../migrations/0007_workflow_tombstones.sql"),
    include_str!("../migrations/0008_console_indexes.sql"),
    include_str!("../migrations/0009_schedules.sql"),
    include_str!("../migrations/0010_schedule_settled.sql"),
];

/// The schema version this code creates and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Refuses a database this code cannot run on, without changing it: one that is newer, or
/// one that `ratchet migrate` must bring up to date first.
pub(crate) fn check(conn: &Connection) -> Result<()> {
    let has_table: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'ratchet_schema'",
            [],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    let found: i64 = if has_table {
        conn.query_row(
            "SELECT coalesce(max(version), 0) FROM ratchet_schema",
            [],
            |r| r.get(0),
        )
        .map_err(db_err)?
    } else {
        0
    };
    StoreError::check_schema(found, SCHEMA_VERSION)
}

/// Applies missing migrations; refuses a database newer than this code.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(db_err)?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS ratchet_schema (version INTEGER NOT NULL)")
        .map_err(db_err)?;
    let current: i64 = tx
        .query_row(
            "SELECT coalesce(max(version), 0) FROM ratchet_schema",
            [],
            |r| r.get(0),
        )
        .map_err(db_err)?;
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
        tracing::info!(version = i + 1, "applying SQLite migration");
        tx.execute_batch(sql).map_err(db_err)?;
        tx.execute(
            "INSERT INTO ratchet_schema (version) VALUES (?1)",
            [i as i64 + 1],
        )
        .map_err(db_err)?;
    }
    tx.commit().map_err(db_err)
}
