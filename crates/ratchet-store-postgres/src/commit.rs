//! The group commit: a [`CommitBatch`] as the composite-type arrays of `commit_batch`
//! (`functions/claim_and_commit.sql` declares each type once), and its result arrays back
//! into a [`CommitOutcome`].

use std::collections::HashMap;

use postgres_types::{Field, Kind, ToSql, Type};
use ratchet_core::ParentRef;
use ratchet_store::{
    child_exists_event, ClaimedInstance, ClaimedTask, CommitBatch, CommitOutcome, CompletionResult,
    Fence, Incarnation, StoreError, TaskId, TaskResult, TurnResult,
};
use tokio_postgres::SimpleQueryMessage;

use crate::convert::{col, i32_of, to_json, u32_of, Failure, Res};
use crate::instance::{create_outcome, events_by_instance, if_exists_name, started_event};
use crate::param::{p, Param};
use crate::store::{one_row, Conn};

/// A turn, as `ratchet.commit_turn`.
#[derive(Debug, ToSql)]
#[postgres(name = "commit_turn")]
struct TurnRow {
    instance: String,
    fence: i64,
    incarnation: i64,
    execution: i32,
    version: Option<i32>,
    history_start: i32,
    history_count: i32,
    status: &'static str,
    output: Option<String>,
    error: Option<String>,
    custom_status: Option<String>,
    next_input: Option<String>,
    consumed: Vec<i64>,
    history: Option<String>,
    /// 1-based positions in the batch's completions.
    fed: Vec<i32>,
    /// 1-based position in the batch's starts.
    started: Option<i32>,
}

/// An instance the batch creates for a turn that ran on its start, as `ratchet.commit_start`.
#[derive(Debug, ToSql)]
#[postgres(name = "commit_start")]
struct StartRow {
    id: String,
    name: String,
    input: String,
    if_exists: &'static str,
    started: String,
    incarnation: i64,
}

/// A task a turn creates, as `ratchet.commit_task`; `turn` is the turn's 1-based position.
#[derive(Debug, ToSql)]
#[postgres(name = "commit_task")]
struct TaskRow {
    turn: i32,
    queue: String,
    name: String,
    input: String,
    options: String,
    seq: Option<i32>,
    visible_at: i64,
    priority: i32,
    unique_key: Option<String>,
    metadata: Option<String>,
    standalone: bool,
}

/// An inbox event a turn writes, as `ratchet.commit_event`.
#[derive(Debug, ToSql)]
#[postgres(name = "commit_event")]
struct EventRow {
    turn: i32,
    kind: String,
    event: String,
    visible_at: i64,
}

/// A sub-orchestration a turn starts, as `ratchet.commit_child`.
#[derive(Debug, ToSql)]
#[postgres(name = "commit_child")]
struct ChildRow {
    turn: i32,
    id: String,
    name: String,
    input: String,
    parent: String,
    parent_seq: i32,
    started: String,
    exists_event: String,
}

/// A task completion, as `ratchet.commit_completion`.
#[derive(Debug, ToSql)]
#[postgres(name = "commit_completion")]
struct CompletionRow {
    task: i64,
    fence: i64,
    instance: Option<String>,
    execution: Option<i32>,
    seq: Option<i32>,
    attempt: i32,
    outcome: &'static str,
    kind: Option<String>,
    event: Option<String>,
    output: Option<String>,
    error: Option<String>,
    at: Option<i64>,
}

/// The array types of `commit_batch`'s parameters, read from the schema once per store: a
/// composite type's id is the database's own, and statements sent unnamed (for PgBouncer)
/// must name every parameter's type.
#[derive(Clone, Debug)]
pub(crate) struct CommitTypes {
    turns: Type,
    tasks: Type,
    events: Type,
    children: Type,
    completions: Type,
    starts: Type,
}

