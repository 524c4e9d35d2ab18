//! Definitions kept in the database: applied once per version, loaded by every worker.

use std::collections::BTreeSet;

use ratchet_core::Timestamp;
use ratchet_runtime::{RegisteredNames, Registry};
use ratchet_store::{NewWorkflow, Store, StoreError, WorkflowPut, WorkflowRecord};

use crate::{CompileErrors, Known, Workflow};

impl Known {
    /// The names a registry holds: a definition calling anything else is refused.
    pub fn from_names(names: &RegisteredNames) -> Known {
        Known {
            activities: Some(names.activities.iter().cloned().collect()),
            orchestrations: Some(
                names
                    .orchestrations
                    .iter()
                    .map(|(n, _)| n.clone())
                    .collect(),
            ),
        }
    }

    fn with_orchestrations(mut self, more: impl IntoIterator<Item = String>) -> Known {
        if let Some(known) = &mut self.orchestrations {
            known.extend(more);
        }
        self
    }
}

/// Why a definition was not applied; nothing was stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// It does not compile.
    #[error("{0}")]
    Compile(#[from] CompileErrors),
    /// Its version is stored with other content.
    #[error("{name} version {version} is stored already (revision {revision}) with other content: give the change a new document.version, so instances keep the definition they started with")]
    Changed {
        /// `namespace/name`.
        name: String,
        /// `document.version`.
        version: String,
        /// The stored revision.
        revision: u32,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What applying a definition did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// `namespace/name`.
    pub name: String,
    /// `document.version`.
    pub version: String,
    /// Its revision: the engine's version number of the orchestration.
    pub revision: u32,
    /// `false` when the same source was stored already.
    pub created: bool,
}

/// Compiles `source` (checking names against `known` and the declarative workflows already
/// stored) and stores it as the next revision of its workflow. One read and one write.
///
/// # Errors
///
/// [`ApplyError`]: it does not compile, its version is stored with other content, or the
/// store failed. Nothing is stored then.
pub async fn apply(
    store: &dyn Store,
    source: &str,
    known: &Known,
    now: Timestamp,
) -> Result<Applied, ApplyError> {
    let stored = store.workflow_list(None, None).await?;
    let known = known.clone().with_orchestrations(names_of(&stored));
    let workflow = Workflow::compile_with(source, &known)?;
    let new = NewWorkflow {
        namespace: workflow.namespace().to_string(),
        name: workflow.name().to_string(),
        version: workflow.version().to_string(),
        hash: workflow.hash().to_string(),
        source: source.to_string(),
    };
    let name = workflow.orchestration_name();
    let version = workflow.version().to_string();
    match store.workflow_put(new, now).await? {
        WorkflowPut::Created(revision) => Ok(Applied {
            name,
            version,
            revision,
            created: true,
        }),
        WorkflowPut::Unchanged(revision) => Ok(Applied {
            name,
            version,
            revision,
            created: false,
        }),
        WorkflowPut::Conflict { revision, .. } => Err(ApplyError::Changed {
            name,
            version,
            revision,
        }),
        _ => Err(ApplyError::Store(StoreError::Corrupt(
            "an unknown outcome of storing a workflow".into(),
        ))),
    }
}

fn names_of(stored: &[WorkflowRecord]) -> BTreeSet<String> {
    stored
        .iter()
        .map(|w| crate::orchestration_name(&w.namespace, &w.name))
        .collect()
}

/// One stored definition as a worker loads it.
#[derive(Debug)]
pub enum Loaded {
    /// Compiled: register it as this revision.
    Ready(Box<Workflow>, u32),
    /// No longer compiles here (an activity it calls is not registered, say): skipped.
    Broken(Box<WorkflowRecord>, CompileErrors),
}

/// Every stored definition, compiled against `known` (and the other stored workflows), for
/// a worker to register each as its revision.
///
/// # Errors
///
/// Store failures.
pub async fn load(store: &dyn Store, known: &Known) -> Result<Vec<Loaded>, StoreError> {
    let stored = store.workflow_list(None, None).await?;
    let known = known.clone().with_orchestrations(names_of(&stored));
    Ok(stored
        .into_iter()
        .map(
            |record| match Workflow::compile_with(&record.source, &known) {
                Ok(w) => Loaded::Ready(Box::new(w), record.revision),
                Err(e) => Loaded::Broken(Box::new(record), e),
            },
        )
        .collect())
}

/// Registers in `registry` (a runtime's, in use) every stored revision it does not have yet,
/// compiled against what it registers; returns the `(name, revision)`s it added and the
/// definitions that do not compile here. A worker calls it at start and then now and then,
/// so a definition applied while it runs is run without a restart.
///
/// # Errors
///
/// Store failures.
pub async fn register_stored(
    store: &dyn Store,
    registry: &Registry,
) -> Result<(Vec<(String, u32)>, Vec<(WorkflowRecord, CompileErrors)>), StoreError> {
    let names = registry.names();
    let have: BTreeSet<(String, u32)> = names
        .orchestrations
        .iter()
        .flat_map(|(n, versions)| versions.iter().map(move |v| (n.clone(), *v)))
        .collect();
    let mut added = Vec::new();
    let mut broken = Vec::new();
    for loaded in load(store, &Known::from_names(&names)).await? {
        match loaded {
            Loaded::Ready(w, revision) => {
                let name = w.orchestration_name();
                if !have.contains(&(name.clone(), revision)) {
                    w.register(registry, revision);
                    added.push((name, revision));
                }
            }
            Loaded::Broken(record, errors) => {
                let name = crate::orchestration_name(&record.namespace, &record.name);
                if !have.contains(&(name, record.revision)) {
                    broken.push((*record, errors));
                }
            }
        }
    }
    Ok((added, broken))
}
