//! What several benches share: a model that asks for a burst of tool calls in its
//! first turn and then answers, and a tool that does nothing.

#![allow(dead_code)]

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream;
use keel_envelope::types::{PermissionLevel, Usage};
use keel_envelope::ErrorPayload;
use keel_kernel::model::{
    FinishReason, Message, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_tools::{ApprovalRequirement, PlanBehavior, Tool, ToolContext, ToolSpec};
use tokio_util::sync::CancellationToken;

/// Session options that take every default.
pub fn opts() -> keel_kernel::SessionOptions {
    keel_kernel::SessionOptions::default()
}

/// Asks for `calls` calls of `tool` with `args` in its first turn (the one that
/// answers a user message), reporting `usage`; answers "done" to anything else.
#[derive(Debug)]
pub struct Burst {
    pub calls: usize,
    pub tool: &'static str,
    pub args: serde_json::Value,
    pub usage: Usage,
}

impl Burst {
    /// `calls` calls of `tool` with `args`, and no token usage.
    pub fn new(calls: usize, tool: &'static str, args: serde_json::Value) -> Arc<Burst> {
        Arc::new(Burst {
            calls,
            tool,
            args,
            usage: Usage::default(),
        })
    }
}

impl Model for Burst {
    fn id(&self) -> String {
        "bench:burst".into()
    }
    fn context_window(&self) -> u64 {
        u64::MAX / 4
    }
    fn stream(&self, request: ModelRequest, _cancel: CancellationToken) -> ModelStream {
        let first = matches!(request.messages.last(), Some(Message::User { .. }));
        let mut items = Vec::new();
        if first {
            for i in 0..self.calls {
                items.push(Ok(ModelEvent::ToolCall(ToolCallRequest {
                    id: format!("c{i}"),
                    name: self.tool.into(),
                    arguments: self.args.clone(),
                })));
            }
            items.push(Ok(ModelEvent::Usage(self.usage)));
            items.push(Ok(ModelEvent::Finished(FinishReason::ToolUse)));
        } else {
            items.push(Ok(ModelEvent::TextDelta("done".into())));
            items.push(Ok(ModelEvent::Finished(FinishReason::EndTurn)));
        }
        Box::pin(stream::iter(items))
    }
}

/// A read-level tool named `noop` that answers `{"ok": true}`.
#[derive(Debug)]
pub struct Noop(ToolSpec);

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(
        &self,
        _args: serde_json::Value,
        _ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        Ok(serde_json::json!({"ok": true}))
    }
}

pub fn noop() -> Arc<Noop> {
    Arc::new(Noop(ToolSpec::custom(
        "noop",
        "does nothing",
        serde_json::json!({"type": "object"}),
        PermissionLevel::Read,
        PlanBehavior::Allowed,
        ApprovalRequirement::Never,
    )))
}
