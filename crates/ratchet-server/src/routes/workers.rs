//! `/v1/workers`: the processes that said they are alive, and what they run.

use axum::extract::State;
use axum::Json;
use ratchet_api::{Api as _, WorkerView};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new().routes(routes!(list))
}

/// Every process that said it is alive (a process that stopped cleanly says it is gone; one
/// silent for a day is forgotten), most recently seen first.
#[utoipa::path(
    get,
    path = "/v1/workers",
    tag = "system", operation_id = "system_workers",
    responses(
        (status = 200, description = "The fleet", body = [WorkerView]),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn list(State(state): State<ServerState>) -> Result<Json<Vec<WorkerView>>, Problem> {
    Ok(Json(state.api.system_workers().await?))
}
