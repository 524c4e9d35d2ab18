//! `/v1/workflows`: what applying, checking, reading and deleting declarative workflow
//! definitions send and answer.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// A definition to apply or check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Definition {
    /// The definition, YAML or JSON, as text.
    pub source: String,
}

/// A stored version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkflowView {
    /// `namespace/name`: the orchestration it runs as.
    pub name: String,
    /// `document.namespace`.
    pub namespace: String,
    /// `document.name`.
    pub workflow: String,
    /// `document.version`.
    pub version: String,
    /// The engine's version number of the orchestration.
    pub revision: u32,
    /// The digest of its source.
    pub hash: String,
    /// When it was applied (RFC 3339).
    pub created_at: String,
    /// The definition as applied (only when one is read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// What applying did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppliedView {
    /// The orchestration it runs as.
    pub name: String,
    /// `document.version`.
    pub version: String,
    /// The engine's version number of the orchestration.
    pub revision: u32,
    /// False when the same source was stored already.
    pub created: bool,
    /// The schedule the definition's own `schedule` created or updated (named after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}

/// A definition that compiles.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Valid {
    /// The orchestration it would run as.
    pub name: String,
    /// `document.version`.
    pub version: String,
}

/// Which version to read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ShowQuery {
    /// This `document.version` (default: the newest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Which versions to delete.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// Only this `document.version` (default: every version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Delete even while unfinished instances run on it: then only a worker that loaded the
    /// revision before it was deleted runs them on; no other worker claims them.
    #[serde(default)]
    pub force: bool,
}
