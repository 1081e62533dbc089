//! The log through the real binary: `KEEL_LOG` selects what is kept, the daily file
//! under `KEEL_HOME/logs` receives it, `--log-stderr` copies it to stderr, and the
//! protocol outputs (bridge, ACP, `exec --json`) never carry a log line on stdout.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use keel_envelope::codec;

fn keel() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keel"));
    c.env_remove("KEEL_MODEL").env_remove("KEEL_LOG");
    c
}

fn script(dir: &Path, body: serde_json::Value) -> String {
    let p = dir.join("script.json");
    std::fs::write(&p, body.to_string()).unwrap();
    format!("scripted:{}", p.display())
}

/// The log files of a store: `keel-YYYY-MM-DD.log` under `logs/`.
fn log_files(home: &Path) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(home.join("logs")) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = dir.map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("keel-") && name.ends_with(".log") && name.len() == 19,
            "{name}"
        );
    }
    files
}

fn log_text(home: &Path) -> String {
    log_files(home)
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect()
}

#[test]
fn bridge_stdout_stays_pure_while_the_log_file_fills_at_trace() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = script(
        home.path(),
        serde_json::json!({"turns": [{"text": "Hello from the model."}]}),
    );
    let mut child = keel()
        .args(["bridge", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .env("KEEL_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "not json").unwrap();
    writeln!(
        stdin,
        r#"{{"version":"1.0","type":"session.start","requestId":"r1"}}"#
    )
    .unwrap();
    writeln!(
        stdin,
        r#"{{"version":"1.0","type":"runtime.shutdown","requestId":"r9"}}"#
    )
    .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let mut types = Vec::new();
    for line in stdout.lines() {
        let env = codec::decode_envelope(line.as_bytes())
            .unwrap_or_else(|e| panic!("stdout line is not an envelope ({e:?}): {line:?}"));
        types.push(env.type_name().to_owned());
    }
    assert_eq!(types.first().map(String::as_str), Some("runtime.ready"));
    assert_eq!(types.last().map(String::as_str), Some("runtime.stopped"));
    let log = log_text(home.path());
    assert!(log.lines().count() > 5, "{log}");
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "trace kept: {log}"
    );
    assert!(
        log.contains("bridge command received") && log.contains("command=\"session.start\""),
        "{log}"
    );
    assert!(log.contains("bridge line refused"), "{log}");
    assert!(log.contains("keel started") && log.contains("command=\"bridge\""));
    // Nothing of the log reached stderr without --log-stderr.
    assert!(!String::from_utf8_lossy(&out.stderr).contains("keel started"));
}

#[test]
fn exec_json_and_acp_stdout_carry_no_log_line_even_with_log_stderr() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = script(
        home.path(),
        serde_json::json!({"turns": [{"text": "Fine."}]}),
    );
    let out = keel()
        .args(["exec", "hello", "--json", "--log-stderr", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .env("KEEL_LOG", "trace")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.lines().count() > 3);
    for line in stdout.lines() {
        codec::decode_envelope(line.as_bytes())
            .unwrap_or_else(|e| panic!("not an envelope ({e:?}): {line:?}"));
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("keel started"), "{stderr}");
    assert!(log_text(home.path()).contains("runtime configured"));

    let mut child = keel()
        .args(["acp", "--log-stderr", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .env("KEEL_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cwd = ws.path().to_str().unwrap();
    let input = format!(
        "{}\n{}\n",
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("command=\"acp\""));
}

#[test]
fn keel_log_selects_what_is_kept() {
    let home = tempfile::tempdir().unwrap();
    // `warn`: the informational start line is not kept.
    let out = keel()
        .args(["sessions", "list"])
        .env("KEEL_HOME", home.path())
        .env("KEEL_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(!log_text(home.path()).contains("keel started"));
    // The default is `info`.
    let out = keel()
        .args(["sessions", "list"])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let log = log_text(home.path());
    assert!(
        log.contains(" INFO ") && log.contains("keel started"),
        "{log}"
    );
    assert!(!log.contains("DEBUG"), "{log}");
    // A bad filter is reported and the default is used.
    let out = keel()
        .args(["sessions", "list", "--json"])
        .env("KEEL_HOME", home.path())
        .env("KEEL_LOG", "keel=notalevel")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    assert!(String::from_utf8_lossy(&out.stderr).contains("KEEL_LOG"));
    assert_eq!(log_files(home.path()).len(), 1);
}

#[test]
fn an_unusable_log_directory_never_stops_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    // KEEL_HOME under a regular file: nothing can be created there, even as root.
    let out = keel()
        .args([
            "policy",
            "check",
            "read_file",
            r#"{"path":"a"}"#,
            "--workspace",
        ])
        .arg(dir.path())
        .arg("--log-stderr")
        .env("KEEL_HOME", file.join("home"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["decision"], "allow");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write logs"));
}

#[test]
fn http_calls_are_logged_without_keys_or_prompts() {
    use keel_testsupport::model_server::{openai, FakeResponse, FakeServer};
    let rt = keel_testsupport::runtime();
    let server = rt
        .block_on(FakeServer::start([
            FakeResponse::json(
                500,
                &openai::error_body("overloaded, try again", "server_error", None),
            ),
            FakeResponse::sse(openai::text_stream(&["The answer", " is 42."])),
        ]))
        .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[retry]\nbaseDelayMs = 1\nmaxDelayMs = 2\n",
    )
    .unwrap();
    let out = keel()
        .args(["exec", "the secret question", "--json", "--workspace"])
        .arg(ws.path())
        .args(["--model", "openai:gpt-4o-mini"])
        .env("KEEL_HOME", home.path())
        .env("OPENAI_BASE_URL", format!("{}/v1", server.base_url()))
        .env("OPENAI_API_KEY", "sk-test-very-secret")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(server.requests().len(), 2);
    let log = log_text(home.path());
    for want in [
        "model request sent",
        "attempt=1",
        "attempt=2",
        "status=500",
        "model call failed; retrying",
        "status=200",
        "model stream finished",
        "/v1/chat/completions",
    ] {
        assert!(log.contains(want), "{want:?} missing from:\n{log}");
    }
    assert!(!log.contains("sk-test-very-secret"), "{log}");
    assert!(!log.contains("secret question"), "{log}");
}

#[test]
fn each_log_line_of_a_request_carries_its_session_and_request_ids() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = script(
        home.path(),
        serde_json::json!({"turns": [
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "missing.txt"}}]},
            {"text": "done"}
        ]}),
    );
    let out = keel()
        .args(["exec", "look", "--json", "--mode", "auto", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .env("KEEL_LOG", "keel_kernel=debug")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let envs: Vec<_> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| codec::decode_envelope(l.as_bytes()).unwrap())
        .collect();
    let accepted = envs
        .iter()
        .find(|e| e.type_name() == "request.accepted")
        .unwrap();
    let sid = accepted.session_id.clone().unwrap();
    let rid = accepted.request_id.clone();
    let log = log_text(home.path());
    let request_lines: Vec<&str> = log
        .lines()
        .filter(|l| {
            [
                "request accepted",
                "gate",
                "tool call failed",
                "request completed",
            ]
            .iter()
            .any(|m| l.contains(m))
        })
        .collect();
    assert!(request_lines.len() >= 4, "{log}");
    for line in request_lines {
        assert!(
            line.contains(&sid) && line.contains(&rid),
            "a request's log line without its ids: {line}"
        );
    }
}
