//! Requests held open (long-poll waits and event streams): each holds a permit within the
//! server's limit, and ends when the server begins to stop or when the token it came with
//! is revoked, so neither a graceful stop nor a revocation waits on them.

use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use futures::{Stream, StreamExt};
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use crate::auth::Authenticated;
use crate::problem::Problem;
use crate::state::ServerState;

/// Set on every request by [`crate::serve`]: cancelled when a graceful stop begins.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stopping(pub(crate) CancellationToken);

/// How often a held-open request checks that its token still holds: a revoked token's
/// requests end within this and the validity of a check (see [`crate::auth::still_valid`]).
const RECHECK_EVERY: Duration = Duration::from_secs(2);

/// A request held open: refused with 429 when the server holds its most already.
pub(crate) struct Held {
    _permit: OwnedSemaphorePermit,
    stopping: CancellationToken,
    /// The server and the hash of the token the request came with, when it asks for tokens.
    token: Option<(ServerState, String)>,
}

impl FromRequestParts<ServerState> for Held {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &ServerState) -> Result<Self, Problem> {
        let permit = state.hold()?;
        let stopping = parts
            .extensions
            .get::<Stopping>()
            .map(|s| s.0.clone())
            .unwrap_or_default();
        let token = parts
            .extensions
            .get::<Authenticated>()
            .map(|a| (state.clone(), a.hash.clone()));
        metrics::gauge!("ratchet_http_requests_held").increment(1.0);
        Ok(Self {
            _permit: permit,
            stopping,
            token,
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        metrics::gauge!("ratchet_http_requests_held").decrement(1.0);
    }
}

impl Held {
    /// Resolves when the request must end: the server began to stop, or the token it came
    /// with was revoked (or removed).
    pub(crate) async fn ended(&self) {
        let revoked = async {
            let Some((state, hash)) = &self.token else {
                return std::future::pending().await;
            };
            loop {
                tokio::time::sleep(RECHECK_EVERY).await;
                if !crate::auth::still_valid(state, hash).await {
                    return;
                }
            }
        };
        tokio::select! {
            () = self.stopping.cancelled() => {}
            () = revoked => {}
        }
    }

    /// `stream` until the request must end; the permit is held as long as the stream.
    pub(crate) fn bound<S: Stream>(self, stream: S) -> impl Stream<Item = S::Item> {
        stream.take_until(async move { self.ended().await })
    }
}
