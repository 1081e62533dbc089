//! Workspace checkpoints kept in PostgreSQL, with real `keel serve` nodes on one
//! database: node a serves a session (a git work tree, so files recorded by blob id
//! must travel by content) and dies with its disk and its KEEL_HOME; node b, which
//! never saw the session, lists a's checkpoints, makes the workspace again from the
//! newest, rewinds to the first, and its own checkpoints go to the database too. And
//! on a shared filesystem: b takes the session over in place and rewinds it with the
//! checkpoints a took.
#![allow(clippy::unwrap_used)]

mod nodes_support;

use std::path::Path;
use std::sync::Arc;

use keel_envelope::{ErrorCode, Event};
use keel_kernel::store::Store;
use keel_store_pg::testing::PgServer;
use keel_store_pg::PgKernelStore;
use keel_testsupport::git;
use nodes_support::*;

/// Two requests: the first writes `a.txt`, the second appends to it and writes `b.txt`.
fn script() -> serde_json::Value {
    let shell = |c: &str| serde_json::json!({"toolCalls": [{"name": "run_shell", "arguments": {"command": c}}]});
    serde_json::json!({"turns": [
        shell("echo one > a.txt"), {"text": "wrote a"},
        shell("echo two >> a.txt && echo new > b.txt"), {"text": "wrote b"},
    ]})
}

/// A clean git checkout of 60 files (enough that the checkpoint asks git which are
/// unchanged, and records them by blob id).
fn repository(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("README.md"), "the project\n").unwrap();
    for i in 0..60 {
        std::fs::write(
            dir.join(format!("src/m{i}.rs")),
            format!("pub fn f{i}() {{}}\n"),
        )
        .unwrap();
    }
    git(dir, &["init", "-q", "."]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "init"]);
    // Older than git's racy window, so the index vouches for every file.
    std::thread::sleep(std::time::Duration::from_millis(1100));
}

fn send(c: &mut Conn, sid: &str, message: &str) -> String {
    let rid = c.send(
        "request.send",
        Some(sid),
        serde_json::json!({ "message": message }),
    );
    let end = c.until(|e| {
        e.request_id == rid
            && matches!(
                e.type_name(),
                "session.completed" | "session.failed" | "request.rejected"
            )
    });
    assert_eq!(
        end.last().unwrap().type_name(),
        "session.completed",
        "{end:?}"
    );
    rid
}

fn checkpoints_in_database(url: &str, sid: &str) -> usize {
    let store: Arc<dyn Store> = Arc::new(PgKernelStore::open(url).unwrap());
    store
        .shared_checkpoints()
        .unwrap()
        .checkpoints(sid)
        .unwrap()
        .len()
}

fn checkpoint_list(c: &mut Conn, sid: &str) -> Vec<keel_envelope::events::CheckpointEntry> {
    let rid = c.send("checkpoint.list", Some(sid), serde_json::json!({}));
    match c.answer(&rid, &["checkpoint.list"]).event {
        Event::CheckpointList(l) => {
            assert!(l.disabled_reason.is_none(), "{l:?}");
            l.checkpoints
        }
        other => panic!("checkpoint.list: {other:?}"),
    }
}

fn rewind_files(
    c: &mut Conn,
    sid: &str,
    to_request: &str,
) -> keel_envelope::events::SessionRewound {
    let rid = c.send(
        "session.rewind",
        Some(sid),
        serde_json::json!({ "toRequestId": to_request, "files": true, "conversation": false }),
    );
    match c.answer(&rid, &["session.rewound"]).event {
        Event::SessionRewound(r) => r,
        other => panic!("session.rewind: {other:?}"),
    }
}

