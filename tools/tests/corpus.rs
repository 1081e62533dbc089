//! Data-driven corpora: shell commands (`tests/data/shell/`) and path arguments
//! (`tests/data/paths/`). Each corpus is run by one check function that reports every
//! mismatch, not just the first.

use std::path::PathBuf;

use keel_envelope::tools::Decision;
use keel_envelope::types::{PermissionMode, RiskLevel};
use keel_envelope::ErrorCode;
use keel_tools::policy::{decide, DecisionInput, Rules, ShellPolicy, Verdict};
use serde_json::json;

#[path = "support/paths.rs"]
mod paths;
use paths::*;

fn decide_in(
    tool: &str,
    args: serde_json::Value,
    mode: PermissionMode,
    ws: &PathBuf,
    shell: &ShellPolicy,
) -> Verdict {
    let rules = Rules::default();
    decide(&DecisionInput {
        tool,
        args: &args,
        mode,
        rules: &rules,
        workspace: ws,
        roots: keel_tools::jail::Roots::none(),
        shell,
    })
}

fn risk_str(r: &RiskLevel) -> &str {
    r.as_str()
}

/// A workspace with `src/`, `build/`, `target/` and a sibling outside directory.
fn shell_workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    for d in ["src", "build", "target/debug", "empty"] {
        std::fs::create_dir_all(ws.join(d)).expect("mkdir");
    }
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").expect("write");
    let ws = std::fs::canonicalize(&ws).expect("canonical");
    (dir, ws)
}

fn decision_of(s: &str) -> Option<Decision> {
    match s {
        "allow" => Some(Decision::Allow),
        "ask" => Some(Decision::Ask),
        "deny" => Some(Decision::Deny),
        _ => None,
    }
}

/// Checks one row of the shell corpus (`ask auto-edit auto plan risk command`) against
/// the gate in every mode; returns every mismatch. With `background`, the call is
/// `run_shell {background: true}`, which must be rated and decided the same and say
/// so in its reason.
fn check_shell_row(
    line: usize,
    cols: &[String],
    ws: &PathBuf,
    policy: &ShellPolicy,
    background: bool,
) -> Result<RiskLevel, Vec<String>> {
    let [ask, auto_edit, auto, plan, risk, command] = cols else {
        return Err(vec![format!(
            "line {line}: expected 6 tab-separated columns, got {}",
            cols.len()
        )]);
    };
    let mut out = Vec::new();
    let want_risk = match risk.as_str() {
        "low" => RiskLevel::Low,
        "medium" => RiskLevel::Medium,
        "high" => RiskLevel::High,
        other => return Err(vec![format!("line {line}: unknown risk `{other}`")]),
    };
    // `\n` in the corpus stands for a newline (here-documents).
    let command = &command.replace("\\n", "\n");
    let args = if background {
        json!({ "command": command, "background": true })
    } else {
        json!({ "command": command })
    };
    let line = if background {
        format!("{line} (background)")
    } else {
        line.to_string()
    };
    let wants = [
        (PermissionMode::Ask, ask),
        (PermissionMode::AutoEdit, auto_edit),
        (PermissionMode::Auto, auto),
        (PermissionMode::Plan, plan),
    ];
    // Every mode has a column.
    assert_eq!(wants.len(), PermissionMode::ALL.len());
    let hard_denied = ask == "deny";
    for (mode, want) in wants {
        let Some(want) = decision_of(want) else {
            out.push(format!("line {line}: unknown decision `{want}`"));
            continue;
        };
        let v = decide_in("run_shell", args.clone(), mode.clone(), ws, policy);
        if v.verdict.decision != want {
            out.push(format!(
                "line {line}: `{command}` in {}: expected {}, got {} ({})",
                mode.as_str(),
                decision_str(&want),
                decision_str(&v.verdict.decision),
                v.verdict.reason
            ));
        }
        if v.verdict.risk_level != want_risk {
            out.push(format!(
                "line {line}: `{command}` in {}: expected risk {risk}, got {} ({})",
                mode.as_str(),
                risk_str(&v.verdict.risk_level),
                v.verdict.reason
            ));
        }
        if mode == PermissionMode::Plan && v.verdict.decision == Decision::Deny {
            let want_code = if hard_denied {
                ErrorCode::ToolPermissionDenied
            } else {
                ErrorCode::PlanApprovalRequired
            };
            if v.deny_code.as_ref() != Some(&want_code) {
                out.push(format!(
                    "line {line}: `{command}` in plan: expected code {want_code}, got {:?}",
                    v.deny_code
                ));
            }
        }
        if mode == PermissionMode::Ask {
            if v.verdict.action_type != "shell.execute" {
                out.push(format!(
                    "line {line}: `{command}`: action type {}",
                    v.verdict.action_type
                ));
            }
            if v.verdict.reason.is_empty() {
                out.push(format!("line {line}: `{command}`: empty reason"));
            }
            if background != v.verdict.reason.contains("(runs in the background)") {
                out.push(format!(
                    "line {line}: `{command}`: the reason does not say where it runs: {}",
                    v.verdict.reason
                ));
            }
            let network = v.verdict.scope.iter().any(|s| s == "network");
            if network && v.verdict.level != keel_envelope::types::PermissionLevel::Elevated {
                out.push(format!(
                    "line {line}: `{command}`: network scope without the elevated level"
                ));
            }
        }
    }
    if out.is_empty() {
        Ok(want_risk)
    } else {
        Err(out)
    }
}

