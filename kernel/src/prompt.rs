//! The system prompt, the tool definitions offered to the model, and token estimates.

use std::sync::Arc;

use keel_envelope::types::PermissionMode;
use keel_tools::Tool;

use crate::model::{Message, ModelRequest, ToolDef};
use crate::session::Session;

/// The kernel's plan tool.
pub const PROPOSE_PLAN: &str = "propose_plan";
/// The kernel's plan-progress tool.
pub const UPDATE_PLAN: &str = "update_plan";
/// The kernel's question tool.
pub const ASK_USER: &str = "ask_user";
/// The kernel's task-graph tool.
pub const TASK_GRAPH: &str = "task_graph";
/// The kernel's sub-agent tool.
pub const SPAWN_SUB_AGENT: &str = "spawn_sub_agent";

const BASE: &str = "You are Keel, a coding agent working in a software project. Read before you change anything, \
make small exact edits, and verify your work by running the project's checks. Tool calls may need the user's \
approval; when a call is denied, do not retry it unchanged.";

/// Builds the system prompt for the session's current mode.
pub(crate) fn system_prompt(session: &Session, mode: PermissionMode) -> String {
    let mut s = String::from(BASE);
    s.push_str(&format!(
        "\n\nWorkspace root: {}\nPermission mode: {}\n",
        session.workspace.display(),
        mode.as_str()
    ));
    if mode == PermissionMode::Plan {
        s.push_str(
            "You are in plan mode: only read tools (read_file, list_dir, search_files, read-only git) run. \
Investigate, then call propose_plan with the steps and wait for approval before changing anything.\n",
        );
    }
    if let Some(extra) = &session.kernel.config.system_prompt {
        s.push('\n');
        s.push_str(extra);
        s.push('\n');
    }
    if let Ok(text) = std::fs::read_to_string(session.workspace.join("AGENTS.md")) {
        s.push_str("\n# Project instructions (AGENTS.md)\n");
        s.push_str(&text);
    }
    s
}

fn kernel_tool_defs() -> Vec<ToolDef> {
    let steps = serde_json::json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
            }
        }
    });
    let node = serde_json::json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "title": {"type": "string"},
            "description": {"type": "string"},
            "dependsOn": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["id", "title"]
    });
    vec![
        ToolDef {
            name: PROPOSE_PLAN.into(),
            description: "Propose a plan (ordered steps with id and title). In plan mode the user must approve it before any write or command runs.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"summary": {"type": "string"}, "steps": steps},
                "required": ["steps"]
            }),
        },
        ToolDef {
            name: UPDATE_PLAN.into(),
            description: "Update the status of plan steps (pending, in_progress, completed).".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"steps": steps},
                "required": ["steps"]
            }),
        },
        ToolDef {
            name: ASK_USER.into(),
            description: "Ask the user a question and wait for the answer; give candidate answers when you can.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "candidates": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["question"]
            }),
        },
        ToolDef {
            name: SPAWN_SUB_AGENT.into(),
            description: "Delegate a self-contained task to a sub-agent with its own conversation. It may use the given tools (a subset of yours; default all of your registered tools) under the same permissions, and returns only a summary of its work.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string"},
                    "tools": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["task"]
            }),
        },
        ToolDef {
            name: TASK_GRAPH.into(),
            description: "Plan multi-step work as a task graph (a DAG kept with the session). Actions: create {title?, description?, nodes: [{id, title, description?, dependsOn?}]}; add_node {node}; update_node {nodeId, updates: {status?, title?, result?, error?, metadata?}} with status pending|ready|running|completed|failed|skipped; advance (marks every node whose dependencies are completed or skipped as ready and returns them); state.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["create", "add_node", "update_node", "advance", "state"]},
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "nodes": {"type": "array", "items": node},
                    "node": node,
                    "nodeId": {"type": "string"},
                    "updates": {
                        "type": "object",
                        "properties": {
                            "status": {"type": "string", "enum": ["pending", "ready", "running", "completed", "failed", "skipped"]},
                            "title": {"type": "string"},
                            "result": {},
                            "error": {},
                            "metadata": {"type": "object"}
                        }
                    }
                },
                "required": ["action"]
            }),
        },
    ]
}

/// The tools offered to the model: registered tools, then the kernel's own.
pub(crate) fn tool_defs(tools: &[Arc<dyn Tool>]) -> Vec<ToolDef> {
    let mut defs: Vec<ToolDef> = tools
        .iter()
        .map(|t| {
            let s = t.spec();
            ToolDef {
                name: s.name.clone(),
                description: s.description.clone(),
                parameters: s.parameters.clone(),
            }
        })
        .collect();
    defs.extend(kernel_tool_defs());
    defs
}

fn message_chars(m: &Message) -> usize {
    match m {
        Message::User { text, .. } => text.len(),
        Message::Assistant { text, tool_calls } => {
            text.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        }
        Message::Tool { content, .. } => content.len(),
    }
}

/// Estimated tokens of a history (4 bytes per token).
pub(crate) fn estimate_history(history: &[Message]) -> u64 {
    (history.iter().map(message_chars).sum::<usize>() / 4) as u64
}

/// Estimated tokens of a request.
pub(crate) fn estimate_tokens(req: &ModelRequest) -> u64 {
    estimate_history(&req.messages) + (req.system.len() / 4) as u64
}

/// A plain-text transcript for summarisation.
pub(crate) fn transcript(history: &[Message]) -> String {
    let mut out = String::new();
    for m in history {
        match m {
            Message::User { text, .. } => out.push_str(&format!("USER: {text}\n")),
            Message::Assistant { text, tool_calls } => {
                if !text.is_empty() {
                    out.push_str(&format!("ASSISTANT: {text}\n"));
                }
                for c in tool_calls {
                    out.push_str(&format!("TOOL CALL {}: {}\n", c.name, c.arguments));
                }
            }
            Message::Tool { name, content, .. } => {
                let short: String = content.chars().take(2000).collect();
                out.push_str(&format!("TOOL RESULT {name}: {short}\n"));
            }
        }
    }
    out
}
