//! One store per workspace: sessions share it, a second baseline of an unchanged tree
//! stores nothing, pruning by age and size (closed sessions first, pinned never), a
//! session's deletion frees what only it used, rewinds that can be undone, and what a
//! session sees of the others.

use std::collections::HashSet;
use std::time::Duration;

use keel_tools::checkpoint::{CheckpointHome, PruneRules};

use super::*;

fn open_as(w: &Ws, session: &str, watch: bool) -> Checkpoints {
    let config = CheckpointConfig {
        watch,
        watch_min_paths: 0,
        ..CheckpointConfig::default()
    };
    Checkpoints::open(&w.root, &w.store, session, config).expect("open")
}

fn tree_of(w: &Ws, dirs: usize, files: usize) {
    for d in 0..dirs {
        for f in 0..files {
            w.write(
                &format!("pkg{d}/src/file{f}.rs"),
                &format!("// {d}/{f}\n{}", "fn body() {}\n".repeat(40)),
            );
        }
    }
}

fn du(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("read_dir").flatten() {
            let m = e.metadata().expect("meta");
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

fn packs(store_dir: &Path) -> usize {
    fs::read_dir(store_dir.join("packs"))
        .expect("packs")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .count()
}

#[test]
fn a_second_session_on_an_unchanged_workspace_reads_nothing_and_stores_almost_nothing() {
    for watch in modes() {
        let w = ws();
        tree_of(&w, 20, 50);
        // Files of a real workspace were not all written within the last second.
        std::thread::sleep(Duration::from_millis(1100));
        let mut a = open_as(&w, "sess-a", watch);
        a.checkpoint("a1", json!(null)).expect("baseline a");
        let store = a.store_dir().to_path_buf();
        let after_a = du(&w.store);
        let packs_a = packs(&store);
        assert!(after_a > 1000 * 500, "the first baseline saved the tree");
        drop(a);
        let mut b = open_as(&w, "sess-b", watch);
        assert_eq!(b.store_dir(), store, "one store per workspace");
        b.checkpoint("b1", json!(null)).expect("baseline b");
        let stats = b.last_stats();
        assert!(stats.full);
        assert_eq!(stats.changed, 0, "a stat scan against the workspace's head");
        assert_eq!(packs(&store), packs_a, "nothing new stored");
        let growth = du(&w.store) - after_a;
        assert!(growth < 4096, "second session added {growth} bytes");
        // The second session's checkpoints restore from objects the first one wrote.
        w.write("pkg3/src/file7.rs", "changed\n");
        fs::remove_file(w.root.join("pkg4/src/file0.rs")).expect("rm");
        b.checkpoint("b2", json!(null)).expect("b2");
        let report = b.restore("b1").expect("restore");
        assert_eq!(report.files.len(), 2, "{report:?}");
        assert!(w
            .read("pkg3/src/file7.rs")
            .expect("back")
            .starts_with("// 3/7"));
        assert!(w.read("pkg4/src/file0.rs").is_some());
    }
}

#[test]
fn the_baseline_reads_only_what_changed_since_the_last_session() {
    let w = ws();
    tree_of(&w, 10, 10);
    // Older than the racy window: the first session's reads are final.
    std::thread::sleep(Duration::from_millis(1100));
    let mut a = open_as(&w, "a", false);
    a.checkpoint("a1", json!(null)).expect("a1");
    drop(a);
    w.write("pkg1/src/file1.rs", "new content\n");
    w.write("fresh.txt", "fresh\n");
    let mut b = open_as(&w, "b", false);
    let b1 = b.checkpoint("b1", json!(null)).expect("b1");
    assert!(b1.baseline && b1.changed.is_empty());
    assert_eq!(b.last_stats().changed, 2, "{:?}", b.last_stats());
    w.write("pkg1/src/file1.rs", "again\n");
    let b2 = b.checkpoint("b2", json!(null)).expect("b2");
    assert_eq!(
        changed(&b2),
        vec![("pkg1/src/file1.rs".to_string(), ChangeKind::Modified)]
    );
    b.restore("b1").expect("restore");
    assert_eq!(
        w.read("pkg1/src/file1.rs").as_deref(),
        Some("new content\n")
    );
    assert_eq!(w.read("fresh.txt").as_deref(), Some("fresh\n"));
}

#[test]
fn a_rewind_can_be_undone() {
    for watch in modes() {
        let w = ws();
        let mut cps = open_as(&w, "s", watch);
        // Request e1 writes x.txt = 1; request e2 runs a shell command.
        cps.checkpoint("e1", json!(null)).expect("e1");
        w.write("x.txt", "1\n");
        cps.checkpoint("e2", json!(null)).expect("e2");
        w.sh("echo 2 > x.txt && echo y > y.txt");
        let (report, undo) = cps
            .restore_undoable("e1", "undo-1", json!({"undo": true}))
            .expect("rewind");
        assert!(undo.recorded && undo.checkpoint_id == "undo-1");
        assert!(report.not_restorable.is_empty(), "{report:?}");
        assert_eq!(w.read("x.txt"), None);
        assert_eq!(w.read("y.txt"), None);
        // Undo the rewind.
        let (_, again) = cps
            .restore_undoable("undo-1", "undo-2", json!(null))
            .expect("undo");
        assert_eq!(w.read("x.txt").as_deref(), Some("2\n"));
        assert_eq!(w.read("y.txt").as_deref(), Some("y\n"));
        assert!(again.recorded);
        // Nothing changed since the last checkpoint: it holds the state already.
        cps.checkpoint("plain", json!(null)).expect("plain");
        let (_, none) = cps
            .restore_undoable("e1", "undo-3", json!(null))
            .expect("same state");
        assert!(!none.recorded);
        assert_eq!(none.checkpoint_id, "plain");
        cps.restore("plain").expect("back to plain");
        assert_eq!(w.read("x.txt").as_deref(), Some("2\n"));
        assert!(matches!(
            cps.restore_undoable("nope", "u", json!(null)),
            Err(CheckpointError::UnknownCheckpoint(_))
        ));
    }
}

#[test]
fn sessions_see_each_other_and_what_the_others_changed() {
    let w = ws();
    w.write("shared.txt", "0\n");
    let mut a = open_as(&w, "a", true);
    let mut b = open_as(&w, "b", true);
    assert_eq!(a.shared_with(), vec!["b".to_string()]);
    a.checkpoint("a1", json!(null)).expect("a1");
    b.checkpoint("b1", json!(null)).expect("b1");
    w.write("by-b.txt", "b\n");
    b.checkpoint("b2", json!(null)).expect("b2");
    let others = a.changed_by_others_since("a1").expect("others");
    assert_eq!(others.len(), 1, "{others:?}");
    assert_eq!(others[0].session_id, "b");
    assert_eq!(others[0].path, "by-b.txt");
    assert_eq!(others[0].change, ChangeKind::Created);
    drop(b);
    assert!(a.shared_with().is_empty(), "b is closed");
    assert!(matches!(
        Checkpoints::open(&w.root, &w.store, "../evil", CheckpointConfig::default()),
        Err(CheckpointError::InvalidSessionId(_))
    ));
}

#[test]
fn deleting_a_session_frees_what_only_it_used() {
    let w = ws();
    w.write("common.txt", "shared by both\n");
    let home = CheckpointHome::new(&w.store);
    let mut a = open_as(&w, "a", false);
    a.checkpoint("a1", json!(null)).expect("a1");
    w.write("only-a.txt", &"a private file\n".repeat(20_000));
    a.checkpoint("a2", json!(null)).expect("a2");
    drop(a);
    fs::remove_file(w.root.join("only-a.txt")).expect("rm");
    let mut b = open_as(&w, "b", false);
    b.checkpoint("b1", json!(null)).expect("b1");
    drop(b);
    let before = home.total_bytes();
    let dry = home.delete_session("a", true).expect("dry run");
    assert!(dry.dry_run);
    assert_eq!(dry.dropped.len(), 2);
    assert!(dry.bytes_freed() > 250_000, "{dry:?}");
    assert_eq!(home.total_bytes(), before, "a dry run changes nothing");
    let done = home.delete_session("a", false).expect("delete");
    assert_eq!(done.sessions_removed, vec!["a".to_string()]);
    assert!(
        before - home.total_bytes() > 250_000,
        "freed {}",
        before - home.total_bytes()
    );
    assert!(home.verify().expect("verify").is_empty());
    // What b shares with a is still there.
    let mut b = open_as(&w, "b", false);
    fs::remove_file(w.root.join("common.txt")).expect("rm");
    b.restore("b1").expect("restore");
    assert_eq!(w.read("common.txt").as_deref(), Some("shared by both\n"));
}

#[test]
fn pruning_drops_old_and_closed_first_never_pinned_and_open_engines_cope() {
    let w = ws();
    let home = CheckpointHome::new(&w.store);
    let mut sessions = Vec::new();
    for (i, s) in ["old", "closed", "open", "pinned"].iter().enumerate() {
        let mut cps = open_as(&w, s, false);
        for k in 0..3 {
            w.write(
                &format!("{s}-{k}.txt"),
                &format!("{s} {k} {}\n", "x".repeat(50_000)),
            );
            cps.checkpoint(&format!("{s}{k}"), json!(i)).expect("cp");
        }
        sessions.push(cps);
    }
    let mut open = sessions.remove(2);
    let _pinned = sessions.pop();
    drop(sessions);
    let usage = home.usage().expect("usage");
    assert_eq!(usage.len(), 1);
    assert_eq!(usage[0].checkpoints, 12);
    assert_eq!(usage[0].workspace.as_deref(), Some(w.root.as_path()));
    let rules = PruneRules {
        max_bytes: Some(1),
        pinned: HashSet::from(["pinned".to_string()]),
        ..PruneRules::default()
    };
    let dry = home.prune(&rules, true).expect("dry");
    let order: Vec<&str> = dry.dropped.iter().map(|d| d.session_id.as_str()).collect();
    assert_eq!(order.len(), 9, "{order:?}");
    assert!(!order.contains(&"pinned"));
    // Closed sessions' checkpoints go before the open one's.
    let first_open = order
        .iter()
        .position(|s| *s == "open")
        .expect("open dropped");
    assert!(order[..first_open].iter().all(|s| *s != "open"));
    assert!(dry.bytes_freed() > 0);
    // Age: only what is older than the limit goes.
    let aged = PruneRules {
        max_age: Some(Duration::from_secs(3600)),
        now_ms: Some(open.list()[0].created_ms + 3_600_000 + 1),
        ..PruneRules::default()
    };
    let aged = home.prune(&aged, true).expect("aged");
    assert!(!aged.dropped.is_empty());
    assert!(aged
        .dropped
        .iter()
        .all(|d| d.created_ms < open.list()[0].created_ms + 1));
    // Real run: the open engine's records go; it reloads and still works.
    let done = home.prune(&rules, false).expect("prune");
    assert_eq!(done.dropped.len(), 9);
    assert!(home.verify().expect("verify").is_empty());
    w.write("after.txt", "after\n");
    let c = open
        .checkpoint("open-after", json!(null))
        .expect("after prune");
    assert_eq!(open.list().len(), 1, "{:?}", open.list());
    assert!(c.baseline, "its checkpoints went: a new baseline");
    fs::remove_file(w.root.join("open-0.txt")).expect("rm");
    open.restore("open-after").expect("restore");
    assert!(w.read("open-0.txt").expect("back").starts_with("open 0"));
    assert!(home.verify().expect("verify").is_empty());
}

/// The files this process has open under `dir` (other tests of this binary open
/// files of their own at the same time; only this test's directory counts).
fn open_files(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| fs::read_link(e.path()).ok())
                .filter(|target| target.starts_with(dir))
                .collect()
        })
        .unwrap_or_default()
}

/// Open sessions cost no open file each: a runtime with thousands of sessions open
/// stays below its limit of open files. Each still shows as open to the others, and
/// closing them lets them show as closed.
#[test]
fn open_sessions_hold_no_file_each() {
    let w = ws();
    w.write("a.txt", "a\n");
    let base = w.root.parent().expect("the test's directory").to_path_buf();
    let before = open_files(&base).len();
    let engines: Vec<Checkpoints> = (0..300)
        .map(|i| open_as(&w, &format!("s{i:03}"), false))
        .collect();
    let during = open_files(&base).len();
    assert!(
        during < before + 30,
        "300 open sessions hold {} more open files",
        during - before
    );
    let probe = open_as(&w, "probe", false);
    assert_eq!(probe.shared_with().len(), 300);
    drop(engines);
    assert!(probe.shared_with().is_empty(), "the 300 are closed");
    drop(probe);
    let after = open_files(&base);
    assert!(
        after.len() <= before,
        "closing them gives the files back: {after:?}"
    );
}
