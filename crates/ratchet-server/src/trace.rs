//! A span for each request, joined to the caller's W3C `traceparent`; a start carries the
//! trace on into the instance, so one trace covers the request, the turns and the activities.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use ratchet::trace;
use tracing::Instrument as _;

/// The caller's trace context, when its `traceparent` header is valid.
#[derive(Clone, Debug, Default)]
pub(crate) struct IncomingTrace(pub(crate) Option<String>);

impl IncomingTrace {
    /// What an instance started by this request joins: the request's own span when an
    /// OpenTelemetry layer records it, else the caller's trace.
    pub(crate) fn carried(&self) -> Option<String> {
        trace::carried(&tracing::Span::current(), self.0.as_deref())
    }
}

/// Runs the request in its span.
pub(crate) async fn span(mut request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let incoming = request
        .headers()
        .get(trace::TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(trace::parse);
    let span = tracing::info_span!("ratchet.http", otel.name = %format!("{} {route}", request.method()),
        otel.kind = "server", http.request.method = %request.method(), http.route = %route,
        http.response.status_code = tracing::field::Empty);
    trace::join(&span, incoming.as_deref());
    request.extensions_mut().insert(IncomingTrace(incoming));
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    response
}
