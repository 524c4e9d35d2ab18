use ratchet_core::{HistoryEvent, ParentRef, Timestamp};
use ratchet_store::{
    ClaimedTask, CommitBatch, CommitOutcome, CompletionResult, CreateOutcome, Lease, NewInboxEvent,
    NewTask, Result, StoreError, TaskCompletion, TaskId, TaskResult, TurnCommit, TurnResult,
};
use rusqlite::{params, OptionalExtension, Transaction};

use crate::convert::{db_err, opt_json, status, to_json, u32_of};
use crate::instance::{self, deliver_to_parent, inbox_insert};
use crate::store::sql;

/// Writes a whole [`CommitBatch`] in the caller's transaction, item by item.
pub(crate) fn commit(tx: &Transaction<'_>, batch: CommitBatch) -> Result<CommitOutcome> {
    let mut out = CommitOutcome::default();
    let mut capacity = batch.task_capacity;
    for turn in &batch.turns {
        let result = commit_turn(
            tx,
            turn,
            batch.task_lease.as_ref(),
            &mut capacity,
            batch.now,
        )?;
        out.turns.push(result);
    }
    for completion in &batch.completions {
        out.completions.push(complete(tx, completion)?);
    }
    if let Some(lease) = &batch.instance_lease {
        for id in &batch.lock_instances {
            if let Some(claimed) = instance::lease(tx, id, lease, batch.now)? {
                out.locked.push(claimed);
            }
        }
    }
    Ok(out)
}

