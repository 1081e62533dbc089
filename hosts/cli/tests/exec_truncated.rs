//! An answer cut by the output cap: the request's terminal event says so
//! (`session.completed {stopReason: "max_tokens"}`), and `keel exec` exits 4.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use keel_envelope::{codec, Event};

#[test]
fn a_truncated_answer_ends_with_max_tokens_and_exit_code_4() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"text":"banana banana ban","stop":"max_tokens"}]}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .env("KEEL_SOCKET", home.path().join("none.sock"))
        .env("KEEL_HOME", home.path())
        .args(["exec", "Write banana 5000 times.", "--json", "--workspace"])
        .arg(ws.path())
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let envs: Vec<_> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| codec::decode_envelope(l).unwrap())
        .collect();
    let completed = envs
        .iter()
        .find_map(|e| match &e.event {
            Event::SessionCompleted(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no session.completed: {stderr}"));
    assert_eq!(
        completed.stop_reason.as_str(),
        "max_tokens",
        "{completed:?}"
    );
    assert_eq!(completed.final_text.as_deref(), Some("banana banana ban"));
    assert_eq!(out.status.code(), Some(4), "{stderr}");
}
