//! The permission gate's pure decision (seed 002 §6.6).

use std::path::PathBuf;

use keel_envelope::tools::PolicyVerdict;
use keel_envelope::types::PermissionMode;
use keel_envelope::ErrorCode;

/// Rules in force for a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Always-allow rules (global and project, as synced by the host): a tool name
    /// (`edit_file`) or a tool with a pattern (`run_shell(npm run test:*)`).
    pub allow: Vec<String>,
    /// Deny rules (e.g. from an ACP `reject_always`), same syntax.
    pub deny: Vec<String>,
    /// Canonical keys approved with `allow_session`.
    pub session_keys: std::collections::BTreeSet<String>,
}

/// Shell whitelist and high-risk additions from configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellPolicy {
    /// Extra low-risk command patterns (`npm run test:*`).
    pub whitelist: Vec<String>,
    /// Extra high-risk program names or patterns.
    pub high_risk: Vec<String>,
}

/// Inputs of one decision.
#[derive(Debug, Clone)]
pub struct DecisionInput<'a> {
    /// The tool name.
    pub tool: &'a str,
    /// The arguments.
    pub args: &'a serde_json::Value,
    /// The session's mode.
    pub mode: PermissionMode,
    /// The rules.
    pub rules: &'a Rules,
    /// The workspace root (canonical).
    pub workspace: &'a PathBuf,
    /// Shell policy.
    pub shell: &'a ShellPolicy,
}

/// The gate's verdict plus what the kernel needs to act on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The public verdict (decision, level, risk, reason, actionType, scope).
    pub verdict: PolicyVerdict,
    /// The canonical key of this call for `allow_session` (same command with another
    /// env prefix or quoting, same file path → same key).
    pub key: String,
    /// For `deny`: the code to report (`TOOL_PERMISSION_DENIED`,
    /// `PLAN_APPROVAL_REQUIRED`, `PATH_OUTSIDE_WORKSPACE`, …).
    pub deny_code: Option<ErrorCode>,
    /// Whether running the call needs the elevated context (network, outside paths).
    pub elevated: bool,
    /// A preview for the approver: the command for shell and git, a diff for edits and
    /// writes, empty otherwise.
    pub preview: String,
    /// The shell command, for shell and git calls.
    pub command: Option<String>,
}

/// The decision (placeholder until the policy engine lands: reads allow, the rest asks).
pub fn decide(input: &DecisionInput<'_>) -> Verdict {
    use keel_envelope::tools::Decision;
    use keel_envelope::types::{PermissionLevel, RiskLevel};
    let read = matches!(input.tool, "read_file" | "list_dir" | "search_files");
    let plan_denied = input.mode == PermissionMode::Plan && !read;
    let decision = if read {
        Decision::Allow
    } else if plan_denied {
        Decision::Deny
    } else if input.mode == PermissionMode::Auto {
        Decision::Allow
    } else {
        Decision::Ask
    };
    let key = format!("{}:{}", input.tool, input.args);
    let decision = if decision == Decision::Ask && input.rules.session_keys.contains(&key) {
        Decision::Allow
    } else {
        decision
    };
    Verdict {
        verdict: PolicyVerdict {
            decision,
            level: if read {
                PermissionLevel::Read
            } else {
                PermissionLevel::Write
            },
            risk_level: if read {
                RiskLevel::Low
            } else {
                RiskLevel::Medium
            },
            reason: "placeholder policy".into(),
            action_type: format!("{}.call", input.tool),
            scope: vec![],
        },
        key,
        deny_code: plan_denied.then_some(ErrorCode::PlanApprovalRequired),
        elevated: false,
        preview: String::new(),
        command: None,
    }
}
