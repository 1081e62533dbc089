//! The spans of Keel's work, each a `tracing` span with the GenAI fields declared up
//! front, wrapped in a handle that records the end (attributes, status, metrics):
//!
//! | call | span name | `gen_ai.operation.name` | kind |
//! |---|---|---|---|
//! | [`Recorder::invoke_agent`] | `invoke_agent {agent}` | `invoke_agent` | internal |
//! | [`Recorder::chat`] | `chat {model}` | `chat` | client |
//! | [`Recorder::execute_tool`] | `execute_tool {tool}` | `execute_tool` | internal |
//! | [`Recorder::approval_wait`] | `approval {tool}` | — | internal |
//! | [`Recorder::hook_run`] | `hook {point}` | — | internal |
//! | [`Recorder::mcp_call`] | `tools/call {tool}` | `execute_tool` | client |
//!
//! A span's parent is the span entered where it is created ([`Parent::Current`]: run
//! the work with `.instrument(handle.span().clone())` so that it stays so across
//! `.await` and spawned tasks), a given span, a host's [`TraceParent`], or none.
//! With no OpenTelemetry layer listening, a span is a disabled `tracing` span: the
//! fields are not even evaluated, and the handle's methods do nothing.

use std::time::Instant;

use tracing::field::Empty;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::context::TraceParent;
use crate::recorder::{int, kv, Recorder, SPAN_TARGET};
use crate::semconv as sc;

/// Where a new span hangs.
#[derive(Debug, Clone, Copy, Default)]
pub enum Parent<'a> {
    /// Under the span entered now (the usual case).
    #[default]
    Current,
    /// Under this span.
    Span(&'a Span),
    /// Under a host's span, in the host's trace.
    Remote(&'a TraceParent),
    /// A new trace.
    Root,
}

/// Creates a span of [`SPAN_TARGET`] under `$parent`.
macro_rules! new_span {
    ($parent:expr, $name:literal, $($fields:tt)*) => {{
        let parent: Parent<'_> = $parent;
        let span = match parent {
            Parent::Span(p) => tracing::info_span!(target: SPAN_TARGET, parent: p, $name, $($fields)*),
            Parent::Root => tracing::info_span!(target: SPAN_TARGET, parent: None, $name, $($fields)*),
            Parent::Current | Parent::Remote(_) => {
                tracing::info_span!(target: SPAN_TARGET, $name, $($fields)*)
            }
        };
        if let Parent::Remote(tp) = parent {
            if !span.is_disabled() {
                // Only fails when no OpenTelemetry layer sees the span.
                let _ = span.set_parent(tp.context());
            }
        }
        span
    }};
}

/// A span name: an operation and what it works on (`chat gpt-4o`).
pub(crate) struct Named<'a>(pub &'static str, pub &'a str);

impl std::fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.1.is_empty() {
            f.write_str(self.0)
        } else {
            write!(f, "{} {}", self.0, self.1)
        }
    }
}

/// Marks `span` failed with `error_type`.
pub(crate) fn fail(span: &Span, error_type: &str) {
    span.record(sc::ERROR_TYPE, error_type);
    span.record("otel.status_code", "error");
}

/// A JSON message list of one text message, the shape of `gen_ai.input.messages` and
/// `gen_ai.output.messages` (`[{"role": …, "parts": [{"type": "text", "content": …}]}]`).
pub fn text_messages(role: &str, text: &str) -> String {
    serde_json::json!([{"role": role, "parts": [{"type": "text", "content": text}]}]).to_string()
}

/// What a request or sub-agent run is.
#[derive(Debug, Clone, Copy, Default)]
pub struct AgentStart<'a> {
    /// `gen_ai.agent.name`: `keel` for a request, the sub-agent's name for a sub-agent.
    pub agent_name: &'a str,
    /// `gen_ai.agent.id`: a sub-agent's id.
    pub agent_id: Option<&'a str>,
    /// `keel.session.id` and `gen_ai.conversation.id`.
    pub session_id: &'a str,
    /// `keel.request.id`.
    pub request_id: &'a str,
    /// `gen_ai.provider.name` of the model the run uses.
    pub provider: Option<&'a str>,
    /// `gen_ai.request.model`.
    pub model: Option<&'a str>,
    /// Where the span hangs.
    pub parent: Parent<'a>,
}

