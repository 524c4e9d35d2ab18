//! `/v1/workflows`: declarative workflow definitions (the Serverless Workflow DSL), checked
//! and stored per version; workers load them when they start. Deleted per version or whole,
//! never from under unfinished instances unless forced.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ratchet::workflow::{self, ApplyError, CompileErrors, Known, Workflow};
use ratchet::{Timestamp, WorkflowRecord};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{JsonBody, PathParam, QueryParams};
use crate::problem::{Problem, ProblemBody, SourceError};
use crate::state::ServerState;
use crate::time::rfc3339;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(list, apply))
        .routes(routes!(validate))
        .routes(routes!(show, delete))
        .routes(routes!(graph))
}

/// A definition to apply or check.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct Definition {
    /// The definition, YAML or JSON, as text.
    source: String,
}

/// A stored version.
#[derive(Debug, Serialize, ToSchema)]
struct WorkflowView {
    /// `namespace/name`: the orchestration it runs as.
    name: String,
    namespace: String,
    workflow: String,
    version: String,
    /// The engine's version number of the orchestration.
    revision: u32,
    hash: String,
    created_at: String,
    /// The definition as applied (only when one is read).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

impl WorkflowView {
    fn of(w: WorkflowRecord, with_source: bool) -> Self {
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

/// What applying did.
#[derive(Debug, Serialize, ToSchema)]
struct AppliedView {
    name: String,
    version: String,
    revision: u32,
    /// False when the same source was stored already.
    created: bool,
    /// The schedule the definition's own `schedule` created or updated (named after it).
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule: Option<String>,
}

fn invalid(errors: &CompileErrors) -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid-workflow",
        "Invalid workflow definition",
        errors.to_string(),
    )
    .field("source")
    .errors(
        errors
            .0
            .iter()
            .map(|e| SourceError {
                line: e.line,
                column: e.column,
                message: e.message.clone(),
            })
            .collect(),
    )
}

/// The names this server's runtime registers, when it runs one: a definition calling
/// anything else is refused.
/// Compiles on a blocking thread: compiling runs each expression once on its budget, which
/// may take a core for tens of milliseconds, and the request's thread serves others.
async fn compile(source: String, known: Known) -> Result<Result<Workflow, CompileErrors>, Problem> {
    tokio::task::spawn_blocking(move || Workflow::compile_with(&source, &known))
        .await
        .map_err(|e| {
            Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "Internal error",
                format!("compiling stopped: {e}"),
            )
        })
}

/// What a definition may call here: what this server's runtime registers, and, since it
/// lets workers elsewhere run activities, the activities live or recent workers run (a
/// worker over HTTP makes its names known with its first claim).
async fn known(state: &ServerState) -> Result<Known, Problem> {
    let Some(registry) = state.client.registry() else {
        return Ok(Known::default());
    };
    let names = registry.names();
    let mut known = Known::from_names(&names);
    if names.activities_elsewhere {
        let mut activities: std::collections::BTreeSet<String> =
            names.activities.into_iter().collect();
        activities.extend(state.fleet.activities(state).await?);
        known.activities = Some(activities);
    }
    Ok(known)
}

#[utoipa::path(
    get,
    path = "/v1/workflows",
    tag = "workflows",
    operation_id = "workflows_list",
    responses(
        (status = 200, description = "Every stored version, by name and revision", body = [WorkflowView]),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn list(State(state): State<ServerState>) -> Result<Json<Vec<WorkflowView>>, Problem> {
    let stored = state.client.store().workflow_list(None, None).await?;
    Ok(Json(
        stored
            .into_iter()
            .map(|w| WorkflowView::of(w, false))
            .collect(),
    ))
}

#[utoipa::path(
    post,
    path = "/v1/workflows",
    tag = "workflows",
    operation_id = "workflows_apply",
    request_body = Definition,
    responses(
        (status = 201, description = "Stored as a new revision", body = AppliedView),
        (status = 200, description = "The same source is stored already", body = AppliedView),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "The version is stored with other content", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "The definition has errors: `errors` lists each with its line and column", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn apply(
    State(state): State<ServerState>,
    JsonBody(def): JsonBody<Definition>,
) -> Result<Response, Problem> {
    let applied = workflow::apply(
        state.client.store().as_ref(),
        &def.source,
        &known(&state).await?,
        Timestamp::now(),
    )
    .await
    .map_err(|e| match e {
        ApplyError::Compile(errors) => invalid(&errors),
        ApplyError::Changed { .. } => Problem::new(
            StatusCode::CONFLICT,
            "version-changed",
            "Version stored with other content",
            e.to_string(),
        )
        .field("source"),
        ApplyError::Store(e) => Problem::from(e),
        other => Problem::invalid(other.to_string()),
    })?;
    // A server that runs a worker runs the new revision from now on; other workers pick it
    // up within seconds.
    if let Some(registry) = state.client.registry() {
        applied
            .workflow
            .clone()
            .register(registry, applied.revision);
    }
    let schedule = workflow::sync_schedule(&state.client, &applied.workflow).await?;
    let schedule = match schedule {
        workflow::ScheduleSync::Created(s)
        | workflow::ScheduleSync::Updated(s)
        | workflow::ScheduleSync::Unchanged(s) => Some(s.name),
        _ => None,
    };
    let status = if applied.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(AppliedView {
            name: applied.workflow.orchestration_name(),
            version: applied.workflow.version().to_string(),
            revision: applied.revision,
            created: applied.created,
            schedule,
        }),
    )
        .into_response())
}

