use crate::InstanceStatus;

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The named instance or task does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// An instance with this id exists and the start did not ask to reuse it.
    #[error("instance \"{id}\" already exists with status {status}")]
    AlreadyExists {
        /// The instance id.
        id: String,
        /// Its current status.
        status: InstanceStatus,
    },
    /// The input was refused (bad id, oversized payload, ...); nothing was written.
    #[error("invalid input: {0}")]
    Invalid(String),
    /// Deleting a stored workflow was refused, nothing deleted: unfinished instances run on
    /// what it would delete. Let them finish (or stop them), or force the delete.
    #[error("workflow {workflow} is in use by {instances} unfinished instance(s): let them finish or stop them, or force the delete")]
    InUse {
        /// What was to be deleted: `namespace/name`, and the version when one was named.
        workflow: String,
        /// How many unfinished instances run on it.
        instances: u64,
    },
    /// The database holds a schema newer than this code understands.
    #[error("the database schema is at version {found}, newer than the {supported} this Ratchet supports; upgrade Ratchet")]
    SchemaTooNew {
        /// Version found in the database.
        found: i64,
        /// Newest version this code knows.
        supported: i64,
    },
    /// The database schema is older than this code needs, and this store does not migrate on
    /// its own.
    #[error("the database schema is at version {found}, older than the {required} this Ratchet needs; run `ratchet migrate`")]
    SchemaTooOld {
        /// Version found in the database.
        found: i64,
        /// Version this code needs.
        required: i64,
    },
    /// The database holds data this code cannot read.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// The store was shut down.
    #[error("the store is closed")]
    Closed,
    /// The database itself failed; retrying later may help.
    #[error("database error: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    /// Refuses a schema at version `found` for code that runs on version `code`: newer
    /// ([`StoreError::SchemaTooNew`]) or older ([`StoreError::SchemaTooOld`]).
    ///
    /// # Errors
    ///
    /// As above; `Ok` when they are equal.
    pub fn check_schema(found: i64, code: i64) -> Result<(), StoreError> {
        match found.cmp(&code) {
            std::cmp::Ordering::Greater => Err(StoreError::SchemaTooNew {
                found,
                supported: code,
            }),
            std::cmp::Ordering::Less => Err(StoreError::SchemaTooOld {
                found,
                required: code,
            }),
            std::cmp::Ordering::Equal => Ok(()),
        }
    }

    /// Wraps a driver error.
    pub fn backend(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Backend(Box::new(e))
    }
}

/// Result of a store operation.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
