//! `/metrics`: the runtime's figures (turns, commits, claims, attempts, stale writes,
//! notifications), the store's counters, queue depths read at scrape time, and HTTP requests
//! by route and status, in Prometheus's text format.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use ratchet::TaskState;

use crate::problem::Problem;
use crate::state::ServerState;

/// Latency buckets, in seconds: from half a millisecond to ten seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Why the recorder could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot record metrics: {0}")]
pub struct MetricsError(String);

/// Installs a Prometheus recorder as this process's `metrics` recorder and returns the
/// handle `/metrics` renders from. Once per process: a second call fails.
///
/// # Errors
///
/// [`MetricsError`] when a recorder is installed already.
pub fn install_recorder() -> Result<PrometheusHandle, MetricsError> {
    PrometheusBuilder::new()
        .set_buckets(&BUCKETS)
        .map_err(|e| MetricsError(e.to_string()))?
        .install_recorder()
        .map_err(|e| MetricsError(e.to_string()))
}

/// Counts and times each request by its route (the pattern, not the path: ids do not make
/// series of their own) and status.
pub(crate) async fn track(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| label_of(p.as_str()));
    let method = request.method().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("ratchet_http_requests_total", "route" => route.clone(),
        "method" => method.clone(), "status" => status)
    .increment(1);
    metrics::histogram!("ratchet_http_request_seconds", "route" => route, "method" => method)
        .record(started.elapsed());
    response
}

/// A route pattern as a label: `/v1/instances/:id/wait`. (Braces are legal in a label value,
/// but some parsers of the text format stop at the first `}`.)
fn label_of(pattern: &str) -> String {
    pattern.replace('{', ":").replace('}', "")
}

/// The page: figures recorded as they happened, and those read now.
pub(crate) async fn render(State(state): State<ServerState>) -> Result<Response, Problem> {
    let Some(handle) = &state.metrics else {
        return Err(Problem::not_found(
            "this server records no metrics (install a recorder with install_recorder)",
        ));
    };
    let stats = state.client.store().stats();
    metrics::counter!("ratchet_store_round_trips_total").absolute(stats.round_trips);
    metrics::counter!("ratchet_store_commits_total").absolute(stats.commits);
    metrics::counter!("ratchet_store_stale_refused_total").absolute(stats.stale_refused);
    let queues = state.client.queues().await?;
    let now = ratchet::Timestamp::now();
    for queue in queues {
        for task_state in TaskState::ALL {
            metrics::gauge!("ratchet_queue_tasks", "queue" => queue.queue.clone(),
                "state" => task_state.to_string().to_lowercase())
            .set(queue.count(task_state) as f64);
        }
        metrics::gauge!("ratchet_queue_depth", "queue" => queue.queue.clone())
            .set(queue.depth() as f64);
        metrics::gauge!("ratchet_queue_paused", "queue" => queue.queue.clone())
            .set(if queue.paused { 1.0 } else { 0.0 });
        // How far behind the queue's workers are: 0 when nothing waits.
        let waited_ms = queue
            .oldest_available
            .map_or(0, |at| now.0.saturating_sub(at.0).max(0));
        metrics::gauge!("ratchet_queue_oldest_ready_seconds", "queue" => queue.queue.clone())
            .set(waited_ms as f64 / 1000.0);
    }
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn route_labels_carry_no_braces() {
        assert_eq!(super::label_of("/v1/tasks/{id}/wait"), "/v1/tasks/:id/wait");
    }
}
