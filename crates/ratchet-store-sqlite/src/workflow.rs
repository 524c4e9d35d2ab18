//! Declarative workflow definitions.

use ratchet_core::Timestamp;
use ratchet_store::{NewWorkflow, Result, WorkflowPut, WorkflowRecord};
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

pub(crate) fn list(
    conn: &Connection,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<Vec<WorkflowRecord>> {
    let mut stmt = conn.prepare_cached(sql("workflow_list")).map_err(db_err)?;
    let rows = stmt
        .query_map(params![namespace, name], |r| {
            Ok(WorkflowRecord {
                namespace: r.get(0)?,
                name: r.get(1)?,
                version: r.get(2)?,
                revision: u32_of(r.get(3)?),
                hash: r.get(4)?,
                source: r.get(5)?,
                created_at: Timestamp(r.get(6)?),
            })
        })
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    Ok(rows)
}
