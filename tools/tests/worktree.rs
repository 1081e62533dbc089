//! Worktrees of isolated sessions, with real git in temporary folders: made at
//! `HEAD` or a given revision (a dirty tree, a detached `HEAD`, a submodule, a
//! workspace below the repository's top), refused outside git, listed with their
//! changes, removed (refused with uncommitted changes unless forced; the branch
//! kept when it has commits), leftovers of a creation that died half-way found and
//! removed, and ten made at once under CPU load.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use keel_envelope::worktree::WorktreeState;
use keel_envelope::ErrorCode;
use keel_testsupport::{git, Busy};
use keel_tools::worktree::{self as wt, CreateRequest};

/// A repository with two commits in `<tmp>/repo`.
fn repo(tmp: &Path) -> PathBuf {
    let r = tmp.join("repo");
    std::fs::create_dir_all(r.join("src")).unwrap();
    git(&r, &["init", "-q"]);
    std::fs::write(r.join("README.md"), "one\n").unwrap();
    std::fs::write(r.join("src/lib.rs"), "fn a() {}\n").unwrap();
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "-qm", "first"]);
    std::fs::write(r.join("README.md"), "two\n").unwrap();
    git(&r, &["commit", "-qam", "second"]);
    r
}

fn req<'a>(name: &'a str, source: &'a Path, branch: &'a str) -> CreateRequest<'a> {
    CreateRequest {
        name,
        session_id: Some(name),
        source,
        branch,
        base_ref: None,
        now: 1,
        held: false,
    }
}

fn branch_exists(repo: &Path, branch: &str) -> bool {
    Command::new("git")
        .args([
            "show-ref",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ])
        .current_dir(repo)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn a_worktree_starts_at_head_without_the_dirty_changes_and_is_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(tmp.path());
    let folder = tmp.path().join("worktrees");
    // The main tree is dirty: an edit and an untracked file.
    std::fs::write(r.join("README.md"), "dirty\n").unwrap();
    std::fs::write(r.join("new.txt"), "x\n").unwrap();
    let made = wt::create(&folder, &req("sess_a", &r, "keel/a")).unwrap();
    assert_eq!(made.workspace, made.path);
    assert_eq!(
        std::fs::read_to_string(made.path.join("README.md")).unwrap(),
        "two\n"
    );
    assert!(!made.path.join("new.txt").exists());
    assert_eq!(
        git(&made.path, &["rev-parse", "--abbrev-ref", "HEAD"]),
        "keel/a"
    );
    assert_eq!(made.record.base_commit, git(&r, &["rev-parse", "HEAD"]));
    // The main tree is untouched.
    assert_eq!(
        std::fs::read_to_string(r.join("README.md")).unwrap(),
        "dirty\n"
    );
    let listed = wt::list(&folder);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, WorktreeState::Ready);
    assert_eq!(listed[0].dirty, Some(false));
    assert_eq!(listed[0].session_id.as_deref(), Some("sess_a"));
    std::fs::write(made.path.join("src/lib.rs"), "fn b() {}\n").unwrap();
    assert_eq!(wt::list(&folder)[0].dirty, Some(true));
    // Git knows it as a worktree of the repository.
    assert!(
        git(&r, &["worktree", "list", "--porcelain"]).contains(&made.path.display().to_string())
    );
}