/// A definition that compiles.
#[derive(Debug, Serialize, ToSchema)]
struct Valid {
    name: String,
    version: String,
}

#[utoipa::path(
    post,
    path = "/v1/workflows/validate",
    tag = "workflows",
    operation_id = "workflows_validate",
    request_body = Definition,
    responses(
        (status = 200, description = "It compiles; nothing was stored", body = Valid),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "The definition has errors: `errors` lists each with its line and column", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn validate(
    State(state): State<ServerState>,
    JsonBody(def): JsonBody<Definition>,
) -> Result<Json<Valid>, Problem> {
    let w = compile(def.source, known(&state).await?)
        .await?
        .map_err(|e| invalid(&e))?;
    Ok(Json(Valid {
        name: w.orchestration_name(),
        version: w.version().to_string(),
    }))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ShowParams {
    /// This `document.version` (default: the newest).
    version: Option<String>,
}

#[utoipa::path(
    get,
    path = "/v1/workflows/{namespace}/{name}",
    tag = "workflows",
    operation_id = "workflows_show",
    params(
        ("namespace" = String, Path, description = "`document.namespace`"),
        ("name" = String, Path, description = "`document.name`"),
        ShowParams
    ),
    responses(
        (status = 200, description = "The stored version with its source", body = WorkflowView),
        (status = 404, description = "No such workflow or version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn show(
    State(state): State<ServerState>,
    PathParam((namespace, name)): PathParam<(String, String)>,
    QueryParams(params): QueryParams<ShowParams>,
) -> Result<Json<WorkflowView>, Problem> {
    let stored = state
        .client
        .store()
        .workflow_list(Some(&namespace), Some(&name))
        .await?;
    let found = match &params.version {
        Some(v) => stored.into_iter().find(|w| &w.version == v),
        None => stored.into_iter().last(),
    };
    found
        .map(|w| Json(WorkflowView::of(w, true)))
        .ok_or_else(|| {
            Problem::not_found(format!(
                "no workflow {namespace}/{name}{} is stored",
                params
                    .version
                    .map(|v| format!(" version {v}"))
                    .unwrap_or_default()
            ))
        })
}

#[utoipa::path(
    get,
    path = "/v1/workflows/{namespace}/{name}/{version}/graph.svg",
    tag = "workflows",
    operation_id = "workflows_graph",
    params(
        ("namespace" = String, Path, description = "`document.namespace`"),
        ("name" = String, Path, description = "`document.name`"),
        ("version" = String, Path, description = "`document.version`")
    ),
    responses(
        (status = 200, description = "The definition's graph: a standalone SVG (steps, switch cases as labelled edges, composite tasks as boxes)", body = String, content_type = "image/svg+xml"),
        (status = 404, description = "No such workflow or version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn graph(
    State(state): State<ServerState>,
    PathParam((namespace, name, version)): PathParam<(String, String, String)>,
) -> Result<Response, Problem> {
    let stored = state
        .client
        .store()
        .workflow_list(Some(&namespace), Some(&name))
        .await?;
    let Some(w) = stored.into_iter().find(|w| w.version == version) else {
        return Err(Problem::not_found(format!(
            "no workflow {namespace}/{name} version {version} is stored"
        )));
    };
    let compiled = compile(w.source, Known::default()).await?.map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "stored-definition-invalid",
            "Stored definition invalid",
            format!("the stored definition no longer compiles: {e}"),
        )
    })?;
    Ok(svg(compiled.render()))
}

/// A drawing, as `image/svg+xml`.
pub(crate) fn svg(body: String) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "image/svg+xml; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct DeleteParams {
    /// Only this `document.version` (default: every version).
    version: Option<String>,
    /// Delete even while unfinished instances run on it: then only a worker that loaded the
    /// revision before it was deleted runs them on; no other worker claims them.
    #[serde(default)]
    force: bool,
}

#[utoipa::path(
    delete,
    path = "/v1/workflows/{namespace}/{name}",
    tag = "workflows",
    operation_id = "workflows_delete",
    params(
        ("namespace" = String, Path, description = "`document.namespace`"),
        ("name" = String, Path, description = "`document.name`"),
        DeleteParams
    ),
    responses(
        (status = 200, description = "The versions deleted, by revision (without their source)", body = [WorkflowView]),
        (status = 404, description = "No such workflow or version", body = ProblemBody, content_type = "application/problem+json"),
        (status = 409, description = "Unfinished instances run on it (`workflow-in-use`; its detail says how many): nothing was deleted", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn delete(
    State(state): State<ServerState>,
    PathParam((namespace, name)): PathParam<(String, String)>,
    QueryParams(params): QueryParams<DeleteParams>,
) -> Result<Json<Vec<WorkflowView>>, Problem> {
    let deleted = state
        .client
        .store()
        .workflow_delete(&namespace, &name, params.version.as_deref(), params.force)
        .await?;
    Ok(Json(
        deleted
            .into_iter()
            .map(|w| WorkflowView::of(w, false))
            .collect(),
    ))
}
