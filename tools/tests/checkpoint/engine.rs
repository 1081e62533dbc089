//! The store: listing, reopening, deduplication, bad ids, limits, and what a
//! checkpoint has to look at (the watcher's cost follows the changes, not the tree).

use super::*;

#[test]
fn the_watcher_looks_at_changed_paths_only_and_the_scan_at_everything() {
    for watch in modes() {
        let w = ws();
        for d in 0..20 {
            for f in 0..50 {
                w.write(&format!("pkg{d}/file{f}.txt"), &format!("{d} {f}\n"));
            }
        }
        let config = CheckpointConfig {
            watch,
            watch_min_paths: 0,
            racy_window: std::time::Duration::ZERO,
            ..CheckpointConfig::default()
        };
        let mut cps = Checkpoints::open(&w.root, &w.store, "s1", config).expect("open");
        cps.checkpoint("c1", json!(null)).expect("baseline");
        assert!(cps.last_stats().full);
        assert_eq!(cps.last_stats().examined, 20 * 50 + 20);
        w.sh("echo x >> pkg3/file7.txt && echo y >> pkg11/file0.txt && rm pkg19/file49.txt");
        let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
        assert_eq!(c2.changed.len(), 3);
        let stats = cps.last_stats();
        if watch {
            assert!(!stats.full);
            assert_eq!(stats.examined, 3, "{stats:?}");
        } else {
            assert!(stats.full);
            assert_eq!(stats.examined, 20 * 50 + 20 - 1);
        }
        assert_eq!(stats.changed, 3);
        // Nothing changed: nothing to look at with the watcher.
        let c3 = cps.checkpoint("c3", json!(null)).expect("c3");
        assert!(c3.changed.is_empty());
        if watch {
            assert_eq!(cps.last_stats().examined, 0);
        }
    }
}

#[test]
fn checkpoints_survive_reopening_and_list_their_changes() {
    let w = ws();
    w.write("a.txt", "a1\n");
    w.write("b.txt", "b1\n");
    {
        let mut cps = w.open(true);
        cps.checkpoint("c1", json!({"requestId": "req_1"}))
            .expect("c1");
        w.write("a.txt", "a2\n");
        cps.checkpoint("c2", json!({"requestId": "req_2"}))
            .expect("c2");
    }
    let first = {
        let mut s = w.snapshot();
        s.insert("a.txt".into(), ('f', b"a1\n".to_vec(), 0o644));
        s
    };
    w.write("c.txt", "made while closed\n");
    let mut cps = w.open(true);
    let list = cps.list();
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].id, "c1");
    assert_eq!(list[0].meta, json!({"requestId": "req_1"}));
    assert!(list[0].baseline && !list[1].baseline);
    assert_eq!(
        changed(&list[1]),
        vec![("a.txt".to_string(), ChangeKind::Modified)]
    );
    let c3 = cps.checkpoint("c3", json!(null)).expect("c3");
    assert!(
        cps.last_stats().full,
        "the first refresh after opening scans"
    );
    assert_eq!(
        changed(&c3),
        vec![("c.txt".to_string(), ChangeKind::Created)]
    );
    let report = cps.restore("c1").expect("restore");
    assert!(report.not_restorable.is_empty(), "{report:?}");
    let mut now = w.snapshot();
    // Modes depend on the umask; compare contents and kinds.
    for v in now.values_mut() {
        v.2 = 0;
    }
    let mut want = first;
    for v in want.values_mut() {
        v.2 = 0;
    }
    assert_eq!(now, want);
}

#[test]
fn identical_contents_are_stored_once() {
    let w = ws();
    for i in 0..50 {
        w.write(&format!("copy{i}.txt"), "the same content\n");
    }
    let mut cps = w.open(false);
    cps.checkpoint("c1", json!(null)).expect("c1");
    let packs: Vec<u8> = fs::read_dir(cps.store_dir().join("packs"))
        .expect("packs")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
        .flat_map(|e| fs::read(e.path()).expect("read"))
        .collect();
    let needle = b"the same content\n";
    let copies = packs.windows(needle.len()).filter(|w| w == needle).count();
    assert_eq!(copies, 1);
}