fn commit_turn(
    tx: &Transaction<'_>,
    t: &TurnCommit,
    task_lease: Option<&Lease>,
    capacity: &mut u32,
    now: Timestamp,
) -> Result<TurnResult> {
    let row: Option<(i64, String, i64, i64, Option<String>)> = tx
        .prepare_cached(sql("instance_for_commit"))
        .map_err(db_err)?
        .query_row([&t.instance], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .optional()
        .map_err(db_err)?;
    let Some((fence, current, execution, history_len, parent)) = row else {
        return Ok(TurnResult::Stale);
    };
    // The fence proves the lease was not taken over; the execution and history length prove
    // no other turn was written in between.
    if fence != t.fence.0
        || status(&current)?.is_finished()
        || u32_of(execution) != t.execution
        || u32_of(history_len) != t.history_start
    {
        return Ok(TurnResult::Stale);
    }
    tx.prepare_cached(sql("inbox_consume"))
        .map_err(db_err)?
        .execute(params![t.instance, to_json(&t.consumed)])
        .map_err(db_err)?;
    {
        let mut insert = tx.prepare_cached(sql("history_insert")).map_err(db_err)?;
        for (i, event) in t.history.iter().enumerate() {
            let seq = i64::from(t.history_start) + i as i64;
            insert
                .execute(params![t.instance, t.execution, seq, to_json(event)])
                .map_err(db_err)?;
        }
    }
    let finished = t.status.is_finished();
    tx.prepare_cached(sql("instance_turn_update"))
        .map_err(db_err)?
        .execute(params![
            t.instance,
            t.status.as_str(),
            t.version,
            t.output.as_ref().map(to_json),
            t.error.as_ref().map(to_json),
            t.custom_status.as_ref().map(to_json),
            t.history.len() as i64,
            now.0,
            finished.then_some(now.0),
        ])
        .map_err(db_err)?;

    let mut leased = Vec::new();
    for task in &t.tasks {
        let lease = task_lease.filter(|_| *capacity > 0);
        if let Some(claimed) = insert_task(tx, task, lease, now)? {
            *capacity -= 1;
            leased.push(claimed);
        }
    }
    for event in &t.inbox {
        if event.instance == t.instance {
            inbox_insert(tx, event)?;
        } else if let Some(parent) = opt_json::<ParentRef>(parent.clone(), "parent")? {
            let result = match &event.event {
                HistoryEvent::SubOrchestrationCompleted { output, .. } => Ok(output.clone()),
                HistoryEvent::SubOrchestrationFailed { error, .. } => Err(error.clone()),
                other => {
                    return Err(StoreError::Invalid(format!(
                        "cannot send {} to a parent",
                        other.kind()
                    )))
                }
            };
            deliver_to_parent(tx, &parent, result)?;
        } else {
            return Err(StoreError::Invalid(format!(
                "a turn of {} sent an event to {}",
                t.instance, event.instance
            )));
        }
    }
    for child in &t.children {
        // A child id that exists already fails that child at once rather than the parent's turn.
        if let CreateOutcome::AlreadyExists(_) = instance::create(tx, child, None, now)? {
            if let Some(parent) = &child.parent {
                inbox_insert(tx, &ratchet_store::child_exists_event(&child.id, parent))?;
            }
        }
    }
    if let Some(next) = &t.continue_as_new {
        for name in ["inbox_clear_for_new_execution", "task_clear_instance"] {
            tx.prepare_cached(sql(name))
                .map_err(db_err)?
                .execute([&t.instance])
                .map_err(db_err)?;
        }
        tx.prepare_cached(sql("instance_continue"))
            .map_err(db_err)?
            .execute(params![t.instance, to_json(&next.input), now.0])
            .map_err(db_err)?;
        for event in next.inbox_events() {
            inbox_insert(
                tx,
                &NewInboxEvent {
                    instance: t.instance.clone(),
                    event,
                    visible_at: now,
                },
            )?;
        }
    }
    if finished {
        for name in ["inbox_clear", "task_clear_instance"] {
            tx.prepare_cached(sql(name))
                .map_err(db_err)?
                .execute([&t.instance])
                .map_err(db_err)?;
        }
    }
    Ok(TurnResult::Committed { tasks: leased })
}

fn insert_task(
    tx: &Transaction<'_>,
    task: &NewTask,
    lease: Option<&Lease>,
    now: Timestamp,
) -> Result<Option<ClaimedTask>> {
    let (id, fence, attempt): (i64, i64, i64) = tx
        .prepare_cached(sql("task_insert"))
        .map_err(db_err)?
        .query_row(
            params![
                task.name,
                to_json(&task.input),
                to_json(&task.options),
                task.owner.instance,
                task.owner.execution,
                task.owner.seq,
                task.visible_at.0,
                lease.map(|l| l.owner.as_str()),
                lease.map(|l| l.until.0),
                now.0
            ],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .map_err(db_err)?;
    Ok(lease.map(|_| ClaimedTask {
        id: TaskId(id),
        fence: ratchet_store::Fence(fence),
        name: task.name.clone(),
        input: task.input.clone(),
        options: task.options.clone(),
        owner: task.owner.clone(),
        attempt: u32_of(attempt),
    }))
}

fn complete(tx: &Transaction<'_>, c: &TaskCompletion) -> Result<CompletionResult> {
    let row: Option<(String, i64, i64, i64)> = tx
        .prepare_cached(sql("task_for_completion"))
        .map_err(db_err)?
        .query_row(params![c.id.0, c.fence.0], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()
        .map_err(db_err)?;
    let Some((instance_id, execution, seq, attempt)) = row else {
        return Ok(CompletionResult::Stale);
    };
    // The fence identifies the claim; a completion that names another step or attempt than
    // the row is not this claim's.
    if instance_id != c.owner.instance
        || u32_of(execution) != c.owner.execution
        || u32_of(seq) != c.owner.seq
        || u32_of(attempt) != c.attempt
    {
        return Ok(CompletionResult::Stale);
    }
    let Some(event) = c.event() else {
        let TaskResult::Retry { error, at } = &c.result else {
            return Err(StoreError::Invalid("unknown task result".into()));
        };
        tx.prepare_cached(sql("task_retry"))
            .map_err(db_err)?
            .execute(params![c.id.0, at.0, to_json(error)])
            .map_err(db_err)?;
        return Ok(CompletionResult::Applied);
    };
    tx.prepare_cached(sql("task_delete"))
        .map_err(db_err)?
        .execute([c.id.0])
        .map_err(db_err)?;
    let active: Option<i64> = tx
        .prepare_cached(sql("instance_active_execution"))
        .map_err(db_err)?
        .query_row([&c.owner.instance], |r| r.get(0))
        .optional()
        .map_err(db_err)?;
    if active == Some(i64::from(c.owner.execution)) {
        inbox_insert(
            tx,
            &NewInboxEvent {
                instance: c.owner.instance.clone(),
                event,
                visible_at: Timestamp(0),
            },
        )?;
    }
    Ok(CompletionResult::Applied)
}
