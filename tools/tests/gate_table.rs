//! The gate reads the permission table: every row × every mode × representative
//! arguments is decided as the row says, and changing a row changes the decision.

use std::path::PathBuf;

use keel_envelope::tools::Decision;
use keel_envelope::types::{PermissionLevel, PermissionMode, RiskLevel};
use keel_envelope::ErrorCode;
use keel_tools::policy::{decide_with_spec, DecisionInput, Rules, ShellPolicy, Verdict};
use keel_tools::spec::{builtin_specs, kernel_specs, Analysis};
use keel_tools::{ApprovalRequirement, PlanBehavior, ToolSpec};
use serde_json::{json, Value};

const MODES: [PermissionMode; 4] = [
    PermissionMode::Plan,
    PermissionMode::Ask,
    PermissionMode::AutoEdit,
    PermissionMode::Auto,
];

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.txt"), "hello\n").expect("write");
    let root = dir.path().canonicalize().expect("canonical");
    (dir, root)
}

/// Arguments the row's analysis finds harmless (no reason of its own to ask).
fn harmless(analysis: Analysis) -> Value {
    match analysis {
        Analysis::None => json!({}),
        Analysis::ReadPath => json!({"path": "a.txt"}),
        Analysis::ListPath => json!({"path": "."}),
        Analysis::SearchPath => json!({"query": "hello"}),
        Analysis::Edit => {
            json!({"path": "a.txt", "edits": [{"oldText": "hello", "newText": "bye"}]})
        }
        Analysis::Write => json!({"path": "new.txt", "content": "x"}),
        Analysis::Shell => json!({"command": "ls"}),
        Analysis::Git => json!({"command": "status"}),
    }
}

/// Arguments the analysis finds worth asking about, where the row leaves it to the
/// analysis (`depends`).
fn asking(analysis: Analysis) -> Option<Value> {
    match analysis {
        Analysis::Shell => Some(json!({"command": "make build"})),
        Analysis::Git => Some(json!({"command": "commit", "args": ["-m", "x"]})),
        _ => None,
    }
}

fn decide(row: &ToolSpec, args: &Value, mode: PermissionMode, ws: &PathBuf) -> Verdict {
    let rules = Rules::default();
    let shell = ShellPolicy::default();
    decide_with_spec(
        &DecisionInput {
            tool: &row.name,
            args,
            mode,
            rules: &rules,
            workspace: ws,
            roots: keel_tools::jail::Roots::none(),
            shell: &shell,
        },
        Some(row),
    )
}

/// What the row says the decision is, for arguments the analysis finds harmless.
fn expected(row: &ToolSpec, mode: PermissionMode) -> (Decision, Option<ErrorCode>) {
    let elevated = row.level == PermissionLevel::Elevated;
    if mode == PermissionMode::Plan && row.plan == PlanBehavior::Denied {
        return (Decision::Deny, Some(ErrorCode::PlanApprovalRequired));
    }
    if mode == PermissionMode::Auto {
        return if elevated {
            (Decision::Deny, Some(ErrorCode::ToolPermissionDenied))
        } else {
            (Decision::Allow, None)
        };
    }
    let asks = elevated || row.approval == ApprovalRequirement::Always;
    let edit_like = matches!(row.analysis, Analysis::Edit | Analysis::Write);
    if asks && !(mode == PermissionMode::AutoEdit && edit_like && !elevated) {
        (Decision::Ask, None)
    } else {
        (Decision::Allow, None)
    }
}