/// A request's or sub-agent's `invoke_agent` span.
#[derive(Debug)]
#[must_use = "a run records its end with finish()"]
pub struct AgentRun {
    span: Span,
    rec: Recorder,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunEnd<'a> {
    /// Input tokens of all its model calls.
    pub input_tokens: Option<u64>,
    /// Output tokens of all its model calls.
    pub output_tokens: Option<u64>,
    /// `error.type` when it failed (an `ErrorCode` name, `interrupted`, …).
    pub error_type: Option<&'a str>,
}

impl Recorder {
    /// Starts an `invoke_agent` span.
    pub fn invoke_agent(&self, s: AgentStart<'_>) -> AgentRun {
        let span = new_span!(
            s.parent,
            "invoke_agent",
            otel.name = %Named("invoke_agent", s.agent_name),
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = sc::OP_INVOKE_AGENT,
            gen_ai.agent.name = s.agent_name,
            gen_ai.agent.id = s.agent_id,
            gen_ai.conversation.id = s.session_id,
            gen_ai.provider.name = s.provider,
            gen_ai.request.model = s.model,
            keel.session.id = s.session_id,
            keel.request.id = s.request_id,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            error.type = Empty,
            gen_ai.input.messages = Empty,
            gen_ai.output.messages = Empty,
        );
        AgentRun {
            span,
            rec: self.clone(),
        }
    }
}

impl AgentRun {
    /// The span, to enter or to `.instrument()` the run's work with.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The OpenTelemetry trace id of the run, when it is exported.
    pub fn trace_id(&self) -> Option<String> {
        crate::context::trace_id_of(&self.span)
    }

    /// The user's message (content).
    pub fn input_text(&self, text: &str) {
        self.rec.content(&self.span, sc::GEN_AI_INPUT_MESSAGES, || {
            text_messages("user", text)
        });
    }

    /// The final answer (content).
    pub fn output_text(&self, text: &str) {
        self.rec
            .content(&self.span, sc::GEN_AI_OUTPUT_MESSAGES, || {
                text_messages("assistant", text)
            });
    }

    /// Records the end; the span closes when its last clone is dropped.
    pub fn finish(self, end: RunEnd<'_>) {
        if let Some(n) = end.input_tokens {
            self.span.record(sc::GEN_AI_USAGE_INPUT_TOKENS, int(n));
        }
        if let Some(n) = end.output_tokens {
            self.span.record(sc::GEN_AI_USAGE_OUTPUT_TOKENS, int(n));
        }
        if let Some(e) = end.error_type {
            fail(&self.span, e);
        }
    }
}

/// What a model call is.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChatStart<'a> {
    /// `gen_ai.provider.name` (`openai`, `anthropic`, …).
    pub provider: &'a str,
    /// `gen_ai.request.model`.
    pub model: &'a str,
    /// `gen_ai.request.max_tokens`.
    pub max_tokens: Option<u32>,
    /// `gen_ai.conversation.id`.
    pub session_id: Option<&'a str>,
    /// Where the span hangs.
    pub parent: Parent<'a>,
}

/// How a model call ended.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChatEnd<'a> {
    /// `gen_ai.response.model`.
    pub response_model: Option<&'a str>,
    /// `gen_ai.response.finish_reasons`.
    pub finish_reason: Option<&'a str>,
    /// `gen_ai.usage.input_tokens`.
    pub input_tokens: Option<u64>,
    /// `gen_ai.usage.output_tokens`.
    pub output_tokens: Option<u64>,
    /// `gen_ai.usage.cache_read.input_tokens`.
    pub cached_input_tokens: Option<u64>,
    /// `error.type` when it failed.
    pub error_type: Option<&'a str>,
}

/// A model call's `chat` span and its metrics.
#[derive(Debug)]
#[must_use = "a model call records its end with finish()"]
pub struct ChatCall {
    span: Span,
    rec: Recorder,
    /// When metrics are on: the start, and the provider and model for their points.
    timing: Option<(Instant, String, String)>,
    /// When the span is exported: the start, for the time to the first chunk.
    started: Option<Instant>,
    first_chunk: bool,
}

