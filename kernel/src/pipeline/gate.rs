//! The permission gate: the session's mode and rules applied to one call.
//!
//! Every call is decided by `keel_tools::policy` from the tool's row of the
//! permission matrix; this module only gathers the session's mode and rules.

use keel_envelope::tools::Decision;
use keel_envelope::types::{PermissionLevel, RiskLevel};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::policy::{self, DecisionInput, Rules, Verdict};
use keel_tools::ToolSpec;

use crate::session::{Data, Session};

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
    let mut deny = d.state.rules.always_deny_global.clone();
    deny.extend(d.state.rules.always_deny_project.iter().cloned());
    deny.extend(d.state.session_deny.iter().cloned());
    Rules {
        allow,
        deny,
        session_keys: d.state.session_keys.iter().cloned().collect(),
    }
}

/// Decides one call with the session's current mode and rules, from the tool's row
/// of the permission matrix (built-in or host-registered).
pub(crate) fn decide(
    session: &Session,
    d: &Data,
    spec: &ToolSpec,
    args: &serde_json::Value,
) -> GateVerdict {
    let rules = rules_of(d);
    let input = DecisionInput {
        tool: &spec.name,
        args,
        mode: d.state.mode,
        rules: &rules,
        workspace: &session.workspace,
        shell: &session.services.config().shell,
    };
    GateVerdict(policy::decide_with_spec(&input, Some(spec)))
}

/// Checks every rule of a `session.set_rules`: each must be `tool` or
/// `tool(pattern)`. A malformed rule refuses the whole command (`REQUEST_INVALID`,
/// naming the field), so a typo never leaves a deny rule silently unmatched.
pub(crate) fn check_rules(p: &keel_envelope::commands::SetRules) -> Result<(), ErrorPayload> {
    let lists: [(&str, &[String]); 5] = [
        ("alwaysAllowGlobal", &p.always_allow_global),
        ("alwaysAllowProject", &p.always_allow_project),
        ("alwaysDenyGlobal", &p.always_deny_global),
        ("alwaysDenyProject", &p.always_deny_project),
        ("deny", p.deny.as_deref().unwrap_or_default()),
    ];
    for (field, rules) in lists {
        for (i, rule) in rules.iter().enumerate() {
            if policy::Rule::parse(rule).is_none() {
                return Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!("{rule:?} is not a rule: write `tool` or `tool(pattern)`, e.g. run_shell(rm *)"),
                )
                .with_detail("field", format!("payload.{field}[{i}]")));
            }
        }
    }
    Ok(())
}
