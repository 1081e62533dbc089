//! The spans around a tool call: the call itself (`execute_tool`), the wait for a
//! person's approval, a hook's run and an MCP server's call.

use std::time::Instant;

use tracing::field::Empty;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::{fail, Named, Parent};
use crate::recorder::{kv, Recorder, SPAN_TARGET};
use crate::semconv as sc;

/// What a tool call is.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolStart<'a> {
    /// `gen_ai.tool.name`.
    pub name: &'a str,
    /// `gen_ai.tool.call.id`: the model's id of the call.
    pub call_id: &'a str,
    /// `gen_ai.tool.type`: `function` for Keel's and the host's tools, `extension`
    /// for an MCP server's.
    pub tool_type: Option<&'a str>,
    /// Where the span hangs.
    pub parent: Parent<'a>,
}

/// How a tool call ended (`keel.tool.outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOutcome {
    /// It ran and succeeded.
    Ok,
    /// It ran and failed, or its arguments were refused (the error type says which).
    Error,
    /// The gate or a person refused it.
    Denied,
    /// The request was interrupted.
    Cancelled,
    /// It ran out of time.
    TimedOut,
}

impl ToolOutcome {
    /// The attribute value.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Ok => "ok",
            ToolOutcome::Error => "error",
            ToolOutcome::Denied => "denied",
            ToolOutcome::Cancelled => "cancelled",
            ToolOutcome::TimedOut => "timeout",
        }
    }
}

/// A tool call's `execute_tool` span and its metrics.
#[derive(Debug)]
#[must_use = "a tool call records its end with finish()"]
pub struct ToolCall {
    span: Span,
    rec: Recorder,
    timing: Option<(Instant, String)>,
}

impl Recorder {
    /// Starts an `execute_tool` span.
    pub fn execute_tool(&self, s: ToolStart<'_>) -> ToolCall {
        let span = new_span!(
            s.parent,
            "execute_tool",
            otel.name = %Named("execute_tool", s.name),
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = sc::OP_EXECUTE_TOOL,
            gen_ai.tool.name = s.name,
            gen_ai.tool.call.id = s.call_id,
            gen_ai.tool.type = s.tool_type,
            keel.permission.decision = Empty,
            keel.permission.level = Empty,
            keel.tool.outcome = Empty,
            error.type = Empty,
            gen_ai.tool.call.arguments = Empty,
            gen_ai.tool.call.result = Empty,
        );
        let timing = self
            .instruments()
            .map(|_| (Instant::now(), s.name.to_owned()));
        ToolCall {
            span,
            rec: self.clone(),
            timing,
        }
    }
}

impl ToolCall {
    /// The span.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// `gen_ai.tool.type`, once it is known (the call is decoded).
    pub fn tool_type(&self, tool_type: &str) {
        self.span.record(sc::GEN_AI_TOOL_TYPE, tool_type);
    }

    /// The gate's verdict (`allow`, `ask`, `deny`) and the call's level.
    pub fn decision(&self, decision: &str, level: Option<&str>) {
        self.span.record(sc::KEEL_PERMISSION_DECISION, decision);
        if let Some(l) = level {
            self.span.record(sc::KEEL_PERMISSION_LEVEL, l);
        }
    }

    /// The arguments (content, JSON).
    pub fn arguments(&self, json: impl FnOnce() -> String) {
        self.rec
            .content(&self.span, sc::GEN_AI_TOOL_CALL_ARGUMENTS, json);
    }

    /// The result (content).
    pub fn result(&self, text: impl FnOnce() -> String) {
        self.rec
            .content(&self.span, sc::GEN_AI_TOOL_CALL_RESULT, text);
    }

