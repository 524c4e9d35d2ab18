//! Declarative workflows in process: definitions compiled against what may run them, stored
//! per version, read and deleted.

use ratchet_core::Timestamp;
use ratchet_runtime::Client;
use ratchet_store::WorkflowRecord;
use ratchet_workflow::{self as workflow, ApplyError, CompileErrors, Known, Workflow};

use crate::problem::{ApiError, ProblemBody, SourceError};
use crate::time::rfc3339;
use crate::workflows::{AppliedView, Definition, Valid, WorkflowView};

impl WorkflowView {
    /// The view of a stored version, with its source when asked.
    pub fn of(w: WorkflowRecord, with_source: bool) -> Self {
        Self {
            name: workflow::orchestration_name(&w.namespace, &w.name),
            created_at: rfc3339(w.created_at),
            source: with_source.then_some(w.source),
            namespace: w.namespace,
            workflow: w.name,
            version: w.version,
            revision: w.revision,
            hash: w.hash,
        }
    }
}

/// The problem of a definition that does not compile: every error, where it is.
fn invalid(errors: &CompileErrors) -> ApiError {
    let mut p = ProblemBody::new(
        422,
        "invalid-workflow",
        "Invalid workflow definition",
        errors.to_string(),
    )
    .field("source");
    p.errors = Some(
        errors
            .0
            .iter()
            .map(|e| SourceError {
                line: e.line,
                column: e.column,
                message: e.message.clone(),
            })
            .collect(),
    );
    p.into()
}

/// What a definition may call on this client: what its runtime registers, when it runs one.
pub(super) fn known(client: &Client) -> Known {
    client
        .registry()
        .map(|r| Known::from_names(&r.names()))
        .unwrap_or_default()
}

/// Compiles on a blocking thread: compiling runs each expression once on its budget, which
/// may take a core for tens of milliseconds, and the caller's thread serves others.
pub async fn compile(source: String, known: Known) -> Result<Workflow, ApiError> {
    tokio::task::spawn_blocking(move || Workflow::compile_with(&source, &known))
        .await
        .map_err(|e| ApiError::from(ProblemBody::internal(format!("compiling stopped: {e}"))))?
        .map_err(|e| invalid(&e))
}

/// Checks a definition against `known`; nothing is stored.
pub async fn validate(definition: &Definition, known: Known) -> Result<Valid, ApiError> {
    let w = compile(definition.source.clone(), known).await?;
    Ok(Valid {
        name: w.orchestration_name(),
        version: w.version().to_string(),
    })
}

/// Stores a definition as a new revision (compiled against `known`), has this client's
/// runtime run it from now on, and creates or updates its own schedule.
pub async fn apply(
    client: &Client,
    definition: &Definition,
    known: Known,
) -> Result<AppliedView, ApiError> {
    let applied = workflow::apply(
        client.store().as_ref(),
        &definition.source,
        &known,
        Timestamp::now(),
    )
    .await
    .map_err(|e| match e {
        ApplyError::Compile(errors) => invalid(&errors),
        ApplyError::Changed { .. } => ProblemBody::conflict(
            "version-changed",
            "Version stored with other content",
            e.to_string(),
        )
        .field("source")
        .into(),
        ApplyError::Store(e) => ProblemBody::from(e).into(),
        other => ProblemBody::invalid(other.to_string()).into(),
    })?;
    // A process that runs a worker runs the new revision from now on; other workers pick it
    // up within seconds.
    if let Some(registry) = client.registry() {
        applied
            .workflow
            .clone()
            .register(registry, applied.revision);
    }
    let schedule = workflow::sync_schedule(client, &applied.workflow)
        .await
        .map_err(super::problem)?;
    let schedule = match schedule {
        workflow::ScheduleSync::Created(s)
        | workflow::ScheduleSync::Updated(s)
        | workflow::ScheduleSync::Unchanged(s) => Some(s.name),
        _ => None,
    };
    Ok(AppliedView {
        name: applied.workflow.orchestration_name(),
        version: applied.workflow.version().to_string(),
        revision: applied.revision,
        created: applied.created,
        schedule,
    })
}

/// The stored versions of one workflow, oldest first.
pub(super) async fn versions(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Vec<WorkflowRecord>, ApiError> {
    client
        .store()
        .workflow_list(Some(namespace), Some(name))
        .await
        .map_err(|e| ProblemBody::from(e).into())
}

/// No such stored workflow (or version).
pub(super) fn missing(namespace: &str, name: &str, version: Option<&str>) -> ApiError {
    ProblemBody::not_found(format!(
        "no workflow {namespace}/{name}{} is stored",
        version.map(|v| format!(" version {v}")).unwrap_or_default()
    ))
    .into()
}
