//! `keel tool <tool> '<json-args>' --workspace DIR`: runs one tool through the
//! permission gate in `ask` mode with nobody to approve, and prints
//! `{ok, result | error}`.

use std::sync::Arc;

use keel_envelope::tools::Decision;
use keel_envelope::types::PermissionMode;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::policy::{decide, DecisionInput, Rules, ShellPolicy};
use keel_tools::{SandboxConfig, ToolContext};

use crate::cli::ToolArgs;
use crate::policy_cmd::{fail, parse_call};

/// Runs `keel tool …`; returns the exit code (0 on success, 1 when the call was
/// refused or failed, 2 on bad input).
pub fn run(args: ToolArgs) -> i32 {
    let call = match parse_call(&args.call, None) {
        Ok(c) => c,
        Err(e) => return fail(e, 2),
    };
    let rules = Rules::default();
    let shell = ShellPolicy::default();
    let v = decide(&DecisionInput {
        tool: &call.tool,
        args: &call.args,
        mode: PermissionMode::Ask,
        rules: &rules,
        workspace: &call.workspace,
        roots: keel_tools::jail::Roots::none(),
        shell: &shell,
    });
    match &v.verdict.decision {
        Decision::Allow => {}
        Decision::Ask => {
            let e = ErrorPayload::new(
                ErrorCode::ToolPermissionDenied,
                format!(
                    "this call needs approval and nobody can approve here: {}",
                    v.verdict.reason
                ),
            )
            .with_detail("decision", "ask")
            .with_detail(
                "riskLevel",
                serde_json::to_value(&v.verdict.risk_level).unwrap_or_default(),
            )
            .with_detail("actionType", v.verdict.action_type.clone());
            return fail(e, 1);
        }
        // Deny (the gate decides no other value).
        _ => {
            let code = v
                .deny_code
                .clone()
                .unwrap_or(ErrorCode::ToolPermissionDenied);
            return fail(
                ErrorPayload::new(code, v.verdict.reason.clone()).with_detail("decision", "deny"),
                1,
            );
        }
    }
    let Some(tool) = keel_tools::builtin_tools()
        .into_iter()
        .find(|t| t.spec().name == call.tool)
    else {
        return fail(
            ErrorPayload::new(
                ErrorCode::ToolNotRegistered,
                format!("unknown tool `{}`", call.tool),
            ),
            2,
        );
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            return fail(
                ErrorPayload::new(
                    ErrorCode::RuntimeInternalError,
                    format!("cannot start the runtime: {e}"),
                ),
                1,
            )
        }
    };
    let ctx = ToolContext {
        workspace: call.workspace.clone(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated: v.elevated,
        sandbox: SandboxConfig::default(),
        roots: keel_tools::jail::Roots::none(),
    };
    let cancel = ctx.cancel.clone();
    let outcome = runtime.block_on(async move {
        tokio::select! {
            r = tool.run(call.args, ctx) => r,
            _ = tokio::signal::ctrl_c() => {
                cancel.cancel();
                Err(ErrorPayload::new(ErrorCode::Interrupted, "interrupted"))
            }
        }
    });
    match outcome {
        Ok(result) => {
            println!("{}", serde_json::json!({ "ok": true, "result": result }));
            0
        }
        Err(e) => fail(e, 1),
    }
}