    /// Records the end. `error_type` names the error of an `Error` outcome (an
    /// `ErrorCode` name); `TimedOut` is `timeout`.
    pub fn finish(self, outcome: ToolOutcome, error_type: Option<&str>) {
        self.span.record(sc::KEEL_TOOL_OUTCOME, outcome.as_str());
        let error = match outcome {
            ToolOutcome::Error => Some(error_type.unwrap_or("tool_error")),
            ToolOutcome::TimedOut => Some(error_type.unwrap_or("timeout")),
            _ => None,
        };
        if let Some(e) = error {
            fail(&self.span, e);
        }
        let (Some(m), Some((start, name))) = (self.rec.instruments(), &self.timing) else {
            return;
        };
        let attrs = [
            kv(sc::GEN_AI_TOOL_NAME, name),
            kv(sc::KEEL_TOOL_OUTCOME, outcome.as_str()),
        ];
        m.tool_calls.add(1, &attrs);
        m.tool_duration
            .record(start.elapsed().as_secs_f64(), &attrs);
    }
}

/// What an approval waits for.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApprovalStart<'a> {
    /// `gen_ai.tool.name`.
    pub tool: &'a str,
    /// `gen_ai.tool.call.id`.
    pub call_id: &'a str,
    /// `keel.permission.level`.
    pub level: Option<&'a str>,
    /// Where the span hangs (the tool call's span).
    pub parent: Parent<'a>,
}

/// The wait for a person's answer to an approval.
#[derive(Debug)]
#[must_use = "an approval records its answer with finish()"]
pub struct ApprovalWait {
    span: Span,
    rec: Recorder,
    timing: Option<(Instant, String)>,
}

impl Recorder {
    /// Starts an approval span.
    pub fn approval_wait(&self, s: ApprovalStart<'_>) -> ApprovalWait {
        let span = new_span!(
            s.parent,
            "approval",
            otel.name = %Named("approval", s.tool),
            otel.kind = "internal",
            gen_ai.tool.name = s.tool,
            gen_ai.tool.call.id = s.call_id,
            keel.permission.level = s.level,
            keel.permission.decision = Empty,
        );
        let timing = self
            .instruments()
            .map(|_| (Instant::now(), s.tool.to_owned()));
        ApprovalWait {
            span,
            rec: self.clone(),
            timing,
        }
    }
}

impl ApprovalWait {
    /// The span.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Records the answer: an approval decision (`allow_once`, `allow_session`,
    /// `allow_always_project`, `allow_always_global`, `deny`), or `expired` or
    /// `cancelled` when none came.
    pub fn finish(self, decision: &str) {
        self.span.record(sc::KEEL_PERMISSION_DECISION, decision);
        let (Some(m), Some((start, tool))) = (self.rec.instruments(), &self.timing) else {
            return;
        };
        let attrs = [
            kv(sc::GEN_AI_TOOL_NAME, tool),
            kv(sc::KEEL_PERMISSION_DECISION, decision),
        ];
        m.approvals.add(1, &attrs);
        m.approval_wait
            .record(start.elapsed().as_secs_f64(), &attrs);
    }
}

/// What a hook run is.
#[derive(Debug, Clone, Copy, Default)]
pub struct HookStart<'a> {
    /// `keel.hook.point`.
    pub point: &'a str,
    /// `gen_ai.tool.name`, for the tool hooks.
    pub tool: Option<&'a str>,
    /// Where the span hangs.
    pub parent: Parent<'a>,
}

/// A hook's run.
#[derive(Debug)]
#[must_use = "a hook run records its end with finish()"]
pub struct HookRun {
    span: Span,
    rec: Recorder,
    point: Option<String>,
}

impl Recorder {
    /// Starts a hook span.
    pub fn hook_run(&self, s: HookStart<'_>) -> HookRun {
        let span = new_span!(
            s.parent,
            "hook",
            otel.name = %Named("hook", s.point),
            otel.kind = "internal",
            otel.status_code = Empty,
            keel.hook.point = s.point,
            gen_ai.tool.name = s.tool,
            keel.hook.outcome = Empty,
            keel.hook.exit_code = Empty,
            error.type = Empty,
        );
        HookRun {
            span,
            rec: self.clone(),
            point: self.instruments().map(|_| s.point.to_owned()),
        }
    }
}

