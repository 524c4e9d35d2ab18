//! The end of a task attempt: an activity's result goes to its orchestration's inbox, a
//! standalone task's to `task_results`; retries and snoozes put the task back.

use ratchet_core::{ErrorInfo, Timestamp};
use ratchet_store::{
    CompletionResult, NewInboxEvent, Result, StoreError, TaskCompletion, TaskId, TaskResult,
    TaskState,
};
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde_json::Value;

use crate::convert::{db_err, to_json, u32_of};
use crate::instance::inbox_insert;
use crate::store::sql;

/// Applies one completion if its fence, step and attempt still match the row. Says whether it
/// was applied and, for an activity's result, the inbox row that delivered it to its
/// orchestration.
pub(crate) fn complete(
    tx: &Transaction<'_>,
    c: &TaskCompletion,
    now: Timestamp,
) -> Result<(CompletionResult, Option<i64>)> {
    type Row = (Option<String>, Option<i64>, Option<i64>, i64);
    let row: Option<Row> = tx
        .prepare_cached(sql("task_for_completion"))
        .map_err(db_err)?
        .query_row(params![c.id.0, c.fence.0], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()
        .map_err(db_err)?;
    let Some((instance, execution, seq, attempt)) = row else {
        return Ok((CompletionResult::Stale, None));
    };
    // The fence identifies the claim; a completion that names another step or attempt than
    // the row is not this claim's.
    let same_owner = match &c.owner {
        None => instance.is_none(),
        Some(o) => {
            instance.as_deref() == Some(o.instance.as_str())
                && execution.map(u32_of) == Some(o.execution)
                && seq.map(u32_of) == Some(o.seq)
        }
    };
    if !same_owner || u32_of(attempt) != c.attempt {
        return Ok((CompletionResult::Stale, None));
    }
    let mut delivered = None;
    match (&c.owner, &c.result) {
        (_, TaskResult::Retry { error, at }) => {
            tx.prepare_cached(sql("task_retry"))
                .map_err(db_err)?
                .execute(params![c.id.0, at.0, to_json(error)])
                .map_err(db_err)?;
        }
        (_, TaskResult::Snooze { at }) => {
            tx.prepare_cached(sql("task_snooze"))
                .map_err(db_err)?
                .execute(params![c.id.0, at.0])
                .map_err(db_err)?;
        }
        (Some(owner), _) => {
            let Some(event) = c.event() else {
                return Err(StoreError::Invalid("unknown task result".into()));
            };
            delete(tx, c.id)?;
            let active: Option<i64> = tx
                .prepare_cached(sql("instance_active_execution"))
                .map_err(db_err)?
                .query_row([&owner.instance], |r| r.get(0))
                .optional()
                .map_err(db_err)?;
            if active == Some(i64::from(owner.execution)) {
                delivered = Some(inbox_insert(
                    tx,
                    &NewInboxEvent::immediate(owner.instance.clone(), event),
                )?);
            }
        }
        (None, TaskResult::Completed(output)) => {
            finish(tx, c.id, TaskState::Completed, Some(output), None, now)?;
        }
        (None, TaskResult::Failed(error)) => {
            finish(tx, c.id, TaskState::Dead, None, Some(error), now)?;
        }
        (None, TaskResult::Cancelled) => {
            finish(tx, c.id, TaskState::Cancelled, None, None, now)?;
        }
        (None, _) => return Err(StoreError::Invalid("unknown task result".into())),
    }
    Ok((CompletionResult::Applied, delivered))
}

fn delete(tx: &Connection, id: TaskId) -> Result<()> {
    tx.prepare_cached(sql("task_delete"))
        .map_err(db_err)?
        .execute([id.0])
        .map_err(db_err)?;
    Ok(())
}

/// Moves a standalone task to `task_results` in a finished `state`; without `error`, the last
/// attempt's error stays on record.
pub(crate) fn finish(
    tx: &Connection,
    id: TaskId,
    state: TaskState,
    output: Option<&Value>,
    error: Option<&ErrorInfo>,
    now: Timestamp,
) -> Result<()> {
    tx.prepare_cached(sql("task_finish"))
        .map_err(db_err)?
        .execute(params![
            id.0,
            state.as_str(),
            output.map(to_json),
            error.map(to_json),
            now.0
        ])
        .map_err(db_err)?;
    delete(tx, id)
}
