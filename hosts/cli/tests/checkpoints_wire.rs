//! Checkpoints over the wire, through the real `keel bridge` on a scripted model, with
//! real files in temporary folders: a rewind undone by rewinding to the checkpoint it
//! recorded, forks and rewinds that say who shares the workspace and what the others
//! changed, deleting a session freeing what only it used, and a full disk under
//! `KEEL_HOME/checkpoints` giving one warning while the request goes on.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use keel_envelope::{Envelope, Event};
use keel_testsupport::bridge::{command, Bridge, Setup};
use serde_json::{json, Value};

fn script(home: &Path, turns: Value) -> String {
    let p = home.join("script.json");
    std::fs::write(&p, json!({ "turns": turns }).to_string()).unwrap();
    format!("scripted:{}", p.display())
}

/// A bridge on `ws` with `KEEL_HOME=home` (shell commands unsandboxed, so the test
/// does not depend on bubblewrap) and the given turns.
fn bridge(home: &Path, ws: &Path, turns: Value) -> Bridge {
    std::fs::write(home.join("config.toml"), "sandbox = \"off\"\n").unwrap();
    let model = script(home, turns);
    Bridge::start(Setup::new(env!("CARGO_BIN_EXE_keel"), home, ws, &model))
}

fn start(b: &mut Bridge, rid: &str) -> String {
    b.start_session(rid, r#"{"permissionMode":"auto"}"#)
}

fn send(b: &mut Bridge, session: &str, rid: &str, message: &str) {
    b.request(session, rid, &json!({ "message": message }).to_string());
    let done = b.until(|e| {
        e.request_id == rid
            && matches!(
                e.type_name(),
                "session.completed" | "session.failed" | "request.rejected"
            )
    });
    let last = done.last().unwrap();
    assert_eq!(last.type_name(), "session.completed", "{last:?}");
}

fn payload(env: &Envelope) -> Value {
    serde_json::to_value(env).unwrap()["payload"].clone()
}

fn rewind(b: &mut Bridge, session: &str, rid: &str, to: &str) -> Value {
    b.send(&command(
        "session.rewind",
        rid,
        Some(session),
        json!({"toRequestId": to, "conversation": false}),
    ));
    let env = b.answer(rid);
    assert_eq!(env.type_name(), "session.rewound", "{env:?}");
    payload(&env)
}

fn list(b: &mut Bridge, session: &str, rid: &str) -> Vec<Value> {
    b.send(&command("checkpoint.list", rid, Some(session), json!({})));
    let env = b.answer(rid);
    assert_eq!(env.type_name(), "checkpoint.list", "{env:?}");
    payload(&env)["checkpoints"].as_array().unwrap().clone()
}

fn read(ws: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(ws.join(rel)).ok()
}

#[test]
fn a_rewind_is_undone_by_rewinding_to_the_checkpoint_it_recorded() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut b = bridge(
        home.path(),
        ws.path(),
        json!([
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "1"}}]},
            {"text": "wrote"},
            {"toolCalls": [{"name": "run_shell", "arguments": {"command": "echo 2 > x.txt && echo y > y.txt"}}]},
            {"text": "ran"}
        ]),
    );
    let sid = start(&mut b, "s1");
    send(&mut b, &sid, "e1", "write x");
    assert_eq!(read(ws.path(), "x.txt").as_deref(), Some("1"));
    send(&mut b, &sid, "e2", "run it");
    assert_eq!(read(ws.path(), "x.txt").as_deref(), Some("2\n"));
    assert_eq!(read(ws.path(), "y.txt").as_deref(), Some("y\n"));

    // Back to before e1: x.txt and y.txt did not exist.
    let r = rewind(&mut b, &sid, "w1", "e1");
    assert_eq!(read(ws.path(), "x.txt"), None);
    assert_eq!(read(ws.path(), "y.txt"), None);
    let undo = r["undoCheckpointId"].as_str().unwrap().to_owned();
    assert!(r.get("sharedWith").is_none(), "{r}");
    assert!(r.get("changedByOthers").is_none(), "{r}");

    // The state before the rewind is the newest checkpoint listed.
    let l = list(&mut b, &sid, "l1");
    let newest = l.last().unwrap();
    assert_eq!(newest["checkpointId"], undo.as_str(), "{l:?}");
    assert_eq!(newest["beforeRewindTo"], "e1");
    assert_eq!(newest["requestId"], "w1");
    let others: Vec<&Value> = l
        .iter()
        .filter(|c| c.get("beforeRewindTo").is_some())
        .collect();
    assert_eq!(others.len(), 1, "{l:?}");

    // Rewinding to it brings back what e2 did.
    let r2 = rewind(&mut b, &sid, "w2", &undo);
    assert_eq!(read(ws.path(), "x.txt").as_deref(), Some("2\n"));
    assert_eq!(read(ws.path(), "y.txt").as_deref(), Some("y\n"));
    // And that rewind can be undone in turn.
    let undo2 = r2["undoCheckpointId"].as_str().unwrap().to_owned();
    assert_ne!(undo2, undo);
    rewind(&mut b, &sid, "w3", &undo2);
    assert_eq!(read(ws.path(), "x.txt"), None);
    assert_eq!(read(ws.path(), "y.txt"), None);

    // A conversation-only rewind touches no file and records nothing.
    b.send(&command(
        "session.rewind",
        "w4",
        Some(&sid),
        json!({"toRequestId": "e2", "files": false}),
    ));
    let p = payload(&b.answer("w4"));
    assert!(p.get("undoCheckpointId").is_none(), "{p}");
    assert_eq!(list(&mut b, &sid, "l2").len(), l.len() + 2);
    b.stop();
}

