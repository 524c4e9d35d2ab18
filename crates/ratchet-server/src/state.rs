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
    /// Requests held open at once (long-poll waits and event streams); more get 429.
    pub max_waiting: usize,
    /// Connections open at once. One more is answered 503 with `Retry-After` and closed
    /// (over HTTPS it is closed before the handshake, which would cost more than the
    /// answer saves). The process's open-file limit must be above it.
    pub max_connections: usize,
    /// How long a connection may take to send a request's head (over HTTPS, to finish its
    /// handshake too): a slower one is closed. It also closes a kept-alive connection that
    /// sends nothing for this long.
    pub header_read_timeout: Duration,
    /// How long a graceful stop waits for the requests in flight (long polls and event
    /// streams end at once when it begins); what is left then is closed.
    pub shutdown_grace: Duration,
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
            max_waiting: 10_000,
            max_connections: 10_000,
            header_read_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// The state of a server: the client every route calls, and its limits.
#[derive(Clone)]
pub struct ServerState {
    pub(crate) client: Client,
    /// The API on that client: the routes of the typed operations answer through it.
    pub(crate) api: ratchet_api::LocalApi,
    pub(crate) limits: ServerLimits,
    pub(crate) metrics: Option<PrometheusHandle>,
    pub(crate) auth: bool,
    pub(crate) fleet: std::sync::Arc<crate::fleet::Fleet>,
    /// One permit per request held open.
    pub(crate) waiting: std::sync::Arc<tokio::sync::Semaphore>,
    /// The port of a loopback server that asks for no token: it answers this machine's own
    /// clients only (see [`ServerState::local_only`]).
    pub(crate) local_port: Option<u16>,
    /// Tokens read lately: a token is read from the store at most once a second.
    pub(crate) tokens: std::sync::Arc<crate::auth::TokenCache>,
}

impl ServerState {
    /// A server on `client`, with default limits. With a client of a runtime
    /// ([`ratchet::Ratchet::client`]), starts and enqueues are checked against what it
    /// registered, and its instances run in this process; a task name it lacks is checked
    /// against the fleet instead (workers elsewhere, over HTTP, may run it).
    pub fn new(client: Client) -> Self {
        let client = client.with_unregistered_tasks();
        Self {
            api: ratchet_api::LocalApi::new(client.clone()),
            client,
            limits: ServerLimits::default(),
            metrics: None,
            auth: false,
            fleet: std::sync::Arc::default(),
            waiting: std::sync::Arc::new(tokio::sync::Semaphore::new(
                ServerLimits::default().max_waiting,
            )),
            local_port: None,
            tokens: std::sync::Arc::default(),
        }
    }

    /// A permit to hold a request open, or 429 when too many are.
    pub(crate) fn hold(&self) -> Result<tokio::sync::OwnedSemaphorePermit, crate::Problem> {
        self.waiting.clone().try_acquire_owned().map_err(|_| {
            let most = self.limits.max_waiting;
            crate::Problem::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                "too-many-waiting",
                "Too many requests held open",
                format!(
                    "{most} waits and event streams are open on this server; try again shortly"
                ),
            )
            .limit(most as u64)
            .retry_after(1)
        })
    }

    /// Asks every request but the probes and `/openapi.json` for a bearer token with the
    /// scope it needs (tokens are made with [`crate::issue_token`] and stored in the database).
    pub fn with_auth(mut self, required: bool) -> Self {
        self.auth = required;
        self
    }

    /// Answers this machine's own clients only, for a server on a loopback address that asks
    /// for no token: a request must name it by a loopback address or `localhost` with
    /// `port` in its `Host` (else 403, against DNS rebinding), and a change (any method but
    /// GET, HEAD and OPTIONS) sent by a browser must come from a page of that origin, such as
    /// the console (else 403, against cross-site requests).
    pub fn local_only(mut self, port: u16) -> Self {
        self.local_port = Some(port);
        self
    }

    /// Serves `/metrics` from `handle` (see [`crate::install_recorder`]).
    pub fn with_metrics(mut self, handle: PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: ServerLimits) -> Self {
        self.waiting = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_waiting));
        self.limits = limits;
        self
    }
}