#[test]
fn unknown_and_duplicate_ids_are_errors() {
    let w = ws();
    w.write("a", "a\n");
    let mut cps = w.open(true);
    assert!(matches!(
        cps.restore("nope"),
        Err(CheckpointError::UnknownCheckpoint(id)) if id == "nope"
    ));
    cps.checkpoint("c1", json!(null)).expect("c1");
    assert!(matches!(
        cps.checkpoint("c1", json!(null)),
        Err(CheckpointError::DuplicateId(_))
    ));
    assert_eq!(cps.list().len(), 1);
}

#[test]
fn a_workspace_over_the_file_limit_is_refused() {
    let w = ws();
    for i in 0..30 {
        w.write(&format!("f{i}"), "x");
    }
    let config = CheckpointConfig {
        max_files: 10,
        ..CheckpointConfig::default()
    };
    let mut cps = Checkpoints::open(&w.root, &w.store, "s1", config).expect("open");
    let err = cps.checkpoint("c1", json!(null)).expect_err("too many");
    assert!(matches!(err, CheckpointError::TooManyFiles { limit: 10 }));
    assert!(err.to_string().contains("more than 10"));
    assert!(cps.list().is_empty());
}

#[test]
fn a_store_inside_the_workspace_is_not_recorded() {
    let w = ws();
    w.write("a.txt", "a\n");
    let store = w.root.join(".keel-store");
    let mut cps =
        Checkpoints::open(&w.root, &store, "s1", CheckpointConfig::default()).expect("open");
    cps.checkpoint("c1", json!(null)).expect("c1");
    w.write("b.txt", "b\n");
    let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
    assert_eq!(
        changed(&c2),
        vec![("b.txt".to_string(), ChangeKind::Created)]
    );
    cps.restore("c1").expect("restore");
    assert!(cps.store_dir().join("sessions/s1").is_dir());
    assert!(cps.store_dir().starts_with(&store));
    assert_eq!(w.read("b.txt"), None);
    assert_eq!(w.read("a.txt").as_deref(), Some("a\n"));
}

#[test]
fn a_damaged_record_is_reported_not_skipped() {
    let w = ws();
    w.write("a.txt", "a\n");
    let store_dir = {
        let mut cps = w.open(false);
        cps.checkpoint("c1", json!(null)).expect("c1");
        cps.store_dir().to_path_buf()
    };
    fs::write(store_dir.join("sessions/s1/00000001.json"), b"{not json").expect("damage");
    let err = Checkpoints::open(&w.root, &w.store, "s1", CheckpointConfig::default())
        .expect_err("damaged");
    assert!(matches!(err, CheckpointError::Corrupt { .. }), "{err}");
}

/// A file created right after a checkpoint — within one tick of the clock that stamps
/// files, so its change time can read earlier than the instant the checkpoint started —
/// is still a created file: restoring that checkpoint removes it.
#[test]
fn a_file_created_just_after_a_checkpoint_is_removed_by_restoring_it() {
    for watch in modes() {
        let w = ws();
        w.write("a.txt", "a\n");
        let mut cps = w.open(watch);
        for i in 0..20 {
            // An idle pause first: the coarse clock that stamps files then lags behind
            // the precise one when the checkpoint starts (as between two steps of a
            // request).
            std::thread::sleep(std::time::Duration::from_millis(3));
            let before = format!("before{i}");
            cps.checkpoint(&before, json!(null)).expect("before");
            w.write(&format!("new{i}.txt"), "made\n");
            cps.checkpoint(&format!("after{i}"), json!(null))
                .expect("after");
            let report = cps.restore(&before).expect("restore");
            assert_eq!(
                report
                    .files
                    .iter()
                    .map(|f| (f.path.as_str(), f.action))
                    .collect::<Vec<_>>(),
                vec![(format!("new{i}.txt").as_str(), RestoreAction::Removed)],
                "watch {watch}, round {i}"
            );
            assert!(!w.root.join(format!("new{i}.txt")).exists());
        }
    }
}

