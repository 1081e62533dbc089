//! The permission matrix (seed 002 §6.3, §6.5) as data.

use keel_envelope::types::PermissionLevel;

/// What a tool may do in plan mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanBehavior {
    /// Runs in plan mode.
    Allowed,
    /// Refused in plan mode (PLAN_APPROVAL_REQUIRED).
    Denied,
    /// Some calls run (e.g. read-only git), others are refused.
    Partial,
}

/// Whether a tool needs approval by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalRequirement {
    /// Never asks.
    Never,
    /// Always asks (unless a mode or rule allows it).
    Always,
    /// Depends on the arguments (e.g. read-only git does not ask).
    Depends,
}

/// One row of the permission matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The tool name.
    pub name: String,
    /// What it does (shown to the model).
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
    /// The default permission level.
    pub level: PermissionLevel,
    /// Plan-mode behaviour.
    pub plan: PlanBehavior,
    /// Approval requirement.
    pub approval: ApprovalRequirement,
}
