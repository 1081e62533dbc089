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
pub fn level_str(level: PermissionLevel) -> &'static str {
    match level {
        PermissionLevel::Read => "read",
        PermissionLevel::Write => "write",
        PermissionLevel::Execute => "execute",
        PermissionLevel::Elevated => "elevated",
    }
}

impl ToolSpec {
    /// A spec for a host-registered tool: the same metadata built-in tools declare.
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
            level,
            plan,
            approval,
        }
    }
}

/// The seven built-in tools' rows (seed 002 §6.3 and §6.5), in matrix order.
pub fn builtin_specs() -> Vec<ToolSpec> {
    use keel_envelope::generate::args_schema;
    use keel_envelope::tools::*;
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Read a text file in the workspace. `offset` (1-based first line) and `limit` (number of lines) select a range; large files are truncated with a marker giving the total line count. Binary files are refused.".into(),
            parameters: args_schema::<ReadFileArgs>(),
            level: PermissionLevel::Read,
            plan: PlanBehavior::Allowed,
            approval: ApprovalRequirement::Never,
        },
        ToolSpec {
            name: "list_dir".into(),
            description: "List a directory of the workspace to a bounded depth (default 2), respecting .gitignore and .ignore. Entries carry kind and size; long listings are truncated and say so.".into(),
            parameters: args_schema::<ListDirArgs>(),
            level: PermissionLevel::Read,
            plan: PlanBehavior::Allowed,
            approval: ApprovalRequirement::Never,
        },
        ToolSpec {
            name: "search_files".into(),
            description: "Search file contents (mode \"content\", literal by default, `regex: true` for a regular expression, smart case unless `caseSensitive`) or file names (mode \"name\", substring or glob). Respects .gitignore; results carry path, line and snippet and are bounded by `maxResults`.".into(),
            parameters: args_schema::<SearchFilesArgs>(),
            level: PermissionLevel::Read,
            plan: PlanBehavior::Allowed,
            approval: ApprovalRequirement::Never,
        },
        ToolSpec {
            name: "edit_file".into(),
            description: "Edit a workspace file by exact replacement: each `oldText` must match exactly once (or set `replaceAll`); all edits apply or none do; line endings are preserved. Returns a unified diff.".into(),
            parameters: args_schema::<EditFileArgs>(),
            level: PermissionLevel::Write,
            plan: PlanBehavior::Denied,
            approval: ApprovalRequirement::Always,
        },
        ToolSpec {
            name: "write_file".into(),
            description: "Create a workspace file, or overwrite one with the whole new content. Parent folders are created. Prefer edit_file for changes to existing files.".into(),
            parameters: args_schema::<WriteFileArgs>(),
            level: PermissionLevel::Write,
            plan: PlanBehavior::Denied,
            approval: ApprovalRequirement::Always,
        },
        ToolSpec {
            name: "run_shell".into(),
            description: "Run a shell command (`sh -c`) in the workspace, sandboxed where the OS allows. Returns {exitCode, stdout, stderr, timedOut, truncated, durationMs}. Read-only and whitelisted commands run without approval; others need approval.".into(),
            parameters: args_schema::<RunShellArgs>(),
            level: PermissionLevel::Execute,
            plan: PlanBehavior::Denied,
            approval: ApprovalRequirement::Depends,
        },
        ToolSpec {
            name: "git".into(),
            description: "Run a git subcommand (`command`, e.g. \"status\", \"diff\", \"log\", \"commit\") with `args`. Read-only subcommands run without approval; others need approval; network ones need elevated approval.".into(),
            parameters: args_schema::<GitArgs>(),
            level: PermissionLevel::Execute,
            plan: PlanBehavior::Partial,
            approval: ApprovalRequirement::Depends,
        },
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
        _ => "",
    }
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
        "## The matrix\n\n| tool | level | plan mode | approval | notes |\n|---|---|---|---|---|\n",
    );
    for s in builtin_specs() {
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {} |\n",
            s.name,
            level_str(s.level),
            s.plan.as_str(),
            s.approval.as_str(),
            notes(&s.name)
        ));
    }
    out.push_str("\n### Descriptions\n\n");
    for s in builtin_specs() {
        out.push_str(&format!("- `{}`: {}\n", s.name, s.description));
    }
    out.push_str(crate::policy::POLICY_DOC);
    out.push_str(crate::sandbox::SANDBOX_DOC);
    out
}
