//! The analysis of one call: what it touches, its risk, its key, and the row of the
//! permission table applied to it.

use super::*;

/// Largest existing file read to show what `write_file` replaces: an approval dialog
/// shows a diff a person reads, and a larger file is named instead.
const PREVIEW_MAX_BYTES: u64 = 1024 * 1024;

pub(super) fn parse<T: serde::de::DeserializeOwned>(
    args: &serde_json::Value,
) -> Result<T, ErrorPayload> {
    let v = if args.is_null() {
        serde_json::Value::Object(Default::default())
    } else {
        args.clone()
    };
    serde_path_to_error::deserialize(v).map_err(|e| {
        ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("invalid arguments: {}", e.inner()),
        )
        .with_detail("field", e.path().to_string())
    })
}

pub(super) fn path_key(tool: &str, r: &ResolvedPath) -> String {
    format!("{tool}:{}", r.display)
}

pub(super) fn assess_read(
    tool: &str,
    action: &str,
    raw: &str,
    ws: &Path,
    roots: &Roots,
) -> Assessment {
    match jail::resolve_in(ws, roots, raw) {
        Err(e) => Assessment::denied(
            e.code,
            PermissionLevel::Read,
            e.message,
            action,
            format!("{tool}:{raw}"),
        ),
        Ok(r) if r.inside => {
            let (where_, scope) = match &r.extra {
                None => (
                    "inside the workspace".to_owned(),
                    "filesystem:workspace:read",
                ),
                Some(root) => (
                    format!("in the extra root `{}`", root.path.display()),
                    "filesystem:root:read",
                ),
            };
            let mut a = Assessment::new(
                PermissionLevel::Read,
                RiskLevel::Low,
                format!("reads `{}` {where_}", r.display),
                action,
                &[scope],
                path_key(tool, &r),
            );
            a.safe = true;
            a.plan_ok = true;
            a.target = Target::Path(r.display);
            a
        }
        Ok(r) => {
            let mut a = Assessment::new(
                PermissionLevel::Elevated,
                RiskLevel::High,
                format!(
                    "reads `{}`, outside the workspace{}; this needs an elevated approval",
                    r.display,
                    if roots.is_empty() {
                        ""
                    } else {
                        " and its extra roots"
                    }
                ),
                action,
                &["filesystem:outside:read"],
                path_key(tool, &r),
            );
            a.plan_ok = true;
            a.elevated = true;
            a.needs_rule_in_auto = true;
            a.target = Target::Outside;
            a
        }
    }
}

pub(super) fn write_target(
    tool: &str,
    raw: &str,
    ws: &Path,
    roots: &Roots,
) -> Result<ResolvedPath, Box<Assessment>> {
    match jail::resolve_in(ws, roots, raw) {
        Err(e) => Err(Box::new(Assessment::denied(e.code, PermissionLevel::Write, e.message, "file.write", format!("{tool}:{raw}")))),
        Ok(r) if !r.inside => Err(Box::new(Assessment::denied(
            ErrorCode::PathOutsideWorkspace,
            PermissionLevel::Write,
            format!(
                "`{raw}` resolves to `{}`, outside the workspace{}; writes outside the workspace are denied",
                r.display,
                if roots.is_empty() { "" } else { " and its extra roots" }
            ),
            "file.write",
            path_key(tool, &r),
        ))),
        Ok(r) if !r.writable() => Err(Box::new(Assessment::denied(
            ErrorCode::PathOutsideWorkspace,
            PermissionLevel::Write,
            format!(
                "`{raw}` is in the extra root `{}`, which the session may only read; writes there are denied",
                r.extra.as_ref().map(|x| x.path.display().to_string()).unwrap_or_default()
            ),
            "file.write",
            path_key(tool, &r),
        ))),
        Ok(r) if r.is_dir => Err(Box::new(Assessment::denied(ErrorCode::ToolArgumentsInvalid, PermissionLevel::Write, format!("`{raw}` is a directory"), "file.write", path_key(tool, &r)))),
        Ok(r) => Ok(r),
    }
}

/// Where a write lands, for the reason: the workspace or the extra root.
fn write_place(r: &ResolvedPath) -> String {
    match &r.extra {
        None => "inside the workspace".to_owned(),
        Some(root) => format!("in the extra root `{}`", root.path.display()),
    }
}

/// The scope of a write.
fn write_scope(r: &ResolvedPath) -> &'static str {
    if r.extra.is_some() {
        "filesystem:root:write"
    } else {
        "filesystem:workspace:write"
    }
}

pub(super) fn in_git_dir(rel: &str) -> bool {
    rel == ".git" || rel.starts_with(".git/") || rel.contains("/.git/")
}

