//! The handler of an MCP tool's entry: reach the server (restarting it once if it
//! died), call the tool under the call's time limit and cancellation, and turn the
//! answer into a result or a structured error.

use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_mcp::CallError;
use serde_json::{json, Value};

use super::Server;
use crate::session::registry::CallCx;
use crate::session::registry::{Args, KernelHandler};

/// Calls one tool of one server.
#[derive(Debug)]
pub(crate) struct McpCall {
    pub(crate) server: Arc<Server>,
    /// The tool's name on the server.
    pub(crate) tool: String,
}

fn interrupted() -> ErrorPayload {
    ErrorPayload::new(ErrorCode::Interrupted, "interrupted before it finished")
}

#[async_trait]
impl KernelHandler for McpCall {
    /// The call is an MCP client span (`tools/call`) under the tool call's.
    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<Value, ErrorPayload> {
        let transport = match self.server.config.transport {
            keel_mcp::Transport::Stdio { .. } => "pipe",
            _ => "tcp",
        };
        let span = cx
            .session
            .services
            .telemetry()
            .mcp_call(keel_telemetry::McpStart {
                server: &self.server.config.name,
                tool: &self.tool,
                call_id: Some(&cx.call.id),
                transport,
                parent: keel_telemetry::Parent::Current,
            });
        span.arguments(|| cx.call.arguments.to_string());
        let r = tracing::Instrument::instrument(self.call(cx, args), span.span().clone()).await;
        match &r {
            Ok(v) => {
                span.result(|| v["message"].as_str().unwrap_or_default().to_owned());
                span.finish(None);
            }
            Err(e) => {
                let reason = match e.code {
                    ErrorCode::ToolTimeout => "timeout",
                    ErrorCode::Interrupted => "cancelled",
                    ErrorCode::ToolExecutionFailed => "tool_error",
                    _ => "closed",
                };
                span.finish(Some(reason));
            }
        }
        r
    }
}

impl McpCall {
    async fn call(&self, cx: &CallCx<'_>, _: Args) -> Result<Value, ErrorPayload> {
        let server = &self.server;
        let name = server.config.name.as_str();
        let Some(conn) = server.connection(cx.session, cx.cancel).await? else {
            return Err(interrupted());
        };
        let limit = server.call_timeout(cx.session);
        // Dropping the call (interrupt, time limit) sends MCP's cancellation.
        let call = conn.call(&self.tool, &cx.call.arguments);
        let answer = tokio::select! {
            biased;
            _ = cx.cancel.cancelled() => return Err(interrupted()),
            r = async {
                if limit.is_zero() {
                    Ok(call.await)
                } else {
                    tokio::time::timeout(limit, call).await
                }
            } => r,
        };
        let detail = |e: ErrorPayload| {
            e.with_detail("server", name.to_owned())
                .with_detail("tool", self.tool.clone())
        };
        let answer = answer.map(|r| {
            r.map(|mut out| {
                out.cap(keel_mcp::RESULT_CAP);
                out
            })
        });
        match answer {
            Err(_) => Err(detail(
                ErrorPayload::new(
                    ErrorCode::ToolTimeout,
                    format!(
                        "the MCP tool `{}` of `{name}` did not answer within {} s (its time limit); the call was cancelled",
                        self.tool,
                        limit.as_secs_f64()
                    ),
                )
                .with_detail("limitMs", limit.as_millis() as u64),
            )),
            Ok(Err(CallError::Closed(reason))) => {
                server.mark_failed(&reason);
                Err(detail(server.unavailable(&format!(
                    "{reason}; the next call restarts it once"
                ))))
            }
            Ok(Err(CallError::Failed(message))) => Err(detail(ErrorPayload::new(
                ErrorCode::ToolExecutionFailed,
                format!("the MCP tool `{}` failed: {message}", self.tool),
            ))),
            Ok(Err(CallError::Protocol { reason, message })) => Err(detail(
                ErrorPayload::new(
                    ErrorCode::ToolExecutionFailed,
                    format!("the MCP tool `{}` of `{name}`: {message}", self.tool),
                )
                .with_detail("reason", reason),
            )),
            Ok(Ok(out)) if out.is_error => Err(detail(ErrorPayload::new(
                ErrorCode::ToolExecutionFailed,
                out.text_for_model(),
            ))
            .with_detail("content", out.content_json())),
            Ok(Ok(out)) => {
                let mut result = json!({
                    "server": name,
                    "tool": self.tool,
                    "content": out.content_json(),
                    "message": out.text_for_model(),
                });
                if let Some(s) = out.structured {
                    result["structuredContent"] = s;
                }
                Ok(result)
            }
        }
    }
}
