//! Tasks: claim, heartbeat, release, enqueue, read, list, cancel/retry/discard, purge.

use ratchet_core::{ActivityOptions, ErrorInfo, Timestamp};
use ratchet_store::{
    ClaimedTask, EnqueueOutcome, Fence, LeaseRelease, LeaseState, NewTask, StoreError, TaskAction,
    TaskActionOutcome, TaskClaim, TaskFilter, TaskId, TaskOwner, TaskRecord, TaskState,
};
use serde_json::Value;
use tokio_postgres::Row;

use crate::convert::{col, from_json, opt_json, to_json, u32_of, Res};
use crate::cursor::Reached;
use crate::param::{p, Param};
use crate::share::WorkPayload;
use crate::store::{one_row, Conn, ReadyFrom};

/// The queue, limit and name arrays of a task claim.
pub(crate) fn queue_arrays(claim: &TaskClaim) -> (Vec<String>, Vec<i32>, Vec<String>) {
    let queues = claim.queues.iter().map(|q| q.queue.clone()).collect();
    let limits = claim
        .queues
        .iter()
        .map(|q| i32::try_from(q.limit).unwrap_or(i32::MAX))
        .collect();
    (queues, limits, claim.names.clone())
}

/// Claimed task rows, column by column: from a claim's `t_*` arrays or from `task_claim`'s rows.
#[derive(Default)]
pub(crate) struct TaskColumns {
    ids: Vec<i64>,
    fences: Vec<i64>,
    queues: Vec<String>,
    names: Vec<String>,
    inputs: Vec<String>,
    options: Vec<String>,
    instances: Vec<Option<String>>,
    executions: Vec<Option<i32>>,
    seqs: Vec<Option<i32>>,
    attempts: Vec<i32>,
    metadata: Vec<Option<String>>,
}

impl TaskColumns {
    pub(crate) fn of_claim(row: &Row) -> Res<Self> {
        Ok(Self {
            ids: col(row, "t_id")?,
            fences: col(row, "t_fence")?,
            queues: col(row, "t_queue")?,
            names: col(row, "t_name")?,
            inputs: col(row, "t_input")?,
            options: col(row, "t_options")?,
            instances: col(row, "t_instance")?,
            executions: col(row, "t_execution")?,
            seqs: col(row, "t_seq")?,
            attempts: col(row, "t_attempt")?,
            metadata: col(row, "t_metadata")?,
        })
    }

    pub(crate) fn into_tasks(self) -> Res<Vec<ClaimedTask>> {
        let mut tasks = Vec::with_capacity(self.ids.len());
        for (i, id) in self.ids.iter().enumerate() {
            let owner = match self.instances.get(i).cloned().flatten() {
                Some(instance) => Some(TaskOwner {
                    instance,
                    execution: self.executions.get(i).copied().flatten().map_or(0, u32_of),
                    seq: self.seqs.get(i).copied().flatten().map_or(0, u32_of),
                }),
                None => None,
            };
            tasks.push(ClaimedTask {
                id: TaskId(*id),
                fence: Fence(self.fences.get(i).copied().unwrap_or_default()),
                queue: self.queues.get(i).cloned().unwrap_or_default(),
                name: self.names.get(i).cloned().unwrap_or_default(),
                input: from_json(
                    self.inputs.get(i).map_or("null", String::as_str),
                    "task input",
                )?,
                options: from_json(
                    self.options.get(i).map_or("{}", String::as_str),
                    "task options",
                )?,
                owner,
                attempt: self.attempts.get(i).copied().map_or(0, u32_of),
                metadata: opt_json(self.metadata.get(i).cloned().flatten(), "task metadata")?,
            });
        }
        Ok(tasks)
    }
}

pub(crate) async fn claim(c: &Conn, claim: &TaskClaim) -> Res<Vec<ClaimedTask>> {
    let (queues, limits, names) = queue_arrays(claim);
    let from = c.cursors().bounds(claim.now.0, &queues, &names);
    let row = c
        .one(
            "task_claim",
            &[
                p(&claim.now.0),
                p(&claim.lease.owner),
                p(&claim.lease.until.0),
                p(&queues),
                p(&limits),
                p(&names),
                p(&from.queues),
                p(&from.priorities),
                p(&from.ready),
                p(&from.ids),
                p(&from.rescan),
            ],
        )
        .await?;
    advance_cursors(c, &names, &from, &row)?;
    TaskColumns::of_claim(&row)?.into_tasks()
}