impl CommitTypes {
    /// Reads the five composite types of `schema` (one round trip, simple protocol).
    pub(crate) async fn load(client: &tokio_postgres::Client, schema: &str) -> Res<Self> {
        let sql = format!(
            "SELECT t.typname, t.oid, t.typarray, a.attname, a.atttypid
             FROM pg_type t JOIN pg_attribute a ON a.attrelid = t.typrelid
             WHERE t.typnamespace = '{schema}'::regnamespace AND t.typname LIKE 'commit\\_%'
               AND a.attnum > 0 AND NOT a.attisdropped
             ORDER BY t.typname, a.attnum"
        );
        // name -> (oid, array oid, fields)
        let mut found: HashMap<String, (u32, u32, Vec<Field>)> = HashMap::new();
        for message in client.simple_query(&sql).await? {
            let SimpleQueryMessage::Row(row) = message else {
                continue;
            };
            let text = |i: usize| row.get(i).unwrap_or_default();
            let oid = |i: usize| text(i).parse::<u32>().unwrap_or_default();
            let field_type = Type::from_oid(oid(4)).ok_or_else(|| {
                Failure::Store(StoreError::Corrupt(format!(
                    "{}.{} has a type this Ratchet cannot send",
                    text(0),
                    text(3)
                )))
            })?;
            found
                .entry(text(0).to_string())
                .or_insert_with(|| (oid(1), oid(2), Vec::new()))
                .2
                .push(Field::new(text(3).to_string(), field_type));
        }
        let mut array_of = |name: &str| -> Res<Type> {
            let (oid, array, fields) = found.remove(name).ok_or_else(|| {
                Failure::Store(StoreError::Invalid(format!(
                    "schema {schema} has no type {name}: its functions are older than this \
                     Ratchet; run `ratchet migrate`"
                )))
            })?;
            let member = Type::new(
                name.to_string(),
                oid,
                Kind::Composite(fields),
                schema.to_string(),
            );
            Ok(Type::new(
                format!("_{name}"),
                array,
                Kind::Array(member),
                schema.to_string(),
            ))
        };
        Ok(Self {
            turns: array_of("commit_turn")?,
            tasks: array_of("commit_task")?,
            events: array_of("commit_event")?,
            children: array_of("commit_child")?,
            completions: array_of("commit_completion")?,
            starts: array_of("commit_start")?,
        })
    }
}

/// The rows of `commit_batch`, one vector per array parameter.
#[derive(Default)]
struct Rows {
    turns: Vec<TurnRow>,
    tasks: Vec<TaskRow>,
    timers: Vec<EventRow>,
    parent_events: Vec<EventRow>,
    children: Vec<ChildRow>,
    next_events: Vec<EventRow>,
    completions: Vec<CompletionRow>,
    starts: Vec<StartRow>,
}

impl Rows {
    fn of(batch: &CommitBatch) -> Self {
        let mut r = Rows::default();
        for (i, t) in batch.turns.iter().enumerate() {
            let turn = i32::try_from(i + 1).unwrap_or(i32::MAX);
            r.turns.push(TurnRow {
                instance: t.instance.clone(),
                fence: t.fence.0,
                incarnation: t.incarnation.0,
                execution: i32_of(t.execution),
                version: t.version.map(i32_of),
                history_start: i32_of(t.history_start),
                history_count: i32::try_from(t.history.len()).unwrap_or(i32::MAX),
                status: t.status.as_str(),
                output: t.output.as_ref().map(to_json),
                error: t.error.as_ref().map(to_json),
                custom_status: t.custom_status.as_ref().map(to_json),
                next_input: t.continue_as_new.as_ref().map(|c| to_json(&c.input)),
                consumed: t.consumed.clone(),
                history: (!t.history.is_empty()).then(|| to_json(&t.history)),
                fed: t
                    .fed
                    .iter()
                    .map(|&f| i32::try_from(f.saturating_add(1)).unwrap_or(i32::MAX))
                    .collect(),
                started: t
                    .started
                    .map(|s| i32::try_from(s.saturating_add(1)).unwrap_or(i32::MAX)),
            });
            for task in &t.tasks {
                r.tasks.push(TaskRow {
                    turn,
                    queue: task.queue.clone(),
                    name: task.name.clone(),
                    input: to_json(&task.input),
                    options: to_json(&task.options),
                    seq: task.owner.as_ref().map(|o| i32_of(o.seq)),
                    visible_at: task.visible_at.0,
                    priority: i32::from(task.priority),
                    unique_key: task.unique_key.clone(),
                    metadata: task.metadata.as_ref().map(to_json),
                    standalone: task.owner.is_none(),
                });
            }
            for e in &t.inbox {
                let row = EventRow {
                    turn,
                    kind: e.event.kind().to_string(),
                    event: to_json(&e.event),
                    visible_at: e.visible_at.0,
                };
                // An event for another instance can only be the result for this one's
                // parent; the server delivers it to the parent it has on record.
                if e.instance == t.instance {
                    r.timers.push(row);
                } else {
                    r.parent_events.push(row);
                }
            }
            for child in &t.children {
                let parent = child.parent.clone().unwrap_or(ParentRef {
                    instance: t.instance.clone(),
                    execution: t.execution,
                    seq: 0,
                });
                r.children.push(ChildRow {
                    turn,
                    id: child.id.clone(),
                    name: child.name.clone(),
                    input: to_json(&child.input),
                    parent: to_json(&parent),
                    parent_seq: i32_of(parent.seq),
                    started: to_json(&started_event(child)),
                    exists_event: to_json(&child_exists_event(&child.id, &parent).event),
                });
            }
            if let Some(next) = &t.continue_as_new {
                for event in next.inbox_events() {
                    r.next_events.push(EventRow {
                        turn,
                        kind: event.kind().to_string(),
                        event: to_json(&event),
                        visible_at: batch.now.0,
                    });
                }
            }
        }
        for s in &batch.starts {
            r.starts.push(StartRow {
                id: s.instance.id.clone(),
                name: s.instance.name.clone(),
                input: to_json(&s.instance.input),
                if_exists: if_exists_name(s.instance.if_exists),
                started: to_json(&started_event(&s.instance)),
                incarnation: s.incarnation.0,
            });
        }
        for c in &batch.completions {
            let event = c.event();
            let (outcome, output, error, at) = match &c.result {
                TaskResult::Completed(output) => ("Completed", Some(to_json(output)), None, None),
                TaskResult::Failed(error) => ("Failed", None, Some(to_json(error)), None),
                TaskResult::Retry { error, at } => {
                    ("Retry", None, Some(to_json(error)), Some(at.0))
                }
                TaskResult::Snooze { at } => ("Snooze", None, None, Some(at.0)),
                _ => ("Cancelled", None, None, None),
            };
            r.completions.push(CompletionRow {
                task: c.id.0,
                fence: c.fence.0,
                instance: c.owner.as_ref().map(|o| o.instance.clone()),
                execution: c.owner.as_ref().map(|o| i32_of(o.execution)),
                seq: c.owner.as_ref().map(|o| i32_of(o.seq)),
                attempt: i32_of(c.attempt),
                outcome,
                kind: event.as_ref().map(|e| e.kind().to_string()),
                event: event.as_ref().map(to_json),
                output,
                error,
                at,
            });
        }
        r
    }
}

