//! Ratchet's HTTP API, served by `ratchet server`: start, signal, wait for and steer
//! orchestration instances; enqueue and steer tasks and queues; append, read and follow
//! events; from any language, over JSON.
//!
//! Every route calls the same [`ratchet::Client`] an embedding Rust program uses, so the API
//! keeps the client's guarantees (one store round trip per call, batched with concurrent
//! calls; waits woken by the runtime's hub, not by polling). Errors are
//! `application/problem+json` ([RFC 9457](https://www.rfc-editor.org/rfc/rfc9457)) with a
//! stable `type`, and a request that is refused writes nothing.
//!
//! ```no_run
//! # async fn serve(client: ratchet::Client) -> std::io::Result<()> {
//! let limits = ratchet_server::ServerLimits::default();
//! let app = ratchet_server::router(ratchet_server::ServerState::new(client).with_limits(limits.clone()));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! ratchet_server::serve(listener, app, &limits, std::future::pending()).await
//! # }
//! ```
#![deny(missing_docs)]

mod auth;
mod console;
mod extract;
mod fleet;
mod held;
mod local;
mod metrics;
mod problem;
mod routes;
mod serve;
mod state;
mod trace;

pub use auth::{hash as token_hash, issue as issue_token, Grant, IssuedToken, Scope, TokenError};
pub use metrics::{install_recorder, MetricsError};
pub use metrics_exporter_prometheus::PrometheusHandle;
pub use problem::{Problem, ProblemBody};
pub use routes::{openapi, router};
pub use serve::{serve, serve_tls, TlsConfig};
pub use state::{ServerLimits, ServerState};
