//! Checkpoints carried as they are taken (`CheckpointHome::carry_new`): each record
//! once, after only the objects not carried before; a fresh mirror lists everything
//! its first record reaches; a failing sink carries nothing further and the next
//! call starts over; what was carried is taken in elsewhere and restores.

use keel_tools::checkpoint::{BundleItem, CheckpointHome, Mirror};

use super::bundle::{collect, Exported};
use super::*;

/// What one carry handed out: objects (hash → bytes) and records.
fn carry(home: &CheckpointHome, ws: &Path, mirror: &mut Mirror) -> Exported {
    let (carried, answer) = collect(|sink| home.carry_new(ws, "s1", mirror, sink));
    answer.expect("carry");
    carried
}

fn seqs(records: &[(u64, Vec<u8>)]) -> Vec<u64> {
    records.iter().map(|r| r.0).collect()
}

#[test]
fn each_record_goes_once_with_only_the_objects_not_carried_before() {
    let w = ws();
    for i in 0..20 {
        w.write(&format!("src/f{i}.txt"), &format!("file {i}\n"));
    }
    w.write("docs/readme.md", "docs\n");
    let home = CheckpointHome::new(&w.store);
    let mut cps = home
        .open(&w.root, "s1", CheckpointConfig::default())
        .expect("open");
    cps.checkpoint("c1", json!({"n": 1})).expect("c1");
    let mut mirror = Mirror::default();
    let (first, records) = carry(&home, &w.root, &mut mirror);
    assert_eq!(seqs(&records), [1]);
    assert_eq!(mirror.carried(), 1);
    assert!(first.values().any(|b| b == b"file 7\n"));
    // root, src, docs and 21 contents.
    assert_eq!(first.len(), 24, "{:?}", first.keys());

    w.write("src/f3.txt", "changed\n");
    cps.checkpoint("c2", json!({"n": 2})).expect("c2");
    let (second, records) = carry(&home, &w.root, &mut mirror);
    assert_eq!(seqs(&records), [2]);
    // The new content, the new src tree and the new root: not the unchanged files.
    assert_eq!(second.len(), 3, "{:?}", second.keys());
    assert!(second.values().any(|b| b == b"changed\n"));
    assert!(!second.values().any(|b| b == b"file 7\n"));

    // Nothing new: nothing handed out.
    let (none, records) = carry(&home, &w.root, &mut mirror);
    assert!(none.is_empty() && records.is_empty());

    // A sink that refuses the record: the mirror stays at 2 and forgets what it sent.
    w.write("docs/readme.md", "docs, again\n");
    cps.checkpoint("c3", json!({"n": 3})).expect("c3");
    let refused = home.carry_new(&w.root, "s1", &mut mirror, &mut |item| match item {
        BundleItem::Record { .. } => Err(std::io::Error::other("the store is down")),
        BundleItem::Object { .. } => Ok(()),
    });
    assert!(refused.is_err());
    assert_eq!(mirror.carried(), 2);
    // The next carry names everything record 3 reaches, since what went before is
    // no longer known.
    let (again, records) = carry(&home, &w.root, &mut mirror);
    assert_eq!(seqs(&records), [3]);
    assert_eq!(again.len(), 24, "{:?}", again.keys());
    assert_eq!(home.last_seq(&w.root, "s1"), 3);

    // A mirror of a session whose first two records are kept elsewhere starts at 3.
    let mut late = Mirror::after(2);
    let (all, records) = carry(&home, &w.root, &mut late);
    assert_eq!(seqs(&records), [3]);
    assert_eq!(all.len(), 24);
    drop(cps);

    // Everything carried, taken in by another home, restores there.
    let mut everything = first;
    everything.extend(second);
    everything.extend(all);
    let (_, mut bodies) = carry(&home, &w.root, &mut Mirror::default());
    bodies.sort_by_key(|r| r.0);
    let there = CheckpointHome::new(w.outside.join("home"));
    let gone = Path::new("/nonexistent/keel/carried");
    let mut imp = there.importer(gone, "s1").expect("importer");
    for (h, b) in &everything {
        imp.object(h, b).expect("object");
    }
    for (seq, b) in &bodies {
        imp.record(*seq, b).expect("record");
    }
    assert_eq!(imp.finish().expect("finish"), 3);
    let to = w.outside.join("made");
    fs::create_dir_all(&to).expect("mkdir");
    there
        .materialize(gone, &to, "s1")
        .expect("materialize")
        .expect("some");
    assert_eq!(
        fs::read_to_string(to.join("docs/readme.md")).expect("docs"),
        "docs, again\n"
    );
    let mut made = there
        .open(&to, "s1", CheckpointConfig::default())
        .expect("open");
    made.restore("c1").expect("rewind");
    assert_eq!(
        fs::read_to_string(to.join("src/f3.txt")).expect("f3"),
        "file 3\n"
    );
}
