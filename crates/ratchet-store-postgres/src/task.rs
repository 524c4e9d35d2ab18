//! Tasks: claim, heartbeat, release.

use ratchet_core::Timestamp;
use ratchet_store::{ClaimedTask, Fence, LeaseRelease, TaskClaim, TaskId};

use crate::convert::{col, Res};
use crate::instance::claimed_tasks;
use crate::param::p;
use crate::store::Conn;

pub(crate) async fn claim(c: &Conn, claim: &TaskClaim) -> Res<Vec<ClaimedTask>> {
    let limit = i32::try_from(claim.limit).unwrap_or(i32::MAX);
    let rows = c
        .query(
            "task_claim",
            &[
                p(&claim.now.0),
                p(&claim.lease.owner),
                p(&claim.lease.until.0),
                p(&limit),
                p(&claim.names),
            ],
        )
        .await?;
    let mut columns = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for r in &rows {
        columns.0.push(col(r, "id")?);
        columns.1.push(col(r, "fence")?);
        columns.2.push(col(r, "name")?);
        columns.3.push(col(r, "input")?);
        columns.4.push(col(r, "options")?);
        columns.5.push(col(r, "instance")?);
        columns.6.push(col(r, "execution")?);
        columns.7.push(col(r, "seq")?);
        columns.8.push(col(r, "attempt")?);
    }
    let (ids, fences, names, inputs, options, instances, executions, seqs, attempts) = columns;
    claimed_tasks(
        ids, fences, names, inputs, options, instances, executions, seqs, attempts,
    )
}

pub(crate) async fn heartbeat(
    c: &Conn,
    tasks: &[(TaskId, Fence)],
    until: Timestamp,
) -> Res<Vec<bool>> {
    let ids: Vec<i64> = tasks.iter().map(|(id, _)| id.0).collect();
    let fences: Vec<i64> = tasks.iter().map(|(_, f)| f.0).collect();
    let rows = c
        .query("task_heartbeat", &[p(&ids), p(&fences), p(&until.0)])
        .await?;
    rows.iter().map(|r| col(r, "kept")).collect()
}

/// How many statements (each its own transaction) a release runs.
pub(crate) fn release_statements(release: &LeaseRelease, notify: bool) -> u64 {
    let updates = u64::from(!release.instances.is_empty()) + u64::from(!release.tasks.is_empty());
    updates + u64::from(notify && updates > 0)
}

/// Gives instance and task leases back, and tells other processes the work is free: the
/// statements go out together on one connection, so this is one round trip.
pub(crate) async fn release(c: &Conn, release: &LeaseRelease) -> Res<()> {
    let instance_ids: Vec<String> = release.instances.iter().map(|(id, _)| id.clone()).collect();
    let instance_fences: Vec<i64> = release.instances.iter().map(|(_, f)| f.0).collect();
    let task_ids: Vec<i64> = release.tasks.iter().map(|(id, _)| id.0).collect();
    let task_fences: Vec<i64> = release.tasks.iter().map(|(_, f)| f.0).collect();
    let instances = async {
        if instance_ids.is_empty() {
            return Ok(Vec::new());
        }
        c.query("instance_release", &[p(&instance_ids), p(&instance_fences)])
            .await
    };
    let tasks = async {
        if task_ids.is_empty() {
            return Ok(Vec::new());
        }
        c.query("task_release", &[p(&task_ids), p(&task_fences)])
            .await
    };
    let notify = async {
        if !c.notify() || release_statements(release, false) == 0 {
            return Ok(Vec::new());
        }
        c.query("work_notify", &[]).await
    };
    futures::try_join!(instances, tasks, notify)?;
    Ok(())
}
