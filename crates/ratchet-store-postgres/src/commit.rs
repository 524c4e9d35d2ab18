//! The group commit: a [`CommitBatch`] flattened into the parallel arrays of
//! `commit_batch`, and its result arrays back into a [`CommitOutcome`].

use std::collections::HashMap;

use ratchet_core::ParentRef;
use ratchet_store::{
    child_exists_event, ClaimedInstance, ClaimedTask, CommitBatch, CommitOutcome, CompletionResult,
    Fence, Incarnation, TaskId, TaskResult, TurnResult,
};

use crate::convert::{col, i32_of, to_json, u32_of, Res};
use crate::instance::{events_by_instance, started_event};
use crate::param::p;
use crate::store::Conn;

/// The arguments of `commit_batch`, one vector per array parameter. Child rows point at their
/// turn by its 1-based position.
#[derive(Default)]
struct Args {
    t_instance: Vec<String>,
    t_fence: Vec<i64>,
    t_incarnation: Vec<i64>,
    t_execution: Vec<i32>,
    t_version: Vec<Option<i32>>,
    t_history_start: Vec<i32>,
    t_history_count: Vec<i32>,
    t_status: Vec<String>,
    t_output: Vec<Option<String>>,
    t_error: Vec<Option<String>>,
    t_custom_status: Vec<Option<String>>,
    t_next_input: Vec<Option<String>>,
    c_turn: Vec<i32>,
    c_id: Vec<i64>,
    h_turn: Vec<i32>,
    h_seq: Vec<i32>,
    h_events: Vec<String>,
    k_turn: Vec<i32>,
    k_queue: Vec<String>,
    k_name: Vec<String>,
    k_input: Vec<String>,
    k_options: Vec<String>,
    k_seq: Vec<Option<i32>>,
    k_visible_at: Vec<i64>,
    k_priority: Vec<i32>,
    k_unique_key: Vec<Option<String>>,
    k_metadata: Vec<Option<String>>,
    k_standalone: Vec<bool>,
    b_turn: Vec<i32>,
    b_kind: Vec<String>,
    b_event: Vec<String>,
    b_visible_at: Vec<i64>,
    d_turn: Vec<i32>,
    d_kind: Vec<String>,
    d_event: Vec<String>,
    d_visible_at: Vec<i64>,
    n_turn: Vec<i32>,
    n_id: Vec<String>,
    n_name: Vec<String>,
    n_input: Vec<String>,
    n_parent: Vec<Option<String>>,
    n_parent_seq: Vec<Option<i32>>,
    n_started: Vec<String>,
    n_exists: Vec<String>,
    s_turn: Vec<i32>,
    s_kind: Vec<String>,
    s_event: Vec<String>,
    p_task: Vec<i64>,
    p_fence: Vec<i64>,
    p_instance: Vec<Option<String>>,
    p_execution: Vec<Option<i32>>,
    p_seq: Vec<Option<i32>>,
    p_attempt: Vec<i32>,
    p_outcome: Vec<String>,
    p_kind: Vec<Option<String>>,
    p_event: Vec<Option<String>>,
    p_output: Vec<Option<String>>,
    p_error: Vec<Option<String>>,
    p_at: Vec<Option<i64>>,
}

