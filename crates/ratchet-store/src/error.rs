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
    /// The database role may not do what was asked; the message names what it lacks.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
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

    /// The same error again, for each of the callers that share one failure (a batch's):
    /// the same variant and message, never wrapped in another "database error".
    pub fn copied(shared: &std::sync::Arc<StoreError>) -> StoreError {
        match shared.as_ref() {
            Self::NotFound(s) => Self::NotFound(s.clone()),
            Self::AlreadyExists { id, status } => Self::AlreadyExists {
                id: id.clone(),
                status: *status,
            },
            Self::Invalid(s) => Self::Invalid(s.clone()),
            Self::InUse {
                workflow,
                instances,
            } => Self::InUse {
                workflow: workflow.clone(),
                instances: *instances,
            },
            Self::SchemaTooNew { found, supported } => Self::SchemaTooNew {
                found: *found,
                supported: *supported,
            },
            Self::SchemaTooOld { found, required } => Self::SchemaTooOld {
                found: *found,
                required: *required,
            },
            Self::Corrupt(s) => Self::Corrupt(s.clone()),
            Self::PermissionDenied(s) => Self::PermissionDenied(s.clone()),
            Self::Closed => Self::Closed,
            Self::Backend(_) => Self::Backend(Box::new(SharedBackend(shared.clone()))),
        }
    }

    /// Wraps a driver error.
    pub fn backend(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Backend(Box::new(e))
    }
}

/// Result of a store operation.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A shared [`StoreError::Backend`]'s cause, shown as itself (the driver's message and
/// causes), so that the copy's "database error: " is said once.
#[derive(Debug)]
struct SharedBackend(std::sync::Arc<StoreError>);

impl SharedBackend {
    fn cause(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        match self.0.as_ref() {
            StoreError::Backend(cause) => Some(cause.as_ref()),
            _ => None,
        }
    }
}

impl std::fmt::Display for SharedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cause() {
            Some(cause) => std::fmt::Display::fmt(cause, f),
            None => std::fmt::Display::fmt(&self.0, f),
        }
    }
}

impl std::error::Error for SharedBackend {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause().and_then(|cause| cause.source())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_database_error_says_database_error_once() {
        let shared = std::sync::Arc::new(StoreError::backend(std::io::Error::other(
            "permission denied for table tasks",
        )));
        let copy = StoreError::copied(&shared);
        assert_eq!(
            copy.to_string(),
            "database error: permission denied for table tasks"
        );
        assert!(matches!(copy, StoreError::Backend(_)));
        let invalid = StoreError::copied(&std::sync::Arc::new(StoreError::Invalid("x".into())));
        assert!(matches!(invalid, StoreError::Invalid(ref s) if s == "x"));
    }
}
