//! Changes made by shell commands (`sed -i`, `rm`, `mv`, `>`, `mkdir`, build outputs),
//! found by both detection methods and rewound.

use super::*;

#[test]
fn shell_changes_in_a_non_git_directory_are_rewound() {
    for watch in modes() {
        let w = ws();
        w.write("src/main.c", "int main() { return 0; }\n");
        w.write("src/util.c", "int util;\n");
        w.write("README", "hello\n");
        w.write("docs/old.md", "old\n");
        let mut cps = w.open(watch);
        assert_eq!(
            cps.detection(),
            if watch {
                Detection::Watch
            } else {
                Detection::Scan
            }
        );
        let base = cps.checkpoint("c1", json!({"step": 1})).expect("baseline");
        assert!(base.baseline);
        let before = w.snapshot();

        w.sh(
            "sed -i 's/return 0/return 1/' src/main.c && rm README && mv docs/old.md docs/new.md \
              && mkdir -p build/out && echo bin > build/out/app && echo gen > src/gen.h \
              && chmod +x src/util.c",
        );
        let c2 = cps.checkpoint("c2", json!({"step": 2})).expect("c2");
        let mut got = changed(&c2);
        got.sort();
        assert_eq!(
            got,
            vec![
                ("README".to_string(), ChangeKind::Deleted),
                ("build/out/app".to_string(), ChangeKind::Created),
                ("docs/new.md".to_string(), ChangeKind::Created),
                ("docs/old.md".to_string(), ChangeKind::Deleted),
                ("src/gen.h".to_string(), ChangeKind::Created),
                ("src/main.c".to_string(), ChangeKind::Modified),
                ("src/util.c".to_string(), ChangeKind::Modified),
            ],
            "watch={watch}"
        );
        let after = w.snapshot();

        let report = cps.restore("c1").expect("restore c1");
        assert!(report.not_restorable.is_empty(), "{report:?}");
        assert_eq!(w.snapshot(), before, "watch={watch}");
        let mut actions: Vec<(String, RestoreAction)> = report
            .files
            .iter()
            .map(|f| (f.path.clone(), f.action))
            .collect();
        actions.sort();
        assert_eq!(
            actions,
            vec![
                ("README".to_string(), RestoreAction::Recreated),
                ("build/out/app".to_string(), RestoreAction::Removed),
                ("docs/new.md".to_string(), RestoreAction::Removed),
                ("docs/old.md".to_string(), RestoreAction::Recreated),
                ("src/gen.h".to_string(), RestoreAction::Removed),
                ("src/main.c".to_string(), RestoreAction::Reverted),
                ("src/util.c".to_string(), RestoreAction::Reverted),
            ]
        );

        // Forward again: the later checkpoint still holds its state.
        let report = cps.restore("c2").expect("restore c2");
        assert!(report.not_restorable.is_empty(), "{report:?}");
        assert_eq!(w.snapshot(), after, "watch={watch}");

        // The restores themselves are recorded by the next checkpoint.
        let c3 = cps.checkpoint("c3", json!(null)).expect("c3");
        assert!(
            c3.changed.is_empty(),
            "back to c2's state: {:?}",
            c3.changed
        );
    }
}

#[test]
fn ignored_files_are_neither_recorded_nor_touched_and_unignored_build_outputs_are() {
    for watch in modes() {
        let w = ws();
        w.write(".gitignore", "target/\n*.log\n");
        w.write("lib.rs", "pub fn f() {}\n");
        w.write("target/old.o", "old object\n");
        let mut cps = w.open(watch);
        cps.checkpoint("c1", json!(null)).expect("c1");
        w.sh(
            "mkdir -p target/debug && echo obj > target/debug/lib.o && echo log > run.log \
              && echo out > dist.txt && rm target/old.o",
        );
        let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
        assert_eq!(
            changed(&c2),
            vec![("dist.txt".to_string(), ChangeKind::Created)],
            "watch={watch}"
        );
        let report = cps.restore("c1").expect("restore");
        assert_eq!(report.files.len(), 1, "{report:?}");
        assert_eq!(w.read("dist.txt"), None);
        assert_eq!(w.read("run.log").as_deref(), Some("log\n"));
        assert_eq!(w.read("target/debug/lib.o").as_deref(), Some("obj\n"));
        assert_eq!(w.read("target/old.o"), None, "ignored: not restored either");
    }
}

#[test]
fn a_directory_moved_while_watched_is_followed() {
    let w = ws();
    w.write("a/one.txt", "1\n");
    w.write("a/deep/two.txt", "2\n");
    let mut cps = w.open(true);
    cps.checkpoint("c1", json!(null)).expect("c1");
    let before = w.snapshot();
    w.sh("mv a b && echo changed > b/deep/two.txt && echo new > b/deep/three.txt");
    let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
    let mut got = changed(&c2);
    got.sort();
    assert_eq!(
        got,
        vec![
            ("a/deep/two.txt".to_string(), ChangeKind::Deleted),
            ("a/one.txt".to_string(), ChangeKind::Deleted),
            ("b/deep/three.txt".to_string(), ChangeKind::Created),
            ("b/deep/two.txt".to_string(), ChangeKind::Created),
            ("b/one.txt".to_string(), ChangeKind::Created),
        ]
    );
    // Later changes inside the moved directory are still seen.
    w.sh("echo again > b/one.txt");
    let c3 = cps.checkpoint("c3", json!(null)).expect("c3");
    assert_eq!(
        changed(&c3),
        vec![("b/one.txt".to_string(), ChangeKind::Modified)]
    );
    cps.restore("c1").expect("restore");
    assert_eq!(w.snapshot(), before);
}

#[test]
fn a_sandboxed_shell_command_is_seen_by_the_watcher() {
    use keel_tools::{SandboxConfig, SandboxKind, SandboxMode, SandboxStatus, Tool, ToolContext};
    use std::sync::Arc;
    let config = SandboxConfig::new(SandboxMode::Bubblewrap);
    if !matches!(
        keel_tools::sandbox_status(),
        SandboxStatus::Available {
            sandbox: SandboxKind::Bubblewrap
        }
    ) {
        eprintln!("bubblewrap unavailable here: the unsandboxed tests cover the rest");
        return;
    }
    let w = ws();
    w.write("notes.txt", "one\n");
    let mut cps = w.open(true);
    cps.checkpoint("c1", json!(null)).expect("c1");
    let before = w.snapshot();
    let tool: Arc<dyn Tool> = keel_tools::builtin_tools()
        .into_iter()
        .find(|t| t.spec().name == "run_shell")
        .expect("run_shell");
    let ctx = ToolContext {
        workspace: w.root.clone(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated: false,
        sandbox: config,
        roots: keel_tools::jail::Roots::none(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(tool.run(
        json!({"command": "sed -i s/one/two/ notes.txt && echo x > made.txt"}),
        ctx,
    ))
    .expect("run_shell");
    let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
    assert!(!cps.last_stats().full);
    let mut got = changed(&c2);
    got.sort();
    assert_eq!(
        got,
        vec![
            ("made.txt".to_string(), ChangeKind::Created),
            ("notes.txt".to_string(), ChangeKind::Modified),
        ]
    );
    cps.restore("c1").expect("restore");
    assert_eq!(w.snapshot(), before);
}
