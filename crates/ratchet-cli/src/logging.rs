//! Logs of the `ratchet` and `ratchet-bench` binaries: to stderr, filtered by `RATCHET_LOG`
//! (default `warn`), coloured only for a person at a terminal.

/// Installs the log subscriber.
pub(crate) fn init() {
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_env_filter(env_filter())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

pub(crate) fn env_filter() -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_env("RATCHET_LOG").unwrap_or_else(|_| "warn".into())
}
