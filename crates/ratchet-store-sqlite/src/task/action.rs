//! What clients do to standalone tasks: cancel, retry or discard them, and purge old results.

use ratchet_core::Timestamp;
use ratchet_store::{Result, StoreError, TaskAction, TaskActionOutcome, TaskId, TaskState};
use rusqlite::{params, Transaction};

use super::complete::finish;
use super::insert::unique_holder;
use super::record;
use crate::convert::db_err;
use crate::store::sql;

/// Applies `action` to each task, with an outcome per task.
pub(crate) fn act(
    tx: &Transaction<'_>,
    ids: &[TaskId],
    action: TaskAction,
    now: Timestamp,
) -> Result<Vec<TaskActionOutcome>> {
    ids.iter().map(|id| act_one(tx, *id, action, now)).collect()
}

fn act_one(
    tx: &Transaction<'_>,
    id: TaskId,
    action: TaskAction,
    now: Timestamp,
) -> Result<TaskActionOutcome> {
    let Some(task) = record::get(tx, id, now)? else {
        return Ok(TaskActionOutcome::NotFound);
    };
    // An activity belongs to its orchestration, which cancels or retries it.
    if task.owner.is_some() {
        return Ok(TaskActionOutcome::NotFound);
    }
    let state = task.state;
    let refused = Ok(TaskActionOutcome::Refused(state));
    match action {
        TaskAction::Cancel if state.is_finished() => refused,
        TaskAction::Cancel if state == TaskState::Running => {
            run(tx, "task_request_cancel", id)?;
            Ok(TaskActionOutcome::Requested)
        }
        TaskAction::Cancel => {
            finish(tx, id, TaskState::Cancelled, None, None, now)?;
            Ok(TaskActionOutcome::Done)
        }
        TaskAction::Retry if matches!(state, TaskState::Dead | TaskState::Cancelled) => {
            // Its key may have been taken while it lay finished.
            if let Some(key) = &task.unique_key {
                if unique_holder(tx, key)?.is_some() {
                    return refused;
                }
            }
            tx.prepare_cached(sql("task_revive"))
                .map_err(db_err)?
                .execute(params![id.0, now.0])
                .map_err(db_err)?;
            run(tx, "task_result_delete", id)?;
            Ok(TaskActionOutcome::Done)
        }
        TaskAction::Retry => refused,
        TaskAction::Discard if state.is_finished() => {
            run(tx, "task_result_delete", id)?;
            Ok(TaskActionOutcome::Done)
        }
        TaskAction::Discard => refused,
        _ => Err(StoreError::Invalid(format!(
            "unknown task action {action:?}"
        ))),
    }
}

/// Runs the statement `name` on one task.
fn run(tx: &Transaction<'_>, name: &str, id: TaskId) -> Result<()> {
    tx.prepare_cached(sql(name))
        .map_err(db_err)?
        .execute([id.0])
        .map_err(db_err)?;
    Ok(())
}

/// Deletes results that finished before `before`; returns how many.
pub(crate) fn purge(tx: &Transaction<'_>, before: Timestamp) -> Result<u64> {
    let n = tx
        .prepare_cached(sql("task_purge"))
        .map_err(db_err)?
        .execute([before.0])
        .map_err(db_err)?;
    Ok(n as u64)
}
