//! `keel policy check <tool> '<json-args>' --workspace DIR [--mode MODE]`: prints the
//! permission gate's verdict on one call as one JSON object.

use std::path::PathBuf;

use keel_envelope::types::PermissionMode;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::policy::{decide, DecisionInput, Rules, ShellPolicy};

use crate::cli::{self, PolicyArgs, PolicyCommand};

/// Parsed command line shared by `keel policy check` and `keel tool`.
#[derive(Debug)]
pub struct CallArgs {
    /// The tool name.
    pub tool: String,
    /// The arguments.
    pub args: serde_json::Value,
    /// The canonical workspace.
    pub workspace: PathBuf,
    /// The mode.
    pub mode: PermissionMode,
}

/// Prints `{ok: false, error}` on stdout and returns exit code 2.
pub fn fail(error: ErrorPayload, code: i32) -> i32 {
    println!("{}", serde_json::json!({ "ok": false, "error": error }));
    code
}

fn bad(message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message)
}

/// Checks a tool call given on the command line: a known tool, arguments that are
/// one JSON object, and a workspace directory.
pub fn parse_call(
    call: &cli::CallArgs,
    mode: Option<PermissionMode>,
) -> Result<CallArgs, ErrorPayload> {
    let tool = &call.tool;
    let json = &call.args;
    let mode = mode.unwrap_or(PermissionMode::Ask);
    let workspace = call.workspace.workspace.clone();
    let known = keel_tools::spec::builtin_specs()
        .iter()
        .any(|s| &s.name == tool);
    if !known {
        return Err(ErrorPayload::new(
            ErrorCode::ToolNotRegistered,
            format!("unknown tool `{tool}`"),
        )
        .with_detail("tool", tool.clone()));
    }
    let args: serde_json::Value = serde_json::from_str(json).map_err(|e| {
        bad(format!("the arguments are not valid JSON: {e}")).with_detail("field", "args")
    })?;
    if !args.is_object() {
        return Err(bad("the arguments must be a JSON object").with_detail("field", "args"));
    }
    let Some(ws) = workspace else {
        return Err(bad("`--workspace DIR` is required").with_detail("field", "workspace"));
    };
    let shown = ws.display();
    let workspace = std::fs::canonicalize(&ws).map_err(|e| {
        bad(format!("workspace `{shown}` cannot be used: {e}")).with_detail("field", "workspace")
    })?;
    if !workspace.is_dir() {
        return Err(bad(format!("workspace `{shown}` is not a directory"))
            .with_detail("field", "workspace"));
    }
    Ok(CallArgs {
        tool: tool.clone(),
        args,
        workspace,
        mode,
    })
}

/// Prints a command-line error of `keel policy` or `keel tool` as
/// `{ok: false, error}` on stdout; returns exit code 2.
pub fn usage_error(e: &clap::Error) -> i32 {
    let rendered = e.render().to_string();
    // The first paragraph of clap's message, on one line.
    let message = rendered
        .trim_start()
        .split("\n\n")
        .next()
        .unwrap_or("bad usage")
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    let message = message.trim_start_matches("error: ").to_owned();
    let mut error = bad(message).with_detail("usage", rendered.trim().to_owned());
    let arg = match e.get(clap::error::ContextKind::InvalidArg) {
        Some(clap::error::ContextValue::String(a)) => Some(a.clone()),
        Some(clap::error::ContextValue::Strings(a)) => a.first().cloned(),
        _ => None,
    };
    if let Some(arg) = arg {
        let field = arg
            .trim_start_matches('-')
            .split([' ', '=', '<'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase()
            .replace('-', "_");
        if !field.is_empty() {
            error = error.with_detail("field", field);
        }
    }
    fail(error, 2)
}

/// Runs `keel policy …`; returns the exit code.
pub fn run(args: PolicyArgs) -> i32 {
    let PolicyCommand::Check { call, mode } = args.command;
    let call = match parse_call(&call, mode.mode) {
        Ok(c) => c,
        Err(e) => return fail(e, 2),
    };
    let rules = Rules::default();
    let shell = ShellPolicy::default();
    let v = decide(&DecisionInput {
        tool: &call.tool,
        args: &call.args,
        mode: call.mode,
        rules: &rules,
        workspace: &call.workspace,
        roots: keel_tools::jail::Roots::none(),
        shell: &shell,
    });
    match serde_json::to_string(&v.verdict) {
        Ok(s) => {
            println!("{s}");
            0
        }
        Err(e) => fail(
            ErrorPayload::new(ErrorCode::RuntimeInternalError, e.to_string()),
            2,
        ),
    }
}