/// `rows` as a parameter of the array type `ty`.
fn rows<'a, T: ToSql + Sync>(rows: &'a Vec<T>, ty: &Type) -> Param<'a> {
    (rows, ty.clone())
}

pub(crate) async fn commit(c: &Conn, batch: &CommitBatch) -> Res<CommitOutcome> {
    batch.check()?;
    let r = Rows::of(batch);
    let types = c.commit_types().await?;
    let task_owner = batch.task_lease.as_ref().map(|l| l.owner.clone());
    let task_until = batch.task_lease.as_ref().map(|l| l.until.0);
    let task_capacity = i32::try_from(batch.task_capacity).unwrap_or(i32::MAX);
    let lock_owner = batch.instance_lease.as_ref().map(|l| l.owner.clone());
    let lock_until = batch.instance_lease.as_ref().map(|l| l.until.0);
    // Only turns and activity completions can make work others should hear of; a batch of
    // standalone tasks' completions (most of a task queue's commits) sends no statement for
    // notifications at all.
    let notify = c.notify()
        && (!batch.turns.is_empty() || batch.completions.iter().any(|done| done.owner.is_some()));
    // The notifications the commit asks for leave in the statement sent with it, after its
    // transaction (see commit_batch): one round trip still.
    let rows_back = c
        .then_notify_on(
            "commit_notify",
            &[],
            notify,
            "commit",
            &[
                p(&batch.now.0),
                p(&notify),
                rows(&r.turns, &types.turns),
                rows(&r.tasks, &types.tasks),
                rows(&r.timers, &types.events),
                rows(&r.parent_events, &types.events),
                rows(&r.children, &types.children),
                rows(&r.next_events, &types.events),
                rows(&r.completions, &types.completions),
                p(&task_owner),
                p(&task_until),
                p(&task_capacity),
                p(&batch.lock_instances),
                p(&lock_owner),
                p(&lock_until),
                rows(&r.starts, &types.starts),
            ],
        )
        .await?;
    outcome(batch, &one_row("commit", rows_back)?)
}

fn outcome(batch: &CommitBatch, row: &tokio_postgres::Row) -> Res<CommitOutcome> {
    let start_outcome: Vec<String> = col(row, "start_outcome")?;
    let start_status: Vec<Option<String>> = col(row, "start_status")?;
    // Created unleased: the turn that ran on the start is the lease's business.
    let starts = (0..batch.starts.len())
        .map(|i| {
            create_outcome(
                start_outcome.get(i).map(String::as_str),
                start_status.get(i).cloned().flatten().as_deref(),
                || None,
            )
        })
        .collect::<Res<Vec<_>>>()?;
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
        starts,
        turns,
        completions,
        locked,
    })
}
