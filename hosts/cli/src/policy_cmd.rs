//! `keel policy check <tool> '<json-args>' --workspace DIR [--mode MODE]`: prints the
//! permission gate's verdict on one call as one JSON object.

use std::path::PathBuf;

use keel_envelope::types::PermissionMode;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::policy::{decide, DecisionInput, Rules, ShellPolicy};

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

/// Parses `<tool> '<json-args>' --workspace DIR [--mode MODE]`.
pub fn parse_call(args: &[String], allow_mode: bool) -> Result<CallArgs, ErrorPayload> {
    let mut positional = Vec::new();
    let mut workspace = None;
    let mut mode = PermissionMode::Ask;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let value = |i: usize| {
            args.get(i + 1)
                .cloned()
                .ok_or_else(|| bad(format!("`{a}` needs a value")))
        };
        match a {
            "--workspace" | "-w" => {
                workspace = Some(value(i)?);
                i += 2;
            }
            "--mode" if allow_mode => {
                let m = value(i)?;
                mode = PermissionMode::parse(&m).ok_or_else(|| {
                    bad(format!(
                        "unknown mode `{m}`; use ask, auto-edit, auto or plan"
                    ))
                    .with_detail("field", "mode")
                })?;
                i += 2;
            }
            s if s.starts_with("--workspace=") => {
                workspace = Some(s["--workspace=".len()..].to_owned());
                i += 1;
            }
            s if allow_mode && s.starts_with("--mode=") => {
                let m = &s["--mode=".len()..];
                mode = PermissionMode::parse(m).ok_or_else(|| {
                    bad(format!(
                        "unknown mode `{m}`; use ask, auto-edit, auto or plan"
                    ))
                    .with_detail("field", "mode")
                })?;
                i += 1;
            }
            s if s.starts_with("--") => return Err(bad(format!("unknown option `{s}`"))),
            _ => {
                positional.push(args[i].clone());
                i += 1;
            }
        }
    }
    let [tool, json] = positional.as_slice() else {
        return Err(bad(format!(
            "expected <tool> '<json-args>', got {} arguments",
            positional.len()
        )));
    };
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
    let workspace = std::fs::canonicalize(&ws).map_err(|e| {
        bad(format!("workspace `{ws}` cannot be used: {e}")).with_detail("field", "workspace")
    })?;
    if !workspace.is_dir() {
        return Err(
            bad(format!("workspace `{ws}` is not a directory")).with_detail("field", "workspace")
        );
    }
    Ok(CallArgs {
        tool: tool.clone(),
        args,
        workspace,
        mode,
    })
}

/// Runs `keel policy …`; returns the exit code.
pub fn run(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        Some("check") => {}
        other => {
            return fail(bad(format!("unknown policy subcommand {other:?}; usage: keel policy check <tool> '<json-args>' --workspace DIR [--mode ask|auto-edit|auto|plan]")), 2);
        }
    }
    let call = match parse_call(&args[1..], true) {
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