#[test]
fn removal_refuses_uncommitted_changes_unless_forced_and_keeps_a_branch_with_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(tmp.path());
    let folder = tmp.path().join("worktrees");
    let a = wt::create(&folder, &req("sess_a", &r, "keel/a")).unwrap();
    std::fs::write(a.path.join("untracked.txt"), "x\n").unwrap();
    let e = wt::remove(&folder, "sess_a", false, false).unwrap_err();
    assert_eq!(e.code, ErrorCode::WorktreeDirty, "{e:?}");
    assert!(
        e.details["changes"].to_string().contains("untracked.txt"),
        "{e:?}"
    );
    assert!(a.path.join("untracked.txt").exists(), "nothing was removed");
    let removed = wt::remove(&folder, "sess_a", true, false).unwrap();
    assert!(!removed.branch_kept);
    assert!(!a.path.exists());
    assert!(!branch_exists(&r, "keel/a"));
    assert!(!git(&r, &["worktree", "list"]).contains("sess_a"));
    assert!(wt::list(&folder).is_empty());
    // A worktree whose branch has a commit of its own: the commit is never lost.
    let b = wt::create(&folder, &req("sess_b", &r, "keel/b")).unwrap();
    std::fs::write(b.path.join("README.md"), "three\n").unwrap();
    git(&b.path, &["commit", "-qam", "in the worktree"]);
    let removed = wt::remove(&folder, "sess_b", false, false).unwrap();
    assert!(removed.branch_kept);
    assert!(branch_exists(&r, "keel/b"));
    // Asked to keep the branch: kept even without commits.
    wt::create(&folder, &req("sess_c", &r, "keel/c")).unwrap();
    assert!(
        wt::remove(&folder, "sess_c", false, true)
            .unwrap()
            .branch_kept
    );
    assert!(branch_exists(&r, "keel/c"));
    // Unknown names.
    assert_eq!(
        wt::remove(&folder, "sess_c", false, false)
            .unwrap_err()
            .code,
        ErrorCode::WorktreeNotFound
    );
    assert_eq!(
        wt::remove(&folder, "../etc", false, false)
            .unwrap_err()
            .code,
        ErrorCode::WorktreeNotFound
    );
}

#[test]
fn a_detached_head_a_given_revision_and_a_subfolder() {
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(tmp.path());
    let folder = tmp.path().join("worktrees");
    let first = git(&r, &["rev-parse", "HEAD~1"]);
    git(&r, &["checkout", "-q", "--detach", &first]);
    let made = wt::create(&folder, &req("sess_d", &r, "keel/d")).unwrap();
    assert_eq!(made.record.base_commit, first);
    assert_eq!(
        std::fs::read_to_string(made.path.join("README.md")).unwrap(),
        "one\n"
    );
    let mut at = req("sess_e", &r, "keel/e");
    at.base_ref = Some("main");
    let made = wt::create(&folder, &at).unwrap();
    assert_eq!(
        std::fs::read_to_string(made.path.join("README.md")).unwrap(),
        "two\n"
    );
    // A workspace below the top: the session works in the same folder of the worktree.
    let sub = r.join("src");
    let made = wt::create(&folder, &req("sess_f", &sub, "keel/f")).unwrap();
    assert_eq!(made.workspace, made.path.join("src"));
    assert!(made.workspace.join("lib.rs").is_file());
}

#[test]
fn refusals_are_structured_and_leave_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("worktrees");
    let plain = tmp.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let e = wt::create(&folder, &req("sess_a", &plain, "keel/a")).unwrap_err();
    assert_eq!(e.code, ErrorCode::WorktreeUnavailable);
    assert_eq!(e.details["reason"], "not_a_repository", "{e:?}");
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    git(&empty, &["init", "-q"]);
    let e = wt::create(&folder, &req("sess_a", &empty, "keel/a")).unwrap_err();
    assert_eq!(e.details["reason"], "no_commit", "{e:?}");
    let r = repo(tmp.path());
    for bad in ["no-such-ref", "-x", ""] {
        let mut q = req("sess_a", &r, "keel/a");
        q.base_ref = Some(bad);
        let e = wt::create(&folder, &q).unwrap_err();
        assert_eq!(e.code, ErrorCode::RequestInvalid, "{bad}: {e:?}");
        assert_eq!(e.details["field"], "payload.baseRef");
    }
    for name in ["", "../x", "a/b", "a b"] {
        let e = wt::create(&folder, &req(name, &r, "keel/x")).unwrap_err();
        assert_eq!(e.details["reason"], "bad_name", "{name:?}");
    }
    let e = wt::create(&folder, &req("sess_a", &r, "bad..branch")).unwrap_err();
    assert_eq!(e.details["reason"], "bad_branch", "{e:?}");
    git(&r, &["branch", "keel/taken"]);
    let e = wt::create(&folder, &req("sess_a", &r, "keel/taken")).unwrap_err();
    assert_eq!(e.details["reason"], "branch_exists", "{e:?}");
    assert!(wt::list(&folder).is_empty(), "no record left");
    assert!(!branch_exists(&r, "keel/a"));
    // A name in use.
    wt::create(&folder, &req("sess_b", &r, "keel/b")).unwrap();
    let e = wt::create(&folder, &req("sess_b", &r, "keel/b2")).unwrap_err();
    assert_eq!(e.details["reason"], "exists", "{e:?}");
    assert!(!branch_exists(&r, "keel/b2"));
}