/// A file that was there all along but ignored, and shows up when the ignore rule goes,
/// was not created by anyone: restoring a checkpoint from before it showed keeps it.
#[test]
fn a_file_that_was_ignored_stays_when_restoring_from_before_it_showed() {
    for watch in modes() {
        let w = ws();
        w.write(".gitignore", "*.log\n");
        w.write("old.log", "kept\n");
        let config = CheckpointConfig {
            watch,
            watch_min_paths: 0,
            racy_window: std::time::Duration::from_millis(20),
            ..CheckpointConfig::default()
        };
        // Older than the first checkpoint by more than the racy window.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut cps = Checkpoints::open(&w.root, &w.store, "s1", config).expect("open");
        cps.checkpoint("c1", json!(null)).expect("c1");
        w.write(".gitignore", "");
        let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
        assert!(
            c2.changed.iter().any(|c| c.path == "old.log"),
            "{:?}",
            c2.changed
        );
        cps.restore("c1").expect("restore");
        assert_eq!(w.read("old.log").as_deref(), Some("kept\n"));
        assert_eq!(w.read(".gitignore").as_deref(), Some("*.log\n"));
    }
}

/// A small tree is scanned (no inotify instance, whose closing would hold up a
/// short-lived process's exit); once a walk finds `watch_min_paths` paths the watcher
/// starts, the next checkpoint walks once more to watch every directory, and from then
/// on only changed paths are looked at. A new session of a tree the store knows is
/// large watches from its first walk.
#[test]
fn only_a_tree_past_the_threshold_is_watched() {
    let w = ws();
    for f in 0..5 {
        w.write(&format!("src/f{f}.txt"), "x\n");
    }
    let config = CheckpointConfig {
        watch_min_paths: 30,
        racy_window: std::time::Duration::ZERO,
        ..CheckpointConfig::default()
    };
    let mut cps = Checkpoints::open(&w.root, &w.store, "s1", config.clone()).expect("open");
    cps.checkpoint("c1", json!(null)).expect("c1");
    assert_eq!(cps.detection(), Detection::Scan, "a small tree is scanned");
    assert_eq!(
        CheckpointConfig::default().watch_min_paths,
        keel_tools::checkpoint::WATCH_MIN_PATHS
    );

    for f in 0..40 {
        w.write(&format!("gen/g{f}.txt"), "y\n");
    }
    let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
    assert_eq!(c2.changed.len(), 40);
    assert!(cps.last_stats().full);
    assert_eq!(
        cps.detection(),
        Detection::Watch,
        "the tree grew past 30 paths"
    );

    w.write("src/f1.txt", "changed\n");
    let c3 = cps.checkpoint("c3", json!(null)).expect("c3");
    assert_eq!(
        changed(&c3),
        vec![("src/f1.txt".to_string(), ChangeKind::Modified)]
    );
    assert!(cps.last_stats().full, "the walk that places the watches");

    w.write("gen/g7.txt", "changed\n");
    let c4 = cps.checkpoint("c4", json!(null)).expect("c4");
    assert_eq!(
        changed(&c4),
        vec![("gen/g7.txt".to_string(), ChangeKind::Modified)]
    );
    let stats = cps.last_stats();
    assert!(!stats.full, "{stats:?}");
    assert!(stats.examined < 10, "{stats:?}");
    drop(cps);

    let second = Checkpoints::open(&w.root, &w.store, "s2", config).expect("open");
    assert_eq!(
        second.detection(),
        Detection::Watch,
        "the store's head is large"
    );
    let unwatched = CheckpointConfig {
        watch: false,
        watch_min_paths: 0,
        ..CheckpointConfig::default()
    };
    let third = Checkpoints::open(&w.root, &w.store, "s3", unwatched).expect("open");
    assert_eq!(third.detection(), Detection::Scan, "watch = false wins");
}