impl HookRun {
    /// The span.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Records the end: `ok`, `block` (the hook refused), `error` or `timeout`, and
    /// the exit code when the command exited.
    pub fn finish(self, outcome: &str, exit_code: Option<i32>) {
        self.span.record(sc::KEEL_HOOK_OUTCOME, outcome);
        if let Some(c) = exit_code {
            self.span.record(sc::KEEL_HOOK_EXIT_CODE, i64::from(c));
        }
        if matches!(outcome, "error" | "timeout") {
            fail(&self.span, outcome);
        }
        if let (Some(m), Some(point)) = (self.rec.instruments(), &self.point) {
            m.hook_runs.add(
                1,
                &[
                    kv(sc::KEEL_HOOK_POINT, point),
                    kv(sc::KEEL_HOOK_OUTCOME, outcome),
                ],
            );
        }
    }
}

/// What an MCP call is.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpStart<'a> {
    /// `keel.mcp.server`: the server's configured name.
    pub server: &'a str,
    /// `gen_ai.tool.name`: the server's own name of the tool.
    pub tool: &'a str,
    /// `gen_ai.tool.call.id`.
    pub call_id: Option<&'a str>,
    /// `network.transport`: `pipe` (stdio) or `tcp` (HTTP).
    pub transport: &'a str,
    /// Where the span hangs (the tool call's span).
    pub parent: Parent<'a>,
}

/// An MCP `tools/call` as the client sees it.
#[derive(Debug)]
#[must_use = "an MCP call records its end with finish()"]
pub struct McpCall {
    span: Span,
    rec: Recorder,
    timing: Option<(Instant, String, String)>,
}

impl Recorder {
    /// Starts an MCP client span.
    pub fn mcp_call(&self, s: McpStart<'_>) -> McpCall {
        let span = new_span!(
            s.parent,
            "mcp",
            otel.name = %Named(sc::MCP_TOOLS_CALL, s.tool),
            otel.kind = "client",
            otel.status_code = Empty,
            mcp.method.name = sc::MCP_TOOLS_CALL,
            gen_ai.operation.name = sc::OP_EXECUTE_TOOL,
            gen_ai.tool.name = s.tool,
            gen_ai.tool.call.id = s.call_id,
            keel.mcp.server = s.server,
            network.transport = s.transport,
            error.type = Empty,
            gen_ai.tool.call.arguments = Empty,
            gen_ai.tool.call.result = Empty,
        );
        let timing = self
            .instruments()
            .map(|_| (Instant::now(), s.tool.to_owned(), s.server.to_owned()));
        McpCall {
            span,
            rec: self.clone(),
            timing,
        }
    }
}

impl McpCall {
    /// The span.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The arguments (content, JSON).
    pub fn arguments(&self, json: impl FnOnce() -> String) {
        self.rec
            .content(&self.span, sc::GEN_AI_TOOL_CALL_ARGUMENTS, json);
    }

    /// The result (content).
    pub fn result(&self, text: impl FnOnce() -> String) {
        self.rec
            .content(&self.span, sc::GEN_AI_TOOL_CALL_RESULT, text);
    }

    /// Records the end; `error_type` is `tool_error` for a result with `isError`, the
    /// JSON-RPC error code, or Keel's reason (`closed`, `timeout`).
    pub fn finish(self, error_type: Option<&str>) {
        if let Some(e) = error_type {
            fail(&self.span, e);
        }
        let (Some(m), Some((start, tool, server))) = (self.rec.instruments(), &self.timing) else {
            return;
        };
        let mut attrs = vec![
            kv(sc::MCP_METHOD_NAME, sc::MCP_TOOLS_CALL),
            kv(sc::GEN_AI_TOOL_NAME, tool),
            kv(sc::KEEL_MCP_SERVER, server),
        ];
        if let Some(e) = error_type {
            attrs.push(kv(sc::ERROR_TYPE, e));
        }
        m.mcp_duration.record(start.elapsed().as_secs_f64(), &attrs);
    }
}
