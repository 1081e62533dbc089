//! W3C trace context: a host's `traceparent` (and `tracestate`) parsed and formatted
//! by the OpenTelemetry SDK's propagator, and the trace id of a span, so that a
//! request's spans join the host's trace and its envelopes name that trace.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The longest `traceparent` or `tracestate` accepted (the W3C limit of `tracestate`
/// is 512 characters; `traceparent` is 55).
pub const MAX_HEADER_LEN: usize = 512;

/// A remote parent: the span of a host that a request's spans join.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceParent {
    span_context: SpanContext,
}

/// A `traceparent` that is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceParentError {
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for TraceParentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TraceParentError {}

impl TraceParent {
    /// Parses a `traceparent` header value (`00-<32 hex>-<16 hex>-<2 hex>`, lowercase,
    /// ids not all zero) and an optional `tracestate`.
    pub fn parse(
        traceparent: &str,
        tracestate: Option<&str>,
    ) -> Result<TraceParent, TraceParentError> {
        if traceparent.len() > MAX_HEADER_LEN
            || tracestate.is_some_and(|s| s.len() > MAX_HEADER_LEN)
        {
            return Err(TraceParentError {
                message: format!(
                    "a traceparent or tracestate is at most {MAX_HEADER_LEN} characters"
                ),
            });
        }
        let bad = || {
            TraceParentError {
            message: format!(
                "{traceparent:?} is not a W3C traceparent (`00-<trace id: 32 lowercase hex>-<parent id: 16 lowercase hex>-<flags: 2 hex>`, ids not all zero)"
            ),
        }
        };
        // The propagator pads short ids; the W3C format has fixed widths.
        if !well_formed(traceparent) {
            return Err(bad());
        }
        let mut carrier = HashMap::new();
        carrier.insert("traceparent".to_owned(), traceparent.to_owned());
        if let Some(state) = tracestate {
            carrier.insert("tracestate".to_owned(), state.to_owned());
        }
        let cx = TraceContextPropagator::new().extract(&carrier);
        let span_context = cx.span().span_context().clone();
        if !span_context.is_valid() {
            return Err(bad());
        }
        Ok(TraceParent { span_context })
    }

    /// The trace id, 32 lowercase hex digits.
    pub fn trace_id(&self) -> String {
        self.span_context.trace_id().to_string()
    }

    /// The parent span's id, 16 lowercase hex digits.
    pub fn span_id(&self) -> String {
        self.span_context.span_id().to_string()
    }

    /// Whether the host sampled its trace.
    pub fn sampled(&self) -> bool {
        self.span_context.is_sampled()
    }

    /// The `traceparent` header value.
    pub fn header(&self) -> String {
        self.inject().remove("traceparent").unwrap_or_default()
    }

    /// The `tracestate` header value, when there is one.
    pub fn tracestate(&self) -> Option<String> {
        self.inject().remove("tracestate").filter(|s| !s.is_empty())
    }

    /// An OpenTelemetry context whose span is this remote parent.
    pub fn context(&self) -> opentelemetry::Context {
        opentelemetry::Context::new().with_remote_span_context(self.span_context.clone())
    }

    /// The trace context of `span` (for a child process or a host), when the span is
    /// exported (an OpenTelemetry layer sees it).
    pub fn of_span(span: &tracing::Span) -> Option<TraceParent> {
        if span.is_disabled() {
            return None;
        }
        let cx = span.context();
        let span_context = cx.span().span_context().clone();
        span_context
            .is_valid()
            .then_some(TraceParent { span_context })
    }

    fn inject(&self) -> HashMap<String, String> {
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&self.context(), &mut carrier);
        carrier
    }
}

/// `version-traceid-parentid-flags` with the W3C widths, lowercase hex; version
/// `00` has exactly these four fields, a later version may add more.
fn well_formed(v: &str) -> bool {
    let parts: Vec<&str> = v.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    parts.len() >= 4
        && hex(parts[0], 2)
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
        && (parts[0] != "00" || parts.len() == 4)
}

/// The OpenTelemetry trace id of `span` (32 lowercase hex digits), when it is
/// exported; `None` for a span no OpenTelemetry layer sees.
pub fn trace_id_of(span: &tracing::Span) -> Option<String> {
    TraceParent::of_span(span).map(|t| t.trace_id())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_round_trips() {
        let t = TraceParent::parse(GOOD, Some("rojo=00f067aa0ba902b7")).unwrap();
        assert_eq!(t.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.span_id(), "00f067aa0ba902b7");
        assert!(t.sampled());
        assert_eq!(t.header(), GOOD);
        assert_eq!(t.tracestate().as_deref(), Some("rojo=00f067aa0ba902b7"));
        let unsampled = TraceParent::parse(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
            None,
        )
        .unwrap();
        assert!(!unsampled.sampled());
        assert_eq!(unsampled.tracestate(), None);
    }

    #[test]
    fn bad_traceparents_are_refused_with_a_reason() {
        for bad in [
            "",
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            let e = TraceParent::parse(bad, None).unwrap_err();
            assert!(e.message.contains("W3C traceparent"), "{bad:?}: {e}");
        }
        let long = "0".repeat(MAX_HEADER_LEN + 1);
        assert!(TraceParent::parse(&long, None)
            .unwrap_err()
            .message
            .contains("at most"));
        assert!(TraceParent::parse(GOOD, Some(&long)).is_err());
    }

    #[test]
    fn a_span_no_layer_sees_has_no_trace_id() {
        let span = tracing::info_span!("nobody listens");
        assert_eq!(trace_id_of(&span), None);
        assert_eq!(trace_id_of(&tracing::Span::none()), None);
    }
}
