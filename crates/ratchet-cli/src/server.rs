//! `ratchet server`: the HTTP API, and a runtime of the sample orchestrations and task in
//! the same process (unless `--no-worker`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use ratchet::{Client, Store};
use ratchet_server::{router, serve, ServerState};

use crate::worker::{self, WorkerArgs};

/// Options of the server.
#[derive(clap::Args, Debug)]
pub(crate) struct ServerArgs {
    /// The address to serve on.
    #[arg(long, env = "RATCHET_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Serve the API only, running no orchestration or task here (other processes run them).
    #[arg(long)]
    no_worker: bool,
    /// Ask every request for a bearer token (`ratchet tokens create`) with the scope it needs.
    #[arg(long, env = "RATCHET_AUTH")]
    auth: bool,
    /// Serve on an address other machines can reach although the API asks for no token.
    #[arg(long, conflicts_with = "auth")]
    insecure_no_auth: bool,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Requests held open at once (long-poll waits and event streams); more get 429.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    max_waiting: u64,
    /// Connections open at once; one more is answered 503 with Retry-After (over HTTPS,
    /// closed). Keep it under the open-file limit (`ulimit -n`).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// How long a connection may take to send a request's head (or a TLS handshake), in
    /// milliseconds; a kept-alive connection idle this long is closed too.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_ms: u64,
    /// How long a graceful stop (SIGTERM, Ctrl-C) waits for requests in flight, in
    /// milliseconds; long polls and event streams end at once, what is left after is closed.
    #[arg(long, default_value_t = 10_000)]
    shutdown_grace_ms: u64,
    /// Print the API's OpenAPI document and exit (docs/openapi.json is this output).
    #[arg(long)]
    pub(crate) print_openapi: bool,
    #[command(flatten)]
    worker: WorkerArgs,
}

impl ServerArgs {
    /// The defaults, serving on `listen` (a loopback address: no token asked).
    pub(crate) fn local(listen: SocketAddr) -> anyhow::Result<ServerArgs> {
        #[derive(clap::Parser)]
        struct Only {
            #[command(flatten)]
            args: ServerArgs,
        }
        let listen = listen.to_string();
        let only = <Only as clap::Parser>::try_parse_from(["server", "--listen", listen.as_str()])?;
        Ok(only.args)
    }

    /// Whether this server creates or upgrades the schema on start.
    pub(crate) fn migrates(&self, sqlite: bool) -> bool {
        self.worker.migrates(sqlite)
    }
}

pub(crate) async fn run(
    store: Arc<dyn Store>,
    about: &str,
    args: ServerArgs,
) -> anyhow::Result<()> {
    if !args.listen.ip().is_loopback() && !args.auth && !args.insecure_no_auth {
        bail!(
            "refusing to serve on {} without authentication: other machines could reach the API; \
             pass --auth (and make tokens with `ratchet tokens create`), serve on 127.0.0.1, \
             or pass --insecure-no-auth behind a proxy that authenticates",
            args.listen
        );
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(
            ratchet_server::TlsConfig::load(cert, key)
                .await
                .with_context(|| {
                    format!(
                        "reading the TLS certificate {} and key {}",
                        cert.display(),
                        key.display()
                    )
                })?,
        ),
        _ => None,
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let address = listener.local_addr().unwrap_or(args.listen);
    let started = if args.no_worker {
        None
    } else {
        // Its workflows may call activities that workers over HTTP run.
        Some(worker::start(store.clone(), args.worker, true).await?)
    };
    let client = match &started {
        Some(s) => s.ratchet.client().clone(),
        None => Client::new(store),
    };
    let what = match &started {
        Some(s) => format!(
            "running orchestrations order, fanout and task work on queue(s) {} as {}",
            s.serves,
            s.ratchet.runtime().owner()
        ),
        None => "running nothing here (--no-worker)".to_string(),
    };
    let metrics = ratchet_server::install_recorder()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    out!("ratchet server on {scheme}://{address} ({about}), {what}; Ctrl-C to stop");
    let limits = ratchet_server::ServerLimits {
        max_waiting: usize::try_from(args.max_waiting).unwrap_or(usize::MAX),
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
        header_read_timeout: Duration::from_millis(args.header_timeout_ms),
        shutdown_grace: Duration::from_millis(args.shutdown_grace_ms),
        ..ratchet_server::ServerLimits::default()
    };
    let mut state = ServerState::new(client)
        .with_limits(limits.clone())
        .with_metrics(metrics)
        .with_auth(args.auth);
    if !args.auth && address.ip().is_loopback() {
        // No token guards it: only this machine's own clients and pages may use it.
        state = state.local_only(address.port());
    }
    let app = router(state);
    match tls {
        Some(tls) => {
            ratchet_server::serve_tls(listener, app, tls, &limits, worker::wait_for_stop())
                .await
                .context("serving HTTPS")?;
        }
        None => serve(listener, app, &limits, worker::wait_for_stop())
            .await
            .context("serving")?,
    }
    if let Some(started) = started {
        out!("server stopping: finishing or releasing its work");
        started.ratchet.shutdown().await;
    }
    out!("server stopped");
    Ok(())
}
