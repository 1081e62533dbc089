//! A takeover on a node that does not have the session's workspace, with real `keel
//! serve` nodes on one PostgreSQL database: node a serves a session in a folder of its
//! own and is killed; its checkpoints leave with `keel sessions export` (from a's
//! KEEL_HOME) and reach node b with `keel sessions import --checkpoints-only`; b
//! refuses the resume with `WORKSPACE_MISSING` (after the lease ran out, and without
//! taking the session over), then takes it over with `materializeTo`: the folder is
//! made from the newest checkpoint, watchers learn the new owner, and the next
//! request works there.
#![allow(clippy::unwrap_used)]

mod nodes_support;

use std::process::Command;

use keel_envelope::{ErrorCode, Event};
use keel_store_pg::testing::PgServer;
use nodes_support::*;

fn keel_cli(home: &std::path::Path, url: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .arg("--json")
        .current_dir(home)
        .env("KEEL_HOME", home)
        .env("KEEL_STORE", url)
        .env_remove("KEEL_MODEL")
        .env("KEEL_SOCKET", home.join("no-daemon.sock"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn complete(c: &mut Conn, sid: &str) {
    let rid = c.send(
        "request.send",
        Some(sid),
        serde_json::json!({ "message": "log it" }),
    );
    let end = c.until(|e| {
        e.request_id == rid
            && matches!(
                e.type_name(),
                "session.completed" | "session.failed" | "request.rejected"
            )
    });
    assert_eq!(end.last().unwrap().type_name(), "session.completed");
}

#[test]
fn a_node_without_the_workspace_takes_the_session_over_into_a_folder_made_from_checkpoints() {
    let url = PgServer::shared().create_database();
    let script = serde_json::json!({"turns": [
        {"toolCalls": [{"name": "run_shell", "arguments": {"command": "echo hi >> log.txt"}}]},
        {"text": "logged"}
    ]});
    let cluster = cluster_with(url.clone(), script, 2);
    for n in ["a", "b"] {
        let home = cluster.root.path().join(n);
        std::fs::create_dir_all(&home).unwrap();
    }
    let root = std::fs::canonicalize(cluster.root.path()).unwrap();
    let disk_a = root.join("a-disk");
    std::fs::create_dir_all(&disk_a).unwrap();
    let mut node_a = cluster.node("a");
    let mut ca = Conn::open(&node_a);
    let sid = start_session(&mut ca, &disk_a);
    complete(&mut ca, &sid);
    assert_eq!(
        std::fs::read_to_string(disk_a.join("log.txt")).unwrap(),
        "hi\n"
    );
    node_a.child.kill().unwrap();
    node_a.child.wait().unwrap();

    // The checkpoints a took leave with an export from its KEEL_HOME.
    let file = root.join("s.keel");
    let r = keel_cli(
        &root.join("a"),
        &url,
        &["sessions", "export", &sid, file.to_str().unwrap()],
    );
    assert_eq!(r["checkpoints"], 3, "{r}");
    // Node b cannot see a's disk.
    std::fs::rename(&disk_a, root.join("a-disk-unreachable")).unwrap();
    let r = keel_cli(
        &root.join("b"),
        &url,
        &[
            "sessions",
            "import",
            file.to_str().unwrap(),
            "--checkpoints-only",
        ],
    );
    assert_eq!(r["checkpoints"], 3, "{r}");

    let node_b = cluster.node("b");
    let mut cb = Conn::open(&node_b);
    // While a's lease is live: owned elsewhere; then: the workspace is missing.
    let missing = resume_once_free(&mut cb, &sid);
    assert_eq!(missing.code, ErrorCode::WorkspaceMissing, "{missing:?}");
    assert_eq!(missing.details["checkpoints"], 3);

    let made = root.join("b-disk").join("ws");
    let rid = cb.send(
        "session.resume",
        None,
        serde_json::json!({ "sessionId": sid, "materializeTo": made }),
    );
    let got =
        cb.until(|e| e.request_id == rid && matches!(e.type_name(), "session.resumed" | "error"));
    let owner_changed = got.iter().find_map(|e| match &e.event {
        Event::SessionOwnerChanged(o) => Some(o.clone()),
        _ => None,
    });
    let owner_changed = owner_changed.unwrap_or_else(|| panic!("{got:?}"));
    assert_eq!(owner_changed.previous_owner, "a");
    assert_eq!(owner_changed.owner, "b");
    let Event::SessionResumed(resumed) = &got.last().unwrap().event else {
        panic!("{got:?}");
    };
    let m = resumed.materialized.as_ref().unwrap();
    assert_eq!(m.workspace, made.display().to_string());
    assert!(m.missing.is_empty(), "{m:?}");
    assert_eq!(resumed.session.workspace, made.display().to_string());
    assert_eq!(
        std::fs::read_to_string(made.join("log.txt")).unwrap(),
        "hi\n"
    );

    // The next request works in the folder made for it.
    complete(&mut cb, &sid);
    assert_eq!(
        std::fs::read_to_string(made.join("log.txt")).unwrap(),
        "hi\nhi\n"
    );
    let rid = cb.send("session.list", None, serde_json::json!({}));
    let Event::SessionList(l) = cb.answer(&rid, &["session.list"]).event else {
        panic!("session.list");
    };
    let s = l.sessions.iter().find(|s| s.session_id == sid).unwrap();
    assert_eq!(s.workspace, made.display().to_string());
}