/// The pid of a process that has exited.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

fn leftover_record(folder: &Path, name: &str, repo: &Path, branch: &str, base: &str) {
    let rec = wt::Record {
        name: name.into(),
        session_id: Some(name.into()),
        repository: std::fs::canonicalize(repo).unwrap(),
        branch: branch.into(),
        base_commit: base.into(),
        state: "creating".into(),
        pid: dead_pid(),
        created_at: 5,
    };
    std::fs::create_dir_all(folder.join("records")).unwrap();
    std::fs::write(
        folder.join("records").join(format!("{name}.json")),
        serde_json::to_vec(&rec).unwrap(),
    )
    .unwrap();
}

#[test]
fn a_creation_that_died_half_way_is_a_leftover_that_removal_clears() {
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(tmp.path());
    let folder = tmp.path().join("worktrees");
    std::fs::create_dir_all(&folder).unwrap();
    let folder = std::fs::canonicalize(&folder).unwrap();
    let head = git(&r, &["rev-parse", "HEAD"]);
    // Died after writing its record, before git ran.
    leftover_record(&folder, "sess_x", &r, "keel/x", &head);
    // Died after git made the worktree, before the record said `ready`.
    leftover_record(&folder, "sess_y", &r, "keel/y", &head);
    let path_y = folder.join("sess_y");
    git(
        &r,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "keel/y",
            path_y.to_str().unwrap(),
            &head,
        ],
    );
    // A creation under way in this process is not a leftover.
    let live = wt::Record {
        name: "sess_z".into(),
        session_id: None,
        repository: r.clone(),
        branch: "keel/z".into(),
        base_commit: head.clone(),
        state: "creating".into(),
        pid: std::process::id(),
        created_at: 6,
    };
    std::fs::write(
        folder.join("records/sess_z.json"),
        serde_json::to_vec(&live).unwrap(),
    )
    .unwrap();
    let listed = wt::list(&folder);
    assert_eq!(listed.len(), 3);
    assert!(listed.iter().all(|w| w.state == WorktreeState::Creating));
    let mut names: Vec<String> = wt::leftovers(&folder).into_iter().map(|r| r.name).collect();
    names.sort();
    assert_eq!(names, ["sess_x", "sess_y"]);
    let e = wt::remove(&folder, "sess_z", true, false).unwrap_err();
    assert_eq!(e.details["reason"], "creating", "{e:?}");
    for n in names {
        wt::remove(&folder, &n, false, false).unwrap();
    }
    assert!(!path_y.exists());
    assert!(!branch_exists(&r, "keel/y"));
    assert!(!git(&r, &["worktree", "list"]).contains("sess_y"));
    assert_eq!(
        wt::list(&folder).len(),
        1,
        "the creation under way is left alone"
    );
}

#[test]
fn a_held_creation_waits_for_its_owner_and_is_a_leftover_once_its_process_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(tmp.path());
    let folder = tmp.path().join("worktrees");
    let held = |name: &'static str, branch: &'static str| CreateRequest {
        held: true,
        ..req(name, &r, branch)
    };
    // Made, not yet owned: listed as being made, refused to others while this
    // process lives, not a leftover.
    let made = wt::create(&folder, &held("sess_h", "keel/h")).unwrap();
    assert!(made.path.join("README.md").is_file());
    assert_eq!(made.record.state, "made");
    assert_eq!(wt::list(&folder)[0].state, WorktreeState::Creating);
    assert!(wt::leftovers(&folder).is_empty());
    let e = wt::remove(&folder, "sess_h", true, false).unwrap_err();
    assert_eq!(e.details["reason"], "creating", "{e:?}");
    // Its owner has it: ready.
    wt::confirm(&folder, "sess_h").unwrap();
    assert_eq!(wt::list(&folder)[0].state, WorktreeState::Ready);
    wt::confirm(&folder, "sess_h").unwrap();
    // A creation given up is taken back whole: folder, git's entry, branch, record.
    let gone = wt::create(&folder, &held("sess_g", "keel/g")).unwrap();
    wt::discard(&folder, "sess_g");
    assert!(!gone.path.exists());
    assert!(!branch_exists(&r, "keel/g"));
    assert!(!git(&r, &["worktree", "list"]).contains("sess_g"));
    assert!(wt::record(&folder, "sess_g").is_none());
    wt::discard(&folder, "sess_g");
    // A `made` record whose process is gone is a leftover that removal clears.
    let orphan = wt::create(&folder, &held("sess_o", "keel/o")).unwrap();
    let rec_path = std::fs::canonicalize(&folder)
        .unwrap()
        .join("records/sess_o.json");
    let mut rec: wt::Record = serde_json::from_slice(&std::fs::read(&rec_path).unwrap()).unwrap();
    rec.pid = dead_pid();
    std::fs::write(&rec_path, serde_json::to_vec(&rec).unwrap()).unwrap();
    let names: Vec<String> = wt::leftovers(&folder).into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["sess_o"]);
    wt::remove(&folder, "sess_o", false, false).unwrap();
    assert!(!orphan.path.exists());
    assert!(!branch_exists(&r, "keel/o"));
    let e = wt::confirm(&folder, "sess_o").unwrap_err();
    assert_eq!(e.code, ErrorCode::WorktreeNotFound);
    assert_eq!(wt::list(&folder).len(), 1, "only the confirmed one is left");
}

