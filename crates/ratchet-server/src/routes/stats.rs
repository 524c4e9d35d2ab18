//! `/v1/whoami` and `/v1/stats/throughput`: who is asking, and work over time, for
//! dashboards.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ratchet_api::{Api as _, Throughput, ThroughputParams, WhoAmI};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::{caller, implied, Scope};
use crate::extract::QueryParams;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(whoami))
        .routes(routes!(throughput))
}

/// What the request's token may do, so a client shows only the actions it may take. Open to
/// requests without a token (they learn that one is needed); an unknown or revoked token
/// gets 401.
#[utoipa::path(
    get,
    path = "/v1/whoami",
    tag = "system",
    operation_id = "system_whoami",
    responses(
        (status = 200, description = "The caller", body = WhoAmI),
        (status = 401, description = "A token is needed, or this one is unknown or revoked", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn whoami(State(state): State<ServerState>, headers: HeaderMap) -> Response {
    let names = |scopes: Vec<Scope>| scopes.iter().map(|s| s.as_str().to_string()).collect();
    let who = match caller(&state, &headers).await {
        Ok(Some(caller)) => WhoAmI {
            auth: true,
            scopes: names(caller.scopes),
            token: Some(caller.token),
            name: Some(caller.name),
        },
        // A server that asks for tokens, asked without one: it may do nothing yet.
        Ok(None) if state.auth => WhoAmI {
            auth: true,
            scopes: Vec::new(),
            token: None,
            name: None,
        },
        Ok(None) => WhoAmI {
            auth: false,
            scopes: names(implied(Some(Scope::Admin))),
            token: None,
            name: None,
        },
        Err(refused) => return refused,
    };
    Json(who).into_response()
}

/// Instances started, completed and failed and tasks completed and dead per bucket, counted
/// by the database from indexes on the times they count by.
#[utoipa::path(
    get,
    path = "/v1/stats/throughput",
    tag = "system",
    operation_id = "system_throughput",
    params(ThroughputParams),
    responses(
        (status = 200, description = "Counts by bucket", body = Throughput),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn throughput(
    State(state): State<ServerState>,
    QueryParams(p): QueryParams<ThroughputParams>,
) -> Result<Json<Throughput>, Problem> {
    Ok(Json(state.api.system_throughput(p).await?))
}
