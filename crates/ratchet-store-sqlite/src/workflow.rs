//! Declarative workflow definitions.

use ratchet_core::Timestamp;
use ratchet_store::{NewWorkflow, Result, StoreError, WorkflowPut, WorkflowRecord};
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::convert::{db_err, u32_of};
use crate::store::sql;

pub(crate) fn put(tx: &Transaction<'_>, w: &NewWorkflow, now: Timestamp) -> Result<WorkflowPut> {
    let stored: Option<(i64, String)> = tx
        .prepare_cached(sql("workflow_stored"))
        .map_err(db_err)?
        .query_row(params![w.namespace, w.name, w.version], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(db_err)?;
    if let Some((revision, hash)) = stored {
        let revision = u32_of(revision);
        return Ok(if hash == w.hash {
            WorkflowPut::Unchanged(revision)
        } else {
            WorkflowPut::Conflict { revision, hash }
        });
    }
    let revision: i64 = tx
        .prepare_cached(sql("workflow_insert"))
        .map_err(db_err)?
        .query_row(
            params![w.namespace, w.name, w.version, w.hash, w.source, now.0],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    Ok(WorkflowPut::Created(u32_of(revision)))
}

/// A row of `namespace, name, version, revision, hash, source, created_at`.
fn record(r: &rusqlite::Row<'_>) -> rusqlite::Result<WorkflowRecord> {
    Ok(WorkflowRecord {
        namespace: r.get(0)?,
        name: r.get(1)?,
        version: r.get(2)?,
        revision: u32_of(r.get(3)?),
        hash: r.get(4)?,
        source: r.get(5)?,
        created_at: Timestamp(r.get(6)?),
    })
}

pub(crate) fn list(
    conn: &Connection,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<Vec<WorkflowRecord>> {
    let mut stmt = conn.prepare_cached(sql("workflow_list")).map_err(db_err)?;
    let rows = stmt
        .query_map(params![namespace, name], record)
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    Ok(rows)
}

/// How errors name what a delete was after: `namespace/name`, with the version if one.
fn target(namespace: &str, name: &str, version: Option<&str>) -> String {
    match version {
        Some(v) => format!("{namespace}/{name} version {v}"),
        None => format!("{namespace}/{name}"),
    }
}

pub(crate) fn delete(
    tx: &Transaction<'_>,
    namespace: &str,
    name: &str,
    version: Option<&str>,
    force: bool,
) -> Result<Vec<WorkflowRecord>> {
    let deleted = tx
        .prepare_cached(sql("workflow_delete_target"))
        .map_err(db_err)?
        .query_map(params![namespace, name, version], record)
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    let Some(highest) = deleted.iter().map(|w| w.revision).max() else {
        return Err(StoreError::NotFound(format!(
            "workflow {}",
            target(namespace, name, version)
        )));
    };
    if !force {
        let in_use: i64 = tx
            .prepare_cached(sql("workflow_in_use"))
            .map_err(db_err)?
            .query_row(params![namespace, name, version], |r| r.get(0))
            .map_err(db_err)?;
        if in_use > 0 {
            return Err(StoreError::InUse {
                workflow: target(namespace, name, version),
                instances: u64::try_from(in_use).unwrap_or(0),
            });
        }
    }
    tx.prepare_cached(sql("workflow_delete"))
        .map_err(db_err)?
        .execute(params![namespace, name, version])
        .map_err(db_err)?;
    tx.prepare_cached(sql("workflow_tombstone"))
        .map_err(db_err)?
        .execute(params![namespace, name, highest])
        .map_err(db_err)?;
    Ok(deleted)
}
