//! The permission matrix (seed 002 §6.3, §6.5) as data.
//!
//! Every tool, built-in or not, is one [`ToolSpec`]: its row of the matrix (level,
//! plan-mode behaviour, approval requirement, action type, risk floor) plus the
//! per-call analysis the row names ([`Analysis`]). The gate (`policy`) reads the row;
//! it never decides by a tool's name.

use keel_envelope::types::{PermissionLevel, RiskLevel};

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

/// The per-call analysis a row names: what the gate looks at in the arguments
/// beyond the row itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Analysis {
    /// None: the row alone decides.
    None,
    /// `read_file {path}`: inside the workspace reads freely, outside needs an elevated
    /// approval.
    ReadPath,
    /// `list_dir {path}`: as [`Analysis::ReadPath`].
    ListPath,
    /// `search_files {path?}`: as [`Analysis::ReadPath`].
    SearchPath,
    /// `edit_file`: the path must be inside the workspace; `.git` raises the risk; the
    /// approval preview is the diff.
    Edit,
    /// `write_file`: as [`Analysis::Edit`]; overwriting raises the risk.
    Write,
    /// `run_shell`: the command is parsed; read-only commands need no approval,
    /// destructive ones are denied, network and outside paths are elevated.
    Shell,
    /// `git`: read-only sub-commands need no approval and run in plan mode; network
    /// and history rewrites are elevated.
    Git,
}

impl Analysis {
    /// The spelling used in `docs/permissions.md`.
    pub fn as_str(self) -> &'static str {
        match self {
            Analysis::None => "none",
            Analysis::ReadPath | Analysis::ListPath | Analysis::SearchPath => "path check",
            Analysis::Edit => "path check, diff preview",
            Analysis::Write => "path check, overwrite check, diff preview",
            Analysis::Shell => "shell parse and risk rating",
            Analysis::Git => "git sub-command class",
        }
    }
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
    /// The permission level (a floor: the analysis may raise it, e.g. to elevated).
    pub level: PermissionLevel,
    /// Plan-mode behaviour.
    pub plan: PlanBehavior,
    /// Approval requirement.
    pub approval: ApprovalRequirement,
    /// The action type reported in verdicts and approvals (`file.read`, …).
    pub action_type: String,
    /// The lowest risk a call is rated (the analysis may raise it).
    pub risk: RiskLevel,
    /// The per-call analysis the gate applies.
    pub analysis: Analysis,
}

impl PlanBehavior {
    /// The spelling used in `docs/permissions.md`.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanBehavior::Allowed => "allowed",
            PlanBehavior::Denied => "denied",
            PlanBehavior::Partial => "partial",
        }
    }
}

impl ApprovalRequirement {
    /// The spelling used in `docs/permissions.md`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalRequirement::Never => "never",
            ApprovalRequirement::Always => "always",
            ApprovalRequirement::Depends => "depends on the arguments",
        }
    }
}

/// The level's wire spelling.
pub fn level_str(level: &PermissionLevel) -> &str {
    level.as_str()
}

/// The risk a call of `level` is rated at least, when the row does not say.
pub fn default_risk(level: &PermissionLevel) -> RiskLevel {
    match level {
        PermissionLevel::Read => RiskLevel::Low,
        PermissionLevel::Write | PermissionLevel::Execute => RiskLevel::Medium,
        // Elevated, and a level this version does not know.
        _ => RiskLevel::High,
    }
}

impl ToolSpec {
    /// A spec for a host-registered tool: the same metadata built-in tools declare.
    /// The action type is `tool.execute`, the risk follows the level, and no analysis
    /// applies (the row alone decides); see the `with_*` methods to change them.
    pub fn custom(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: serde_json::Value,
        level: PermissionLevel,
        plan: PlanBehavior,
        approval: ApprovalRequirement,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            plan,
            approval,
            action_type: "tool.execute".to_owned(),
            risk: default_risk(&level),
            level,
            analysis: Analysis::None,
        }
    }

    /// Sets the action type.
    pub fn with_action_type(mut self, action_type: impl Into<String>) -> Self {
        self.action_type = action_type.into();
        self
    }

    /// Sets the risk floor.
    pub fn with_risk(mut self, risk: RiskLevel) -> Self {
        self.risk = risk;
        self
    }

    /// Sets the per-call analysis.
    pub fn with_analysis(mut self, analysis: Analysis) -> Self {
        self.analysis = analysis;
        self
    }
}

#[allow(clippy::too_many_arguments)]
fn row(
    name: &str,
    description: &str,
    parameters: serde_json::Value,
    level: PermissionLevel,
    plan: PlanBehavior,
    approval: ApprovalRequirement,
    action_type: &str,
    risk: RiskLevel,
    analysis: Analysis,
) -> ToolSpec {
    ToolSpec::custom(name, description, parameters, level, plan, approval)
        .with_action_type(action_type)
        .with_risk(risk)
        .with_analysis(analysis)
}

