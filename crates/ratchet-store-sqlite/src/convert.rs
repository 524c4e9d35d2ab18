//! Rows to store types, and driver errors to [`StoreError`]: the one place driver types stop.

use ratchet_core::{ActivityOptions, ErrorInfo, ParentRef, Timestamp};
use ratchet_store::{
    ClaimedTask, Fence, InstanceRecord, Position, StoreError, StoredEvent, TaskId, TaskOwner,
    TaskRecord, TaskState,
};
use rusqlite::Row;
use serde_json::Value;

/// Maps every SQLite error.
pub(crate) fn db_err(e: rusqlite::Error) -> StoreError {
    StoreError::backend(e)
}

pub(crate) use ratchet_store::codec::{event, from_json, opt_json, status, to_json};

/// A stored count or number, saturated into a `u32`.
pub(crate) fn u32_of(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The orchestration step of a task row: all three columns for an activity, none for a
/// standalone task.
fn owner(
    instance: Option<String>,
    execution: Option<i64>,
    seq: Option<i64>,
) -> Result<Option<TaskOwner>, StoreError> {
    match (instance, execution, seq) {
        (None, None, None) => Ok(None),
        (Some(instance), Some(execution), Some(seq)) => Ok(Some(TaskOwner {
            instance,
            execution: u32_of(execution),
            seq: u32_of(seq),
        })),
        _ => Err(StoreError::Corrupt(
            "a task row names part of an orchestration step".into(),
        )),
    }
}

/// Raw columns of a task leased by `task_claim`, read inside the row callback.
pub(crate) struct ClaimedRow {
    id: i64,
    fence: i64,
    queue: String,
    name: String,
    input: String,
    options: String,
    instance: Option<String>,
    execution: Option<i64>,
    seq: Option<i64>,
    attempt: i64,
    metadata: Option<String>,
}

impl ClaimedRow {
    pub(crate) fn read(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: r.get(0)?,
            fence: r.get(1)?,
            queue: r.get(2)?,
            name: r.get(3)?,
            input: r.get(4)?,
            options: r.get(5)?,
            instance: r.get(6)?,
            execution: r.get(7)?,
            seq: r.get(8)?,
            attempt: r.get(9)?,
            metadata: r.get(10)?,
        })
    }

    pub(crate) fn into_task(self) -> Result<ClaimedTask, StoreError> {
        Ok(ClaimedTask {
            id: TaskId(self.id),
            fence: Fence(self.fence),
            input: from_json(&self.input, "task input")?,
            options: from_json(&self.options, "task options")?,
            owner: owner(self.instance, self.execution, self.seq)?,
            metadata: opt_json(self.metadata, "task metadata")?,
            queue: self.queue,
            name: self.name,
            attempt: u32_of(self.attempt),
        })
    }
}

/// Raw columns of `task_get` / `task_list`, read inside the row callback.
pub(crate) struct TaskRow {
    id: i64,
    queue: String,
    name: String,
    state: String,
    priority: i16,
    attempt: i64,
    options: String,
    input: String,
    output: Option<String>,
    error: Option<String>,
    unique_key: Option<String>,
    metadata: Option<String>,
    instance: Option<String>,
    execution: Option<i64>,
    seq: Option<i64>,
    created_at: i64,
    visible_at: i64,
    finished_at: Option<i64>,
}

