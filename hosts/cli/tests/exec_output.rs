//! What `keel exec --json` writes and when: the request's terminal event once the
//! session is stored, then only `session.closed`.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use keel_envelope::codec;

/// A reader that has just read the terminal event finds the session saved as closed,
/// and `session.closed` is the only line after it. Several runs, with the cores busy.
#[test]
fn exec_json_writes_the_terminal_event_once_the_session_is_stored() {
    let _busy = keel_testsupport::Busy::start(2);
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("README.md"), "# project\n").unwrap();
    for run in 0..5 {
        let home = tempfile::tempdir().unwrap();
        let script = home.path().join("script.json");
        std::fs::write(
            &script,
            serde_json::json!({"turns": [
                {"toolCalls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
                {"text": "It is a project."}
            ]})
            .to_string(),
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .env("KEEL_SOCKET", home.path().join("none.sock"))
            .env("KEEL_HOME", home.path())
            .args(["exec", "what is this?", "--json", "--workspace"])
            .arg(ws.path())
            .arg("--model")
            .arg(format!("scripted:{}", script.display()))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let session = loop {
            let line = lines.next().expect("a terminal event").unwrap();
            let env = codec::decode_envelope(line.as_bytes()).unwrap();
            if env.type_name() == "session.completed" {
                break env.session_id.clone().unwrap();
            }
        };
        // Read at once, before anything else of the process is waited for.
        let state = home
            .path()
            .join("sessions")
            .join(&session)
            .join("state.json");
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(state).unwrap()).unwrap();
        assert_eq!(state["closed"], true, "run {run}: {state}");
        let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
        assert_eq!(rest.len(), 1, "run {run}: {rest:?}");
        assert!(
            rest[0].contains("\"session.closed\""),
            "run {run}: {rest:?}"
        );
        assert_eq!(child.wait().unwrap().code(), Some(0), "run {run}");
    }
}
