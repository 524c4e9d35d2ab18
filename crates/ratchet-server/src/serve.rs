//! Serving a router until told to stop.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;

/// Serves `app` on `listener` until `shutdown` completes; then stops accepting and returns
/// once the requests in flight have been answered (long polls and event streams end with
/// the shutdown of the client they wait on).
///
/// # Errors
///
/// An I/O error of the listener.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// How long a TLS server waits for the requests in flight once told to stop.
const TLS_GRACE: Duration = Duration::from_secs(30);

/// A certificate chain and its private key, read and checked.
#[derive(Clone)]
pub struct TlsConfig(axum_server::tls_rustls::RustlsConfig);

impl TlsConfig {
    /// Reads the certificate chain and private key from PEM files.
    ///
    /// # Errors
    ///
    /// An unreadable file, or a certificate or key rustls refuses.
    pub async fn load(cert: &Path, key: &Path) -> std::io::Result<Self> {
        // The process's TLS provider: ring (a second call finds it installed: no change).
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Self(
            axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key).await?,
        ))
    }
}

/// [`serve`] over HTTPS.
///
/// # Errors
///
/// An I/O error of the listener.
pub async fn serve_tls(
    listener: std::net::TcpListener,
    app: Router,
    tls: TlsConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        shutdown.await;
        stopper.graceful_shutdown(Some(TLS_GRACE));
    });
    listener.set_nonblocking(true)?;
    axum_server::from_tcp_rustls(listener, tls.0)
        .handle(handle)
        .serve(app.into_make_service())
        .await
}