impl TaskRow {
    pub(crate) fn read(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: r.get(0)?,
            queue: r.get(1)?,
            name: r.get(2)?,
            state: r.get(3)?,
            priority: r.get(4)?,
            attempt: r.get(5)?,
            options: r.get(6)?,
            input: r.get(7)?,
            output: r.get(8)?,
            error: r.get(9)?,
            unique_key: r.get(10)?,
            metadata: r.get(11)?,
            instance: r.get(12)?,
            execution: r.get(13)?,
            seq: r.get(14)?,
            created_at: r.get(15)?,
            visible_at: r.get(16)?,
            finished_at: r.get(17)?,
        })
    }

    pub(crate) fn into_record(self) -> Result<TaskRecord, StoreError> {
        let options: ActivityOptions = from_json(&self.options, "task options")?;
        Ok(TaskRecord {
            id: TaskId(self.id),
            state: task_state(&self.state)?,
            priority: self.priority,
            attempt: u32_of(self.attempt),
            max_attempts: options.retry.max_attempts,
            options,
            input: from_json(&self.input, "task input")?,
            output: opt_json(self.output, "task output")?,
            error: opt_json::<ErrorInfo>(self.error, "task error")?,
            metadata: opt_json(self.metadata, "task metadata")?,
            owner: owner(self.instance, self.execution, self.seq)?,
            queue: self.queue,
            name: self.name,
            unique_key: self.unique_key,
            created_at: Timestamp(self.created_at),
            visible_at: Timestamp(self.visible_at),
            finished_at: self.finished_at.map(Timestamp),
        })
    }
}

/// A stored or computed task state name read back.
pub(crate) fn task_state(text: &str) -> Result<TaskState, StoreError> {
    text.parse().map_err(StoreError::Corrupt)
}

/// Raw columns of `instance_get` / `instance_list`, read inside the row callback.
pub(crate) struct InstanceRow {
    id: String,
    name: String,
    version: Option<i64>,
    status: String,
    execution: i64,
    input: String,
    output: Option<String>,
    error: Option<String>,
    custom_status: Option<String>,
    parent: Option<String>,
    history_len: i64,
    created_at: i64,
    updated_at: i64,
    finished_at: Option<i64>,
}

impl InstanceRow {
    pub(crate) fn read(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: r.get(0)?,
            name: r.get(1)?,
            version: r.get(2)?,
            status: r.get(3)?,
            execution: r.get(4)?,
            input: r.get(5)?,
            output: r.get(6)?,
            error: r.get(7)?,
            custom_status: r.get(8)?,
            parent: r.get(9)?,
            history_len: r.get(10)?,
            created_at: r.get(11)?,
            updated_at: r.get(12)?,
            finished_at: r.get(13)?,
        })
    }

    pub(crate) fn into_record(self) -> Result<InstanceRecord, StoreError> {
        Ok(InstanceRecord {
            status: status(&self.status)?,
            input: from_json::<Value>(&self.input, "instance input")?,
            output: opt_json(self.output, "instance output")?,
            error: opt_json::<ErrorInfo>(self.error, "instance error")?,
            custom_status: opt_json(self.custom_status, "custom status")?,
            parent: opt_json::<ParentRef>(self.parent, "parent")?,
            id: self.id,
            name: self.name,
            version: self.version.map(u32_of),
            execution: u32_of(self.execution),
            history_len: u32_of(self.history_len),
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
            finished_at: self.finished_at.map(Timestamp),
        })
    }
}

/// A stored event position read back.
pub(crate) fn position(v: i64) -> Result<Position, StoreError> {
    u64::try_from(v)
        .map(Position)
        .map_err(|_| StoreError::Corrupt(format!("event position {v}")))
}

/// Raw columns of an event read, read inside the row callback.
pub(crate) struct EventRow {
    position: i64,
    kind: String,
    tags: String,
    payload: String,
    metadata: String,
    recorded_at: i64,
}

impl EventRow {
    pub(crate) fn read(r: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            position: r.get(0)?,
            kind: r.get(1)?,
            tags: r.get(2)?,
            payload: r.get(3)?,
            metadata: r.get(4)?,
            recorded_at: r.get(5)?,
        })
    }

    pub(crate) fn into_event(self) -> Result<StoredEvent, StoreError> {
        Ok(StoredEvent {
            position: position(self.position)?,
            tags: from_json(&self.tags, "event tags")?,
            payload: from_json(&self.payload, "event payload")?,
            metadata: from_json(&self.metadata, "event metadata")?,
            kind: self.kind,
            recorded_at: Timestamp(self.recorded_at),
        })
    }
}
