//! The [`Recorder`]: what the kernel holds to report its work. It creates the spans
//! (through `tracing`, target [`SPAN_TARGET`]) and records the metrics, and knows
//! whether content may be recorded. [`Recorder::off`] (the default) records no
//! metrics and no content; its spans are disabled `tracing` spans unless some
//! OpenTelemetry layer listens to [`SPAN_TARGET`].

use std::sync::Arc;

use opentelemetry::metrics::{Counter, Histogram, Meter};
use opentelemetry::KeyValue;

use crate::semconv as sc;

/// The `tracing` target of every span this crate creates. An OpenTelemetry layer
/// listens to it alone (see [`span_filter`]); a log layer leaves it out.
pub const SPAN_TARGET: &str = "keel_telemetry::span";

/// The longest content attribute recorded, in bytes; longer content is cut at a
/// character boundary and ends with `…[truncated]`.
pub const MAX_CONTENT_BYTES: usize = 32 * 1024;

/// A per-layer filter that lets through exactly the spans of [`SPAN_TARGET`] (at
/// `INFO` and above): put it on an OpenTelemetry layer so that it exports Keel's
/// spans and not every crate's.
pub fn span_filter() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new().with_target(SPAN_TARGET, tracing::Level::INFO)
}

/// Reports spans and metrics. Cheap to clone; `Default` is [`Recorder::off`].
#[derive(Clone, Default)]
pub struct Recorder {
    inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("on", &self.inner.is_some())
            .field("log_content", &self.logs_content())
            .finish()
    }
}

struct Inner {
    log_content: bool,
    m: Instruments,
}

pub(crate) struct Instruments {
    pub token_usage: Histogram<u64>,
    pub operation_duration: Histogram<f64>,
    pub time_to_first_chunk: Histogram<f64>,
    pub tool_calls: Counter<u64>,
    pub tool_duration: Histogram<f64>,
    pub approvals: Counter<u64>,
    pub approval_wait: Histogram<f64>,
    pub hook_runs: Counter<u64>,
    pub mcp_duration: Histogram<f64>,
}

impl Instruments {
    fn new(meter: &Meter) -> Instruments {
        let seconds = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(sc::DURATION_BUCKETS.to_vec())
                .build()
        };
        Instruments {
            token_usage: meter
                .u64_histogram(sc::METRIC_TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Number of input and output tokens used.")
                .with_boundaries(sc::TOKEN_BUCKETS.to_vec())
                .build(),
            operation_duration: seconds(sc::METRIC_OPERATION_DURATION, "GenAI operation duration."),
            time_to_first_chunk: seconds(
                sc::METRIC_TIME_TO_FIRST_CHUNK,
                "Time to receive the first chunk of a streamed model response.",
            ),
            tool_calls: meter
                .u64_counter(sc::METRIC_TOOL_CALLS)
                .with_unit("{call}")
                .with_description("Tool calls, by tool and outcome.")
                .build(),
            tool_duration: seconds(
                sc::METRIC_TOOL_DURATION,
                "Tool call duration, approval wait included.",
            ),
            approvals: meter
                .u64_counter(sc::METRIC_APPROVALS)
                .with_unit("{approval}")
                .with_description("Approvals answered, by decision.")
                .build(),
            approval_wait: seconds(
                sc::METRIC_APPROVAL_WAIT,
                "Time an approval waited for its answer.",
            ),
            hook_runs: meter
                .u64_counter(sc::METRIC_HOOK_RUNS)
                .with_unit("{run}")
                .with_description("Hook runs, by point and outcome.")
                .build(),
            mcp_duration: seconds(
                sc::METRIC_MCP_DURATION,
                "MCP call duration, as the client sees it.",
            ),
        }
    }
}

impl Recorder {
    /// Records nothing: no metrics, no content.
    pub fn off() -> Recorder {
        Recorder { inner: None }
    }

    /// Records metrics with `meter` and, when `log_content`, content on spans.
    pub fn new(meter: &Meter, log_content: bool) -> Recorder {
        Recorder {
            inner: Some(Arc::new(Inner {
                log_content,
                m: Instruments::new(meter),
            })),
        }
    }

    /// Whether this recorder records anything beyond spans.
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Whether content (prompts, outputs, tool arguments and results) is recorded.
    pub fn logs_content(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| i.log_content)
    }

    pub(crate) fn instruments(&self) -> Option<&Instruments> {
        self.inner.as_deref().map(|i| &i.m)
    }

    /// Records `content()` as `key` on `span` when content is recorded and the span is
    /// exported; `content` is not called otherwise.
    pub(crate) fn content(
        &self,
        span: &tracing::Span,
        key: &str,
        content: impl FnOnce() -> String,
    ) {
        if self.logs_content() && !span.is_disabled() {
            span.record(key, truncate(content()).as_str());
        }
    }
}

/// Cuts `s` to [`MAX_CONTENT_BYTES`].
fn truncate(mut s: String) -> String {
    if s.len() <= MAX_CONTENT_BYTES {
        return s;
    }
    let mut cut = MAX_CONTENT_BYTES;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s.push_str("…[truncated]");
    s
}

/// A `u64` as the `i64` OpenTelemetry integers are (saturating).
pub(crate) fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Attributes for a metric point.
pub(crate) fn kv(key: &'static str, value: &str) -> KeyValue {
    KeyValue::new(key, value.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn content_is_cut_at_a_character_boundary() {
        assert_eq!(truncate("short".into()), "short");
        let long = "é".repeat(MAX_CONTENT_BYTES);
        let cut = truncate(long);
        assert!(cut.ends_with("…[truncated]"));
        assert!(cut.len() <= MAX_CONTENT_BYTES + "…[truncated]".len());
    }

    #[test]
    fn off_records_nothing() {
        let r = Recorder::off();
        assert!(!r.is_on() && !r.logs_content());
        let mut called = false;
        r.content(&tracing::Span::none(), "k", || {
            called = true;
            String::new()
        });
        assert!(!called);
        assert_eq!(int(u64::MAX), i64::MAX);
    }
}
