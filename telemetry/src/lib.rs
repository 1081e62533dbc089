//! Keel's OpenTelemetry: traces and metrics of agent work, named after the GenAI
//! semantic conventions, exported over OTLP.
//!
//! - [`semconv`]: the span, attribute and metric names (pinned version).
//! - [`Recorder`]: what the kernel holds. It creates the spans of a request
//!   (`invoke_agent`), a model call (`chat`), a tool call (`execute_tool`), an
//!   approval wait, a hook run and an MCP call as `tracing` spans of target
//!   [`SPAN_TARGET`], and records the metrics. Content (prompts, outputs, tool
//!   arguments and results) is recorded only when the recorder was made with
//!   `log_content`. [`Recorder::off`] costs a disabled `tracing` span per call.
//! - [`TraceParent`]: a host's W3C `traceparent`, parsed and formatted by the SDK's
//!   propagator, so that a request joins the host's trace; [`trace_id_of`] gives a
//!   span's trace id for the envelopes.
//! - [`config`]: the `[telemetry]` table ([`TelemetryConfig`]) and the
//!   `OTEL_*` environment variables, resolved into [`Settings`]; export is off by
//!   default.
//! - `Pipeline` (feature `otlp`, on by default): the exporters, the `tracing` layer
//!   and a bounded shutdown. Export runs in the background with a bounded queue and a
//!   short time limit; a failing endpoint costs a warning in the log, once.
//! - `testing` (feature `testing`): a real OTLP/HTTP receiver on loopback that
//!   decodes the protobuf requests.
//!
//! This crate never prints.

pub mod config;
pub mod context;
mod recorder;
pub mod semconv;
mod spans;

#[cfg(feature = "otlp")]
mod export;
#[cfg(feature = "testing")]
pub mod testing;

pub use config::{resolve, ConfigError, Off, Protocol, Resolved, Settings, TelemetryConfig};
pub use context::{trace_id_of, TraceParent, TraceParentError};
#[cfg(feature = "otlp")]
pub use export::{Health, Pipeline, Shutdown, StartError, LOG_TARGET};
pub use recorder::{span_filter, Recorder, MAX_CONTENT_BYTES, SPAN_TARGET};
pub use spans::{
    text_messages, AgentRun, AgentStart, ApprovalStart, ApprovalWait, ChatCall, ChatEnd, ChatStart,
    HookRun, HookStart, McpCall, McpStart, Parent, RunEnd, ToolCall, ToolOutcome, ToolStart,
};
