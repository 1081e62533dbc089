//! The system prompt, the kernel tools' names, and token estimates.

use std::path::Path;

use keel_envelope::types::PermissionMode;
use keel_envelope::{ErrorCode, ErrorPayload};

use crate::base::model::{Message, ModelRequest};

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

/// Builds the system prompt for the session's current mode, with the project's
/// instructions; the error says why `AGENTS.md` was left out.
/// `extra` is the configured text placed before the project's instructions.
pub(crate) fn system_prompt(
    workspace: &Path,
    extra: Option<&str>,
    mode: PermissionMode,
) -> (String, Option<ErrorPayload>) {
    let mut s = String::from(BASE);
    s.push_str(&format!(
        "\n\nWorkspace root: {}\nPermission mode: {}\n",
        workspace.display(),
        mode.as_str()
    ));
    if mode == PermissionMode::Plan {
        s.push_str(
            "You are in plan mode: only read tools (read_file, list_dir, search_files, read-only git) run. \
Investigate, then call propose_plan with the steps and wait for approval before changing anything.\n",
        );
    }
    if let Some(extra) = extra {
        s.push('\n');
        s.push_str(extra);
        s.push('\n');
    }
    match project_instructions(workspace) {
        Ok(Some(text)) => {
            s.push_str("\n# Project instructions (AGENTS.md)\n");
            s.push_str(&text);
            (s, None)
        }
        Ok(None) => (s, None),
        Err(e) => (s, Some(e)),
    }
}

/// Largest project-instructions file read into the prompt.
const INSTRUCTIONS_CAP: usize = 256 * 1024;

/// The workspace's `AGENTS.md`, read through the workspace jail like any tool read: a
/// symlink (at any depth) that leads out of the workspace, a special file, a file over
/// 256 KiB or one that is not UTF-8 is not read, and the error says why.
pub(crate) fn project_instructions(workspace: &Path) -> Result<Option<String>, ErrorPayload> {
    let r = keel_tools::jail::resolve(workspace, "AGENTS.md")?;
    if !r.exists {
        return Ok(None);
    }
    if !r.inside {
        return Err(ErrorPayload::new(
            ErrorCode::PathOutsideWorkspace,
            format!(
                "AGENTS.md leads outside the workspace (to `{}`); it was not read",
                r.display
            ),
        )
        .with_detail("path", "AGENTS.md"));
    }
    let unreadable = |why: String| {
        ErrorPayload::new(
            ErrorCode::ToolExecutionFailed,
            format!("AGENTS.md was not read: {why}"),
        )
        .with_detail("path", "AGENTS.md")
    };
    let bytes = keel_tools::jail::read_regular(&r.abs, INSTRUCTIONS_CAP as u64)
        .map_err(|e| unreadable(e.to_string()))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| unreadable("it is not UTF-8 text".into()))
}

/// Estimated tokens of a request (kept per message in the history, so this does not
/// grow with it).
pub(crate) fn estimate_tokens(req: &ModelRequest) -> u64 {
    req.messages.estimated_tokens() + (req.system.len() / 4) as u64
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

/// The current plan for the system prompt, so the model keeps it after compaction has
/// folded the messages that built it, and in a fork. Empty without a plan.
pub(crate) fn plan_section(plan: Option<&keel_envelope::types::Plan>) -> String {
    use keel_envelope::types::StepStatus;
    let Some(plan) = plan.filter(|p| !p.steps.is_empty()) else {
        return String::new();
    };
    let mut s = format!("\n# Current plan ({})\n", plan.plan_id);
    if let Some(summary) = &plan.summary {
        s.push_str(summary);
        s.push('\n');
    }
    for step in &plan.steps {
        let mark = match step.status {
            StepStatus::Pending => "[ ]",
            StepStatus::InProgress => "[>]",
            StepStatus::Completed => "[x]",
            _ => "[?]",
        };
        s.push_str(&format!("- {mark} {} ({})\n", step.title, step.id));
    }
    s.push_str("Keep it current with update_plan as steps move.\n");
    s
}