#[test]
fn shell_corpus() {
    let text = data("shell/commands.tsv");
    let (_dir, ws) = shell_workspace();
    let policy = ShellPolicy::default();
    let mut mismatches = Vec::new();
    let (mut dangerous, mut harmless) = (0, 0);
    for (line, cols) in rows(&text) {
        // A background command is rated and decided like the same command in the
        // foreground.
        if let Err(e) = check_shell_row(line, &cols, &ws, &policy, true) {
            mismatches.extend(e);
        }
        match check_shell_row(line, &cols, &ws, &policy, false) {
            Ok(RiskLevel::High) => dangerous += 1,
            Ok(RiskLevel::Low) => harmless += 1,
            Ok(_) => {}
            Err(e) => mismatches.extend(e),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} shell corpus mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(
        dangerous >= 300,
        "the shell corpus needs at least 300 dangerous (high-risk) commands, has {dangerous}"
    );
    assert!(
        harmless >= 100,
        "the shell corpus needs at least 100 harmless (low-risk) commands, has {harmless}"
    );
}

#[test]
fn shell_keys_corpus() {
    let text = data("shell/keys.tsv");
    let (_dir, ws) = shell_workspace();
    let mut mismatches = Vec::new();
    for (line, cols) in rows(&text) {
        let [rel, a, b] = cols.as_slice() else {
            mismatches.push(format!("line {line}: expected 3 columns"));
            continue;
        };
        let ka = keel_tools::canonical_key("run_shell", &json!({ "command": a }), &ws);
        let kb = keel_tools::canonical_key("run_shell", &json!({ "command": b }), &ws);
        let same = ka == kb;
        let want_same = rel == "same";
        if same != want_same {
            mismatches.push(format!(
                "line {line}: `{a}` / `{b}`: expected {rel}, keys `{ka}` and `{kb}`"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} key mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn configured_shell_policy() {
    let (_dir, ws) = shell_workspace();
    let policy = ShellPolicy {
        whitelist: vec!["make test".into(), "just check*".into()],
        high_risk: vec!["terraform".into(), "npm run deploy*".into()],
    };
    let cases = [
        ("make test", "allow", "low"),
        ("make", "ask", "medium"),
        ("just check-all", "allow", "low"),
        ("terraform plan", "ask", "high"),
        ("npm run deploy:prod", "ask", "high"),
        ("make test && terraform apply", "ask", "high"),
        ("make test > out.txt", "ask", "medium"),
    ];
    let mut mismatches = Vec::new();
    for (cmd, want, risk) in cases {
        let v = decide_in(
            "run_shell",
            json!({ "command": cmd }),
            PermissionMode::Ask,
            &ws,
            &policy,
        );
        if decision_str(&v.verdict.decision) != want || risk_str(&v.verdict.risk_level) != risk {
            mismatches.push(format!(
                "`{cmd}`: expected {want}/{risk}, got {:?}/{:?} ({})",
                v.verdict.decision, v.verdict.risk_level, v.verdict.reason
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[tokio::test]
async fn path_corpus() {
    let text = data("paths/cases.tsv");
    let fx = path_fixture();
    let policy = ShellPolicy::default();
    let tools = keel_tools::builtin_tools();
    let read_file = tools
        .iter()
        .find(|t| t.spec().name == "read_file")
        .expect("read_file");
    let mut mismatches = Vec::new();
    let mut count = 0;
    for (line, cols) in rows(&text) {
        let (op, want, raw) = match cols.as_slice() {
            [op, want, raw] => (op.as_str(), want.as_str(), raw.as_str()),
            [op, want] => (op.as_str(), want.as_str(), ""),
            _ => {
                mismatches.push(format!("line {line}: expected 3 columns"));
                continue;
            }
        };
        count += 1;
        let path = raw
            .replace("{ws}", &fx.ws.to_string_lossy())
            .replace("{out}", &fx.out.to_string_lossy())
            .replace("\\0", "\0");
        let (tool, args) = match op {
            "read" => ("read_file", json!({ "path": path })),
            "write" => ("write_file", json!({ "path": path, "content": "x\n" })),
            other => {
                mismatches.push(format!("line {line}: unknown op {other}"));
                continue;
            }
        };
        let v = decide_in(tool, args.clone(), PermissionMode::Ask, &fx.ws, &policy);
        let got = match &v.verdict.decision {
            Decision::Deny => format!(
                "deny:{}",
                v.deny_code.as_ref().map(|c| c.as_str()).unwrap_or("?")
            ),
            d => decision_str(d).to_owned(),
        };
        if got != want {
            mismatches.push(format!(
                "line {line}: {op} `{raw}`: expected {want}, got {got} ({})",
                v.verdict.reason
            ));
        }
        if op == "read"
            && want == "ask"
            && (v.verdict.level != keel_envelope::types::PermissionLevel::Elevated
                || v.verdict.risk_level != RiskLevel::High
                || !v.elevated)
        {
            mismatches.push(format!(
                "line {line}: read `{raw}` outside must be elevated/high, got {:?}/{:?}",
                v.verdict.level, v.verdict.risk_level
            ));
        }
        if op == "write" && want == "ask" {
            let auto_edit = decide_in(
                tool,
                args.clone(),
                PermissionMode::AutoEdit,
                &fx.ws,
                &policy,
            );
            if auto_edit.verdict.decision != Decision::Allow {
                mismatches.push(format!(
                    "line {line}: write `{raw}` inside should be allowed in auto-edit"
                ));
            }
        }
        if op == "write" && want.starts_with("deny") {
            for mode in PermissionMode::ALL {
                let m = decide_in(tool, args.clone(), mode.clone(), &fx.ws, &policy);
                if m.verdict.decision != Decision::Deny {
                    mismatches.push(format!(
                        "line {line}: write `{raw}` must be denied in {} mode",
                        mode.as_str()
                    ));
                }
            }
        }
        // The tool itself enforces the jail too: without an elevated context, reads the
        // gate would not allow outright never succeed.
        if op == "read" && want != "allow" {
            match read_file.run(args, ctx(&fx.ws)).await {
                Ok(v) => mismatches.push(format!(
                    "line {line}: read_file `{raw}` succeeded without approval: {v}"
                )),
                Err(e)
                    if matches!(
                        e.code,
                        ErrorCode::PathOutsideWorkspace | ErrorCode::ToolArgumentsInvalid
                    ) => {}
                Err(e) => mismatches.push(format!(
                    "line {line}: read_file `{raw}` failed with {} instead of a jail error",
                    e.code
                )),
            }
        }
    }
    // No write through the corpus may have created anything outside.
    let outside: Vec<_> = std::fs::read_dir(&fx.out)
        .expect("read outside")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        outside.len(),
        1,
        "the outside directory changed: {outside:?}"
    );
    assert!(
        count >= 100,
        "the path corpus needs at least 100 cases, has {count}"
    );
    assert!(
        mismatches.is_empty(),
        "{} path corpus mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[tokio::test]
async fn writes_through_the_tool_follow_the_corpus() {
    // Every write the corpus denies is refused by write_file itself too.
    let text = data("paths/cases.tsv");
    let fx = path_fixture();
    let tools = keel_tools::builtin_tools();
    let write_file = tools
        .iter()
        .find(|t| t.spec().name == "write_file")
        .expect("write_file");
    let mut mismatches = Vec::new();
    for (line, cols) in rows(&text) {
        let [op, want, raw] = cols.as_slice() else {
            continue;
        };
        if op != "write" || !want.starts_with("deny") {
            continue;
        }
        let path = raw
            .replace("{ws}", &fx.ws.to_string_lossy())
            .replace("{out}", &fx.out.to_string_lossy())
            .replace("\\0", "\0");
        let base = fx.ws.parent().expect("base").to_string_lossy().into_owned();
        if (path.starts_with('/') && !path.starts_with(&base))
            || path.starts_with('~')
            || path.contains("link_etc")
        {
            // Only attempt writes whose target would land in the temporary directory,
            // even though they are expected to be refused.
            continue;
        }
        match write_file
            .run(json!({ "path": path, "content": "pwned\n" }), ctx(&fx.ws))
            .await
        {
            Ok(v) => mismatches.push(format!("line {line}: write_file `{raw}` succeeded: {v}")),
            Err(e)
                if e.code == ErrorCode::PathOutsideWorkspace
                    || e.code == ErrorCode::ToolArgumentsInvalid
                    || e.code == ErrorCode::ToolExecutionFailed => {}
            Err(e) => mismatches.push(format!("line {line}: unexpected code {}", e.code)),
        }
    }
    let outside: Vec<_> = std::fs::read_dir(&fx.out)
        .expect("read outside")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        outside.len(),
        1,
        "the outside directory changed: {outside:?}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.out.join("secret.txt")).expect("secret"),
        "secret\n"
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
