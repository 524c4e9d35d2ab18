//! Serving a router until told to stop, within limits that hold under connection abuse: a
//! cap on the connections open at once, a deadline for each request's head (and TLS
//! handshake), and a graceful stop that ends long polls and event streams at once and
//! closes what is left after a grace period.
//!
//! One accept loop serves plain HTTP and HTTPS. It is ours because `axum::serve` takes no
//! configuration (no header-read timeout, no cap) and clones the router's routes for each
//! connection (with the OpenAPI document its handler holds: about 1.6 MB a connection);
//! here each connection shares the router, and hyper's HTTP/1 server reads the heads.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use crate::held::Stopping;
use crate::problem::Problem;
use crate::state::ServerLimits;

/// The largest request head (request line and headers) a connection may send, and the
/// most its read buffer grows to: a client cannot make a connection cost more.
const MAX_HEAD_BYTES: usize = 64 << 10;

/// Refusals being written at once (each a few hundred bytes and at most a second); past
/// this, connections over the cap are closed without an answer.
const MAX_REFUSING: usize = 256;

/// How long a refusal may take to be written and its request drained.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` until `shutdown` completes, holding at most
/// `limits.max_connections` connections (more are answered 503 and closed) and closing one
/// that takes longer than `limits.header_read_timeout` to send a request's head.
///
/// When `shutdown` completes it stops accepting, ends the long polls and event streams (a
/// wait answers as at its timeout, a stream ends), lets the other requests in flight finish
/// within `limits.shutdown_grace`, then closes what is left and returns.
///
/// # Errors
///
/// None today: a failed accept is logged and retried (an I/O error is kept in the signature
/// for the listener's sake).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: &ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run(listener, app, None, limits, shutdown).await;
    Ok(())
}

/// A certificate chain and its private key, read and checked.
#[derive(Clone)]
pub struct TlsConfig(Arc<rustls::ServerConfig>);

impl TlsConfig {
    /// Reads the certificate chain and private key from PEM files.
    ///
    /// # Errors
    ///
    /// An unreadable file, or a certificate or key rustls refuses.
    pub async fn load(cert: &Path, key: &Path) -> std::io::Result<Self> {
        // The process's TLS provider: ring (a second call finds it installed: no change).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let read = axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key).await?;
        let mut config = (*read.get_inner()).clone();
        // This server speaks HTTP/1.1 only: offering h2 would let a client pick it.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self(Arc::new(config)))
    }
}

/// [`serve`] over HTTPS: the same limits, the handshake within the header-read timeout.
///
/// # Errors
///
/// As [`serve`].
pub async fn serve_tls(
    listener: TcpListener,
    app: Router,
    tls: TlsConfig,
    limits: &ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.0);
    run(listener, app, Some(acceptor), limits, shutdown).await;
    Ok(())
}

/// What every connection is served with.
#[derive(Clone)]
struct Connection {
    app: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    header_read_timeout: Duration,
    /// Cancelled when a graceful stop begins.
    stopping: CancellationToken,
    /// Cancelled when the grace runs out: the connections left are closed.
    closing: CancellationToken,
}

async fn run(
    listener: TcpListener,
    app: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limits: &ServerLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let connection = Connection {
        app,
        header_read_timeout: limits.header_read_timeout,
        stopping: CancellationToken::new(),
        closing: CancellationToken::new(),
        tls,
    };
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let refusal: Arc<[u8]> = refusal(limits.max_connections).into();
    let tracker = TaskTracker::new();
    let mut last_warning: Option<Instant> = None;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            metrics::counter!("ratchet_http_connections_refused_total").increment(1);
            if last_warning.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                last_warning = Some(Instant::now());
                tracing::warn!(
                    max_connections = limits.max_connections,
                    "connection refused: the server holds its most connections"
                );
            }
            // Over HTTPS the answer would need a handshake first: the connection closes.
            if connection.tls.is_none() {
                if let Ok(slot) = refusing.clone().try_acquire_owned() {
                    tokio::spawn(refuse(stream, refusal.clone(), slot));
                }
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        tracker.spawn(connection.clone().serve(stream, permit));
    }
    drop(listener);
    connection.stopping.cancel();
    tracker.close();
    let open = tracker.len();
    if open > 0 {
        tracing::info!(
            connections = open,
            "stopping: waiting for the requests in flight"
        );
    }
    if tokio::time::timeout(limits.shutdown_grace, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!(
            connections = tracker.len(),
            grace_ms = limits.shutdown_grace.as_millis() as u64,
            "stopping: requests still in flight after the grace; closing them"
        );
        connection.closing.cancel();
        tracker.wait().await;
    }
}

impl Connection {
    /// Serves one connection, holding `permit` until it closes.
    async fn serve(self, stream: TcpStream, permit: OwnedSemaphorePermit) {
        metrics::gauge!("ratchet_http_connections").increment(1.0);
        match self.tls.clone() {
            None => self.http(stream).await,
            Some(acceptor) => {
                let handshake =
                    tokio::time::timeout(self.header_read_timeout, acceptor.accept(stream));
                let stopping = self.stopping.clone();
                tokio::select! {
                    done = handshake => match done {
                        Ok(Ok(stream)) => self.http(stream).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    },
                    () = stopping.cancelled() => {}
                }
            }
        }
        metrics::gauge!("ratchet_http_connections").decrement(1.0);
        drop(permit);
    }

    /// HTTP/1.1 on `io` until the client closes, a head is late, or the stop's grace ends.
    async fn http<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let app = self.app.clone();
        let stopping = Stopping(self.stopping.clone());
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(stopping.clone());
            // A clone of the router is a reference count: the routes are shared.
            app.clone().oneshot(request)
        });
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(self.header_read_timeout)
            .max_header_size(MAX_HEAD_BYTES)
            .max_buf_size(MAX_HEAD_BYTES);
        let conn = http.serve_connection(TokioIo::new(io), service);
        let mut conn = std::pin::pin!(conn);
        tokio::select! {
            done = conn.as_mut() => return log_end(done),
            () = self.stopping.cancelled() => {}
        }
        // Answer what is in flight, then close (an idle connection closes at once).
        conn.as_mut().graceful_shutdown();
        tokio::select! {
            done = conn.as_mut() => log_end(done),
            () = self.closing.cancelled() => {}
        }
    }
}

fn log_end(done: Result<(), hyper::Error>) {
    if let Err(e) = done {
        // A late head, a reset, a malformed request: the client's doing, not the server's.
        tracing::debug!(error = %e, "connection ended");
    }
}

/// An accept that failed: errors of one connection are skipped; others (out of file
/// descriptors) wait a little, as the listener will fail again at once.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!(error = %e, "accepting a connection failed; trying again in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The answer to a connection over the cap: 503 as a problem, `Retry-After`, then close.
fn refusal(most: usize) -> Vec<u8> {
    let problem = Problem::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        "too-many-connections",
        "Too many connections",
        format!("this server holds its most of {most} connections; try again shortly"),
    )
    .limit(most as u64);
    let body = serde_json::to_vec(&problem).unwrap_or_default();
    let mut answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    answer
}

/// Writes the refusal and closes, reading (and dropping) what the client sent meanwhile, so
/// the close does not reset the connection before the client reads the answer.
async fn refuse(mut stream: TcpStream, answer: Arc<[u8]>, _slot: OwnedSemaphorePermit) {
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(&answer).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    })
    .await;
}
