//! The permission gate: the session's mode and rules applied to one call.
//!
//! Built-in tools are decided by `keel_tools::policy::decide` (the permission
//! matrix). Tools registered by a host are decided from their [`ToolSpec`] row with
//! the same precedence: plan mode > deny rules > auto mode > allow rules > ask.

use keel_envelope::tools::{Decision, PolicyVerdict};
use keel_envelope::types::{PermissionLevel, PermissionMode, RiskLevel};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::policy::{self, DecisionInput, Rules, Verdict};
use keel_tools::{PlanBehavior, ToolSpec};

use crate::session::{Data, Session};

/// The names of the built-in tools (decided by the permission matrix).
pub(crate) const BUILTIN: [&str; 7] = [
    "read_file",
    "list_dir",
    "search_files",
    "edit_file",
    "write_file",
    "run_shell",
    "git",
];

/// A verdict with the accessors the loop needs.
#[derive(Debug, Clone)]
pub(crate) struct GateVerdict(pub(crate) Verdict);

impl std::ops::Deref for GateVerdict {
    type Target = Verdict;
    fn deref(&self) -> &Verdict {
        &self.0
    }
}

impl GateVerdict {
    pub(crate) fn decision(&self) -> Decision {
        self.0.verdict.decision
    }
    pub(crate) fn level(&self) -> PermissionLevel {
        self.0.verdict.level
    }
    pub(crate) fn risk(&self) -> RiskLevel {
        self.0.verdict.risk_level
    }
    pub(crate) fn reason(&self) -> String {
        self.0.verdict.reason.clone()
    }
    pub(crate) fn action_type(&self) -> String {
        self.0.verdict.action_type.clone()
    }
    pub(crate) fn scope(&self) -> Vec<String> {
        self.0.verdict.scope.clone()
    }
    pub(crate) fn preview(&self) -> String {
        self.0.preview.clone()
    }
    pub(crate) fn command(&self) -> Option<String> {
        self.0.command.clone()
    }
    pub(crate) fn elevated(&self) -> bool {
        self.0.elevated
    }

    /// The error reported when the gate denies.
    pub(crate) fn deny_error(&self, tool: &str) -> ErrorPayload {
        let code = self.0.deny_code.unwrap_or(ErrorCode::ToolPermissionDenied);
        let mut message = self.0.verdict.reason.clone();
        if code == ErrorCode::PlanApprovalRequired {
            message.push_str(
                " The session is in plan mode: only read tools run. Propose a plan with propose_plan and wait for its approval.",
            );
        }
        ErrorPayload::new(code, message)
            .with_detail("toolName", tool)
            .with_detail(
                "level",
                serde_json::to_value(self.0.verdict.level).unwrap_or_default(),
            )
    }

    /// The always-allow rule that an `allow_always_*` approval records.
    pub(crate) fn rule(&self, tool: &str) -> String {
        match &self.0.command {
            Some(cmd) => format!("{tool}({cmd})"),
            None => tool.to_owned(),
        }
    }
}

pub(crate) fn rules_of(d: &Data) -> Rules {
    let mut allow = d.state.rules.always_allow_global.clone();
    allow.extend(d.state.rules.always_allow_project.iter().cloned());
    Rules {
        allow,
        deny: Vec::new(),
        session_keys: d.state.session_keys.iter().cloned().collect(),
    }
}

/// Decides one call with the session's current mode and rules.
pub(crate) fn decide(
    session: &Session,
    d: &Data,
    spec: &ToolSpec,
    args: &serde_json::Value,
) -> GateVerdict {
    let rules = rules_of(d);
    if BUILTIN.contains(&spec.name.as_str()) {
        let input = DecisionInput {
            tool: &spec.name,
            args,
            mode: d.state.mode,
            rules: &rules,
            workspace: &session.workspace,
            shell: &session.kernel.config.shell,
        };
        return GateVerdict(policy::decide(&input));
    }
    GateVerdict(decide_custom(spec, args, d.state.mode, &rules))
}

/// The decision for a host-registered tool, from its matrix row.
pub fn decide_custom(
    spec: &ToolSpec,
    args: &serde_json::Value,
    mode: PermissionMode,
    rules: &Rules,
) -> Verdict {
    let key = format!("{}:{}", spec.name, args);
    let (decision, reason, deny_code) =
        if mode == PermissionMode::Plan && spec.plan != PlanBehavior::Allowed {
            (
                Decision::Deny,
                format!("{} is not allowed in plan mode.", spec.name),
                Some(ErrorCode::PlanApprovalRequired),
            )
        } else if rules.deny.iter().any(|r| r == &spec.name) {
            (
                Decision::Deny,
                format!("a rule denies {}", spec.name),
                Some(ErrorCode::ToolPermissionDenied),
            )
        } else if spec.level == PermissionLevel::Read {
            (Decision::Allow, format!("{} only reads", spec.name), None)
        } else if mode == PermissionMode::Auto {
            (Decision::Allow, "auto mode".to_owned(), None)
        } else if mode == PermissionMode::AutoEdit && spec.level == PermissionLevel::Write {
            (
                Decision::Allow,
                "auto-edit mode allows writes".to_owned(),
                None,
            )
        } else if rules.allow.iter().any(|r| r == &spec.name) || rules.session_keys.contains(&key) {
            (Decision::Allow, "allowed by a rule".to_owned(), None)
        } else {
            (
                Decision::Ask,
                format!("{} needs approval ({:?} level)", spec.name, spec.level),
                None,
            )
        };
    let risk = match spec.level {
        PermissionLevel::Read => RiskLevel::Low,
        PermissionLevel::Write => RiskLevel::Medium,
        PermissionLevel::Execute | PermissionLevel::Elevated => RiskLevel::High,
    };
    Verdict {
        verdict: PolicyVerdict {
            decision,
            level: spec.level,
            risk_level: risk,
            reason,
            action_type: format!("tool.{}", spec.name),
            scope: vec![format!("tool:{}", spec.name)],
        },
        key,
        deny_code,
        elevated: spec.level == PermissionLevel::Elevated,
        preview: serde_json::to_string_pretty(args).unwrap_or_default(),
        command: None,
    }
}
