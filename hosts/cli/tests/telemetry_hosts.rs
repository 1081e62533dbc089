//! A trace end to end through the REPL (its piped mode) and through `keel acp`: the
//! real binary, export turned on by `$KEEL_HOME/config.toml`, a real OTLP/HTTP
//! receiver on loopback decoding the protobuf. Each request is one `invoke_agent`
//! span naming the session, with its model call as a `chat` child; the process
//! flushes its spans when it exits. (The bridge's trace is in `skills_bridge.rs`.)
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use keel_telemetry::testing::{ReceivedSpan, Receiver};
use serde_json::{json, Value};

struct Dirs {
    _root: tempfile::TempDir,
    home: std::path::PathBuf,
    ws: std::path::PathBuf,
    model: String,
}

fn dirs(receiver: &Receiver) -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let (home, ws) = (root.path().join("home"), root.path().join("ws"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!("[telemetry]\nendpoint = \"{}\"\n", receiver.endpoint()),
    )
    .unwrap();
    let script = root.path().join("script.json");
    std::fs::write(&script, r#"{"turns": [{"text": "Traced answer."}]}"#).unwrap();
    Dirs {
        model: format!("scripted:{}", script.display()),
        _root: root,
        home,
        ws,
    }
}

fn keel(d: &Dirs) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keel"));
    c.env_remove("KEEL_MODEL")
        .env_remove("KEEL_LOG")
        .env("KEEL_HOME", &d.home)
        .env("HOME", &d.home);
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") {
            c.env_remove(k);
        }
    }
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The request span of `session` and its model call, once they reached the receiver.
fn request_spans(receiver: &Receiver, session: Option<&str>) -> (ReceivedSpan, ReceivedSpan) {
    let is_root = |s: &ReceivedSpan| {
        s.name == "invoke_agent keel"
            && session.is_none_or(|id| s.str("gen_ai.conversation.id") == Some(id))
    };
    let got = receiver.wait_until(Duration::from_secs(20), |r| r.spans().iter().any(is_root));
    assert!(got, "no request span: {:#?}", receiver.spans());
    let spans = receiver.spans();
    let root = spans.iter().find(|s| is_root(s)).unwrap().clone();
    let chat = spans
        .iter()
        .find(|s| s.name.starts_with("chat ") && s.parent_span_id.as_deref() == Some(&root.span_id))
        .unwrap_or_else(|| panic!("no model call under the request: {spans:#?}"))
        .clone();
    assert_eq!(receiver.bad_requests(), 0);
    (root, chat)
}

#[test]
fn a_trace_through_the_repl() {
    let receiver = Receiver::start().unwrap();
    let d = dirs(&receiver);
    let mut child = keel(&d)
        .arg("--workspace")
        .arg(&d.ws)
        .arg("--model")
        .arg(&d.model)
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("Traced answer."), "{stdout}");
    let (root, chat) = request_spans(&receiver, None);
    assert!(
        root.str("gen_ai.conversation.id")
            .is_some_and(|id| id.starts_with("sess_")),
        "{root:#?}"
    );
    assert_eq!(chat.trace_id, root.trace_id);
}

fn send(stdin: &mut impl Write, v: Value) {
    writeln!(stdin, "{v}").unwrap();
    stdin.flush().unwrap();
}

fn answer(lines: &mut impl Iterator<Item = std::io::Result<String>>, id: u64) -> Value {
    for line in lines {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["id"] == id {
            return v;
        }
    }
    panic!("keel acp ended before answering {id}");
}

#[test]
fn a_trace_through_acp() {
    let receiver = Receiver::start().unwrap();
    let d = dirs(&receiver);
    let mut child = keel(&d)
        .arg("acp")
        .arg("--workspace")
        .arg(&d.ws)
        .arg("--model")
        .arg(&d.model)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
    );
    assert!(answer(&mut lines, 1)["result"].is_object());
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": d.ws, "mcpServers": []}}),
    );
    let created = answer(&mut lines, 2);
    let sid = created["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
               "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}}),
    );
    let done = answer(&mut lines, 3);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let (root, chat) = request_spans(&receiver, Some(&sid));
    assert_eq!(chat.trace_id, root.trace_id);
}
