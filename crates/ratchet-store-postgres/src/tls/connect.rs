//! Connecting as the `sslmode` says, with libpq's second tries: `allow` tries plain text
//! first and TLS when the server refuses that; `prefer` tries TLS first (when the server
//! offers it) and plain text when the handshake fails or the server refuses the encrypted
//! connection.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{CancelToken, Client, Config, Connection, Error, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::Mode;

/// The stream of a TLS connection.
type Stream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;
/// What makes a TLS stream of a socket, for one host.
type RustlsConnect = <MakeRustlsConnect as MakeTlsConnect<Socket>>::TlsConnect;

/// How every connection of a store is made: the `sslmode` and the TLS settings it needs.
#[derive(Clone)]
pub(crate) struct Tls {
    mode: Mode,
    make: MakeRustlsConnect,
}

/// How far TLS got on one attempt.
const NOT_TRIED: u8 = 0;
const HANDSHAKE_FAILED: u8 = 1;
const ENCRYPTED: u8 = 2;

impl Tls {
    pub(super) fn new(mode: Mode, config: rustls::ClientConfig) -> Self {
        Self {
            mode,
            make: MakeRustlsConnect::new(config),
        }
    }

    /// Opens one connection with `config` (whose own `ssl_mode` is ignored), trying a second
    /// way where the `sslmode` allows one.
    ///
    /// # Errors
    ///
    /// The driver's error of the last attempt.
    pub(crate) async fn open(
        &self,
        config: &Config,
    ) -> Result<(Client, Connection<Socket, Stream>), Error> {
        let (first, second) = match self.mode {
            Mode::Disable => (SslMode::Disable, None),
            Mode::Allow => (SslMode::Disable, Some(SslMode::Require)),
            Mode::Prefer => (SslMode::Prefer, Some(SslMode::Disable)),
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => (SslMode::Require, None),
        };
        let (e, tls) = match self.attempt(config, first).await {
            (Err(e), tls) => (e, tls),
            (connected, _) => return connected,
        };
        let refused = e.as_db_error().is_some();
        let again = match self.mode {
            // The server refused plain text (pg_hba.conf's `hostssl`, say).
            Mode::Allow => refused,
            // Not when the server offered no TLS: plain text was tried already.
            Mode::Prefer => tls == HANDSHAKE_FAILED || (tls == ENCRYPTED && refused),
            _ => false,
        };
        match second {
            Some(second) if again => {
                tracing::debug!(error = %e, sslmode = ?self.mode, "connecting again the other way, as the sslmode allows");
                self.attempt(config, second).await.0
            }
            _ => Err(e),
        }
    }

    /// One attempt with `ssl_mode`, and how far TLS got.
    async fn attempt(
        &self,
        config: &Config,
        ssl_mode: SslMode,
    ) -> (Result<(Client, Connection<Socket, Stream>), Error>, u8) {
        let tls = Arc::new(AtomicU8::new(NOT_TRIED));
        let mut config = config.clone();
        config.ssl_mode(ssl_mode);
        let result = config
            .connect(Noting {
                make: self.make.clone(),
                tls: tls.clone(),
            })
            .await;
        (result, tls.load(Ordering::SeqCst))
    }

    /// Cancels the statement running on the connection of `token`, over TLS if that
    /// connection was encrypted.
    ///
    /// # Errors
    ///
    /// The driver's, when the server cannot be reached.
    pub(crate) async fn cancel(&self, token: CancelToken) -> Result<(), Error> {
        token.cancel_query(self.make.clone()).await
    }
}

impl deadpool_postgres::Connect for Tls {
    fn connect(&self, config: &Config) -> BoxFuture<'_, Result<(Client, JoinHandle<()>), Error>> {
        let config = config.clone();
        Box::pin(async move {
            let (client, connection) = self.open(&config).await?;
            let driver = tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::warn!(error = %e, "database connection failed");
                }
            });
            Ok((client, driver))
        })
    }
}

/// The TLS connector of one attempt, noting how far TLS got: whether the server offered it
/// and the handshake succeeded.
#[derive(Clone)]
struct Noting {
    make: MakeRustlsConnect,
    tls: Arc<AtomicU8>,
}

impl MakeTlsConnect<Socket> for Noting {
    type Stream = Stream;
    type TlsConnect = NotingConnect;
    type Error = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<NotingConnect, Self::Error> {
        Ok(NotingConnect {
            inner: MakeTlsConnect::<Socket>::make_tls_connect(&mut self.make, domain)?,
            tls: self.tls.clone(),
        })
    }
}

struct NotingConnect {
    inner: RustlsConnect,
    tls: Arc<AtomicU8>,
}

impl TlsConnect<Socket> for NotingConnect {
    type Stream = Stream;
    type Error = <RustlsConnect as TlsConnect<Socket>>::Error;
    type Future = BoxFuture<'static, Result<Stream, Self::Error>>;

    fn connect(self, socket: Socket) -> Self::Future {
        let handshake = self.inner.connect(socket);
        let tls = self.tls;
        Box::pin(async move {
            let stream = handshake.await;
            let reached = if stream.is_ok() {
                ENCRYPTED
            } else {
                HANDSHAKE_FAILED
            };
            tls.store(reached, Ordering::SeqCst);
            stream
        })
    }
}
