//! `/v1/workers`: the processes that said they are alive, and what they run.

use axum::extract::State;
use axum::Json;
use ratchet::{Timestamp, WorkerRecord};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;
use crate::time::rfc3339;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new().routes(routes!(list))
}

#[derive(Debug, Serialize, ToSchema)]
struct OrchestrationName {
    name: String,
    versions: Vec<u32>,
}

/// A process as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
struct WorkerView {
    /// Its id (the owner named in its leases).
    id: String,
    label: Option<String>,
    host: Option<String>,
    pid: u32,
    /// False once it has not said so for longer than its lease: stopped, killed or cut off.
    alive: bool,
    started_at: String,
    seen_at: String,
    max_orchestrations: u32,
    max_activities: u32,
    queues: Vec<String>,
    orchestrations: Vec<OrchestrationName>,
    activities: Vec<String>,
    tasks: Vec<String>,
}

impl WorkerView {
    fn of(w: WorkerRecord, now: Timestamp) -> Self {
        Self {
            alive: w.alive_until >= now,
            started_at: rfc3339(w.started_at),
            seen_at: rfc3339(w.seen_at),
            id: w.id,
            label: w.about.label,
            host: w.about.host,
            pid: w.about.pid,
            max_orchestrations: w.about.max_orchestrations,
            max_activities: w.about.max_activities,
            queues: w.queues,
            orchestrations: w
                .about
                .orchestrations
                .into_iter()
                .map(|(name, versions)| OrchestrationName { name, versions })
                .collect(),
            activities: w.about.activities,
            tasks: w.about.tasks,
        }
    }
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
    let now = Timestamp::now();
    let workers = state.client.store().worker_list().await?;
    Ok(Json(
        workers
            .into_iter()
            .map(|w| WorkerView::of(w, now))
            .collect(),
    ))
}
