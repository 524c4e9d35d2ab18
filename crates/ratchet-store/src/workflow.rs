//! Declarative workflow definitions: their source, kept by namespace, name and version.

use ratchet_core::Timestamp;

/// A definition to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewWorkflow {
    /// `document.namespace`.
    pub namespace: String,
    /// `document.name`.
    pub name: String,
    /// `document.version`, as written.
    pub version: String,
    /// The SHA-256 of `source`, in hex.
    pub hash: String,
    /// The definition as applied (YAML or JSON).
    pub source: String,
}

/// A stored definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkflowRecord {
    /// `document.namespace`.
    pub namespace: String,
    /// `document.name`.
    pub name: String,
    /// `document.version`, as written.
    pub version: String,
    /// The engine's version of the orchestration it runs as (`namespace/name`): 1 for the
    /// first version stored under the namespace and name, then one more than the highest
    /// given so far for each new one (a deleted revision's number is never given again). An
    /// instance stays on the revision it started on.
    pub revision: u32,
    /// The SHA-256 of `source`, in hex.
    pub hash: String,
    /// The definition as applied.
    pub source: String,
    /// When it was stored.
    pub created_at: Timestamp,
}

/// What storing a definition did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkflowPut {
    /// Stored as this new revision.
    Created(u32),
    /// The same source is stored already under this revision: nothing changed.
    Unchanged(u32),
    /// This version is stored already with other content (this revision, that hash): a
    /// change needs a new `document.version`, so instances keep the definition they started.
    Conflict {
        /// The stored revision of the version.
        revision: u32,
        /// Its hash.
        hash: String,
    },
}