/// The seven built-in tools' rows (seed 002 §6.3 and §6.5), in matrix order.
pub fn builtin_specs() -> Vec<ToolSpec> {
    use keel_envelope::generate::args_schema;
    use keel_envelope::tools::*;
    vec![
        row(
            "read_file",
            "Read a text file in the workspace. `offset` (1-based first line) and `limit` (number of lines) select a range; large files are truncated with a marker giving the total line count. Binary files are refused.",
            args_schema::<ReadFileArgs>(),
            PermissionLevel::Read,
            PlanBehavior::Allowed,
            ApprovalRequirement::Never,
            "file.read",
            RiskLevel::Low,
            Analysis::ReadPath,
        ),
        row(
            "list_dir",
            "List a directory of the workspace to a bounded depth (default 2), respecting .gitignore and .ignore. Entries carry kind and size; long listings are truncated and say so.",
            args_schema::<ListDirArgs>(),
            PermissionLevel::Read,
            PlanBehavior::Allowed,
            ApprovalRequirement::Never,
            "directory.list",
            RiskLevel::Low,
            Analysis::ListPath,
        ),
        row(
            "search_files",
            "Search file contents (mode \"content\", literal by default, `regex: true` for a regular expression, smart case unless `caseSensitive`) or file names (mode \"name\", substring or glob). Respects .gitignore; results carry path, line and snippet and are bounded by `maxResults`.",
            args_schema::<SearchFilesArgs>(),
            PermissionLevel::Read,
            PlanBehavior::Allowed,
            ApprovalRequirement::Never,
            "file.search",
            RiskLevel::Low,
            Analysis::SearchPath,
        ),
        row(
            "edit_file",
            "Edit a workspace file by exact replacement: each `oldText` must match exactly once (or set `replaceAll`); all edits apply or none do; line endings are preserved. Returns a unified diff.",
            args_schema::<EditFileArgs>(),
            PermissionLevel::Write,
            PlanBehavior::Denied,
            ApprovalRequirement::Always,
            "file.edit",
            RiskLevel::Medium,
            Analysis::Edit,
        ),
        row(
            "write_file",
            "Create a workspace file, or overwrite one with the whole new content. Parent folders are created. Prefer edit_file for changes to existing files.",
            args_schema::<WriteFileArgs>(),
            PermissionLevel::Write,
            PlanBehavior::Denied,
            ApprovalRequirement::Always,
            "file.write",
            RiskLevel::Medium,
            Analysis::Write,
        ),
        row(
            "run_shell",
            "Run a shell command (`sh -c`) in the workspace, sandboxed where the OS allows. Returns {exitCode, stdout, stderr, timedOut, truncated, durationMs}. Read-only and whitelisted commands run without approval; others need approval.",
            args_schema::<RunShellArgs>(),
            PermissionLevel::Execute,
            PlanBehavior::Denied,
            ApprovalRequirement::Depends,
            "shell.execute",
            RiskLevel::Low,
            Analysis::Shell,
        ),
        row(
            "git",
            "Run a git subcommand (`command`, e.g. \"status\", \"diff\", \"log\", \"commit\") with `args`. Read-only subcommands run without approval; others need approval; network ones need elevated approval.",
            args_schema::<GitArgs>(),
            PermissionLevel::Execute,
            PlanBehavior::Partial,
            ApprovalRequirement::Depends,
            "git.execute",
            RiskLevel::Low,
            Analysis::Git,
        ),
    ]
}

/// The kernel's own tools' rows: plans, questions, the task graph and sub-agents.
/// They change only the session's own state (a sub-agent's calls each pass the gate
/// with their own rows), so they read at the `read` level, run in plan mode and need
/// no approval; a deny rule still stops them.
pub fn kernel_specs() -> Vec<ToolSpec> {
    use keel_envelope::generate::args_schema;
    use keel_envelope::kernel_tools::*;
    let row = |name: &str, description: &str, parameters, action: &str| {
        ToolSpec::custom(
            name,
            description,
            parameters,
            PermissionLevel::Read,
            PlanBehavior::Allowed,
            ApprovalRequirement::Never,
        )
        .with_action_type(action)
        .with_risk(RiskLevel::Low)
    };
    vec![
        row(
            "propose_plan",
            "Propose a plan (ordered steps with id and title). In plan mode the user must approve it before any write or command runs.",
            args_schema::<ProposePlanArgs>(),
            "plan.propose",
        ),
        row(
            "update_plan",
            "Update the status of plan steps (pending, in_progress, completed).",
            args_schema::<UpdatePlanArgs>(),
            "plan.update",
        ),
        row(
            "ask_user",
            "Ask the user a question and wait for the answer; give candidate answers when you can.",
            args_schema::<AskUserArgs>(),
            "user.ask",
        ),
        row(
            "spawn_sub_agent",
            "Delegate a self-contained task to a sub-agent with its own conversation. It may use the given tools (a subset of yours; default all of your registered tools) under the same permissions, and returns only a summary of its work. With isolation \"worktree\" it works in a git worktree of its own holding your files as they are, never touching yours; its changes come back as a patch (its id and stats in the result) that the user applies or rejects.",
            args_schema::<SpawnSubAgentArgs>(),
            "agent.spawn",
        ),
        row(
            "task_graph",
            "Plan multi-step work as a task graph (a DAG kept with the session). Actions: create {title?, description?, nodes: [{id, title, description?, dependsOn?}]}; add_node {node}; update_node {nodeId, updates: {status?, title?, result?, error?, metadata?}} with status pending|ready|running|completed|failed|skipped; advance (marks every node whose dependencies are completed or skipped as ready and returns them); state.",
            args_schema::<TaskGraphArgs>(),
            "task_graph.update",
        ),
        row(
            "activate_skill",
            "Activate one of the skills listed in the system prompt: returns its instructions and the list of its other files. With `file` (a path relative to the skill's folder), returns that file instead.",
            args_schema::<ActivateSkillArgs>(),
            "skill.activate",
        ),
    ]
}

