//! The permission gate's verdict on one call ([`crate::pipeline::gate`] decides it
//! with `keel_tools::policy`), with the accessors the pipeline, the approval and the
//! handlers read.

use keel_envelope::tools::Decision;
use keel_envelope::types::{PermissionLevel, RiskLevel};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::policy::Verdict;

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
        self.0.verdict.decision.clone()
    }
    pub(crate) fn level(&self) -> PermissionLevel {
        self.0.verdict.level.clone()
    }
    pub(crate) fn risk(&self) -> RiskLevel {
        self.0.verdict.risk_level.clone()
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
        let code = self
            .0
            .deny_code
            .clone()
            .unwrap_or(ErrorCode::ToolPermissionDenied);
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
                serde_json::to_value(self.0.verdict.level.clone()).unwrap_or_default(),
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
