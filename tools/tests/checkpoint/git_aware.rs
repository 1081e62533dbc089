//! In real git repositories: files equal to their index blob are recorded by blob id
//! and not copied, restores read them back from git, `.git` is never written, and a
//! workspace that is a subdirectory of the work tree works the same.

use super::safety::git;
use super::*;

/// A committed repository of `n` text files under `sub/` directories.
fn repo(w: &Ws, n: usize) {
    git(&w.root, &["init", "-q", "."]);
    for i in 0..n {
        w.write(
            &format!("src/d{}/f{i}.rs", i % 10),
            &format!("// {i}\n{}", "let x = 1;\n".repeat(20)),
        );
    }
    w.write(".gitignore", "target/\n");
    git(&w.root, &["add", "-A"]);
    git(&w.root, &["commit", "-qm", "init"]);
}

fn pack_bytes(store_dir: &Path) -> Vec<u8> {
    fs::read_dir(store_dir.join("packs"))
        .expect("packs")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .flat_map(|e| fs::read(e.path()).expect("read"))
        .collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_clean_checkout_is_recorded_by_blob_id_and_restored_from_git() {
    for watch in modes() {
        let w = ws();
        repo(&w, 200);
        // Files written a moment ago are racily clean for git too; let time pass.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        let dot_git = snapshot(&w.root.join(".git"));
        let mut cps = w.open(watch);
        assert!(cps.git_aware());
        cps.checkpoint("c1", json!(null)).expect("baseline");
        assert_eq!(cps.last_stats().git, 201, "{:?}", cps.last_stats());
        let packs = pack_bytes(cps.store_dir());
        assert!(
            !contains(&packs, b"let x = 1;"),
            "no file content copied into the store"
        );
        assert!(packs.len() < 200 * 200, "only trees: {} bytes", packs.len());
        // Changes by a shell: modified, deleted, created, and a staged edit.
        w.sh("echo changed > src/d1/f1.rs && rm src/d2/f2.rs && echo new > new.rs");
        w.sh("echo staged > src/d3/f3.rs && git add src/d3/f3.rs");
        let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
        assert_eq!(c2.changed.len(), 4, "{:?}", c2.changed);
        let report = cps.restore("c1").expect("restore");
        assert!(report.not_restorable.is_empty(), "{report:?}");
        assert!(w.read("src/d1/f1.rs").expect("f1").starts_with("// 1\n"));
        assert!(w.read("src/d2/f2.rs").expect("f2").starts_with("// 2\n"));
        assert!(w.read("src/d3/f3.rs").expect("f3").starts_with("// 3\n"));
        assert_eq!(w.read("new.rs"), None);
        // And forward again: the changed contents were copied.
        cps.restore("c2").expect("forward");
        assert_eq!(w.read("src/d1/f1.rs").as_deref(), Some("changed\n"));
        assert_eq!(w.read("src/d3/f3.rs").as_deref(), Some("staged\n"));
        // The restore touched the work tree only: the index still holds the staged
        // edit, and nothing under .git changed but what `git add` itself wrote.
        let mut now = snapshot(&w.root.join(".git"));
        let mut before = dot_git.clone();
        for s in [&mut now, &mut before] {
            s.retain(|k, _| k != "index" && !k.starts_with("objects/"));
        }
        assert_eq!(now, before);
    }
}

#[test]
fn a_file_that_differs_from_its_blob_is_copied_and_a_restored_blob_stays_a_blob() {
    let w = ws();
    repo(&w, 40);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    w.write("src/d0/f0.rs", "dirty before the baseline\n");
    let mut cps = w.open(true);
    cps.checkpoint("c1", json!(null)).expect("c1");
    assert_eq!(cps.last_stats().git, 40, "{:?}", cps.last_stats());
    assert!(contains(
        &pack_bytes(cps.store_dir()),
        b"dirty before the baseline"
    ));
    w.write("src/d5/f5.rs", "edited\n");
    cps.checkpoint("c2", json!(null)).expect("c2");
    cps.restore("c1").expect("restore");
    assert!(w.read("src/d5/f5.rs").expect("f5").starts_with("// 5\n"));
    // Restored from git and re-read: recorded by blob id again, not as a copy.
    let c3 = cps.checkpoint("c3", json!(null)).expect("c3");
    assert_eq!(
        changed(&c3),
        vec![("src/d5/f5.rs".to_string(), ChangeKind::Modified)]
    );
    assert!(!contains(&pack_bytes(cps.store_dir()), b"// 5\nlet x"));
}

#[test]
fn a_workspace_inside_a_work_tree_uses_the_repository() {
    let w = ws();
    repo(&w, 60);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let sub = w.root.join("src");
    let mut cps =
        Checkpoints::open(&sub, &w.store, "sub", CheckpointConfig::default()).expect("open");
    cps.checkpoint("c1", json!(null)).expect("c1");
    assert_eq!(cps.last_stats().git, 60);
    fs::write(sub.join("d4/f4.rs"), "gone wrong\n").expect("write");
    cps.checkpoint("c2", json!(null)).expect("c2");
    cps.restore("c1").expect("restore");
    assert!(w.read("src/d4/f4.rs").expect("f4").starts_with("// 4\n"));
}

#[test]
fn git_awareness_can_be_turned_off() {
    let w = ws();
    repo(&w, 40);
    let config = CheckpointConfig {
        git: false,
        ..CheckpointConfig::default()
    };
    let mut cps = Checkpoints::open(&w.root, &w.store, "s", config).expect("open");
    assert!(!cps.git_aware());
    cps.checkpoint("c1", json!(null)).expect("c1");
    assert_eq!(cps.last_stats().git, 0);
    assert!(contains(&pack_bytes(cps.store_dir()), b"let x = 1;"));
}