/// Moves this process's claim cursors to where a claim's scans got (its `c_*` columns).
pub(crate) fn advance_cursors(
    c: &Conn,
    names: &[String],
    from: &crate::cursor::Bounds,
    row: &Row,
) -> Res<()> {
    let queues: Vec<String> = col(row, "c_queue")?;
    let priorities: Vec<i16> = col(row, "c_priority")?;
    let ready: Vec<i64> = col(row, "c_ready")?;
    let ids: Vec<i64> = col(row, "c_id")?;
    let floor_ready: Vec<Option<i64>> = col(row, "c_floor_ready")?;
    let floor_ids: Vec<Option<i64>> = col(row, "c_floor_id")?;
    let reached = queues
        .iter()
        .zip(priorities)
        .zip(ready.into_iter().zip(ids))
        .zip(floor_ready.into_iter().zip(floor_ids))
        .map(|(((q, priority), position), floor)| Reached {
            queue: q.as_str(),
            priority,
            position,
            first_unfinished: floor.0.zip(floor.1),
        });
    c.cursors().advance(names, from, reached);
    Ok(())
}

pub(crate) async fn heartbeat(
    c: &Conn,
    tasks: &[(TaskId, Fence)],
    until: Timestamp,
) -> Res<Vec<LeaseState>> {
    let ids: Vec<i64> = tasks.iter().map(|(id, _)| id.0).collect();
    let fences: Vec<i64> = tasks.iter().map(|(_, f)| f.0).collect();
    let rows = c
        .query("task_heartbeat", &[p(&ids), p(&fences), p(&until.0)])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(match (col::<bool>(r, "kept")?, col::<bool>(r, "cancel")?) {
                (false, _) => LeaseState::Lost,
                (true, true) => LeaseState::CancelRequested,
                (true, false) => LeaseState::Kept,
            })
        })
        .collect()
}

/// How many writing statements (each its own transaction) a release runs; a notification
/// alone writes nothing.
pub(crate) fn release_statements(release: &LeaseRelease) -> u64 {
    u64::from(!release.instances.is_empty()) + u64::from(!release.tasks.is_empty())
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
        c.query(
            "task_release",
            &[p(&task_ids), p(&task_fences), p(&release.now.0)],
        )
        .await
    };
    let notify = async {
        if !c.notify() || release_statements(release) == 0 {
            return Ok(Vec::new());
        }
        c.query("work_notify", &[p(&ReadyFrom::At(release.now.0).payload())])
            .await
    };
    futures::try_join!(instances, tasks, notify)?;
    Ok(())
}

/// The arguments of `task_enqueue`, one vector per array parameter.
pub(crate) struct EnqueueArgs {
    queues: Vec<String>,
    names: Vec<String>,
    inputs: Vec<String>,
    options: Vec<String>,
    priorities: Vec<i32>,
    visible: Vec<i64>,
    keys: Vec<Option<String>>,
    metadata: Vec<Option<String>>,
}

impl EnqueueArgs {
    pub(crate) fn of(tasks: &[NewTask]) -> Self {
        Self {
            queues: tasks.iter().map(|t| t.queue.clone()).collect(),
            names: tasks.iter().map(|t| t.name.clone()).collect(),
            inputs: tasks.iter().map(|t| to_json(&t.input)).collect(),
            options: tasks.iter().map(|t| to_json(&t.options)).collect(),
            priorities: tasks.iter().map(|t| i32::from(t.priority)).collect(),
            visible: tasks.iter().map(|t| t.visible_at.0).collect(),
            keys: tasks.iter().map(|t| t.unique_key.clone()).collect(),
            metadata: tasks
                .iter()
                .map(|t| t.metadata.as_ref().map(to_json))
                .collect(),
        }
    }

    pub(crate) fn params<'a>(&'a self, now: &'a i64, notify: &'a bool) -> Vec<Param<'a>> {
        vec![
            p(now),
            p(notify),
            p(&self.queues),
            p(&self.names),
            p(&self.inputs),
            p(&self.options),
            p(&self.priorities),
            p(&self.visible),
            p(&self.keys),
            p(&self.metadata),
        ]
    }
}

/// `task_enqueue`'s row: an outcome per task.
pub(crate) fn enqueue_outcomes(row: &Row) -> Res<Vec<EnqueueOutcome>> {
    let outcomes: Vec<String> = col(row, "outcome")?;
    let ids: Vec<i64> = col(row, "id")?;
    Ok(outcomes
        .iter()
        .zip(ids)
        .map(|(outcome, id)| match outcome.as_str() {
            "enqueued" => EnqueueOutcome::Enqueued(TaskId(id)),
            _ => EnqueueOutcome::Duplicate(TaskId(id)),
        })
        .collect())
}

/// Whether enqueueing `tasks` makes work ready now (and so worth a notification).
pub(crate) fn wakes(tasks: &[NewTask], now: Timestamp) -> bool {
    tasks.iter().any(|t| t.visible_at <= now)
}

