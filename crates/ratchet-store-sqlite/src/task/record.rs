//! Reading tasks back, running or finished.

use ratchet_core::Timestamp;
use ratchet_store::{Result, TaskFilter, TaskId, TaskRecord};
use rusqlite::{params, Connection, OptionalExtension};

use crate::convert::{db_err, to_json, TaskRow};
use crate::store::sql;

/// One task, activity or standalone, from the hot table or the results.
pub(crate) fn get(conn: &Connection, id: TaskId, now: Timestamp) -> Result<Option<TaskRecord>> {
    let row = conn
        .prepare_cached(sql("task_get"))
        .map_err(db_err)?
        .query_row(params![id.0, now.0], TaskRow::read)
        .optional()
        .map_err(db_err)?;
    row.map(TaskRow::into_record).transpose()
}

/// Standalone tasks matching `f`, newest first, below the id `before` when given.
pub(crate) fn list(
    conn: &Connection,
    f: &TaskFilter,
    before: Option<TaskId>,
    now: Timestamp,
) -> Result<Vec<TaskRecord>> {
    let states = (!f.states.is_empty())
        .then(|| to_json(&f.states.iter().map(|s| s.as_str()).collect::<Vec<_>>()));
    // Which tables the state filter asks anything of.
    let unfinished = f.states.is_empty() || f.states.iter().any(|s| !s.is_finished());
    let finished = f.states.is_empty() || f.states.iter().any(|s| s.is_finished());
    let mut stmt = conn.prepare_cached(sql("task_list")).map_err(db_err)?;
    let rows = stmt
        .query_map(
            params![
                now.0,
                f.queue,
                states,
                f.name,
                f.limit.unwrap_or(100),
                before.map(|id| id.0),
                unfinished,
                finished
            ],
            TaskRow::read,
        )
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    rows.into_iter().map(TaskRow::into_record).collect()
}