pub(super) fn ctx_for(ws: &Path, roots: &Roots) -> crate::ToolContext {
    crate::ToolContext {
        workspace: ws.to_path_buf(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: std::sync::Arc::new(|_, _| {}),
        elevated: false,
        sandbox: crate::SandboxConfig::default(),
        roots: roots.clone(),
    }
}

pub(super) fn assess_edit(args: &EditFileArgs, ws: &Path, roots: &Roots) -> Assessment {
    let r = match write_target("edit_file", &args.path, ws, roots) {
        Ok(r) => r,
        Err(a) => return *a,
    };
    let mut a = Assessment::new(
        PermissionLevel::Write,
        RiskLevel::Medium,
        format!("edits `{}` {}", r.display, write_place(&r)),
        "file.edit",
        &[write_scope(&r)],
        path_key("edit_file", &r),
    );
    a.preview = match crate::fs::plan_edit(args, &ctx_for(ws, roots)) {
        Ok((_, old, new, _)) => crate::edit::unified_diff(&r.display, &old, &new).0,
        Err(e) => format!("(the edit cannot be applied: {})", e.message),
    };
    a.edit_like = !in_git_dir(&r.display);
    if in_git_dir(&r.display) {
        a.risk = RiskLevel::High;
        a.reason = format!("edits `{}` inside `.git`", r.display);
    }
    a.target = Target::Path(r.display);
    a
}

pub(super) fn assess_write(args: &WriteFileArgs, ws: &Path, roots: &Roots) -> Assessment {
    let r = match write_target("write_file", &args.path, ws, roots) {
        Ok(r) => r,
        Err(a) => return *a,
    };
    let mut a = if r.exists {
        let mut a = Assessment::new(
            PermissionLevel::Write,
            RiskLevel::High,
            format!("overwrites the existing file `{}`", r.display),
            "file.overwrite",
            &[write_scope(&r)],
            path_key("write_file", &r),
        );
        // The diff of what it replaces; a file too large (or unreadable) for one is
        // named instead of read whole.
        a.preview = match jail::read_regular(&r.abs, PREVIEW_MAX_BYTES) {
            Ok(b) => {
                let old = String::from_utf8_lossy(&b);
                crate::edit::unified_diff(&r.display, &old, &args.content).0
            }
            Err(e) => format!(
                "(no preview: the existing `{}` was not read: {e})",
                r.display
            ),
        };
        a
    } else {
        let mut a = Assessment::new(
            PermissionLevel::Write,
            RiskLevel::Medium,
            format!("creates `{}` {}", r.display, write_place(&r)),
            "file.write",
            &[write_scope(&r)],
            path_key("write_file", &r),
        );
        a.preview = crate::edit::unified_diff(&r.display, "", &args.content).0;
        a
    };
    a.edit_like = !in_git_dir(&r.display);
    if in_git_dir(&r.display) {
        a.risk = RiskLevel::High;
        a.reason = format!("writes `{}` inside `.git`", r.display);
    }
    a.target = Target::Path(r.display);
    a
}

pub(super) fn assess_shell(args: &RunShellArgs, ws: &Path, policy: &ShellPolicy) -> Assessment {
    let root = jail::canonical_root(ws);
    let (cwd_abs, cwd_rel) = match args.cwd.as_deref() {
        None | Some("") => (root.clone(), ".".to_owned()),
        Some(c) => match jail::resolve(ws, c) {
            Ok(r) if r.inside && r.is_dir => (r.abs, r.display),
            Ok(r) if r.inside => {
                return Assessment::denied(
                    ErrorCode::ToolArgumentsInvalid,
                    PermissionLevel::Execute,
                    format!("`cwd` `{c}` is not an existing directory"),
                    "shell.execute",
                    format!("run_shell:{}", args.command),
                );
            }
            Ok(r) => {
                return Assessment::denied(ErrorCode::PathOutsideWorkspace, PermissionLevel::Execute, format!("`cwd` `{c}` resolves to `{}`, outside the workspace; commands run inside the workspace only", r.display), "shell.execute", format!("run_shell:{}", args.command));
            }
            Err(e) => {
                return Assessment::denied(
                    e.code,
                    PermissionLevel::Execute,
                    e.message,
                    "shell.execute",
                    format!("run_shell:{}", args.command),
                )
            }
        },
    };
    if args.command.contains('\0') {
        return Assessment::denied(
            ErrorCode::ToolArgumentsInvalid,
            PermissionLevel::Execute,
            "the command contains a NUL byte",
            "shell.execute",
            "run_shell:".to_owned(),
        );
    }
    let an = shell::analyze(&args.command, &root, Some(&cwd_abs), policy);
    let key = if cwd_rel == "." {
        format!("run_shell:{}", an.canonical)
    } else {
        format!("run_shell:{}@{cwd_rel}", an.canonical)
    };
    let level = if an.elevated {
        PermissionLevel::Elevated
    } else {
        PermissionLevel::Execute
    };
    let mut scope = vec!["process:spawn", "filesystem:workspace"];
    if an.network {
        scope.push("network");
    }
    let mut a = Assessment::new(
        level,
        an.risk.clone(),
        an.reason.clone(),
        "shell.execute",
        &scope,
        key,
    );
    if an.destructive {
        a.hard_deny = Some(ErrorCode::ToolPermissionDenied);
        a.reason = format!("default-denied: {}", an.reason);
    }
    a.safe = an.safe;
    a.elevated = an.elevated;
    a.needs_rule_in_auto = an.elevated || an.needs_approval;
    a.preview = args.command.clone();
    a.command = Some(args.command.clone());
    if args.background == Some(true) {
        // A background command is rated and decided like the same command in the
        // foreground (same key, never milder); the reason says where it runs.
        a.reason = format!("{} (runs in the background)", a.reason);
    }
    a.target = Target::Shell(Box::new(an));
    a
}

pub(super) fn git_words(args: &GitArgs) -> Vec<String> {
    let mut w = vec![args.command.clone()];
    w.extend(args.args.clone().unwrap_or_default());
    w
}

pub(super) fn assess_git(args: &GitArgs) -> Assessment {
    let words = git_words(args);
    let canonical = words
        .iter()
        .map(|w| shell::quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    let key = format!("git:{canonical}");
    if let Err(e) = git::validate_subcommand(&args.command) {
        return Assessment::denied(
            ErrorCode::ToolArgumentsInvalid,
            PermissionLevel::Execute,
            e.message,
            "git.execute",
            key,
        );
    }
    let rest = args.args.clone().unwrap_or_default();
    let mut a = match git::classify(&args.command, &rest) {
        GitClass::ReadOnly => {
            let mut a = Assessment::new(
                PermissionLevel::Read,
                RiskLevel::Low,
                format!("`git {}` only reads the repository", args.command),
                "git.read",
                &["process:spawn", "git:read"],
                key,
            );
            a.safe = true;
            a.plan_ok = true;
            a
        }
        GitClass::Write { reason } => Assessment::new(
            PermissionLevel::Execute,
            RiskLevel::Medium,
            reason,
            "git.write",
            &["process:spawn", "git:write"],
            key,
        ),
        GitClass::High { reason } => Assessment::new(
            PermissionLevel::Execute,
            RiskLevel::High,
            reason,
            "git.write",
            &["process:spawn", "git:write"],
            key,
        ),
        GitClass::Elevated { reason, network } => {
            let scope: &[&str] = if network {
                &["process:spawn", "git:write", "network"]
            } else {
                &["process:spawn", "git:history"]
            };
            let mut a = Assessment::new(
                PermissionLevel::Elevated,
                RiskLevel::High,
                reason,
                if network {
                    "git.network"
                } else {
                    "git.history"
                },
                scope,
                key,
            );
            a.elevated = true;
            a.needs_rule_in_auto = true;
            a
        }
    };
    a.preview = format!("git {canonical}");
    a.command = Some(a.preview.clone());
    a.target = Target::Git(words);
    a
}

pub(super) fn assess_custom(spec: &ToolSpec, args: &serde_json::Value) -> Assessment {
    let key = format!(
        "{}:{}",
        spec.name,
        serde_json::to_string(args).unwrap_or_default()
    );
    let scope = format!("tool:{}", spec.name);
    Assessment::new(
        spec.level.clone(),
        spec.risk.clone(),
        format!(
            "runs the tool `{}` (level {})",
            spec.name,
            spec::level_str(&spec.level)
        ),
        &spec.action_type,
        &[scope.as_str()],
        key,
    )
}

/// The row of `tool`: the given spec, else the built-in or kernel row of that name,
/// else the row of an undeclared tool (execute level, always asks, refused in plan
/// mode).
pub(super) fn row_of(tool: &str, spec: Option<&ToolSpec>) -> ToolSpec {
    if let Some(s) = spec {
        return s.clone();
    }
    spec::builtin_spec(tool)
        .or_else(|| spec::kernel_specs().into_iter().find(|s| s.name == tool))
        .unwrap_or_else(|| {
            ToolSpec::custom(
                tool,
                "",
                serde_json::Value::Null,
                PermissionLevel::Execute,
                PlanBehavior::Denied,
                ApprovalRequirement::Always,
            )
        })
}

/// Applies the row to the analysis of one call: the row's level and risk are
/// floors, its plan behaviour and approval requirement decide unless they say
/// "depends" (`Partial` / `Depends`), in which case the analysis decides. An elevated
/// call always needs approval.
pub(super) fn apply_row(a: &mut Assessment, row: &ToolSpec) {
    if a.hard_deny.is_some() {
        return;
    }
    if row.level > a.level {
        a.level = row.level.clone();
    }
    if a.level == PermissionLevel::Elevated {
        a.elevated = true;
        a.needs_rule_in_auto = true;
    }
    if row.risk > a.risk {
        a.risk = row.risk.clone();
    }
    match row.plan {
        PlanBehavior::Allowed => a.plan_ok = true,
        PlanBehavior::Denied => a.plan_ok = false,
        PlanBehavior::Partial => {}
    }
    match row.approval {
        ApprovalRequirement::Never => a.safe = true,
        ApprovalRequirement::Always => a.safe = false,
        ApprovalRequirement::Depends => {}
    }
    if a.elevated {
        a.safe = false;
    }
}

/// The action type an analysis reports when it has nothing more specific to say; it
/// stands for the row's own action type.
pub(super) fn generic_action(analysis: Analysis) -> &'static str {
    match analysis {
        Analysis::None => "tool.execute",
        Analysis::ReadPath => "file.read",
        Analysis::ListPath => "directory.list",
        Analysis::SearchPath => "file.search",
        Analysis::Edit => "file.edit",
        Analysis::Write => "file.write",
        Analysis::Shell => "shell.execute",
        Analysis::Git => "git.execute",
    }
}

/// The analysis of one call, named by its row, then the row applied to it.
pub(super) fn assess(input: &DecisionInput<'_>, spec: Option<&ToolSpec>) -> Assessment {
    let row = row_of(input.tool, spec);
    let a = analyse(input, &row);
    refine(a, &row)
}

/// [`assess`] for arguments already decoded.
pub(super) fn assess_decoded(
    input: &DecisionInput<'_>,
    args: &ToolArgs,
    spec: Option<&ToolSpec>,
) -> Assessment {
    let row = row_of(input.tool, spec);
    let a = if args.analysis() == row.analysis {
        analyse_decoded(input, &row, args)
    } else {
        let tool = row.name.as_str();
        Assessment::denied(
            ErrorCode::ToolArgumentsInvalid,
            row.level.clone(),
            format!("{tool}: the arguments were decoded for another kind of tool"),
            &row.action_type,
            format!("{tool}:invalid"),
        )
    };
    refine(a, &row)
}

/// The row applied to an analysis.
fn refine(mut a: Assessment, row: &ToolSpec) -> Assessment {
    // The analysis may refine the action (`git.read`, `file.overwrite`); otherwise
    // the row's action stands.
    if a.action_type == generic_action(row.analysis) {
        a.action_type = row.action_type.clone();
    }
    apply_row(&mut a, row);
    a
}

/// Decodes the JSON arguments (`null` as `{}`) into the row's shape and analyses
/// them; arguments that do not fit are default-denied.
pub(super) fn analyse(input: &DecisionInput<'_>, row: &ToolSpec) -> Assessment {
    let decoded = match row.analysis {
        Analysis::None => Ok(ToolArgs::Untyped),
        Analysis::ReadPath => parse(input.args).map(ToolArgs::ReadFile),
        Analysis::ListPath => parse(input.args).map(ToolArgs::ListDir),
        Analysis::SearchPath => parse(input.args).map(ToolArgs::SearchFiles),
        Analysis::Edit => parse(input.args).map(ToolArgs::EditFile),
        Analysis::Write => parse(input.args).map(ToolArgs::WriteFile),
        Analysis::Shell => parse(input.args).map(ToolArgs::RunShell),
        Analysis::Git => parse(input.args).map(ToolArgs::Git),
    };
    match decoded {
        Ok(args) => analyse_decoded(input, row, &args),
        Err(e) => {
            let tool = row.name.as_str();
            Assessment::denied(
                ErrorCode::ToolArgumentsInvalid,
                row.level.clone(),
                format!("{tool}: {}", e.message),
                &row.action_type,
                format!("{tool}:invalid"),
            )
        }
    }
}

/// What the decoded arguments of a call touch, by the row's analysis.
fn analyse_decoded(input: &DecisionInput<'_>, row: &ToolSpec, args: &ToolArgs) -> Assessment {
    let ws = input.workspace.as_path();
    let roots = &input.roots;
    let tool = row.name.as_str();
    let action = row.action_type.as_str();
    match args {
        ToolArgs::Untyped => assess_custom(row, input.args),
        ToolArgs::ReadFile(a) => assess_read(tool, action, &a.path, ws, roots),
        ToolArgs::ListDir(a) => assess_read(tool, action, &a.path, ws, roots),
        ToolArgs::SearchFiles(a) => {
            assess_read(tool, action, a.path.as_deref().unwrap_or("."), ws, roots)
        }
        ToolArgs::EditFile(a) => assess_edit(a, ws, roots),
        ToolArgs::WriteFile(a) => assess_write(a, ws, roots),
        ToolArgs::RunShell(a) => assess_shell(a, ws, input.shell),
        ToolArgs::Git(a) => assess_git(a),
    }
}
