use ratchet_core::Timestamp;
use ratchet_store::{ClaimedTask, Fence, LeaseRelease, Result, TaskClaim, TaskId, TaskOwner};
use rusqlite::{params, Transaction};

use crate::convert::{db_err, from_json, to_json, u32_of};
use crate::store::sql;

pub(crate) fn claim(tx: &Transaction<'_>, claim: &TaskClaim) -> Result<Vec<ClaimedTask>> {
    type Row = (i64, i64, String, String, String, String, i64, i64, i64);
    let mut stmt = tx.prepare_cached(sql("task_claim")).map_err(db_err)?;
    let rows = stmt
        .query_map(
            params![
                claim.now.0,
                claim.lease.owner,
                claim.lease.until.0,
                to_json(&claim.names),
                claim.limit
            ],
            |r| -> rusqlite::Result<Row> {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                ))
            },
        )
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<Row>>>()
        .map_err(db_err)?;
    let mut tasks: Vec<ClaimedTask> = rows
        .into_iter()
        .map(
            |(id, fence, name, input, options, instance, execution, seq, attempt)| {
                Ok(ClaimedTask {
                    id: TaskId(id),
                    fence: Fence(fence),
                    name,
                    input: from_json(&input, "task input")?,
                    options: from_json(&options, "task options")?,
                    owner: TaskOwner {
                        instance,
                        execution: u32_of(execution),
                        seq: u32_of(seq),
                    },
                    attempt: u32_of(attempt),
                })
            },
        )
        .collect::<Result<_>>()?;
    tasks.sort_by_key(|t| t.id);
    Ok(tasks)
}

pub(crate) fn heartbeat(
    tx: &Transaction<'_>,
    tasks: &[(TaskId, Fence)],
    until: Timestamp,
) -> Result<Vec<bool>> {
    let mut stmt = tx.prepare_cached(sql("task_heartbeat")).map_err(db_err)?;
    tasks
        .iter()
        .map(|(id, fence)| {
            Ok(stmt
                .execute(params![id.0, fence.0, until.0])
                .map_err(db_err)?
                == 1)
        })
        .collect()
}

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