impl Args {
    fn of(batch: &CommitBatch) -> Self {
        let mut a = Args::default();
        for (i, t) in batch.turns.iter().enumerate() {
            let n = i32::try_from(i + 1).unwrap_or(i32::MAX);
            a.t_instance.push(t.instance.clone());
            a.t_fence.push(t.fence.0);
            a.t_incarnation.push(t.incarnation.0);
            a.t_execution.push(i32_of(t.execution));
            a.t_version.push(t.version.map(i32_of));
            a.t_history_start.push(i32_of(t.history_start));
            a.t_history_count
                .push(i32::try_from(t.history.len()).unwrap_or(i32::MAX));
            a.t_status.push(t.status.as_str().to_string());
            a.t_output.push(t.output.as_ref().map(to_json));
            a.t_error.push(t.error.as_ref().map(to_json));
            a.t_custom_status
                .push(t.custom_status.as_ref().map(to_json));
            a.t_next_input
                .push(t.continue_as_new.as_ref().map(|c| to_json(&c.input)));
            for id in &t.consumed {
                a.c_turn.push(n);
                a.c_id.push(*id);
            }
            if !t.history.is_empty() {
                a.h_turn.push(n);
                a.h_seq.push(i32_of(t.history_start));
                a.h_events.push(to_json(&t.history));
            }
            for task in &t.tasks {
                a.k_turn.push(n);
                a.k_queue.push(task.queue.clone());
                a.k_name.push(task.name.clone());
                a.k_input.push(to_json(&task.input));
                a.k_options.push(to_json(&task.options));
                a.k_seq.push(task.owner.as_ref().map(|o| i32_of(o.seq)));
                a.k_visible_at.push(task.visible_at.0);
                a.k_priority.push(i32::from(task.priority));
                a.k_unique_key.push(task.unique_key.clone());
                a.k_metadata.push(task.metadata.as_ref().map(to_json));
                a.k_standalone.push(task.owner.is_none());
            }
            for e in &t.inbox {
                // An event for another instance can only be the result for this one's parent;
                // the server delivers it to the parent it has on record.
                if e.instance == t.instance {
                    a.b_turn.push(n);
                    a.b_kind.push(e.event.kind().to_string());
                    a.b_event.push(to_json(&e.event));
                    a.b_visible_at.push(e.visible_at.0);
                } else {
                    a.d_turn.push(n);
                    a.d_kind.push(e.event.kind().to_string());
                    a.d_event.push(to_json(&e.event));
                    a.d_visible_at.push(e.visible_at.0);
                }
            }
            for child in &t.children {
                let parent = child.parent.clone().unwrap_or(ParentRef {
                    instance: t.instance.clone(),
                    execution: t.execution,
                    seq: 0,
                });
                a.n_turn.push(n);
                a.n_id.push(child.id.clone());
                a.n_name.push(child.name.clone());
                a.n_input.push(to_json(&child.input));
                a.n_parent.push(Some(to_json(&parent)));
                a.n_parent_seq.push(Some(i32_of(parent.seq)));
                a.n_started.push(to_json(&started_event(child)));
                a.n_exists
                    .push(to_json(&child_exists_event(&child.id, &parent).event));
            }
            if let Some(next) = &t.continue_as_new {
                for event in next.inbox_events() {
                    a.s_turn.push(n);
                    a.s_kind.push(event.kind().to_string());
                    a.s_event.push(to_json(&event));
                }
            }
        }
        for c in &batch.completions {
            a.p_task.push(c.id.0);
            a.p_fence.push(c.fence.0);
            a.p_instance
                .push(c.owner.as_ref().map(|o| o.instance.clone()));
            a.p_execution
                .push(c.owner.as_ref().map(|o| i32_of(o.execution)));
            a.p_seq.push(c.owner.as_ref().map(|o| i32_of(o.seq)));
            a.p_attempt.push(i32_of(c.attempt));
            let event = c.event();
            a.p_kind.push(event.as_ref().map(|e| e.kind().to_string()));
            a.p_event.push(event.as_ref().map(to_json));
            let (outcome, output, error, at) = match &c.result {
                TaskResult::Completed(output) => ("Completed", Some(to_json(output)), None, None),
                TaskResult::Failed(error) => ("Failed", None, Some(to_json(error)), None),
                TaskResult::Retry { error, at } => {
                    ("Retry", None, Some(to_json(error)), Some(at.0))
                }
                TaskResult::Snooze { at } => ("Snooze", None, None, Some(at.0)),
                _ => ("Cancelled", None, None, None),
            };
            a.p_outcome.push(outcome.to_string());
            a.p_output.push(output);
            a.p_error.push(error);
            a.p_at.push(at);
        }
        a
    }
}

