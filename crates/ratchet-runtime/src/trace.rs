//! Traces across processes and time: an instance keeps the W3C `traceparent` of the request
//! that started it, and each of its turns and activities joins that trace, whichever process
//! runs it and however long after. The spans are ordinary `tracing` spans; they reach a trace
//! backend when the program installs an OpenTelemetry layer (`ratchet --otlp-endpoint`), and
//! cost only a span otherwise.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The header and metadata key of a trace context.
pub const TRACEPARENT: &str = "traceparent";

fn context_of(traceparent: &str) -> Option<opentelemetry::Context> {
    let carrier = HashMap::from([(TRACEPARENT.to_string(), traceparent.to_string())]);
    let context = TraceContextPropagator::new().extract(&carrier);
    context.span().span_context().is_valid().then_some(context)
}

/// `traceparent` if it is a valid W3C trace context (version, 32 and 16 hex digits, not all
/// zero, flags), in its canonical form; `None` otherwise, as the W3C says a receiver treats
/// a malformed one: as absent.
pub fn parse(traceparent: &str) -> Option<String> {
    context_of(traceparent.trim()).and_then(|c| format(&c))
}

fn format(context: &opentelemetry::Context) -> Option<String> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(context, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// Makes `span` a child of `traceparent` (when valid). Call it before the span is entered.
pub fn join(span: &tracing::Span, traceparent: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    if let Some(context) = traceparent.and_then(context_of) {
        // Fails only when no OpenTelemetry layer records spans: then there is nothing to join.
        let _ = span.set_parent(context);
    }
}

/// The trace context of `span` as a `traceparent`, when an OpenTelemetry layer records it.
pub fn of(span: &tracing::Span) -> Option<String> {
    // Every turn asks: with traces off, answer without building a context.
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    if context.span().span_context().is_valid() {
        format(&context)
    } else {
        None
    }
}

/// What work started under `span` carries on: the span's own context when it is recorded,
/// else the trace it was asked to join.
pub fn carried(span: &tracing::Span, joined: Option<&str>) -> Option<String> {
    of(span).or_else(|| joined.map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_kept() {
        assert_eq!(parse(VALID).as_deref(), Some(VALID));
        assert_eq!(parse(&format!(" {VALID} ")).as_deref(), Some(VALID));
    }

    #[test]
    fn a_malformed_traceparent_is_treated_as_absent() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "'; DROP TABLE instances; --",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn without_a_recording_layer_work_carries_the_joined_trace() {
        let span = tracing::info_span!("turn");
        join(&span, Some(VALID));
        assert_eq!(carried(&span, Some(VALID)).as_deref(), Some(VALID));
        assert_eq!(carried(&span, None), None);
    }
}
