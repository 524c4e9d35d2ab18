//! The routes, one file per resource.

mod events;
mod instances;
mod queues;
mod system;
mod tasks;

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::Router;

use crate::problem::Problem;
use crate::state::ServerState;

/// The API's router on `state`: every route under `/v1`, and `/healthz`, `/readyz`.
pub fn router(state: ServerState) -> Router {
    let limit = state.limits.max_body_bytes;
    Router::new()
        .merge(instances::routes())
        .merge(tasks::routes())
        .merge(queues::routes())
        .merge(events::routes())
        .merge(system::routes())
        .fallback(|| async { Problem::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method-not-allowed",
                "Method not allowed",
                "this route does not take this method",
            )
        })
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// A page size asked for, or `default`, within the server's limit.
pub(crate) fn page_size(
    asked: Option<u32>,
    default: u32,
    state: &ServerState,
) -> Result<u32, Problem> {
    let max = state.limits.max_page;
    match asked {
        None => Ok(default.min(max)),
        Some(0) => Err(Problem::invalid("limit must be at least 1").field("limit")),
        Some(n) if n > max => Err(
            Problem::invalid(format!("limit {n} is over the most of {max}"))
                .field("limit")
                .limit(u64::from(max)),
        ),
        Some(n) => Ok(n),
    }
}

/// A list of values given comma-separated in one query parameter.
pub(crate) fn comma_list(text: Option<&str>) -> Vec<String> {
    text.map(|t| {
        t.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}
