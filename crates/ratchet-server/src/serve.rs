//! Serving a router until told to stop.

use std::future::Future;

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