impl Recorder {
    /// Starts a `chat` span.
    pub fn chat(&self, s: ChatStart<'_>) -> ChatCall {
        let span = new_span!(
            s.parent,
            "chat",
            otel.name = %Named("chat", s.model),
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = sc::OP_CHAT,
            gen_ai.provider.name = s.provider,
            gen_ai.request.model = s.model,
            gen_ai.request.max_tokens = s.max_tokens.map(i64::from),
            gen_ai.conversation.id = s.session_id,
            gen_ai.response.model = Empty,
            gen_ai.response.finish_reasons = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            keel.response.time_to_first_chunk = Empty,
            error.type = Empty,
            gen_ai.system_instructions = Empty,
            gen_ai.input.messages = Empty,
            gen_ai.output.messages = Empty,
        );
        let timing = self
            .instruments()
            .map(|_| (Instant::now(), s.provider.to_owned(), s.model.to_owned()));
        let started = (!span.is_disabled()).then(Instant::now);
        ChatCall {
            span,
            rec: self.clone(),
            timing,
            started,
            first_chunk: false,
        }
    }
}

impl ChatCall {
    /// The span.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The first chunk of a streamed response arrived: records the time to it (once),
    /// on the span (`keel.response.time_to_first_chunk`, seconds) and in the metric.
    pub fn first_chunk(&mut self) {
        if std::mem::replace(&mut self.first_chunk, true) {
            return;
        }
        if let Some(start) = self.started {
            self.span.record(
                sc::KEEL_RESPONSE_TIME_TO_FIRST_CHUNK,
                start.elapsed().as_secs_f64(),
            );
        }
        if let (Some(m), Some((start, provider, model))) = (self.rec.instruments(), &self.timing) {
            m.time_to_first_chunk.record(
                start.elapsed().as_secs_f64(),
                &[
                    kv(sc::GEN_AI_OPERATION_NAME, sc::OP_CHAT),
                    kv(sc::GEN_AI_PROVIDER_NAME, provider),
                    kv(sc::GEN_AI_REQUEST_MODEL, model),
                ],
            );
        }
    }

    /// The system instructions (content, JSON).
    pub fn system_instructions(&self, json: impl FnOnce() -> String) {
        self.rec
            .content(&self.span, sc::GEN_AI_SYSTEM_INSTRUCTIONS, json);
    }

    /// The messages sent (content, JSON in the conventions' message shape).
    pub fn input_messages(&self, json: impl FnOnce() -> String) {
        self.rec
            .content(&self.span, sc::GEN_AI_INPUT_MESSAGES, json);
    }

    /// The messages received (content, JSON).
    pub fn output_messages(&self, json: impl FnOnce() -> String) {
        self.rec
            .content(&self.span, sc::GEN_AI_OUTPUT_MESSAGES, json);
    }

    /// Records the end: usage and finish reason on the span, duration and tokens in
    /// the metrics.
    pub fn finish(self, end: ChatEnd<'_>) {
        let span = &self.span;
        if let Some(m) = end.response_model {
            span.record(sc::GEN_AI_RESPONSE_MODEL, m);
        }
        if let Some(r) = end.finish_reason {
            span.record(sc::GEN_AI_RESPONSE_FINISH_REASONS, r);
        }
        if let Some(n) = end.input_tokens {
            span.record(sc::GEN_AI_USAGE_INPUT_TOKENS, int(n));
        }
        if let Some(n) = end.output_tokens {
            span.record(sc::GEN_AI_USAGE_OUTPUT_TOKENS, int(n));
        }
        if let Some(n) = end.cached_input_tokens {
            span.record(sc::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, int(n));
        }
        if let Some(e) = end.error_type {
            fail(span, e);
        }
        let (Some(m), Some((start, provider, model))) = (self.rec.instruments(), &self.timing)
        else {
            return;
        };
        let mut attrs = vec![
            kv(sc::GEN_AI_OPERATION_NAME, sc::OP_CHAT),
            kv(sc::GEN_AI_PROVIDER_NAME, provider),
            kv(sc::GEN_AI_REQUEST_MODEL, model),
        ];
        if let Some(r) = end.response_model {
            attrs.push(kv(sc::GEN_AI_RESPONSE_MODEL, r));
        }
        let tokens = attrs.clone();
        if let Some(e) = end.error_type {
            attrs.push(kv(sc::ERROR_TYPE, e));
        }
        m.operation_duration
            .record(start.elapsed().as_secs_f64(), &attrs);
        for (n, kind) in [(end.input_tokens, "input"), (end.output_tokens, "output")] {
            if let Some(n) = n {
                let mut a = tokens.clone();
                a.push(kv(sc::GEN_AI_TOKEN_TYPE, kind));
                m.token_usage.record(n, &a);
            }
        }
    }
}

mod tools;
pub use tools::{
    ApprovalStart, ApprovalWait, HookRun, HookStart, McpCall, McpStart, ToolCall, ToolOutcome,
    ToolStart,
};
