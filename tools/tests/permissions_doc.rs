//! `docs/permissions.md` is generated from the permission table; this test fails when
//! the checked-in file is stale.

use keel_tools::spec::{builtin_specs, kernel_specs, matrix_row, notes, permissions_markdown};

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
    for s in builtin_specs().into_iter().chain(kernel_specs()) {
        let row = matrix_row(&s, notes(&s.name));
        assert!(doc.contains(&row), "missing row {row}");
        assert!(row.contains(&format!("`{}`", s.action_type)), "{row}");
    }
}