#[test]
fn forks_and_rewinds_name_the_sessions_sharing_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut b = bridge(
        home.path(),
        ws.path(),
        json!([
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "x.txt", "content": "1"}}]},
            {"text": "parent wrote"},
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "fork.txt", "content": "f"}}]},
            {"text": "fork wrote"},
            {"text": "fork again"}
        ]),
    );
    let parent = start(&mut b, "s1");
    send(&mut b, &parent, "e1", "write x");
    b.send(&command("session.fork", "f1", Some(&parent), json!({})));
    let forked = b.answer("f1");
    let fork = forked.session_id.clone().unwrap();
    let p = payload(&forked);
    assert_eq!(p["sharedWith"], json!([parent.clone()]), "{p}");
    // The fork's model is a fresh instance of the script: its first request writes
    // x.txt = "1" again (no change), its second writes fork.txt, and its third
    // request's checkpoint records that.
    send(&mut b, &fork, "b1", "write x");
    send(&mut b, &fork, "b2", "write in the fork");
    send(&mut b, &fork, "b3", "again");
    assert_eq!(read(ws.path(), "fork.txt").as_deref(), Some("f"));

    let r = rewind(&mut b, &parent, "w1", "e1");
    assert_eq!(r["sharedWith"], json!([fork.clone()]), "{r}");
    assert_eq!(
        r["changedByOthers"],
        json!([{"sessionId": fork.clone(), "path": "fork.txt", "change": "created"}]),
        "{r}"
    );
    // The shared folder went back for both: the host was told.
    assert_eq!(read(ws.path(), "fork.txt"), None);

    // Once the fork is closed, the parent's workspace is its own again.
    b.send(&command("session.close", "c1", Some(&fork), json!({})));
    b.until_on("c1", "session.closed");
    let r = rewind(
        &mut b,
        &parent,
        "w2",
        r["undoCheckpointId"].as_str().unwrap(),
    );
    assert!(r.get("sharedWith").is_none(), "{r}");
    assert_eq!(read(ws.path(), "fork.txt").as_deref(), Some("f"));
    b.stop();
}

/// The bytes of the files under `dir`.
fn bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