/// Node a serves `sid`'s two requests in `disk`, then dies (SIGKILL), and its
/// KEEL_HOME is gone with it; answers the two request ids.
fn serve_on_a_then_lose_it(cluster: &Cluster, disk: &Path) -> (String, String, String) {
    let mut node_a = cluster.node("a");
    let mut ca = Conn::open(&node_a);
    let sid = start_session(&mut ca, disk);
    let r1 = send(&mut ca, &sid, "write a");
    let r2 = send(&mut ca, &sid, "write b");
    assert_eq!(
        std::fs::read_to_string(disk.join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    // A request's checkpoint and its call's, for each request: in the database already.
    assert_eq!(checkpoints_in_database(&cluster.url, &sid), 4);
    node_a.child.kill().unwrap();
    node_a.child.wait().unwrap();
    std::fs::remove_dir_all(cluster.root.path().join("a")).unwrap();
    (sid, r1, r2)
}

#[test]
fn a_node_that_never_saw_the_session_makes_its_workspace_and_rewinds_from_the_database() {
    let url = PgServer::shared().create_database();
    let cluster = cluster_with(url.clone(), script(), 2);
    let root = std::fs::canonicalize(cluster.root.path()).unwrap();
    let disk_a = root.join("a-disk");
    repository(&disk_a);
    let (sid, r1, r2) = serve_on_a_then_lose_it(&cluster, &disk_a);
    // Node b cannot see a's disk.
    std::fs::rename(&disk_a, root.join("a-disk-unreachable")).unwrap();

    let node_b = cluster.node("b");
    let mut cb = Conn::open(&node_b);
    let missing = resume_once_free(&mut cb, &sid);
    assert_eq!(missing.code, ErrorCode::WorkspaceMissing, "{missing:?}");
    // Counted from the database: b has none of its own.
    assert_eq!(missing.details["checkpoints"], 4, "{missing:?}");

    let made = root.join("b-disk");
    let rid = cb.send(
        "session.resume",
        None,
        serde_json::json!({ "sessionId": sid, "materializeTo": made }),
    );
    let got =
        cb.until(|e| e.request_id == rid && matches!(e.type_name(), "session.resumed" | "error"));
    let Event::SessionResumed(resumed) = &got.last().unwrap().event else {
        panic!("{got:?}");
    };
    let m = resumed.materialized.as_ref().unwrap();
    assert!(m.missing.is_empty(), "{m:?}");
    // The newest checkpoint: taken before the second request's shell call.
    assert_eq!(
        std::fs::read_to_string(made.join("a.txt")).unwrap(),
        "one\n"
    );
    assert!(!made.join("b.txt").exists());
    // Files a recorded by git blob id came by content.
    assert_eq!(
        std::fs::read_to_string(made.join("README.md")).unwrap(),
        "the project\n"
    );
    assert_eq!(
        std::fs::read_to_string(made.join("src/m59.rs")).unwrap(),
        "pub fn f59() {}\n"
    );

    let listed = checkpoint_list(&mut cb, &sid);
    let of: Vec<&str> = listed.iter().map(|c| c.request_id.as_str()).collect();
    assert_eq!(
        of,
        [r1.as_str(), r1.as_str(), r2.as_str(), r2.as_str()],
        "{listed:?}"
    );

    // Back to before the first request: a.txt goes, the tracked files stay, and what
    // was written since the newest checkpoint is recorded first (the undo point).
    std::fs::write(made.join("local.txt"), "written on b\n").unwrap();
    let rewound = rewind_files(&mut cb, &sid, &r1);
    assert!(rewound.not_restorable.is_empty(), "{rewound:?}");
    assert!(rewound.undo_checkpoint_id.is_some(), "{rewound:?}");
    assert!(!made.join("a.txt").exists());
    assert!(!made.join("local.txt").exists());
    assert!(made.join("src/m0.rs").exists());
    // The undo point b recorded went to the database too.
    assert_eq!(checkpoints_in_database(&url, &sid), 5);

    // b's own requests work there, and their checkpoints are kept as well.
    send(&mut cb, &sid, "write a again");
    assert_eq!(
        std::fs::read_to_string(made.join("a.txt")).unwrap(),
        "one\n"
    );
    assert_eq!(checkpoints_in_database(&url, &sid), 7);
}

#[test]
fn on_a_shared_filesystem_the_next_owner_rewinds_with_the_checkpoints_the_dead_one_took() {
    let url = PgServer::shared().create_database();
    let cluster = cluster_with(url.clone(), script(), 2);
    let disk = std::fs::canonicalize(&cluster.workspace).unwrap();
    std::fs::write(disk.join("notes.txt"), "kept\n").unwrap();
    let (sid, r1, r2) = serve_on_a_then_lose_it(&cluster, &disk);

    let node_b = cluster.node("b");
    let mut cb = Conn::open(&node_b);
    take_over(&mut cb, &sid);
    assert_eq!(checkpoint_list(&mut cb, &sid).len(), 4);
    // To the second request's start: b.txt goes, a.txt is as the first request left it.
    let rewound = rewind_files(&mut cb, &sid, &r2);
    assert!(rewound.not_restorable.is_empty(), "{rewound:?}");
    assert_eq!(
        std::fs::read_to_string(disk.join("a.txt")).unwrap(),
        "one\n"
    );
    assert!(!disk.join("b.txt").exists());
    let rewound = rewind_files(&mut cb, &sid, &r1);
    assert!(rewound.not_restorable.is_empty(), "{rewound:?}");
    assert!(!disk.join("a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(disk.join("notes.txt")).unwrap(),
        "kept\n"
    );
}
