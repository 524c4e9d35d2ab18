//! `/v1/workflows`: declarative workflow definitions (the Serverless Workflow DSL), checked
//! and stored per version; workers load them when they start. Deleted per version or whole,
//! never from under unfinished instances unless forced.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ratchet::workflow::Known;
use ratchet_api::{Api as _, AppliedView, Definition, DeleteQuery, ShowQuery, Valid, WorkflowView};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{JsonBody, PathParam, QueryParams};
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(list, apply))
        .routes(routes!(validate))
        .routes(routes!(show, delete))
        .routes(routes!(graph))
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
    Ok(Json(state.api.workflows_list().await?))
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
    let known = known(&state).await?;
    let applied = ratchet_api::workflow_apply(&state.client, &def, known).await?;
    let status = if applied.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(applied)).into_response())
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
    let known = known(&state).await?;
    Ok(Json(ratchet_api::workflow_validate(&def, known).await?))
}

#[utoipa::path(
    get,
    path = "/v1/workflows/{namespace}/{name}",
    tag = "workflows",
    operation_id = "workflows_show",
    params(
        ("namespace" = String, Path, description = "`document.namespace`"),
        ("name" = String, Path, description = "`document.name`"),
        ShowQuery
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
    QueryParams(query): QueryParams<ShowQuery>,
) -> Result<Json<WorkflowView>, Problem> {
    Ok(Json(
        state.api.workflows_show(&namespace, &name, &query).await?,
    ))
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
    let drawn = state
        .api
        .workflows_graph(&namespace, &name, &version)
        .await?;
    Ok(svg(drawn))
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

#[utoipa::path(
    delete,
    path = "/v1/workflows/{namespace}/{name}",
    tag = "workflows",
    operation_id = "workflows_delete",
    params(
        ("namespace" = String, Path, description = "`document.namespace`"),
        ("name" = String, Path, description = "`document.name`"),
        DeleteQuery
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
    QueryParams(query): QueryParams<DeleteQuery>,
) -> Result<Json<Vec<WorkflowView>>, Problem> {
    Ok(Json(
        state
            .api
            .workflows_delete(&namespace, &name, &query)
            .await?,
    ))
}
