//! Inserting tasks: standalone tasks with their unique keys, activity attempts with an
//! optional eager lease.

use ratchet_core::Timestamp;
use ratchet_store::{ClaimedTask, EnqueueOutcome, Fence, Lease, NewTask, Result, TaskId};
use rusqlite::{params, Connection, OptionalExtension};

use crate::convert::{db_err, to_json, u32_of};
use crate::store::sql;

/// Inserts one row, leased to `lease` when given. Returns its id, fence and attempt.
fn insert_row(
    tx: &Connection,
    task: &NewTask,
    lease: Option<&Lease>,
    now: Timestamp,
) -> Result<(TaskId, Fence, u32)> {
    let owner = task.owner.as_ref();
    tx.prepare_cached(sql("task_insert"))
        .map_err(db_err)?
        .query_row(
            params![
                task.queue,
                task.name,
                to_json(&task.input),
                to_json(&task.options),
                owner.map(|o| o.instance.as_str()),
                owner.map(|o| o.execution),
                owner.map(|o| o.seq),
                task.visible_at.0,
                lease.map(|l| l.owner.as_str()),
                lease.map(|l| l.until.0),
                task.priority,
                task.unique_key,
                task.metadata.as_ref().map(to_json),
                now.0
            ],
            |r| Ok((TaskId(r.get(0)?), Fence(r.get(1)?), u32_of(r.get(2)?))),
        )
        .map_err(db_err)
}

/// The unfinished task that holds the unique key `key`.
pub(crate) fn unique_holder(tx: &Connection, key: &str) -> Result<Option<TaskId>> {
    tx.prepare_cached(sql("task_unique_holder"))
        .map_err(db_err)?
        .query_row([key], |r| r.get(0).map(TaskId))
        .optional()
        .map_err(db_err)
}

/// Enqueues one task unleased, unless an unfinished task holds its unique key (one enqueued
/// earlier in the same transaction included).
pub(crate) fn enqueue(tx: &Connection, task: &NewTask, now: Timestamp) -> Result<EnqueueOutcome> {
    if let Some(key) = &task.unique_key {
        if let Some(holder) = unique_holder(tx, key)? {
            return Ok(EnqueueOutcome::Duplicate(holder));
        }
    }
    let (id, _, _) = insert_row(tx, task, None, now)?;
    Ok(EnqueueOutcome::Enqueued(id))
}

/// Inserts an activity attempt; with `lease`, it comes back leased to the caller (eager
/// dispatch).
pub(crate) fn insert_activity(
    tx: &Connection,
    task: &NewTask,
    lease: Option<&Lease>,
    now: Timestamp,
) -> Result<Option<ClaimedTask>> {
    let (id, fence, attempt) = insert_row(tx, task, lease, now)?;
    Ok(lease.map(|_| ClaimedTask {
        id,
        fence,
        queue: task.queue.clone(),
        name: task.name.clone(),
        input: task.input.clone(),
        options: task.options.clone(),
        owner: task.owner.clone(),
        attempt,
        metadata: task.metadata.clone(),
    }))
}
