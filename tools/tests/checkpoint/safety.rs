//! What a restore must never do (touch `.git`, write through a link, lose a file it
//! cannot restore) and what it reports instead: links, modes, binary and large files.

use super::*;

pub(super) fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(root)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn has_git() -> bool {
    Command::new("git").arg("--version").output().is_ok()
}

#[test]
fn the_projects_git_directory_is_never_read_recorded_or_restored() {
    if !has_git() {
        eprintln!("git not installed");
        return;
    }
    for watch in modes() {
        let w = ws();
        w.write("main.txt", "v1\n");
        git(&w.root, &["init", "-q"]);
        git(&w.root, &["add", "."]);
        git(&w.root, &["commit", "-q", "-m", "one"]);
        let mut cps = w.open(watch);
        let c1 = cps.checkpoint("c1", json!(null)).expect("c1");
        assert!(c1.baseline);
        w.write("main.txt", "v2\n");
        git(&w.root, &["commit", "-q", "-am", "two"]);
        let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
        assert_eq!(
            changed(&c2),
            vec![("main.txt".to_string(), ChangeKind::Modified)],
            "nothing of .git is recorded"
        );
        let git_before: BTreeMap<_, _> = w
            .snapshot()
            .into_iter()
            .filter(|(k, _)| k.starts_with(".git"))
            .collect();
        let report = cps.restore("c1").expect("restore");
        assert!(report.files.iter().all(|f| !f.path.starts_with(".git")));
        let git_after: BTreeMap<_, _> = w
            .snapshot()
            .into_iter()
            .filter(|(k, _)| k.starts_with(".git"))
            .collect();
        assert_eq!(git_before, git_after, "watch={watch}");
        assert_eq!(w.read("main.txt").as_deref(), Some("v1\n"));
    }
}

#[test]
fn links_are_restored_as_links_and_never_written_through() {
    for watch in modes() {
        let w = ws();
        fs::write(w.outside.join("secret"), "outside\n").expect("outside");
        w.write("real.txt", "real\n");
        w.write("sub/inner.txt", "inner\n");
        std::os::unix::fs::symlink("real.txt", w.root.join("link")).expect("symlink");
        let mut cps = w.open(watch);
        cps.checkpoint("c1", json!(null)).expect("c1");
        let before = w.snapshot();
        // The link now points outside; a file became a link to outside; a directory
        // was replaced by a link to outside; a new link appeared.
        fs::remove_file(w.root.join("link")).expect("rm");
        std::os::unix::fs::symlink(w.outside.join("secret"), w.root.join("link")).expect("ln");
        fs::remove_file(w.root.join("real.txt")).expect("rm");
        std::os::unix::fs::symlink(w.outside.join("secret"), w.root.join("real.txt")).expect("ln");
        fs::remove_dir_all(w.root.join("sub")).expect("rm -r");
        std::os::unix::fs::symlink(&w.outside, w.root.join("sub")).expect("ln");
        std::os::unix::fs::symlink("/etc", w.root.join("etc")).expect("ln");
        let outside_before = snapshot(&w.outside);
        cps.checkpoint("c2", json!(null)).expect("c2");
        let report = cps.restore("c1").expect("restore");
        assert!(report.not_restorable.is_empty(), "{report:?}");
        assert_eq!(w.snapshot(), before, "watch={watch}");
        assert_eq!(snapshot(&w.outside), outside_before, "outside untouched");
    }
}

#[test]
fn modes_are_restored_even_in_a_directory_made_read_only() {
    for watch in modes() {
        let w = ws();
        w.write("tool.sh", "echo hi\n");
        fs::set_permissions(w.root.join("tool.sh"), fs::Permissions::from_mode(0o755))
            .expect("chmod");
        w.write("locked/data.txt", "data\n");
        w.write("private.txt", "p\n");
        fs::set_permissions(
            w.root.join("private.txt"),
            fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        let mut cps = w.open(watch);
        cps.checkpoint("c1", json!(null)).expect("c1");
        let before = w.snapshot();
        w.sh("chmod -x tool.sh && chmod 644 private.txt && rm locked/data.txt && chmod 555 locked");
        cps.checkpoint("c2", json!(null)).expect("c2");
        let report = cps.restore("c1").expect("restore");
        assert!(report.not_restorable.is_empty(), "{report:?}");
        assert_eq!(w.snapshot(), before, "watch={watch}");
    }
}

#[test]
fn binary_and_large_files_are_reported_not_restorable_and_never_lost() {
    for watch in modes() {
        let w = ws();
        let config = CheckpointConfig {
            watch,
            max_file_bytes: 1024,
            ..CheckpointConfig::default()
        };
        w.write("small.txt", "small\n");
        w.write("big.txt", &"x".repeat(4096));
        fs::write(w.root.join("image.bin"), [0u8, 1, 2, 3, 255]).expect("binary");
        w.write("stays-big.txt", &"y".repeat(4096));
        let mut cps = Checkpoints::open(&w.root, &w.store, "s1", config).expect("open");
        cps.checkpoint("c1", json!(null)).expect("c1");
        w.sh(
            "rm big.txt && printf '\\001\\000changed' > image.bin && echo edit >> small.txt \
              && printf '\\000\\001' > new.bin && head -c 5000 /dev/zero > new-big.txt",
        );
        let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
        assert_eq!(c2.changed.len(), 5, "{:?}", c2.changed);
        let report = cps.restore("c1").expect("restore");
        let mut failed: Vec<&str> = report
            .not_restorable
            .iter()
            .map(|n| n.path.as_str())
            .collect();
        failed.sort();
        assert_eq!(failed, vec!["big.txt", "image.bin"], "watch={watch}");
        let reason = |p: &str| {
            report
                .not_restorable
                .iter()
                .find(|n| n.path == p)
                .map(|n| n.reason.clone())
                .unwrap_or_default()
        };
        assert!(
            reason("big.txt").contains("size limit"),
            "{}",
            reason("big.txt")
        );
        assert!(
            reason("image.bin").contains("binary"),
            "{}",
            reason("image.bin")
        );
        // The binary file keeps its current content rather than being lost.
        assert_eq!(
            fs::read(w.root.join("image.bin")).expect("read"),
            b"\x01\x00changed"
        );
        assert_eq!(w.read("small.txt").as_deref(), Some("small\n"));
        assert!(
            !w.root.join("new.bin").exists(),
            "created files are removed"
        );
        assert!(!w.root.join("new-big.txt").exists());
        assert_eq!(w.read("stays-big.txt").map(|s| s.len()), Some(4096));
    }
}

#[test]
fn a_created_directory_holding_ignored_files_is_kept_and_reported() {
    let w = ws();
    w.write(".gitignore", "*.tmp\n");
    w.write("a.txt", "a\n");
    let mut cps = w.open(true);
    cps.checkpoint("c1", json!(null)).expect("c1");
    w.sh("mkdir gen && echo x > gen/out.txt && echo t > gen/cache.tmp");
    cps.checkpoint("c2", json!(null)).expect("c2");
    let report = cps.restore("c1").expect("restore");
    assert!(!w.root.join("gen/out.txt").exists());
    assert_eq!(w.read("gen/cache.tmp").as_deref(), Some("t\n"));
    assert_eq!(report.not_restorable.len(), 1, "{report:?}");
    assert_eq!(report.not_restorable[0].path, "gen");
}