/// A short remark on a built-in tool for the documentation table.
pub fn notes(name: &str) -> &'static str {
    match name {
        "read_file" => "text files; paths outside the workspace need an elevated approval",
        "list_dir" => "workspace only; bounded depth and entry count",
        "search_files" => "ripgrep's library crates, parallel walk",
        "edit_file" => "plan first, then approval; never outside the workspace",
        "write_file" => "workspace only; an overwrite is higher risk and previews the diff",
        "run_shell" => "whitelist and read-only commands run without asking outside plan mode; others ask; destructive ones are denied",
        "git" => "status/diff/log/show/branch listing are read-only and allowed in plan mode",
        "propose_plan" => "in plan mode, waits for the host's plan decision",
        "update_plan" => "moves step statuses of the current plan",
        "ask_user" => "waits for the host's answer (same time limit as approvals)",
        "spawn_sub_agent" => "each of the sub-agent's calls passes the gate with its own row",
        "task_graph" => "the session's task graph",
        "activate_skill" => "offered only to a session with skills; reads inside the skill's folder only",
        _ => "",
    }
}

/// One line of the matrix table in `docs/permissions.md`.
pub fn matrix_row(s: &ToolSpec, notes: &str) -> String {
    format!(
        "| `{}` | `{}` | {} | {} | `{}` | {} | {} | {} |\n",
        s.name,
        level_str(&s.level),
        s.plan.as_str(),
        s.approval.as_str(),
        s.action_type,
        risk_str(&s.risk),
        s.analysis.as_str(),
        notes
    )
}

/// The risk's wire spelling.
pub fn risk_str(risk: &RiskLevel) -> &str {
    risk.as_str()
}

/// Looks a built-in spec up by name.
pub fn builtin_spec(name: &str) -> Option<ToolSpec> {
    builtin_specs().into_iter().find(|s| s.name == name)
}

/// Renders `docs/permissions.md` from [`builtin_specs`] and the policy description.
pub fn permissions_markdown() -> String {
    let mut out = String::new();
    out.push_str("# Permissions\n\n");
    out.push_str("<!-- Generated from the keel-tools permission table. Do not edit by hand.\n     Regenerate: KEEL_UPDATE_GENERATED=1 cargo test -p keel-tools permissions_doc -->\n\n");
    out.push_str("Every tool declares its row of the permission matrix as data (`keel_tools::spec`). The kernel's permission gate, this page and the tests read the same table. Tools registered by a host declare the same metadata (`ToolSpec::custom`).\n\n");
    out.push_str("## Levels\n\n| level | meaning |\n|---|---|\n");
    out.push_str("| `read` | reads only: no file changes, no processes, no network |\n");
    out.push_str("| `write` | changes files in the workspace; runs no commands |\n");
    out.push_str("| `execute` | runs local commands or scripts |\n");
    out.push_str("| `elevated` | needs extra approval: leaves the sandbox, reaches the network, rewrites git history, touches paths outside the workspace |\n\n");
    out.push_str(
        "## The matrix\n\n| tool | level | plan mode | approval | action | risk floor | analysis | notes |\n|---|---|---|---|---|---|---|---|\n",
    );
    for s in builtin_specs() {
        out.push_str(&matrix_row(&s, notes(&s.name)));
    }
    out.push_str("\n### The kernel's own tools\n\nThey go through the same gate, approvals and events as every other tool.\n\n| tool | level | plan mode | approval | action | risk floor | analysis | notes |\n|---|---|---|---|---|---|---|---|\n");
    for s in kernel_specs() {
        out.push_str(&matrix_row(&s, notes(&s.name)));
    }
    out.push_str("\n### Descriptions\n\n");
    for s in builtin_specs().into_iter().chain(kernel_specs()) {
        out.push_str(&format!("- `{}`: {}\n", s.name, s.description));
    }
    out.push_str(crate::policy::POLICY_DOC);
    out.push_str(crate::sandbox::SANDBOX_DOC);
    out
}
