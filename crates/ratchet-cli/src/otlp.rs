//! `--otlp-endpoint`: the log subscriber plus Ratchet's spans exported over OTLP/HTTP.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::Layer as _;

use crate::logging::env_filter;

/// Exports spans until dropped; dropping it sends what is left.
pub(crate) struct Tracing(SdkTracerProvider);

impl Tracing {
    /// Sends the spans not yet exported (off the async runtime: the exporter blocks).
    pub(crate) async fn flush(self) {
        let provider = self.0;
        let done = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = done {
            eprintln!("warning: the last spans were not exported: {e}");
        }
    }
}

/// Installs the log subscriber and an OpenTelemetry layer that sends Ratchet's spans (at
/// info level, whatever `RATCHET_LOG` says) to the OTLP/HTTP collector at `endpoint`
/// (`http://localhost:4318`, or a full `.../v1/traces` URL).
pub(crate) fn init(endpoint: &str) -> anyhow::Result<Tracing> {
    use std::io::IsTerminal as _;
    let url = if endpoint.trim_end_matches('/').ends_with("/v1/traces") {
        endpoint.to_string()
    } else {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpJson)
        .with_endpoint(url)
        .build()?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("ratchet")
                .build(),
        )
        .build();
    let tracer = provider.tracer("ratchet");
    // Only Ratchet's own spans: the exporter's HTTP client must not trace its own exports.
    let ours = tracing_subscriber::filter::filter_fn(|meta| {
        meta.target().starts_with("ratchet") && *meta.level() <= tracing::Level::INFO
    });
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_filter(env_filter()),
        )
        .with(
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(ours),
        )
        .try_init()?;
    Ok(Tracing(provider))
}