#[test]
fn deleting_a_session_frees_what_only_it_used() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // 300 KB that no other file shares.
    let mut rng = keel_testsupport::Rng::new(7);
    let big: String = (0..300_000)
        .map(|_| char::from(b'a' + (rng.next() % 26) as u8))
        .collect();
    let mut b = bridge(
        home.path(),
        ws.path(),
        json!([
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "big.txt", "content": big}}]},
            {"text": "wrote"},
            {"toolCalls": [{"name": "run_shell", "arguments": {"command": "rm big.txt"}}]},
            {"text": "removed"},
            {"text": "other"}
        ]),
    );
    let a = start(&mut b, "s1");
    send(&mut b, &a, "e1", "write");
    send(&mut b, &a, "e2", "remove");
    // A second session of the same workspace, after big.txt went.
    let c = start(&mut b, "s2");
    send(&mut b, &c, "c1", "hello");
    let store = home.path().join("checkpoints");
    let before = bytes(&store);
    assert!(before > 300_000, "{before}");

    b.send(&command(
        "session.delete",
        "d1",
        None,
        json!({"sessionId": a}),
    ));
    assert_eq!(b.answer("d1").type_name(), "session.deleted");
    let after = bytes(&store);
    assert!(before - after >= 300_000, "{before} -> {after}");
    // The other session's checkpoints are whole.
    let l = list(&mut b, &c, "l1");
    assert_eq!(l[0]["checkpointId"], "c1");
    std::fs::write(ws.path().join("later.txt"), "l").unwrap();
    let r = rewind(&mut b, &c, "w1", "c1");
    assert_eq!(
        r["files"],
        json!([{"path": "later.txt", "action": "removed"}]),
        "{r}"
    );
    b.stop();
}

/// A small tmpfs at `path`, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn tmpfs(path: &Path, size: &str) -> Option<Tmpfs> {
    std::fs::create_dir_all(path).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(path)
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| Tmpfs(path.to_path_buf()))
}

#[test]
fn a_full_disk_under_the_checkpoint_store_is_a_warning_and_the_request_goes_on() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "a").unwrap();
    let Some(_mount) = tmpfs(&home.path().join("checkpoints"), "64k") else {
        eprintln!("cannot mount a tmpfs here (not root?): the full-disk test needs one");
        return;
    };
    // Fill it.
    let fill = home.path().join("checkpoints/fill");
    let _ = std::fs::write(&fill, vec![7u8; 1 << 20]);
    let mut b = bridge(
        home.path(),
        ws.path(),
        json!([
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}]},
            {"text": "wrote"},
            {"text": "again"},
            {"text": "third"}
        ]),
    );
    let sid = start(&mut b, "s1");
    b.request(&sid, "e1", &json!({"message": "write"}).to_string());
    let seen = b.until(|e| e.request_id == "e1" && e.type_name() == "session.completed");
    let warnings: Vec<&Envelope> = seen
        .iter()
        .filter(|e| matches!(&e.event, Event::Warning(w) if w.details["reason"] == "disk_full"))
        .collect();
    assert_eq!(warnings.len(), 1, "{seen:?}");
    assert_eq!(read(ws.path(), "b.txt").as_deref(), Some("b"));
    // Told once per session; the next request runs as well.
    b.request(&sid, "e2", &json!({"message": "again"}).to_string());
    let seen = b.until(|e| e.request_id == "e2" && e.type_name() == "session.completed");
    assert!(!seen.iter().any(|e| e.type_name() == "warning"), "{seen:?}");
    // Room again: the session's checkpoints start.
    std::fs::remove_file(&fill).unwrap();
    b.request(&sid, "e3", &json!({"message": "third"}).to_string());
    b.until(|e| e.request_id == "e3" && e.type_name() == "session.completed");
    let l = list(&mut b, &sid, "l1");
    assert!(l.iter().any(|c| c["checkpointId"] == "e3"), "{l:?}");
    b.stop();
}