/// Checks every mode for one row; returns the mismatches.
fn check_row(row: &ToolSpec, ws: &PathBuf) -> Vec<String> {
    let mut bad = Vec::new();
    let args = harmless(row.analysis);
    for mode in MODES {
        let v = decide(row, &args, mode.clone(), ws);
        let (want, code) = expected(row, mode.clone());
        let got = v.verdict.decision;
        if got != want || (want == Decision::Deny && v.deny_code != code) {
            bad.push(format!(
                "{} in {mode:?}: got {got:?} {:?} ({}), the row says {want:?} {code:?}",
                row.name, v.deny_code, v.verdict.reason
            ));
        }
        if v.verdict.level < row.level {
            bad.push(format!(
                "{} in {mode:?}: level {:?} below the row's {:?}",
                row.name, v.verdict.level, row.level
            ));
        }
        if v.verdict.risk_level < row.risk {
            bad.push(format!(
                "{} in {mode:?}: risk {:?} below the row's floor {:?}",
                row.name, v.verdict.risk_level, row.risk
            ));
        }
        let action = match row.analysis {
            // The git analysis names the class of the sub-command.
            Analysis::Git => "git.read",
            _ => row.action_type.as_str(),
        };
        if v.verdict.action_type != action {
            bad.push(format!(
                "{} in {mode:?}: action {} but the row says {}",
                row.name, v.verdict.action_type, row.action_type
            ));
        }
        if row.approval == ApprovalRequirement::Depends && mode == PermissionMode::Ask {
            if let Some(risky) = asking(row.analysis) {
                let v = decide(row, &risky, mode.clone(), ws);
                if v.verdict.decision != Decision::Ask {
                    bad.push(format!(
                        "{} {risky}: the analysis should ask, got {:?}",
                        row.name, v.verdict.decision
                    ));
                }
            }
        }
        if row.plan == PlanBehavior::Partial && mode == PermissionMode::Plan {
            if let Some(risky) = asking(row.analysis) {
                let v = decide(row, &risky, mode.clone(), ws);
                if v.deny_code != Some(ErrorCode::PlanApprovalRequired) {
                    bad.push(format!(
                        "{} {risky}: partial in plan mode should refuse it, got {:?}",
                        row.name, v.verdict.decision
                    ));
                }
            }
        }
    }
    bad
}

fn all_rows() -> Vec<ToolSpec> {
    builtin_specs().into_iter().chain(kernel_specs()).collect()
}

#[test]
fn every_row_in_every_mode_is_decided_as_the_row_says() {
    let (_dir, ws) = workspace();
    let bad: Vec<String> = all_rows().iter().flat_map(|r| check_row(r, &ws)).collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn changing_a_row_changes_the_gate() {
    let (_dir, ws) = workspace();
    let mut bad = Vec::new();
    for original in all_rows() {
        let variants: Vec<(&str, ToolSpec)> = vec![
            (
                "plan denied",
                ToolSpec {
                    plan: PlanBehavior::Denied,
                    ..original.clone()
                },
            ),
            (
                "plan allowed",
                ToolSpec {
                    plan: PlanBehavior::Allowed,
                    ..original.clone()
                },
            ),
            (
                "always asks",
                ToolSpec {
                    approval: ApprovalRequirement::Always,
                    ..original.clone()
                },
            ),
            (
                "never asks",
                ToolSpec {
                    approval: ApprovalRequirement::Never,
                    ..original.clone()
                },
            ),
            (
                "elevated",
                ToolSpec {
                    level: PermissionLevel::Elevated,
                    ..original.clone()
                },
            ),
            (
                "high risk",
                ToolSpec {
                    risk: RiskLevel::High,
                    ..original.clone()
                },
            ),
            (
                "other action",
                ToolSpec {
                    action_type: "x.changed".into(),
                    ..original.clone()
                },
            ),
        ];
        for (what, row) in variants {
            for m in check_row(&row, &ws) {
                bad.push(format!("[{what}] {m}"));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_row_without_analysis_is_decided_by_the_row_alone() {
    let (_dir, ws) = workspace();
    let row = ToolSpec::custom(
        "deploy",
        "",
        json!({"type": "object"}),
        PermissionLevel::Execute,
        PlanBehavior::Denied,
        ApprovalRequirement::Always,
    );
    // The arguments do not matter: nothing looks at them.
    for args in [
        json!({}),
        json!({"command": "rm -rf /"}),
        json!({"path": "/etc/shadow"}),
    ] {
        assert_eq!(
            decide(&row, &args, PermissionMode::Ask, &ws)
                .verdict
                .decision,
            Decision::Ask
        );
        assert_eq!(
            decide(&row, &args, PermissionMode::Auto, &ws)
                .verdict
                .decision,
            Decision::Allow
        );
        assert_eq!(
            decide(&row, &args, PermissionMode::Plan, &ws).deny_code,
            Some(ErrorCode::PlanApprovalRequired)
        );
    }
}