pub(crate) async fn enqueue(
    c: &Conn,
    tasks: &[NewTask],
    now: Timestamp,
) -> Res<Vec<EnqueueOutcome>> {
    let args = EnqueueArgs::of(tasks);
    let params = args.params(&now.0, &false);
    // Work for one queue goes first to one of the processes serving it (share.rs).
    let queue = tasks.first().map(|t| t.queue.as_str());
    let target = queue
        .filter(|q| tasks.iter().all(|t| t.queue == *q))
        .map(|q| (q, c.wake_key()));
    let payload = WorkPayload::encode(now.0, target);
    let rows = c
        .then_notify_on(
            "work_notify",
            &[p(&payload)],
            wakes(tasks, now),
            "task_enqueue",
            &params,
        )
        .await?;
    let row = one_row("task_enqueue", rows)?;
    enqueue_outcomes(&row)
}

pub(crate) fn task_state(text: &str) -> Result<TaskState, StoreError> {
    text.parse().map_err(StoreError::Corrupt)
}

/// A row of `task_records`.
fn record(r: &Row) -> Res<TaskRecord> {
    let options: ActivityOptions = from_json(col(r, "options")?, "task options")?;
    let owner = match col::<Option<String>>(r, "instance")? {
        Some(instance) => Some(TaskOwner {
            instance,
            execution: col::<Option<i32>>(r, "execution")?.map_or(0, u32_of),
            seq: col::<Option<i32>>(r, "seq")?.map_or(0, u32_of),
        }),
        None => None,
    };
    Ok(TaskRecord {
        id: TaskId(col(r, "id")?),
        queue: col(r, "queue")?,
        name: col(r, "name")?,
        state: task_state(col(r, "state")?)?,
        priority: col(r, "priority")?,
        attempt: u32_of(col(r, "attempt")?),
        max_attempts: options.retry.max_attempts,
        options,
        input: from_json::<Value>(col(r, "input")?, "task input")?,
        output: opt_json(col(r, "output")?, "task output")?,
        error: opt_json::<ErrorInfo>(col(r, "error")?, "task error")?,
        unique_key: col(r, "unique_key")?,
        metadata: opt_json(col(r, "metadata")?, "task metadata")?,
        owner,
        created_at: Timestamp(col(r, "created_at")?),
        visible_at: Timestamp(col(r, "visible_at")?),
        finished_at: col::<Option<i64>>(r, "finished_at")?.map(Timestamp),
    })
}

pub(crate) async fn get(c: &Conn, id: TaskId, now: Timestamp) -> Res<Option<TaskRecord>> {
    let rows = c.query("task_get", &[p(&id.0), p(&now.0)]).await?;
    rows.first().map(record).transpose()
}

pub(crate) async fn list(
    c: &Conn,
    f: &TaskFilter,
    before: Option<TaskId>,
    now: Timestamp,
) -> Res<Vec<TaskRecord>> {
    let states: Option<Vec<String>> =
        (!f.states.is_empty()).then(|| f.states.iter().map(|s| s.as_str().to_string()).collect());
    // Which tables the state filter asks anything of.
    let unfinished = f.states.is_empty() || f.states.iter().any(|s| !s.is_finished());
    let finished = f.states.is_empty() || f.states.iter().any(|s| s.is_finished());
    let limit = i64::from(f.limit.unwrap_or(100));
    let before = before.map(|id| id.0);
    let rows = c
        .query_planned(
            "task_list",
            &[
                p(&now.0),
                p(&f.queue),
                p(&states),
                p(&f.name),
                p(&limit),
                p(&before),
                p(&unfinished),
                p(&finished),
            ],
        )
        .await?;
    rows.iter().map(record).collect()
}

pub(crate) async fn act(
    c: &Conn,
    ids: &[TaskId],
    action: TaskAction,
    now: Timestamp,
) -> Res<Vec<TaskActionOutcome>> {
    let action = match action {
        TaskAction::Cancel => "Cancel",
        TaskAction::Retry => "Retry",
        _ => "Discard",
    };
    let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
    let row = c
        .one(
            "task_act",
            &[p(&ids), p(&action), p(&now.0), p(&c.notify())],
        )
        .await?;
    let outcomes: Vec<String> = col(&row, "outcome")?;
    let states: Vec<Option<String>> = col(&row, "state")?;
    outcomes
        .iter()
        .zip(states)
        .map(|(outcome, state)| {
            Ok(match outcome.as_str() {
                "done" => TaskActionOutcome::Done,
                "requested" => TaskActionOutcome::Requested,
                "not_found" => TaskActionOutcome::NotFound,
                _ => TaskActionOutcome::Refused(task_state(&state.unwrap_or_default())?),
            })
        })
        .collect()
}

pub(crate) async fn purge(c: &Conn, before: Timestamp) -> Res<u64> {
    let row = c.one("task_purge", &[p(&before.0)]).await?;
    let purged: i64 = col(&row, "purged")?;
    Ok(u64::try_from(purged).unwrap_or(0))
}
