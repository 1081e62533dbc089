//! Hooks and budgets in the REPL as a person sees them: the real `keel` binary with a
//! configuration file, a scripted model and lines typed on its standard input.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn the_repl_shows_hook_denials_hook_failures_and_budget_stops() {
    let root = tempfile::tempdir().unwrap();
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[budget.request]\ntokens = 200\n\n\
         [[hooks.PreToolUse]]\nmatcher = \"write_file\"\n\
         command = \"echo 'no writes on Fridays' >&2; exit 2\"\n\n\
         [[hooks.PostToolUse]]\ncommand = \"echo 'audit log unreachable' >&2; exit 1\"\n",
    )
    .unwrap();
    let script = root.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({"turns": [
            {
                "text": "Writing the notes.",
                "toolCalls": [{"name": "write_file", "arguments": {"path": "NOTES.md", "content": "x"}}],
                "usage": {"inputTokens": 100, "outputTokens": 10}
            },
            {
                "text": "Then I list the files.",
                "toolCalls": [{"name": "list_dir", "arguments": {"path": "."}}],
                "usage": {"inputTokens": 20, "outputTokens": 5}
            },
            {
                "text": "And once more.",
                "toolCalls": [{"name": "list_dir", "arguments": {"path": "."}}],
                "usage": {"inputTokens": 100, "outputTokens": 10}
            },
            {"text": "never reached"}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg("--workspace")
        .arg(&ws)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .env("KEEL_HOME", &home)
        .env_remove("KEEL_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"write the notes\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!ws.join("NOTES.md").exists());
    // The denial, with the hook's reason.
    assert!(
        stdout.contains("skipped: a hook denied write_file: no writes on Fridays"),
        "{stdout}"
    );
    // The failing PostToolUse hook is a warning; the call still counts.
    assert!(
        stdout.contains("warning: the PostToolUse hook `echo 'audit log unreachable' >&2; exit 1` exited with status 1"),
        "{stdout}"
    );
    // 110 + 25 = 135 tokens: under 80 % of 200; the third call passes both marks.
    let warned = stdout
        .find("budget: the request's tokens: 245 of 200 (80 % reached)")
        .unwrap_or_else(|| panic!("{stdout}"));
    let stopped = stdout
        .find("stopped: the limit was reached, the request's tokens: 245 of 200")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(warned < stopped);
    assert!(
        stdout.contains("warning: the request used 245 of its 200 tokens"),
        "{stdout}"
    );
    assert!(!stdout.contains("never reached"), "{stdout}");
}
