//! Worktrees at repository scale, with real git: a session in a worktree of a
//! 10,000-file repository (every file there, an edit and its rewind in the
//! worktree only), and session starts given up while their worktree is being made
//! (the caller's future dropped at random moments, under CPU load): what was made
//! is taken back, nothing is left half-made, and the starts that finished keep
//! theirs.

use std::path::Path;

use keel_envelope::commands::{SessionRewind, SessionStart};
use keel_envelope::worktree::Isolation;
use keel_testsupport::Rng;
use serde_json::json;

use super::worktrees::{branch_exists, fixture_with, git, Wt};
use super::*;

const FILES: usize = 10_000;

/// The fixture's repository with `FILES` more files committed (100 folders of
/// 100), so that making a worktree is a real checkout.
fn large(turns: Vec<Turn>) -> Wt {
    let w = fixture_with(turns, |_| {});
    for d in 0..FILES / 100 {
        let dir = w.repo.join(format!("d{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f:03}.txt")), format!("file {d}/{f}\n")).unwrap();
        }
    }
    git(&w.repo, &["add", "-A"]);
    git(&w.repo, &["commit", "-qm", "ten thousand files"]);
    w
}

/// Files under `dir`, `.git` left out.
fn count_files(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_name() == ".git" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                n += 1;
            }
        }
    }
    n
}

fn isolated() -> SessionStart {
    SessionStart::new().isolation(Isolation::Worktree)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_in_a_worktree_of_a_ten_thousand_file_repository() {
    let w = large(vec![
        call(
            "edit_file",
            json!({"path": "d042/f017.txt", "edits": [{"oldText": "file 42/17", "newText": "edited"}]}),
        ),
        say("done"),
    ]);
    let (h, mut ev) = w.kernel.start_session(isolated()).await.unwrap();
    let started = until(&mut ev, "session.started").await;
    let Event::SessionStarted(s) = &started.last().unwrap().event else {
        panic!("{started:?}")
    };
    let tree = s.worktree.clone().expect("a worktree");
    let root = std::path::PathBuf::from(&tree.path);
    assert_eq!(count_files(&root), FILES + 1, "every file is checked out");
    let rid = h.send("edit one file").await.unwrap();
    let done = until(&mut ev, "session.completed").await;
    assert!(
        types(&done).contains(&"tool.call.completed".to_owned()),
        "{:?}",
        types(&done)
    );
    let edited = root.join("d042/f017.txt");
    assert_eq!(std::fs::read_to_string(&edited).unwrap(), "edited\n");
    assert_eq!(
        std::fs::read_to_string(w.repo.join("d042/f017.txt")).unwrap(),
        "file 42/17\n",
        "the repository's tree is untouched"
    );
    h.command(CommandPayload::SessionRewind(
        SessionRewind::new()
            .to_request_id(rid)
            .files(true)
            .conversation(false),
    ))
    .await
    .unwrap();
    until(&mut ev, "session.rewound").await;
    assert_eq!(std::fs::read_to_string(&edited).unwrap(), "file 42/17\n");
    assert_eq!(
        git(&root, &["status", "--porcelain"]),
        "",
        "back at its base"
    );
    assert_eq!(git(&w.repo, &["status", "--porcelain"]), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_given_up_while_its_worktree_is_made_leaves_nothing() {
    let w = large(vec![]);
    // How long one start takes here, to spread the interrupts over it.
    let t0 = std::time::Instant::now();
    let (h, _ev) = w.kernel.start_session(isolated()).await.unwrap();
    let full = t0.elapsed();
    let mut kept = vec![h.id().to_owned()];
    let _busy = Busy::start(2);
    let mut rng = Rng::new(0x5eed_0026);
    let mut given_up = 0;
    for round in 0..12 {
        // From at once to a little past a whole start.
        let after = full.mul_f64(rng.below(120) as f64 / 100.0);
        match tokio::time::timeout(after, w.kernel.start_session(isolated())).await {
            Ok(Ok((h, _))) => kept.push(h.id().to_owned()),
            Ok(Err(e)) => panic!("round {round}: {e:?}"),
            Err(_) => given_up += 1,
        }
    }
    assert!(given_up > 0, "no start was given up");
    // The kernel's shutdown waits for what the given-up starts made to be taken back.
    w.kernel.shutdown("test").await;
    let records = std::fs::read_dir(w.folder.join("records"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".json")
        })
        .count();
    assert_eq!(records, kept.len(), "one record per session started");
    let mut folders: Vec<String> = std::fs::read_dir(&w.folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "records")
        .collect();
    folders.sort();
    let mut want = kept.clone();
    want.sort();
    assert_eq!(
        folders, want,
        "only the started sessions' worktrees are left"
    );
    let worktrees = git(&w.repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        worktrees.matches("worktree ").count(),
        kept.len() + 1,
        "{worktrees}"
    );
    let branches = git(&w.repo, &["branch", "--list", "keel/*"]);
    assert_eq!(branches.lines().count(), kept.len(), "{branches}");
    for id in &kept {
        let branch = format!("keel/{}", keel_tools::worktree::short_id(id));
        assert!(branch_exists(&w.repo, &branch), "{branch}");
    }
    // Every record left is ready: its session was stored.
    for e in std::fs::read_dir(w.folder.join("records")).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        assert!(text.contains("\"state\": \"ready\""), "{text}");
    }
}