#[test]
fn ten_worktrees_made_at_once_under_cpu_load() {
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(tmp.path());
    let folder = tmp.path().join("worktrees");
    let _busy = Busy::start(2);
    let handles: Vec<_> = (0..10)
        .map(|i| {
            let (r, folder) = (r.clone(), folder.clone());
            std::thread::spawn(move || {
                let name = format!("sess_{i:02}");
                let branch = format!("keel/{i:02}");
                wt::create(&folder, &req(&name, &r, &branch)).map(|c| c.path)
            })
        })
        .collect();
    let mut paths = Vec::new();
    for h in handles {
        paths.push(h.join().unwrap().unwrap_or_else(|e| panic!("{e:?}")));
    }
    let listed = wt::list(&folder);
    assert_eq!(listed.len(), 10);
    assert!(listed
        .iter()
        .all(|w| w.state == WorktreeState::Ready && w.dirty == Some(false)));
    for p in &paths {
        assert_eq!(
            std::fs::read_to_string(p.join("README.md")).unwrap(),
            "two\n"
        );
    }
    // And removed at once.
    let handles: Vec<_> = (0..10)
        .map(|i| {
            let folder = folder.clone();
            std::thread::spawn(move || wt::remove(&folder, &format!("sess_{i:02}"), false, false))
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap_or_else(|e| panic!("{e:?}"));
    }
    assert!(wt::list(&folder).is_empty());
    assert_eq!(git(&r, &["worktree", "list"]).lines().count(), 1);
}

#[test]
fn a_repository_with_a_submodule() {
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(tmp.path());
    let sub = tmp.path().join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q"]);
    std::fs::write(sub.join("s.txt"), "s\n").unwrap();
    git(&sub, &["add", "-A"]);
    git(&sub, &["commit", "-qm", "sub"]);
    git(
        &r,
        &[
            "submodule",
            "add",
            "-q",
            sub.to_str().unwrap(),
            "vendor/sub",
        ],
    );
    git(&r, &["commit", "-qm", "with a submodule"]);
    let folder = tmp.path().join("worktrees");
    let made = wt::create(&folder, &req("sess_s", &r, "keel/s")).unwrap();
    // Not populated, as with `git worktree add`.
    assert!(made.path.join("vendor/sub").is_dir());
    assert!(!made.path.join("vendor/sub/s.txt").exists());
    assert_eq!(wt::list(&folder)[0].dirty, Some(false));
    // Populated by hand, it is still removed (git refuses worktrees with submodules).
    git(&made.path, &["submodule", "update", "--init", "-q"]);
    assert!(made.path.join("vendor/sub/s.txt").exists());
    wt::remove(&folder, "sess_s", false, false).unwrap();
    assert!(!made.path.exists());
    assert!(!branch_exists(&r, "keel/s"));
}

#[test]
fn overlay_copies_the_uncommitted_changes_of_one_tree_into_another() {
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(tmp.path());
    let folder = tmp.path().join("worktrees");
    std::fs::write(r.join("README.md"), "edited\n").unwrap();
    std::fs::write(r.join("src/new.rs"), "new\n").unwrap();
    std::fs::remove_file(r.join("src/lib.rs")).unwrap();
    std::fs::write(r.join("ignored.log"), "x\n").unwrap();
    std::fs::write(r.join(".gitignore"), "*.log\n").unwrap();
    let made = wt::create(&folder, &req("sess_o", &r, "keel/o")).unwrap();
    let n = wt::overlay(&r, &made.path).unwrap();
    assert_eq!(n, 4, "README.md, src/lib.rs, src/new.rs, .gitignore");
    assert_eq!(
        std::fs::read_to_string(made.path.join("README.md")).unwrap(),
        "edited\n"
    );
    assert_eq!(
        std::fs::read_to_string(made.path.join("src/new.rs")).unwrap(),
        "new\n"
    );
    assert!(!made.path.join("src/lib.rs").exists());
    assert!(!made.path.join("ignored.log").exists());
    let changed: Vec<String> = wt::diff_files(&made.path, &made.record.base_commit)
        .unwrap()
        .into_iter()
        .map(|c| c.path)
        .collect();
    assert_eq!(
        changed,
        [".gitignore", "README.md", "src/lib.rs", "src/new.rs"]
    );
}

#[test]
fn snapshots_tell_what_changed_in_between_without_touching_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let r = repo(tmp.path());
    let folder = tmp.path().join("worktrees");
    // The starting point holds uncommitted changes of its own.
    std::fs::write(r.join("src/new.rs"), "new\n").unwrap();
    std::fs::write(r.join(".gitignore"), "*.log\n").unwrap();
    let made = wt::create(&folder, &req("sub_s", &r, "keel/sub-s")).unwrap();
    wt::overlay(&r, &made.path).unwrap();
    let status_before = git(&made.path, &["status", "--porcelain"]);
    let start = wt::snapshot(&made.path).unwrap();
    assert_eq!(wt::snapshot(&made.path).unwrap(), start, "nothing changed");
    // An edit, a new file in a new folder, a deletion of an uncommitted file, an
    // ignored file, a binary file, a large file, a mode change alone.
    std::fs::write(made.path.join("README.md"), "three\n").unwrap();
    std::fs::create_dir_all(made.path.join("docs")).unwrap();
    std::fs::write(made.path.join("docs/guide.md"), "guide\n").unwrap();
    std::fs::remove_file(made.path.join("src/new.rs")).unwrap();
    std::fs::write(made.path.join("build.log"), "ignored\n").unwrap();
    std::fs::write(made.path.join("blob.bin"), [0u8, 159, 146, 150]).unwrap();
    std::fs::write(made.path.join("big.txt"), "x".repeat(100)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        made.path.join("src/lib.rs"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let end = wt::snapshot(&made.path).unwrap();
    assert_ne!(start, end);
    // The worktree's own index is as it was.
    assert_eq!(
        git(&made.path, &["diff", "--cached", "--name-only"]),
        "",
        "nothing staged"
    );
    assert_ne!(git(&made.path, &["status", "--porcelain"]), status_before);
    let changes = wt::diff_trees(&made.path, &start, &end, "", 50).unwrap();
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "README.md",
            "big.txt",
            "blob.bin",
            "docs/guide.md",
            "src/new.rs"
        ]
    );
    assert_eq!(changes[0].before, wt::Side::File(b"two\n".to_vec()));
    assert_eq!(changes[0].after, wt::Side::File(b"three\n".to_vec()));
    assert_eq!(changes[1].before, wt::Side::Absent);
    assert_eq!(changes[1].after, wt::Side::TooLarge(100));
    assert_eq!(changes[2].after, wt::Side::File(vec![0, 159, 146, 150]));
    assert_eq!(changes[4].before, wt::Side::File(b"new\n".to_vec()));
    assert_eq!(changes[4].after, wt::Side::Absent);
    // Asked about one folder: its paths, relative to it.
    let docs = wt::diff_trees(&made.path, &start, &end, "docs", 50).unwrap();
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0].path, "guide.md");
    // A tree that is not one is a structured error.
    let e = wt::diff_trees(&made.path, "0123", &end, "", 50).unwrap_err();
    assert_eq!(e.code, ErrorCode::WorktreeUnavailable);
    // Outside git.
    let plain = tempfile::tempdir().unwrap();
    assert_eq!(
        wt::snapshot(plain.path()).unwrap_err().code,
        ErrorCode::WorktreeUnavailable
    );
    wt::remove(&folder, "sub_s", true, false).unwrap();
    assert!(!made.path.exists());
}
