//! Rows to store types, and driver errors to [`StoreError`]: the one place driver types stop.

use ratchet_core::{ErrorInfo, ParentRef, Timestamp};
use ratchet_store::{InstanceRecord, StoreError};
use serde_json::Value;
use tokio_postgres::error::SqlState;
use tokio_postgres::Row;

/// What a call can fail with before it becomes a [`StoreError`]: the driver's error keeps its
/// SQLSTATE so a deadlock can be retried.
#[derive(Debug)]
pub(crate) enum Failure {
    Db(tokio_postgres::Error),
    Store(StoreError),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Db(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl Failure {
    /// A conflict between concurrent transactions that rolled this one back whole: running
    /// the call again is safe.
    pub(crate) fn is_transient_conflict(&self) -> bool {
        match self {
            Self::Db(e) => matches!(
                e.code(),
                Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED
                    || *c == SqlState::T_R_SERIALIZATION_FAILURE
            ),
            Self::Store(_) => false,
        }
    }

    pub(crate) fn into_store(self) -> StoreError {
        match self {
            Self::Db(e) => db_err(e),
            Self::Store(e) => e,
        }
    }
}

/// A driver error that says what the server said: the driver's own message for a server
/// error is only "db error".
#[derive(Debug)]
struct DbError {
    message: String,
    source: tokio_postgres::Error,
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Maps every driver error.
pub(crate) fn db_err(e: tokio_postgres::Error) -> StoreError {
    let message = match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    };
    StoreError::backend(DbError { message, source: e })
}

/// Maps a failure to get a pooled connection.
pub(crate) fn pool_err(e: deadpool_postgres::PoolError) -> StoreError {
    use deadpool_postgres::{PoolError, TimeoutType};
    let timed_out = |what: &str| {
        StoreError::backend(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("{what} within the connect timeout"),
        ))
    };
    match e {
        PoolError::Backend(e) => db_err(e),
        PoolError::Timeout(TimeoutType::Create) => {
            timed_out("could not connect to the server: it did not answer")
        }
        PoolError::Timeout(TimeoutType::Wait) => {
            timed_out("no pooled connection came free: all were busy")
        }
        PoolError::Timeout(TimeoutType::Recycle) => {
            timed_out("a pooled connection could not be checked")
        }
        other => StoreError::backend(other),
    }
}

pub(crate) type Res<T> = std::result::Result<T, Failure>;

pub(crate) use ratchet_store::codec::{event, from_json, opt_json, status, to_json};

/// A stored integer as the store's `u32` (never negative in practice).
pub(crate) fn u32_of(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

/// A `u32` as PostgreSQL's `integer`, saturating (positions and counts never get there).
pub(crate) fn i32_of(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// Reads a column, naming it when the row does not have the expected shape.
pub(crate) fn col<'a, T: tokio_postgres::types::FromSql<'a>>(row: &'a Row, name: &str) -> Res<T> {
    Ok(row.try_get(name)?)
}

/// A row of `instance_get` / `instance_list`.
pub(crate) fn instance_record(row: &Row) -> Res<InstanceRecord> {
    Ok(InstanceRecord {
        id: col(row, "id")?,
        name: col(row, "name")?,
        version: col::<Option<i32>>(row, "version")?.map(u32_of),
        status: status(col(row, "status")?)?,
        execution: u32_of(col(row, "execution")?),
        input: from_json::<Value>(col(row, "input")?, "instance input")?,
        output: opt_json(col(row, "output")?, "instance output")?,
        error: opt_json::<ErrorInfo>(col(row, "error")?, "instance error")?,
        custom_status: opt_json(col(row, "custom_status")?, "custom status")?,
        parent: opt_json::<ParentRef>(col(row, "parent")?, "parent")?,
        history_len: u32_of(col(row, "history_len")?),
        created_at: Timestamp(col(row, "created_at")?),
        updated_at: Timestamp(col(row, "updated_at")?),
        finished_at: col::<Option<i64>>(row, "finished_at")?.map(Timestamp),
    })
}
