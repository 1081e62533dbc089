//! Portable sessions through the real binary, with real files in temporary folders:
//! a session with edits and shell edits over two requests in a bridge, exported with
//! `keel sessions export`, imported into a fresh KEEL_HOME after its workspace is gone
//! (another machine), resumed over the bridge with `materializeTo` (files equal to
//! the newest checkpoint, binary files listed missing, rewind and a new request
//! there); `keel sessions import --workspace` making the workspace at import time,
//! `--as-new`, an id the store has already; and bad files (missing, not an export,
//! another version, truncated at many points, a path-escaping entry name, a damaged
//! object), each a structured error with exit code 3 that leaves nothing behind.
#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use keel_envelope::Envelope;
use keel_testsupport::bridge::{command, Bridge, Setup};
use serde_json::{json, Value};

fn keel(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .current_dir(home)
        .env("KEEL_HOME", home)
        .env_remove("KEEL_MODEL")
        .env_remove("KEEL_LOG")
        .env_remove("KEEL_STORE")
        .env("KEEL_SOCKET", home.join("no-daemon.sock"))
        .output()
        .unwrap()
}

/// `keel args --json` in `home`: exit code and the JSON it printed.
fn keel_json(home: &Path, args: &[&str]) -> (i32, Value) {
    let mut all = args.to_vec();
    all.push("--json");
    let out = keel(home, &all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {:?} {stderr}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), v)
}

fn home_with_config(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("config.toml"), "sandbox = \"off\"\n").unwrap();
    dir.to_path_buf()
}

fn script(path: &Path, turns: Value) -> String {
    std::fs::write(path, json!({ "turns": turns }).to_string()).unwrap();
    format!("scripted:{}", path.display())
}

fn payload(env: &Envelope) -> Value {
    serde_json::to_value(env).unwrap()["payload"].clone()
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

fn read(ws: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(ws.join(rel)).ok()
}

/// Every file under `dir` (relative path → content), `.keel*` files left out.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A session made in a bridge on `ws` (`KEEL_HOME=home`): a binary file there from
/// the start, then request e1 writes a.txt, request e2 changes it and makes d/y.txt
/// with a shell command. Returns the session's id once the bridge has stopped.
fn make_session(home: &Path, ws: &Path, scripts: &Path) -> String {
    std::fs::write(ws.join("b.bin"), b"bin\0ary").unwrap();
    std::fs::write(ws.join("keep.txt"), "kept\n").unwrap();
    let model = script(
        &scripts.join("first.json"),
        json!([
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}}]},
            {"text": "wrote"},
            {"toolCalls": [{"name": "run_shell", "arguments": {"command": "echo 2 > a.txt && mkdir -p d && echo y > d/y.txt"}}]},
            {"text": "ran"}
        ]),
    );
    let mut b = Bridge::start(Setup::new(env!("CARGO_BIN_EXE_keel"), home, ws, &model));
    let sid = b.start_session("s1", r#"{"permissionMode":"auto"}"#);
    send(&mut b, &sid, "e1", "write a");
    send(&mut b, &sid, "e2", "run it");
    assert_eq!(read(ws, "a.txt").as_deref(), Some("2\n"));
    b.stop();
    sid
}