pub(crate) async fn commit(c: &Conn, batch: &CommitBatch) -> Res<CommitOutcome> {
    let a = Args::of(batch);
    let task_owner = batch.task_lease.as_ref().map(|l| l.owner.clone());
    let task_until = batch.task_lease.as_ref().map(|l| l.until.0);
    let task_capacity = i32::try_from(batch.task_capacity).unwrap_or(i32::MAX);
    let lock_owner = batch.instance_lease.as_ref().map(|l| l.owner.clone());
    let lock_until = batch.instance_lease.as_ref().map(|l| l.until.0);
    let row = c
        .one(
            "commit",
            &[
                p(&batch.now.0),
                p(&c.notify()),
                p(&a.t_instance),
                p(&a.t_fence),
                p(&a.t_execution),
                p(&a.t_version),
                p(&a.t_history_start),
                p(&a.t_history_count),
                p(&a.t_status),
                p(&a.t_output),
                p(&a.t_error),
                p(&a.t_custom_status),
                p(&a.t_next_input),
                p(&a.c_turn),
                p(&a.c_id),
                p(&a.h_turn),
                p(&a.h_seq),
                p(&a.h_events),
                p(&a.k_turn),
                p(&a.k_queue),
                p(&a.k_name),
                p(&a.k_input),
                p(&a.k_options),
                p(&a.k_seq),
                p(&a.k_visible_at),
                p(&a.k_priority),
                p(&a.k_unique_key),
                p(&a.k_metadata),
                p(&a.k_standalone),
                p(&a.b_turn),
                p(&a.b_kind),
                p(&a.b_event),
                p(&a.b_visible_at),
                p(&a.d_turn),
                p(&a.d_kind),
                p(&a.d_event),
                p(&a.d_visible_at),
                p(&a.n_turn),
                p(&a.n_id),
                p(&a.n_name),
                p(&a.n_input),
                p(&a.n_parent),
                p(&a.n_parent_seq),
                p(&a.n_started),
                p(&a.n_exists),
                p(&a.s_turn),
                p(&a.s_kind),
                p(&a.s_event),
                p(&a.p_task),
                p(&a.p_fence),
                p(&a.p_instance),
                p(&a.p_execution),
                p(&a.p_seq),
                p(&a.p_attempt),
                p(&a.p_outcome),
                p(&a.p_kind),
                p(&a.p_event),
                p(&a.p_output),
                p(&a.p_error),
                p(&a.p_at),
                p(&task_owner),
                p(&task_until),
                p(&task_capacity),
                p(&batch.lock_instances),
                p(&lock_owner),
                p(&lock_until),
                p(&a.t_incarnation),
            ],
        )
        .await?;
    outcome(batch, &row)
}

fn outcome(batch: &CommitBatch, row: &tokio_postgres::Row) -> Res<CommitOutcome> {
    let turn_ok: Vec<bool> = col(row, "turn_ok")?;
    let completion_ok: Vec<bool> = col(row, "completion_ok")?;
    // Scheduled activities leased to the committer, by instance and step.
    let task_instance: Vec<String> = col(row, "task_instance")?;
    let task_seq: Vec<i32> = col(row, "task_seq")?;
    let task_id: Vec<i64> = col(row, "task_id")?;
    let task_fence: Vec<i64> = col(row, "task_fence")?;
    let mut leased: HashMap<(String, u32), (i64, i64)> = HashMap::new();
    for (((instance, seq), id), fence) in task_instance
        .into_iter()
        .zip(task_seq)
        .zip(task_id)
        .zip(task_fence)
    {
        leased.insert((instance, u32_of(seq)), (id, fence));
    }
    let turns = batch
        .turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if !turn_ok.get(i).copied().unwrap_or(false) {
                return TurnResult::Stale;
            }
            let tasks = t
                .tasks
                .iter()
                .filter_map(|task| {
                    let seq = task.owner.as_ref()?.seq;
                    let (id, fence) = leased.remove(&(t.instance.clone(), seq))?;
                    Some(ClaimedTask {
                        id: TaskId(id),
                        fence: Fence(fence),
                        queue: task.queue.clone(),
                        name: task.name.clone(),
                        input: task.input.clone(),
                        options: task.options.clone(),
                        owner: task.owner.clone(),
                        attempt: 1,
                        metadata: task.metadata.clone(),
                    })
                })
                .collect();
            TurnResult::Committed { tasks }
        })
        .collect();
    let completions = (0..batch.completions.len())
        .map(|i| {
            if completion_ok.get(i).copied().unwrap_or(false) {
                CompletionResult::Applied
            } else {
                CompletionResult::Stale
            }
        })
        .collect();
    let mut events = events_by_instance(row)?;
    let ids: Vec<String> = col(row, "l_id")?;
    let names: Vec<String> = col(row, "l_name")?;
    let versions: Vec<Option<i32>> = col(row, "l_version")?;
    let executions: Vec<i32> = col(row, "l_execution")?;
    let lengths: Vec<i32> = col(row, "l_history_len")?;
    let fences: Vec<i64> = col(row, "l_fence")?;
    let incarnations: Vec<i64> = col(row, "l_incarnation")?;
    let locked = ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| ClaimedInstance {
            name: names.get(i).cloned().unwrap_or_default(),
            version: versions.get(i).copied().flatten().map(u32_of),
            execution: executions.get(i).copied().map_or(0, u32_of),
            history_len: lengths.get(i).copied().map_or(0, u32_of),
            fence: Fence(fences.get(i).copied().unwrap_or_default()),
            incarnation: Incarnation(incarnations.get(i).copied().unwrap_or_default()),
            events: events.remove(&id).unwrap_or_default(),
            id,
        })
        .collect();
    Ok(CommitOutcome {
        turns,
        completions,
        locked,
    })
}
