//! A host with a tool of its own and an approval callback: the model (scripted) calls
//! the host's `count_words` tool, which is `execute`-level, so in `ask` mode the kernel
//! asks first (`approval.requested`); the host answers through the session handle.
//!
//! Run: `cargo run --example own_tool`

use std::sync::Arc;

use async_trait::async_trait;
use keel::models::ScriptedModel;
use keel::protocol::commands::SessionStart;
use keel::protocol::types::{ApprovalDecision, PermissionLevel, PermissionMode};
use keel::protocol::{ErrorCode, ErrorPayload, Event};
use keel::tools::{ApprovalRequirement, PlanBehavior, Tool, ToolContext, ToolSpec};
use serde_json::{json, Value};

/// Counts the words of a text.
#[derive(Debug)]
struct CountWords {
    spec: ToolSpec,
}

impl CountWords {
    fn new() -> Self {
        let schema = json!({
            "type": "object",
            "properties": { "text": { "type": "string" } },
            "required": ["text"]
        });
        Self {
            spec: ToolSpec::custom(
                "count_words",
                "Counts the words of a text.",
                schema,
                PermissionLevel::Execute,
                PlanBehavior::Denied,
                ApprovalRequirement::Always,
            ),
        }
    }
}

#[async_trait]
impl Tool for CountWords {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn run(&self, args: Value, _ctx: ToolContext) -> Result<Value, ErrorPayload> {
        let text = args.get("text").and_then(Value::as_str).ok_or_else(|| {
            ErrorPayload::new(ErrorCode::ToolArgumentsInvalid, "`text` must be a string")
        })?;
        Ok(json!({ "words": text.split_whitespace().count() }))
    }
}

/// The host's approval policy: a callback that sees each request for approval.
fn approve(tool: &str, arguments: &Value) -> ApprovalDecision {
    println!("approval asked for {tool} {arguments}: allowed once");
    ApprovalDecision::AllowOnce
}

/// Runs the example; returns the tool's result and the final answer.
pub async fn run() -> Result<(Value, String), ErrorPayload> {
    let workspace = tempfile::tempdir()
        .map_err(|e| ErrorPayload::new(ErrorCode::RuntimeInternalError, e.to_string()))?;
    let model = ScriptedModel::from_json(json!({
        "turns": [
            { "toolCalls": [{ "name": "count_words", "arguments": { "text": "one two three" } }] },
            { "text": "The text has three words." }
        ]
    }))?;
    let kernel = keel::Kernel::builder()
        .workspace(workspace.path())
        .model(Arc::new(model))
        .tool(Arc::new(CountWords::new()))
        .memory_store()
        .build()?;
    let start = SessionStart::new().permission_mode(PermissionMode::Ask);
    let (session, mut events) = kernel.start_session(start).await?;
    session.send("How many words in 'one two three'?").await?;
    let mut result = Value::Null;
    while let Some(env) = events.recv().await {
        match env.event {
            Event::ApprovalRequested(a) => {
                let decision = approve(&a.tool_name, &a.arguments);
                session.respond_approval(&a.approval_id, decision).await?;
            }
            Event::ToolCallCompleted(c) => {
                println!("{} returned {}", c.tool_name, c.result);
                result = c.result;
            }
            Event::SessionCompleted(done) => {
                kernel.shutdown("done").await;
                return Ok((result, done.final_text.unwrap_or_default()));
            }
            _ => {}
        }
    }
    Err(ErrorPayload::new(
        ErrorCode::RuntimeInternalError,
        "the stream ended",
    ))
}

#[tokio::main]
async fn main() {
    match run().await {
        Ok((_, answer)) => println!("answer: {answer}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
