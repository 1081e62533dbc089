//! A session's checkpoints carried to another store: files recorded by git blob id
//! travel by content, the workspace is made again from the newest checkpoint where the
//! old one does not exist, and a damaged bundle writes no record.

use keel_tools::checkpoint::{BundleError, BundleItem, CheckpointHome};

use super::safety::git;
use super::*;

/// Objects (hash → bytes) and records (number, body) handed out.
pub(super) type Exported = (BTreeMap<String, Vec<u8>>, Vec<(u64, Vec<u8>)>);

/// What `hand_out` hands its sink (each object at most once), and what it answers.
pub(super) fn collect<T>(
    hand_out: impl FnOnce(&mut dyn FnMut(BundleItem<'_>) -> std::io::Result<()>) -> T,
) -> (Exported, T) {
    let mut objects = BTreeMap::new();
    let mut records = Vec::new();
    let answer = hand_out(&mut |item| {
        match item {
            BundleItem::Object { hash, bytes } => {
                assert!(
                    objects.insert(hash.to_owned(), bytes.to_vec()).is_none(),
                    "{hash} twice"
                );
            }
            BundleItem::Record { seq, body } => records.push((seq, body.to_vec())),
        }
        Ok(())
    });
    ((objects, records), answer)
}

/// Every item a session's export hands out: objects (hash → bytes) and records.
fn export(home: &CheckpointHome, ws: &Path, id: &str) -> Exported {
    let ((objects, records), summary) = collect(|sink| home.export_session(ws, id, sink));
    let summary = summary.expect("export");
    assert_eq!(summary.records, records.len());
    assert_eq!(summary.objects, objects.len());
    (objects, records)
}

#[test]
fn checkpoints_travel_by_content_and_make_the_workspace_again_elsewhere() {
    let w = ws();
    git(&w.root, &["init", "-q", "."]);
    w.write("tracked.txt", "from git\n");
    w.write("src/lib.rs", "pub fn f() {}\n");
    // Enough files for git's answer to be asked (a few are simply read).
    for i in 0..40 {
        w.write(&format!("src/m{i}.rs"), &format!("// {i}\n"));
    }
    git(&w.root, &["add", "-A"]);
    git(&w.root, &["commit", "-qm", "init"]);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    w.write("untracked.txt", "mine\n");
    fs::write(w.root.join("blob.bin"), b"\0\x01\x02").expect("binary");
    let here = CheckpointHome::new(&w.store);
    let mut cps = here
        .open(&w.root, "s1", CheckpointConfig::default())
        .expect("open");
    cps.checkpoint("c1", json!({"n": 1})).expect("c1");
    assert!(cps.last_stats().git >= 40, "{:?}", cps.last_stats());
    w.write("src/lib.rs", "pub fn g() {}\n");
    cps.checkpoint("c2", json!({"n": 2})).expect("c2");
    drop(cps);

    let (objects, records) = export(&here, &w.root, "s1");
    assert_eq!(records.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2]);
    // The committed file's content is carried, though the store held only its blob id.
    assert!(
        objects.values().any(|b| b == b"from git\n"),
        "git content carried"
    );
    assert!(!records
        .iter()
        .any(|(_, b)| String::from_utf8_lossy(b).contains("\"g\"")));

    // Another machine: the old path does not exist there.
    let there_dir = w.outside.join("home");
    let there = CheckpointHome::new(&there_dir);
    let gone = Path::new("/nonexistent/keel/ws");
    let mut imp = there.importer(gone, "s1").expect("importer");
    for (h, b) in &objects {
        imp.object(h, b).expect("object");
    }
    for (seq, b) in &records {
        imp.record(*seq, b).expect("record");
    }
    assert_eq!(imp.finish().expect("finish"), 2);
    assert_eq!(there.count_records(gone, "s1"), 2);

    let to = w.outside.join("made");
    fs::create_dir_all(&to).expect("mkdir");
    let made = there
        .materialize(gone, &to, "s1")
        .expect("materialize")
        .expect("some");
    assert_eq!(made.checkpoint_id, "c2");
    assert_eq!(made.meta, json!({"n": 2}));
    let missing: Vec<&str> = made
        .report
        .not_restorable
        .iter()
        .map(|n| n.path.as_str())
        .collect();
    assert_eq!(missing, vec!["blob.bin"], "{:?}", made.report);
    assert_eq!(
        fs::read_to_string(to.join("tracked.txt")).expect("tracked"),
        "from git\n"
    );
    assert_eq!(
        fs::read_to_string(to.join("src/lib.rs")).expect("lib"),
        "pub fn g() {}\n"
    );
    assert_eq!(
        fs::read_to_string(to.join("untracked.txt")).expect("untracked"),
        "mine\n"
    );
    assert!(!to.join(".git").exists());
    // The records moved with the workspace; rewinding there works.
    assert_eq!(there.count_records(gone, "s1"), 0);
    assert_eq!(there.count_records(&to, "s1"), 2);
    let mut moved = there
        .open(&to, "s1", CheckpointConfig::default())
        .expect("open there");
    moved.restore("c1").expect("rewind");
    assert_eq!(
        fs::read_to_string(to.join("src/lib.rs")).expect("lib"),
        "pub fn f() {}\n"
    );
}

#[test]
fn a_damaged_bundle_writes_no_record() {
    let w = ws();
    w.write("a.txt", "a\n");
    let here = CheckpointHome::new(&w.store);
    let mut cps = here
        .open(&w.root, "s1", CheckpointConfig::default())
        .expect("open");
    cps.checkpoint("c1", json!(null)).expect("c1");
    drop(cps);
    let (objects, records) = export(&here, &w.root, "s1");
    let there = CheckpointHome::new(w.outside.join("home"));
    let target = w.outside.join("ws");
    fs::create_dir_all(&target).expect("mkdir");

    // An object that does not match its name.
    let mut imp = there.importer(&target, "s1").expect("importer");
    let (h, b) = objects.iter().next().expect("an object");
    let mut wrong = b.clone();
    wrong.push(b'!');
    assert!(matches!(
        imp.object(h, &wrong),
        Err(BundleError::Invalid(_))
    ));
    assert!(matches!(
        imp.object("../x", b),
        Err(BundleError::Invalid(_))
    ));
    drop(imp);

    // A record whose trees are not there.
    let mut imp = there.importer(&target, "s1").expect("importer");
    imp.record(records[0].0, &records[0].1).expect("record");
    let e = imp.finish().expect_err("missing tree");
    assert!(matches!(e, BundleError::Invalid(_)), "{e}");
    assert_eq!(there.count_records(&target, "s1"), 0);
    // A record of another number, or of another format.
    let mut imp = there.importer(&target, "s1").expect("importer");
    assert!(imp.record(7, &records[0].1).is_err());
    assert!(imp.record(1, b"{}").is_err());
    drop(imp);
    // No pack was left behind: the store has no object.
    let packs = there.store_dir(&target).expect("store").join("packs");
    let left: Vec<_> = fs::read_dir(&packs)
        .expect("packs")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Whole, it goes in.
    let mut imp = there.importer(&target, "s1").expect("importer");
    for (h, b) in &objects {
        imp.object(h, b).expect("object");
    }
    imp.record(records[0].0, &records[0].1).expect("record");
    assert_eq!(imp.finish().expect("finish"), 1);
    assert_eq!(there.count_records(&target, "s1"), 1);
}
