//! `docs/permissions.md` is generated from the permission table; this test fails when
//! the checked-in file is stale.

use keel_envelope::types::PermissionLevel;
use keel_tools::spec::{builtin_specs, permissions_markdown};
use keel_tools::{ApprovalRequirement, PlanBehavior};

#[test]
fn permissions_doc_is_fresh() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/permissions.md");
    let want = permissions_markdown();
    if std::env::var_os("KEEL_UPDATE_GENERATED").is_some() {
        std::fs::write(&path, &want).expect("write docs/permissions.md");
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == want,
        "docs/permissions.md is stale; regenerate with: KEEL_UPDATE_GENERATED=1 cargo test -p keel-tools permissions_doc"
    );
}

#[test]
fn permissions_doc_explains_the_sandbox() {
    let doc = permissions_markdown();
    assert!(doc.ends_with(keel_tools::sandbox::SANDBOX_DOC));
    for needle in [
        "## Sandbox",
        "`auto` (default)",
        "SANDBOX_UNAVAILABLE",
        "sandboxNetwork = true",
        "`elevated`",
        "Landlock",
    ] {
        assert!(doc.contains(needle), "{needle}");
    }
}

#[test]
fn permissions_doc_lists_every_row_of_the_table() {
    let doc = permissions_markdown();
    for s in builtin_specs() {
        let row = format!(
            "| `{}` | `{}` | {} | {} |",
            s.name,
            keel_tools::spec::level_str(s.level),
            s.plan.as_str(),
            s.approval.as_str()
        );
        assert!(doc.contains(&row), "missing row {row}");
    }
}

#[test]
fn the_table_is_the_matrix_of_the_design() {
    let specs = builtin_specs();
    let got: Vec<(&str, PermissionLevel, PlanBehavior, ApprovalRequirement)> = specs
        .iter()
        .map(|s| (s.name.as_str(), s.level, s.plan, s.approval))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "read_file",
                PermissionLevel::Read,
                PlanBehavior::Allowed,
                ApprovalRequirement::Never
            ),
            (
                "list_dir",
                PermissionLevel::Read,
                PlanBehavior::Allowed,
                ApprovalRequirement::Never
            ),
            (
                "search_files",
                PermissionLevel::Read,
                PlanBehavior::Allowed,
                ApprovalRequirement::Never
            ),
            (
                "edit_file",
                PermissionLevel::Write,
                PlanBehavior::Denied,
                ApprovalRequirement::Always
            ),
            (
                "write_file",
                PermissionLevel::Write,
                PlanBehavior::Denied,
                ApprovalRequirement::Always
            ),
            (
                "run_shell",
                PermissionLevel::Execute,
                PlanBehavior::Denied,
                ApprovalRequirement::Depends
            ),
            (
                "git",
                PermissionLevel::Execute,
                PlanBehavior::Partial,
                ApprovalRequirement::Depends
            ),
        ]
    );
    for s in &specs {
        assert_eq!(s.parameters["type"], "object", "{} schema", s.name);
        assert!(!s.description.is_empty());
    }
    // The tools carry the same rows.
    let tools = keel_tools::builtin_tools();
    let names: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
    assert_eq!(
        names,
        specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()
    );
    for (t, s) in tools.iter().zip(&specs) {
        assert_eq!(t.spec(), s);
    }
}