#[test]
fn a_session_moves_to_another_machine_and_resumes_in_a_materialised_workspace() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let (home1, home2) = (
        home_with_config(&root.join("home1")),
        home_with_config(&root.join("home2")),
    );
    let scripts = root.join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let ws1 = root.join("ws1");
    std::fs::create_dir_all(&ws1).unwrap();
    let sid = make_session(&home1, &ws1, &scripts);
    let expected = files(&ws1);

    let file = root.join("session.keel");
    let (code, report) = keel_json(
        &home1,
        &["sessions", "export", &sid, file.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["sessionId"], sid.as_str());
    assert_eq!(report["workspace"], ws1.to_str().unwrap());
    assert_eq!(report["messages"], 8, "{report}");
    // e1, its write_file, e2, its run_shell, and the workspace as exported.
    assert_eq!(report["checkpoints"], 5, "{report}");
    let recorded = report["recorded"].as_str().unwrap().to_owned();
    // An unchanged workspace exported again records nothing more.
    let again = root.join("again.keel");
    let (code, report2) = keel_json(
        &home1,
        &["sessions", "export", &sid, again.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{report2}");
    assert_eq!(report2["checkpoints"], 5, "{report2}");
    assert!(report2.get("recorded").is_none(), "{report2}");

    // Another machine: neither the workspace nor the first script is there.
    std::fs::rename(&ws1, root.join("ws1-elsewhere")).unwrap();
    std::fs::remove_file(scripts.join("first.json")).unwrap();
    let (code, imported) = keel_json(&home2, &["sessions", "import", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{imported}");
    assert_eq!(imported["sessionId"], sid.as_str());
    assert_eq!(imported["workspace"], ws1.to_str().unwrap());
    assert_eq!(imported["workspaceMissing"], true);
    assert_eq!(imported["checkpoints"], 5);
    let (_, listed) = keel_json(&home2, &["sessions", "list"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["sessionId"], sid.as_str());

    let other = root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let model = script(
        &scripts.join("second.json"),
        json!([
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "c.txt", "content": "3"}}]},
            {"text": "wrote c"}
        ]),
    );
    let mut b = Bridge::start(Setup::new(
        env!("CARGO_BIN_EXE_keel"),
        &home2,
        &other,
        &model,
    ));
    // Without materializeTo: refused, saying how.
    b.send(&command(
        "session.resume",
        "r1",
        None,
        json!({"sessionId": sid}),
    ));
    let e = b.answer("r1");
    assert_eq!(e.type_name(), "error", "{e:?}");
    let p = payload(&e);
    assert_eq!(p["code"], "WORKSPACE_MISSING", "{p}");
    assert_eq!(p["details"]["workspace"], ws1.to_str().unwrap());
    assert_eq!(p["details"]["checkpoints"], 5);
    assert!(
        p["message"].as_str().unwrap().contains("materializeTo"),
        "{p}"
    );
    // A folder that is not empty, or a relative path, is refused.
    std::fs::write(other.join("x"), "x").unwrap();
    b.send(&command(
        "session.resume",
        "r2",
        None,
        json!({"sessionId": sid, "materializeTo": other.to_str().unwrap()}),
    ));
    b.send(&command(
        "session.resume",
        "r3",
        None,
        json!({"sessionId": sid, "materializeTo": "relative/dir"}),
    ));
    for rid in ["r2", "r3"] {
        let e = b.answer(rid);
        let p = payload(&e);
        assert_eq!(p["code"], "REQUEST_INVALID", "{p}");
        assert_eq!(p["details"]["field"], "payload.materializeTo", "{p}");
    }

    let ws2 = root.join("new").join("ws2");
    b.send(&command(
        "session.resume",
        "r4",
        None,
        json!({"sessionId": sid, "materializeTo": ws2.to_str().unwrap()}),
    ));
    let resumed = b.answer("r4");
    assert_eq!(resumed.type_name(), "session.resumed", "{resumed:?}");
    let m = payload(&resumed)["materialized"].clone();
    assert_eq!(m["workspace"], ws2.to_str().unwrap(), "{m}");
    assert_eq!(m["previousWorkspace"], ws1.to_str().unwrap(), "{m}");
    assert_eq!(m["checkpointId"], recorded.as_str(), "{m}");
    let missing: Vec<&str> = m["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(missing, vec!["b.bin"], "{m}");
    assert!(
        m["missing"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("binary"),
        "{m}"
    );
    assert_eq!(m["restored"], 3, "{m}");
    assert_eq!(
        payload(&resumed)["session"]["workspace"],
        ws2.to_str().unwrap()
    );
    // The files equal the newest checkpoint: the workspace as exported, but the
    // binary file.
    let want: Vec<(String, Vec<u8>)> = expected
        .iter()
        .filter(|(p, _)| p != "b.bin")
        .cloned()
        .collect();
    assert_eq!(files(&ws2), want);

    // checkpoint.list and session.rewind work there.
    b.send(&command("checkpoint.list", "l1", Some(&sid), json!({})));
    let l = payload(&b.answer("l1"));
    let ids: Vec<&str> = l["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["checkpointId"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 5, "{l}");
    assert_eq!(ids[0], "e1");
    assert_eq!(*ids.last().unwrap(), recorded.as_str());
    // Since the newest: only the binary file it did not keep is not there.
    assert_eq!(
        l["checkpoints"][4]["filesChanged"],
        json!([{"path": "b.bin", "change": "deleted"}]),
        "{l}"
    );
    b.send(&command(
        "session.rewind",
        "w1",
        Some(&sid),
        json!({"toRequestId": "e1", "conversation": false}),
    ));
    let r = b.answer("w1");
    assert_eq!(r.type_name(), "session.rewound", "{r:?}");
    assert_eq!(read(&ws2, "a.txt"), None);
    assert_eq!(read(&ws2, "d/y.txt"), None);
    assert_eq!(read(&ws2, "keep.txt").as_deref(), Some("kept\n"));
    let undo = payload(&r)["undoCheckpointId"].as_str().unwrap().to_owned();
    b.send(&command(
        "session.rewind",
        "w2",
        Some(&sid),
        json!({"toRequestId": undo, "conversation": false}),
    ));
    assert_eq!(b.answer("w2").type_name(), "session.rewound");
    assert_eq!(read(&ws2, "a.txt").as_deref(), Some("2\n"));
    assert_eq!(read(&ws2, "d/y.txt").as_deref(), Some("y\n"));
    // The next request works in the new workspace, on the conversation it had.
    send(&mut b, &sid, "e3", "write c");
    assert_eq!(read(&ws2, "c.txt").as_deref(), Some("3"));
    b.send(&command("session.state", "st", Some(&sid), json!({})));
    let st = payload(&b.answer("st"));
    assert_eq!(st["messageCount"], 12, "{st}");
    b.stop();

    // Resumed again: the workspace exists, materializeTo is ignored.
    let mut b = Bridge::start(Setup::new(
        env!("CARGO_BIN_EXE_keel"),
        &home2,
        &other,
        &model,
    ));
    b.send(&command(
        "session.resume",
        "r5",
        None,
        json!({"sessionId": sid, "materializeTo": root.join("unused").to_str().unwrap()}),
    ));
    let again = b.answer("r5");
    assert_eq!(again.type_name(), "session.resumed", "{again:?}");
    assert!(payload(&again).get("materialized").is_none());
    assert!(!root.join("unused").exists());
    b.stop();
}

#[test]
fn import_makes_the_workspace_and_refuses_an_id_the_store_has() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let (home1, home2) = (
        home_with_config(&root.join("home1")),
        home_with_config(&root.join("home2")),
    );
    let ws1 = root.join("ws1");
    std::fs::create_dir_all(&ws1).unwrap();
    let sid = make_session(&home1, &ws1, &root);
    // Written into the workspace itself: the checkpoint the export takes does not
    // hold the file (nor its temporary).
    let file = ws1.join("s.keel");
    let out = keel(
        &home1,
        &["sessions", "export", &sid, file.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("exported session {sid} to {}: ", file.display())),
        "{text}"
    );

    let ws = root.join("made").join("here");
    let (code, r) = keel_json(
        &home2,
        &[
            "sessions",
            "import",
            file.to_str().unwrap(),
            "--workspace",
            ws.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["workspace"], ws.to_str().unwrap());
    assert_eq!(r["workspaceMissing"], false);
    assert_eq!(r["materialized"]["missing"][0]["path"], "b.bin", "{r}");
    assert_eq!(read(&ws, "a.txt").as_deref(), Some("2\n"));
    assert_eq!(read(&ws, "d/y.txt").as_deref(), Some("y\n"));
    assert_eq!(read(&ws, "b.bin"), None);
    let names: Vec<String> = files(&ws).into_iter().map(|(p, _)| p).collect();
    assert_eq!(names, vec!["a.txt", "d/y.txt", "keep.txt"], "{names:?}");

    // The same id again: refused, nothing changed.
    let (code, e) = keel_json(&home2, &["sessions", "import", file.to_str().unwrap()]);
    assert_eq!(code, 1, "{e}");
    assert_eq!(e["ok"], false);
    assert_eq!(e["error"]["code"], "REQUEST_INVALID");
    assert_eq!(e["error"]["details"]["reason"], "session_exists");
    assert!(e["error"]["message"].as_str().unwrap().contains("--as-new"));
    // As new: another id, in a folder that has files (used as it is).
    let used = root.join("used");
    std::fs::create_dir_all(&used).unwrap();
    std::fs::write(used.join("mine.txt"), "mine").unwrap();
    let (code, r) = keel_json(
        &home2,
        &[
            "sessions",
            "import",
            file.to_str().unwrap(),
            "--as-new",
            "-w",
            used.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{r}");
    let new_id = r["sessionId"].as_str().unwrap().to_owned();
    assert_ne!(new_id, sid);
    assert_eq!(r["exportedSessionId"], sid.as_str());
    assert!(r.get("materialized").is_none(), "{r}");
    assert_eq!(files(&used), vec![("mine.txt".into(), b"mine".to_vec())]);
    let (_, listed) = keel_json(&home2, &["sessions", "list"]);
    let mut ids: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let mut want = vec![sid.clone(), new_id.clone()];
    want.sort();
    assert_eq!(ids, want);
    // The copy's log is its own: every event names the new id.
    let log =
        std::fs::read_to_string(home2.join("sessions").join(&new_id).join("events.jsonl")).unwrap();
    assert!(!log.contains(&sid), "{log}");
    assert!(log.contains(&new_id));

    // A node that has the session but not its checkpoints takes in only those.
    let home3 = home_with_config(&root.join("home3"));
    let (code, e) = keel_json(
        &home3,
        &[
            "sessions",
            "import",
            file.to_str().unwrap(),
            "--checkpoints-only",
        ],
    );
    assert_eq!(code, 1, "{e}");
    assert_eq!(e["error"]["code"], "SESSION_NOT_FOUND", "{e}");
    let (code, _) = keel_json(&home3, &["sessions", "import", file.to_str().unwrap()]);
    assert_eq!(code, 0);
    std::fs::remove_dir_all(home3.join("checkpoints")).unwrap();
    let (code, r) = keel_json(
        &home3,
        &[
            "sessions",
            "import",
            file.to_str().unwrap(),
            "--checkpoints-only",
        ],
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["checkpoints"], 5, "{r}");
    assert_eq!(r["events"], 0, "{r}");
    assert_eq!(r["workspace"], ws1.to_str().unwrap(), "{r}");
    let out = keel(
        &home3,
        &[
            "sessions",
            "import",
            file.to_str().unwrap(),
            "--checkpoints-only",
            "--as-new",
        ],
    );
    assert_eq!(out.status.code(), Some(2));

    // From the command line: `keel resume` says the workspace is missing, and
    // `--materialize-to` makes it.
    let gone = root.join("ws1-gone");
    std::fs::rename(&ws1, &gone).unwrap();
    let file = gone.join("s.keel");
    let home4 = home_with_config(&root.join("home4"));
    let (code, r) = keel_json(&home4, &["sessions", "import", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["workspaceMissing"], true, "{r}");
    let resume = |extra: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(["resume", &sid])
            .args(extra)
            .current_dir(&home4)
            .env("KEEL_HOME", &home4)
            .env("NO_COLOR", "1")
            .env_remove("KEEL_MODEL")
            .env_remove("KEEL_STORE")
            .env("KEEL_SOCKET", home4.join("no-daemon.sock"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"/status\n").unwrap();
        child.wait_with_output().unwrap()
    };
    let out = resume(&[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not exist on this node"), "{err}");
    let into = root.join("resumed-here");
    let out = resume(&["--materialize-to", into.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read(&into, "a.txt").as_deref(), Some("2\n"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("missing b.bin: not saved: a binary file"),
        "{err}"
    );
    let (_, listed) = keel_json(&home4, &["sessions", "list"]);
    assert_eq!(listed[0]["workspace"], into.to_str().unwrap(), "{listed}");

    // An unknown session cannot be exported.
    let (code, e) = keel_json(
        &home2,
        &["sessions", "export", "sess_nothing", "/dev/null/x"],
    );
    assert_eq!(code, 1, "{e}");
    assert_eq!(e["error"]["code"], "SESSION_NOT_FOUND");
}

/// The entries of an export, in order.
fn entries(file: &Path) -> Vec<(String, Vec<u8>)> {
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(file).unwrap());
    let mut a = tar::Archive::new(gz);
    let mut out = Vec::new();
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let mut body = Vec::new();
        e.read_to_end(&mut body).unwrap();
        out.push((name, body));
    }
    out
}

/// A gzip-compressed tar of `entries`, names written as they are (even unsafe ones).
fn pack(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut b = tar::Builder::new(gz);
    for (name, body) in entries {
        let mut h = tar::Header::new_old();
        let raw = name.as_bytes();
        h.as_old_mut().name[..raw.len()].copy_from_slice(raw);
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        b.append(&h, &body[..]).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

#[test]
fn bad_files_are_refused_with_a_reason_and_leave_nothing_behind() {
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let (home1, home2) = (
        home_with_config(&root.join("home1")),
        home_with_config(&root.join("home2")),
    );
    let ws1 = root.join("ws1");
    std::fs::create_dir_all(&ws1).unwrap();
    let sid = make_session(&home1, &ws1, &root);
    let good = root.join("good.keel");
    assert_eq!(
        keel(
            &home1,
            &["sessions", "export", &sid, good.to_str().unwrap()]
        )
        .status
        .code(),
        Some(0)
    );
    let bytes = std::fs::read(&good).unwrap();
    let parts = entries(&good);
    assert_eq!(parts[0].0, "keel-export.json");
    assert_eq!(parts.last().unwrap().0, "end.json");

    let header: Value = serde_json::from_slice(&parts[0].1).unwrap();
    let mut v2 = parts.clone();
    let mut h2 = header.clone();
    h2["version"] = 2.into();
    v2[0].1 = serde_json::to_vec(&h2).unwrap();
    let mut foreign = parts.clone();
    let mut h3 = header.clone();
    h3["format"] = "something-else".into();
    foreign[0].1 = serde_json::to_vec(&h3).unwrap();
    let with = |name: &str| {
        let mut e = parts.clone();
        e.insert(1, (name.to_owned(), b"x".to_vec()));
        pack(&e)
    };
    let mut bad_object = parts.clone();
    let obj = bad_object
        .iter_mut()
        .find(|(n, _)| n.starts_with("objects/"))
        .unwrap();
    obj.1.push(b'!');
    let no_end: Vec<(String, Vec<u8>)> = parts[..parts.len() - 1].to_vec();

    let mut cases: Vec<(String, Vec<u8>, &str)> = vec![
        ("text".into(), b"hello\n".to_vec(), "not_an_export"),
        ("empty".into(), Vec::new(), "not_an_export"),
        (
            "other tar".into(),
            pack(&[("notes.txt".into(), b"hi".to_vec())]),
            "not_an_export",
        ),
        ("version 2".into(), pack(&v2), "unsupported_version"),
        ("foreign format".into(), pack(&foreign), "not_an_export"),
        ("climbs out".into(), with("../evil"), "unsafe_entry"),
        (
            "climbs out inside".into(),
            with("objects/../../evil"),
            "unsafe_entry",
        ),
        ("absolute".into(), with("/etc/evil"), "unsafe_entry"),
        (
            "unknown entry".into(),
            with("session/other.json"),
            "unexpected_entry",
        ),
        ("damaged object".into(), pack(&bad_object), "damaged"),
        ("no end".into(), pack(&no_end), "truncated"),
    ];
    let n = bytes.len();
    for cut in [2, 10, 30, 100, n / 4, n / 2, 3 * n / 4, n - 9, n - 1] {
        cases.push((
            format!("cut at {cut} of {n}"),
            bytes[..cut].to_vec(),
            "truncated",
        ));
    }
    let target = root.join("target-ws");
    for (what, body, reason) in cases {
        let f = root.join("bad.keel");
        std::fs::write(&f, &body).unwrap();
        let (code, e) = keel_json(
            &home2,
            &[
                "sessions",
                "import",
                f.to_str().unwrap(),
                "--workspace",
                target.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 3, "{what}: {e}");
        assert_eq!(e["error"]["code"], "REQUEST_INVALID", "{what}: {e}");
        assert_eq!(e["error"]["details"]["reason"], reason, "{what}: {e}");
        assert!(!target.exists(), "{what}: the workspace made for it stays");
    }
    let (code, e) = keel_json(
        &home2,
        &[
            "sessions",
            "import",
            root.join("absent.keel").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 3, "{e}");
    assert_eq!(e["error"]["details"]["reason"], "not_found", "{e}");
    // Nothing was imported, and no checkpoint record was written.
    let (_, listed) = keel_json(&home2, &["sessions", "list"]);
    assert_eq!(listed, json!([]));
    let records = walk_records(&home2.join("checkpoints"));
    assert_eq!(records, 0);
    // The good file still imports.
    let (code, r) = keel_json(&home2, &["sessions", "import", good.to_str().unwrap()]);
    assert_eq!(code, 0, "{r}");
    assert_eq!(walk_records(&home2.join("checkpoints")), 5);
}

fn walk_records(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .parent()
                .and_then(|q| q.parent())
                .is_some_and(|q| q.ends_with("sessions"))
                && p.extension().is_some_and(|x| x == "json")
            {
                n += 1;
            }
        }
    }
    n
}
