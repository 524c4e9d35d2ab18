use ratchet_core::{HistoryEvent, ParentRef, Timestamp};
use ratchet_store::{
    CommitBatch, CommitOutcome, CreateOutcome, Fence, Lease, NewInboxEvent, Result, StoreError,
    TurnCommit, TurnResult,
};
use rusqlite::{params, OptionalExtension, Transaction};

use crate::convert::{db_err, opt_json, status, to_json, u32_of};
use crate::instance::{self, deliver_to_parent, inbox_insert};
use crate::store::sql;
use crate::task;

/// Writes a whole [`CommitBatch`] in the caller's transaction, item by item: starts and
/// completions first, so that a turn they fed consumes the inbox rows they deliver.
pub(crate) fn commit(tx: &Transaction<'_>, batch: CommitBatch) -> Result<CommitOutcome> {
    batch.check()?;
    let mut out = CommitOutcome::default();
    // Each start's instance, fence and opening inbox row, when it created one.
    let mut created = Vec::with_capacity(batch.starts.len());
    for start in &batch.starts {
        let (outcome, written) = instance::create_as(
            tx,
            &start.instance,
            None,
            batch.now,
            Some(start.incarnation),
        )?;
        out.starts.push(outcome);
        created.push(written.map(|w| (start.instance.id.as_str(), w)));
    }
    let mut delivered = Vec::with_capacity(batch.completions.len());
    for completion in &batch.completions {
        let (result, inbox_row) = task::complete(tx, completion, batch.now)?;
        out.completions.push(result);
        let instance = completion.owner.as_ref().map(|o| o.instance.as_str());
        delivered.push(instance.zip(inbox_row));
    }
    let mut capacity = batch.task_capacity;
    for turn in &batch.turns {
        let result = commit_turn(
            tx,
            turn,
            &created,
            &delivered,
            batch.task_lease.as_ref(),
            &mut capacity,
            batch.now,
        )?;
        out.turns.push(result);
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
    created: &[Option<(&str, (Fence, i64))>],
    delivered: &[Option<(&str, i64)>],
    task_lease: Option<&Lease>,
    capacity: &mut u32,
    now: Timestamp,
) -> Result<TurnResult> {
    let row: Option<(i64, String, i64, i64, Option<String>, i64)> = tx
        .prepare_cached(sql("instance_for_commit"))
        .map_err(db_err)?
        .query_row([&t.instance], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .optional()
        .map_err(db_err)?;
    let Some((fence, current, execution, history_len, parent, incarnation)) = row else {
        return Ok(TurnResult::Stale);
    };
    // A first turn that ran on a start of this batch: its instance must be the one the start
    // created, under the fence it was given; it consumes the opening event.
    let mut consumed = t.consumed.clone();
    let mut expected_fence = t.fence.0;
    if let Some(position) = t.started {
        match created.get(position as usize).copied().flatten() {
            Some((instance, (created_fence, opening))) if instance == t.instance => {
                expected_fence = created_fence.0;
                consumed.push(opening);
            }
            _ => return Ok(TurnResult::Stale),
        }
    }
    // The fence proves the lease was not taken over; the incarnation, that the id was not
    // started afresh; the execution and history length, that no other turn was written since.
    if fence != expected_fence
        || incarnation != t.incarnation.0
        || status(&current)?.is_finished()
        || u32_of(execution) != t.execution
        || u32_of(history_len) != t.history_start
    {
        return Ok(TurnResult::Stale);
    }
    // A turn fed by this batch's completions consumes the rows they delivered, all of them.
    for &position in &t.fed {
        match delivered.get(position as usize).copied().flatten() {
            Some((instance, row)) if instance == t.instance => consumed.push(row),
            _ => return Ok(TurnResult::Stale),
        }
    }
    tx.prepare_cached(sql("inbox_consume"))
        .map_err(db_err)?
        .execute(params![t.instance, to_json(&consumed)])
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
    for new in &t.tasks {
        // Standalone tasks go to their queue's workers; only activities are leased eagerly.
        if new.owner.is_none() {
            task::enqueue(tx, new, now)?;
            continue;
        }
        let lease = task_lease.filter(|_| *capacity > 0);
        if let Some(claimed) = task::insert_activity(tx, new, lease, now)? {
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
