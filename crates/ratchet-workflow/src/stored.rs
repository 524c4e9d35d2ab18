//! Definitions kept in the database: applied once per version, loaded by every worker.

use std::collections::BTreeSet;

use ratchet_core::Timestamp;
use ratchet_runtime::{RegisteredNames, Registry};
use ratchet_store::{NewWorkflow, Store, StoreError, WorkflowPut, WorkflowRecord};

use crate::{CompileErrors, Known, Workflow};

impl Known {
    /// The names a registry holds: a definition calling anything else is refused (any
    /// activity passes when the registry's runtime lets workers elsewhere run activities).
    pub fn from_names(names: &RegisteredNames) -> Known {
        Known {
            activities: (!names.activities_elsewhere)
                .then(|| names.activities.iter().cloned().collect()),
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
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    /// The definition, compiled: a runtime in this process can register it at once.
    pub workflow: Workflow,
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
    // Off the async threads: compiling runs each expression on its budget.
    let text = source.to_string();
    let workflow = tokio::task::spawn_blocking(move || Workflow::compile_with(&text, &known))
        .await
        .map_err(|e| {
            ApplyError::Compile(CompileErrors(vec![crate::CompileError::new(
                0,
                0,
                format!("compiling stopped: {e}"),
            )]))
        })??;
    let new = NewWorkflow {
        namespace: workflow.namespace().to_string(),
        name: workflow.name().to_string(),
        version: workflow.version().to_string(),
        hash: workflow.hash().to_string(),
        source: source.to_string(),
    };
    let (revision, created) = match store.workflow_put(new, now).await? {
        WorkflowPut::Created(revision) => (revision, true),
        WorkflowPut::Unchanged(revision) => (revision, false),
        WorkflowPut::Conflict { revision, .. } => {
            return Err(ApplyError::Changed {
                name: workflow.orchestration_name(),
                version: workflow.version().to_string(),
                revision,
            })
        }
        _ => {
            return Err(ApplyError::Store(StoreError::Corrupt(
                "an unknown outcome of storing a workflow".into(),
            )))
        }
    };
    Ok(Applied {
        workflow,
        revision,
        created,
    })
}

fn names_of(stored: &[WorkflowRecord]) -> BTreeSet<String> {
    stored
        .iter()
        .map(|w| crate::orchestration_name(&w.namespace, &w.name))
        .collect()
}

/// Registers in `registry` (a runtime's, in use) every stored revision it does not have and
/// that is not in `tried`, compiled against what it registers and the other stored
/// workflows; returns the `(name, revision)`s it added and the definitions that do not
/// compile here. Every revision it looks at goes into `tried`, so a worker that calls it at
/// start and then now and then compiles each revision once, and warns of a broken one once.
///
/// # Errors
///
/// Store failures.
pub async fn register_stored(
    store: &dyn Store,
    registry: &Registry,
    tried: &mut BTreeSet<(String, u32)>,
) -> Result<(Vec<(String, u32)>, Vec<(WorkflowRecord, CompileErrors)>), StoreError> {
    let stored = store.workflow_list(None, None).await?;
    let names = registry.names();
    tried.extend(
        names
            .orchestrations
            .iter()
            .flat_map(|(n, versions)| versions.iter().map(move |v| (n.clone(), *v))),
    );
    let known = Known::from_names(&names).with_orchestrations(names_of(&stored));
    let mut added = Vec::new();
    let mut broken = Vec::new();
    for record in stored {
        let key = (
            crate::orchestration_name(&record.namespace, &record.name),
            record.revision,
        );
        if !tried.insert(key.clone()) {
            continue;
        }
        match Workflow::compile_with(&record.source, &known) {
            Ok(w) => {
                w.register(registry, record.revision);
                added.push(key);
            }
            Err(errors) => {
                // A definition broken in itself (stored before a rule it breaks existed, or
                // written straight into the table) is broken for every worker: its
                // instances fail at once, naming why, instead of waiting for a worker that
                // will never run them. One that only names what this worker lacks is left
                // to a worker that has it.
                if let Err(own) = Workflow::compile(&record.source) {
                    register_invalid(registry, &key.0, record.revision, &own);
                }
                broken.push((record, errors));
            }
        }
    }
    Ok((added, broken))
}

/// Registers, as version `revision` of `name`, an orchestration that fails each instance at
/// its first turn with `DefinitionInvalid` and the definition's errors.
fn register_invalid(registry: &Registry, name: &str, revision: u32, errors: &CompileErrors) {
    let message = format!("the stored definition does not compile: {errors}");
    registry.add_orchestration_version(name, revision, move |_ctx, _input: serde_json::Value| {
        let message = message.clone();
        async move {
            Err::<serde_json::Value, _>(ratchet_core::OrchestrationError::Application(
                ratchet_core::ErrorInfo::new("DefinitionInvalid", message),
            ))
        }
    });
}

/// How often [`keep_registered`] looks for newly applied workflows.
pub const LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Registers in `client`'s runtime every stored workflow it does not run yet (each revision as
/// that version of its orchestration; one that does not compile here is skipped with a
/// warning, once), then looks for newly applied ones every [`LOOK_EVERY`] on a task of its
/// own, which the returned handle aborts. Nothing to do for a client without a runtime.
///
/// # Errors
///
/// Store failures of the first look (later ones are logged and retried).
pub async fn keep_registered(
    store: std::sync::Arc<dyn Store>,
    client: ratchet_runtime::Client,
) -> Result<tokio::task::JoinHandle<()>, StoreError> {
    let mut tried = BTreeSet::new();
    register_logged(store.as_ref(), &client, &mut tried).await?;
    Ok(tokio::spawn(async move {
        loop {
            tokio::time::sleep(LOOK_EVERY).await;
            if let Err(e) = register_logged(store.as_ref(), &client, &mut tried).await {
                tracing::debug!(error = %e, "could not look for new workflows");
            }
        }
    }))
}

/// [`register_stored`] on `client`'s runtime, saying what it added and what does not compile.
async fn register_logged(
    store: &dyn Store,
    client: &ratchet_runtime::Client,
    tried: &mut BTreeSet<(String, u32)>,
) -> Result<(), StoreError> {
    let Some(registry) = client.registry() else {
        return Ok(());
    };
    let (added, broken) = register_stored(store, registry, tried).await?;
    for (name, revision) in added {
        tracing::info!(workflow = %name, revision, "running a stored workflow");
    }
    for (record, errors) in broken {
        tracing::warn!(workflow = %crate::orchestration_name(&record.namespace, &record.name),
            version = %record.version, %errors, "a stored workflow does not compile here; not running it");
    }
    Ok(())
}

/// What applying a definition did to its schedule.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ScheduleSync {
    /// The definition has no `schedule`: nothing was done.
    None,
    /// Created the schedule `namespace/name`.
    Created(ratchet_store::ScheduleRecord),
    /// Gave the schedule `namespace/name` the definition's new spec (its policies, pause and
    /// progress kept).
    Updated(ratchet_store::ScheduleRecord),
    /// The schedule already had the definition's spec.
    Unchanged(ratchet_store::ScheduleRecord),
    /// `schedule.on`: the trigger instance that listens for the events and starts the
    /// workflow (`namespace/name:on@REVISION`); `started` is false when it ran already.
    /// Triggers of earlier revisions were terminated.
    Trigger {
        /// The trigger instance's id.
        instance: String,
        /// Whether this call started it.
        started: bool,
    },
}

/// Creates or updates the schedule a definition's own `schedule` asks for: named after the
/// workflow (`namespace/name`), starting it with an empty input, its spec from `every`,
/// `cron` (read in UTC) or `after`. A schedule changed by hand keeps its policies, note and
/// pause; only its spec follows the definition.
///
/// # Errors
///
/// The client's errors (a store failure).
pub async fn sync_schedule(
    client: &ratchet_runtime::Client,
    workflow: &Workflow,
) -> Result<ScheduleSync, ratchet_runtime::Error> {
    let Some(dsl) = workflow.schedule() else {
        return Ok(ScheduleSync::None);
    };
    if let crate::DslSchedule::On(_) = dsl {
        return sync_trigger(client, workflow).await;
    }
    let name = workflow.orchestration_name();
    let spec = dsl.spec();
    match client.schedule(&name).await {
        Ok(existing) if existing.spec == spec && existing.time_zone == "UTC" => {
            Ok(ScheduleSync::Unchanged(existing))
        }
        Ok(existing) => {
            let options = ratchet_runtime::ScheduleOptions {
                spec,
                time_zone: "UTC".into(),
                action: existing.action.clone(),
                overlap: existing.overlap.parse()?,
                catch_up: existing.catch_up.parse()?,
                jitter_ms: existing.jitter_ms,
                paused: existing.paused,
                note: existing.note.clone(),
                start_at: existing.start_at,
                end_at: existing.end_at,
                remaining_actions: existing.remaining,
            };
            Ok(ScheduleSync::Updated(
                client.schedule_update(&name, options).await?,
            ))
        }
        Err(ratchet_runtime::Error::ScheduleNotFound(_)) => {
            let options =
                ratchet_runtime::ScheduleOptions::start(&spec, &name, serde_json::json!({}))?;
            Ok(ScheduleSync::Created(
                client.schedule_create(&name, options).await?,
            ))
        }
        Err(e) => Err(e),
    }
}

/// Starts the trigger of a workflow with `schedule.on`, one per revision (its id ends with
/// the definition's hash), and terminates the triggers of other revisions: one listens at a
/// time. A workflow it starts is named after the event's position, so two triggers that
/// overlap for a moment start it once.
async fn sync_trigger(
    client: &ratchet_runtime::Client,
    workflow: &Workflow,
) -> Result<ScheduleSync, ratchet_runtime::Error> {
    use ratchet_store::{IfExists, InstanceFilter, InstanceStatus};
    let trigger = workflow.trigger_name();
    let hash = workflow.hash();
    let id = format!("{trigger}@{}", &hash[..hash.len().min(16)]);
    let running = client
        .list(InstanceFilter {
            statuses: vec![InstanceStatus::Pending, InstanceStatus::Running],
            name: Some(trigger.clone()),
            limit: Some(100),
            ..InstanceFilter::default()
        })
        .await?;
    for old in running.iter().filter(|r| r.id != id) {
        client
            .terminate(&old.id, "its workflow was given a new definition")
            .await?;
    }
    let options = ratchet_runtime::StartOptions::id(&id).if_exists(IfExists::UseExisting);
    let started = !running.iter().any(|r| r.id == id);
    client
        .start_with(&trigger, serde_json::json!({}), options)
        .await?;
    Ok(ScheduleSync::Trigger {
        instance: id,
        started,
    })
}
