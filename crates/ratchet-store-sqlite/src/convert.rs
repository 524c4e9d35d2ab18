//! Rows to store types, and driver errors to [`StoreError`]: the one place driver types stop.

use ratchet_core::{ErrorInfo, ParentRef, Timestamp};
use ratchet_store::{InstanceRecord, StoreError};
use rusqlite::Row;
use serde_json::Value;

/// Maps every SQLite error.
pub(crate) fn db_err(e: rusqlite::Error) -> StoreError {
    StoreError::backend(e)
}

pub(crate) use ratchet_store::codec::{event, from_json, opt_json, status, to_json};

pub(crate) fn u32_of(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
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
