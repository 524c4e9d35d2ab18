//! Leasing tasks queue by queue under the queues' shared settings, and keeping or giving back
//! those leases.

use std::collections::HashMap;

use ratchet_core::Timestamp;
use ratchet_store::{
    ClaimedTask, Fence, Lease, LeaseRelease, LeaseState, Result, TaskClaim, TaskId,
};
use rusqlite::{params, OptionalExtension, Transaction};

use crate::convert::{db_err, to_json, u32_of, ClaimedRow};
use crate::queue;
use crate::store::sql;

/// What a [`TaskClaim`] took.
pub(crate) struct Claimed {
    /// Leased tasks, queue by queue in the claim's order, each queue's in the order they
    /// should run.
    pub(crate) tasks: Vec<ClaimedTask>,
    /// When a rate-limited queue that has ready tasks but no whole token gets its next one.
    pub(crate) next_token: Option<Timestamp>,
    /// How many were taken over from a lease that expired rather than was released.
    pub(crate) taken_over: u32,
}

/// Leases ready tasks from each queue of the claim in order, up to its limit and what the
/// queue's pause, concurrency and rate limit allow.
pub(crate) fn claim(tx: &Transaction<'_>, claim: &TaskClaim) -> Result<Claimed> {
    let names = to_json(&claim.names);
    let now = claim.now;
    let mut tasks = Vec::new();
    let mut next_token: Option<Timestamp> = None;
    let mut taken_over = 0;
    for q in &claim.queues {
        finish_cancelled(tx, &q.queue, now)?;
        if q.limit == 0 {
            // The caller has no room: the queue's settings and bucket stay untouched.
            continue;
        }
        let mut limit = q.limit;
        let mut bucket = None;
        if let Some(settings) = queue::settings(tx, &q.queue)? {
            if settings.paused {
                continue;
            }
            if let Some(concurrency) = settings.concurrency {
                limit = limit.min(concurrency.saturating_sub(running(tx, &q.queue, now)?));
            }
            bucket = settings.bucket(now);
        }
        if let Some(b) = &bucket {
            limit = limit.min(b.whole());
        }
        let (taken, expired) = if limit > 0 {
            take(tx, &q.queue, &names, limit, &claim.lease, now)?
        } else {
            (Vec::new(), 0)
        };
        taken_over += expired;
        if let Some(mut b) = bucket {
            b.spend(taken.len());
            b.store(tx, &q.queue)?;
            if let Some(at) = b.next_token(now) {
                if claimable(tx, &q.queue, &names, now)? {
                    next_token = Some(next_token.map_or(at, |t| t.min(at)));
                }
            }
        }
        tasks.extend(taken);
    }
    Ok(Claimed {
        tasks,
        next_token,
        taken_over,
    })
}

/// Leases up to `limit` ready tasks of one queue and returns them in the order they should
/// run: by priority, then readiness, then id; and how many of them had an expired lease.
fn take(
    tx: &Transaction<'_>,
    queue: &str,
    names: &str,
    limit: u32,
    lease: &Lease,
    now: Timestamp,
) -> Result<(Vec<ClaimedTask>, u32)> {
    let ready: Vec<(i64, bool, i64)> = tx
        .prepare_cached(sql("task_ready"))
        .map_err(db_err)?
        .query_map(params![queue, now.0, names, limit], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(db_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(db_err)?;
    if ready.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let expired = u32::try_from(ready.iter().filter(|(_, e, _)| *e).count()).unwrap_or(u32::MAX);
    // The attempts each takeover found, to tell a lost last attempt (see task_claim).
    let taken_over: HashMap<i64, i64> = ready
        .iter()
        .filter(|(_, e, _)| *e)
        .map(|(id, _, attempt)| (*id, *attempt))
        .collect();
    let ids: Vec<i64> = ready.into_iter().map(|(id, _, _)| id).collect();
    let mut stmt = tx.prepare_cached(sql("task_claim")).map_err(db_err)?;
    let rows = stmt
        .query_map(
            params![to_json(&ids), lease.owner, lease.until.0],
            ClaimedRow::read,
        )
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    let mut tasks = rows
        .into_iter()
        .map(ClaimedRow::into_task)
        .collect::<Result<Vec<_>>>()?;
    for task in &mut tasks {
        let max = i64::from(task.options.retry.max_attempts.max(1));
        if taken_over
            .get(&task.id.0)
            .is_some_and(|found| *found >= max)
        {
            task.attempt = task.attempt.saturating_add(1);
        }
    }
    let rank: HashMap<i64, usize> = ids.iter().enumerate().map(|(n, id)| (*id, n)).collect();
    tasks.sort_by_key(|t| rank.get(&t.id.0).copied());
    Ok((tasks, expired))
}

/// How many tasks of the queue hold a live lease.
fn running(tx: &Transaction<'_>, queue: &str, now: Timestamp) -> Result<u32> {
    let n: i64 = tx
        .prepare_cached(sql("task_running_count"))
        .map_err(db_err)?
        .query_row(params![queue, now.0], |r| r.get(0))
        .map_err(db_err)?;
    Ok(u32_of(n))
}

/// Whether the queue has tasks the claimer could take now, given tokens.
fn claimable(tx: &Transaction<'_>, queue: &str, names: &str, now: Timestamp) -> Result<bool> {
    tx.prepare_cached(sql("task_claimable"))
        .map_err(db_err)?
        .query_row(params![queue, now.0, names], |r| r.get(0))
        .map_err(db_err)
}

/// Cancels for good the queue's tasks a client cancelled while they ran, once their lease
/// has expired: their worker is gone and will never report.
fn finish_cancelled(tx: &Transaction<'_>, queue: &str, now: Timestamp) -> Result<()> {
    for name in ["task_finish_cancelled", "task_delete_cancelled"] {
        tx.prepare_cached(sql(name))
            .map_err(db_err)?
            .execute(params![queue, now.0])
            .map_err(db_err)?;
    }
    Ok(())
}

/// Extends the leases still held under their fence, saying for each whether a client asked
/// to cancel the task.
pub(crate) fn heartbeat(
    tx: &Transaction<'_>,
    tasks: &[(TaskId, Fence)],
    until: Timestamp,
) -> Result<Vec<LeaseState>> {
    let mut stmt = tx.prepare_cached(sql("task_heartbeat")).map_err(db_err)?;
    tasks
        .iter()
        .map(|(id, fence)| {
            let cancel: Option<bool> = stmt
                .query_row(params![id.0, fence.0, until.0], |r| r.get(0))
                .optional()
                .map_err(db_err)?;
            Ok(match cancel {
                None => LeaseState::Lost,
                Some(true) => LeaseState::CancelRequested,
                Some(false) => LeaseState::Kept,
            })
        })
        .collect()
}

/// Gives instance and task leases back, each only under its fence.
pub(crate) fn release(tx: &Transaction<'_>, release: &LeaseRelease) -> Result<()> {
    let mut stmt = tx.prepare_cached(sql("instance_release")).map_err(db_err)?;
    for (id, fence) in &release.instances {
        stmt.execute(params![id, fence.0]).map_err(db_err)?;
    }
    let mut stmt = tx.prepare_cached(sql("task_release")).map_err(db_err)?;
    for (id, fence) in &release.tasks {
        stmt.execute(params![id.0, fence.0]).map_err(db_err)?;
    }
    Ok(())
}
