//! What every request handler shares.

use std::time::Duration;

use metrics_exporter_prometheus::PrometheusHandle;
use ratchet::Client;

/// Limits on what one request may ask for.
#[derive(Clone, Debug)]
pub struct ServerLimits {
    /// The largest request body, in bytes (larger ones get 413).
    pub max_body_bytes: usize,
    /// The most items one batch request (starts, enqueues) may carry.
    pub max_batch: usize,
    /// The most records one page may hold.
    pub max_page: u32,
    /// The longest a wait may hold a request open.
    pub max_wait: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            // Room for a batch of payloads at the client's own 1 MiB limit each would be
            // unbounded; 4 MiB holds any single payload with its envelope.
            max_body_bytes: 4 << 20,
            max_batch: 1_000,
            max_page: 1_000,
            max_wait: Duration::from_secs(60),
        }
    }
}

/// The state of a server: the client every route calls, and its limits.
#[derive(Clone)]
pub struct ServerState {
    pub(crate) client: Client,
    pub(crate) limits: ServerLimits,
    pub(crate) metrics: Option<PrometheusHandle>,
    pub(crate) auth: bool,
    pub(crate) fleet: std::sync::Arc<crate::fleet::Fleet>,
}

impl ServerState {
    /// A server on `client`, with default limits. With a client of a runtime
    /// ([`ratchet::Ratchet::client`]), starts and enqueues are checked against what it
    /// registered, and its instances run in this process.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            limits: ServerLimits::default(),
            metrics: None,
            auth: false,
            fleet: std::sync::Arc::default(),
        }
    }

    /// Asks every request but the probes and `/openapi.json` for a bearer token with the
    /// scope it needs (tokens are made with [`crate::issue_token`] and stored in the database).
    pub fn with_auth(mut self, required: bool) -> Self {
        self.auth = required;
        self
    }

    /// Serves `/metrics` from `handle` (see [`crate::install_recorder`]).
    pub fn with_metrics(mut self, handle: PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: ServerLimits) -> Self {
        self.limits = limits;
        self
    }
}
