//! `keel acp` through the real binary: JSON-RPC errors for bad input, reading on,
//! and a clean exit at the end of input.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

fn run_acp(input: &str) -> (i32, Vec<Value>, String) {
    run_acp_in(input, |_, _| {})
}

/// Like [`run_acp`]; `prepare(workspace, home)` writes files first. `HOME` is a
/// temporary folder too.
fn run_acp_in(
    input: &str,
    prepare: impl FnOnce(&std::path::Path, &std::path::Path),
) -> (i32, Vec<Value>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::create_dir_all(&home).expect("mkdir");
    prepare(&ws, &home);
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"{"turns":[{"text":"Hello."}]}"#).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg("--log-stderr")
        .arg("acp")
        .arg("--workspace")
        .arg(&ws)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .env("KEEL_HOME", &home)
        .env("HOME", dir.path())
        .env_remove("KEEL_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn keel acp");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    (
        out.status.code().unwrap_or(-1),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn line(v: Value) -> String {
    format!("{v}\n")
}

#[test]
fn bad_input_gets_json_rpc_errors_and_reading_goes_on() {
    let mut input = String::new();
    input.push_str("{not json\n");
    input.push_str(&line(
        json!({"jsonrpc": "2.0", "id": 1, "method": "no/such_method", "params": {}}),
    ));
    input.push_str(&line(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": 7}}),
    ));
    input.push_str(&line(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": "sess_x"}}),
    ));
    input.push_str(&line(json!({"jsonrpc": "2.0", "id": 4, "method": "session/set_mode", "params": {"sessionId": "sess_x", "modeId": "ask"}})));
    input.push_str(&line(json!([1, 2, 3])));
    // An unknown notification is ignored (no answer).
    input.push_str(&line(
        json!({"jsonrpc": "2.0", "method": "_unknown/notice", "params": {}}),
    ));
    input.push('\n');
    input.push_str(&line(
        json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {"protocolVersion": 1}}),
    ));
    let (code, lines, stderr) = run_acp(&input);
    assert_eq!(code, 0, "clean exit at the end of input; stderr: {stderr}");
    let got: Vec<(Value, Value)> = lines
        .iter()
        .map(|m| {
            assert_eq!(m["jsonrpc"], "2.0");
            (m["id"].clone(), m["error"]["code"].clone())
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (Value::Null, json!(-32700)),
            (json!(1), json!(-32601)),
            (json!(2), json!(-32602)),
            (json!(3), json!(-32602)),
            (json!(4), json!(-32002)),
            (Value::Null, json!(-32600)),
            (json!(5), Value::Null),
        ]
    );
    assert_eq!(lines[6]["result"]["protocolVersion"], 1);
    assert_eq!(lines[6]["result"]["agentCapabilities"]["loadSession"], true);
}

#[test]
fn end_of_input_exits_zero_even_with_a_session_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path().to_str().expect("utf-8").to_owned();
    let input = line(
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}),
    );
    let (code, lines, stderr) = run_acp(&input);
    assert_eq!(code, 0, "stderr: {stderr}");
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["result"]["modes"]["currentModeId"], "ask");
}

#[test]
fn a_workspaces_custom_commands_are_announced_and_the_repls_names_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = std::fs::canonicalize(dir.path()).expect("canon");
    let write = |p: std::path::PathBuf, t: &str| {
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, t).expect("write");
    };
    write(
        cwd.join(".keel/commands/hello.md"),
        "---\ndescription: Say hello\n---\nSay hello to $ARGUMENTS.\n",
    );
    write(cwd.join(".keel/commands/status.md"), "Shadows /status.\n");
    let input = line(
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}),
    );
    let user_skill = |_: &std::path::Path, home: &std::path::Path| {
        let p = home.join("skills/notes/SKILL.md");
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(
            p,
            "---\nname: notes\ndescription: Keep notes.\n---\nAppend.\n",
        )
        .expect("write");
    };
    let (code, lines, stderr) = run_acp_in(&input, user_skill);
    assert_eq!(code, 0, "stderr: {stderr}");
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0]["result"]["sessionId"].is_string());
    let update = &lines[1]["params"]["update"];
    assert_eq!(update["sessionUpdate"], "available_commands_update");
    let names: Vec<&str> = update["availableCommands"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, vec!["hello", "skill:notes"]);
    assert!(
        stderr.contains("status.md: /status is a built-in command"),
        "{stderr}"
    );
}
