//! Hooks, budgets and the output cap end to end through the real `keel bridge`
//! binary: the configuration file, JSON-lines commands in, envelopes out, and (for
//! the output cap) a local server speaking the OpenAI wire format.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use keel_envelope::budget::{BudgetLimit, BudgetScope};
use keel_envelope::types::StopReason;
use keel_envelope::{codec, Envelope, ErrorCode, Event};
use keel_testsupport::model_server::{openai, FakeResponse, FakeServer};

struct Bridge {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Bridge {
    fn start(ws: &Path, home: &Path, model: &str, env: &[(&str, String)]) -> Bridge {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
        cmd.args(["bridge", "--workspace"])
            .arg(ws)
            .args(["--model", model])
            .env("KEEL_HOME", home)
            .env_remove("KEEL_MODEL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut b = Bridge {
            child,
            stdin,
            lines,
        };
        assert_eq!(b.next().type_name(), "runtime.ready");
        b
    }

    fn next(&mut self) -> Envelope {
        let line = self
            .lines
            .next()
            .expect("the bridge closed stdout")
            .unwrap();
        codec::decode_envelope(line.as_bytes()).unwrap()
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }

    /// Reads until an event of type `ty` on request `rid`.
    fn until(&mut self, ty: &str, rid: &str) -> Vec<Envelope> {
        let mut out = Vec::new();
        loop {
            let env = self.next();
            let done = env.type_name() == ty && env.request_id == rid;
            out.push(env);
            if done {
                return out;
            }
        }
    }

    fn start_session(&mut self, rid: &str, payload: &str) -> String {
        self.send(&format!(
            r#"{{"version":"1.0","type":"session.start","requestId":"{rid}","payload":{payload}}}"#
        ));
        let started = self.until("session.started", rid);
        started.last().unwrap().session_id.clone().unwrap()
    }

    fn request(&mut self, sid: &str, rid: &str, payload: &str) {
        self.send(&format!(
            r#"{{"version":"1.0","type":"request.send","requestId":"{rid}","sessionId":"{sid}","payload":{payload}}}"#
        ));
    }

    fn stop(mut self) {
        self.send(r#"{"version":"1.0","type":"runtime.shutdown","requestId":"bye"}"#);
        self.until("runtime.stopped", "bye");
        assert!(self.child.wait().unwrap().success());
    }
}

#[test]
fn hooks_and_budgets_through_the_bridge() {
    let root = tempfile::tempdir().unwrap();
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(ws.join("README.md"), "# project\n").unwrap();
    let deny = root.path().join("deny.sh");
    std::fs::write(
        &deny,
        "input=$(cat)\ncase \"$input\" in *README*) echo 'README.md is off limits' >&2; exit 2;; esac\n",
    )
    .unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[[hooks.PreToolUse]]\nmatcher = \"read_file\"\ncommand = \"sh '{}'\"\n\n\
             [[hooks.UserPromptSubmit]]\ncommand = \"echo 'The tests live in t/.'\"\n",
            deny.display()
        ),
    )
    .unwrap();
    let script = root.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({"turns": [
            {
                "expectLastMessageContains": "The tests live in t/.",
                "toolCalls": [{"name": "read_file", "arguments": {"path": "README.md"}}]
            },
            {
                "expectLastMessageContains": "README.md is off limits",
                "toolCalls": [{"name": "list_dir", "arguments": {"path": "."}}]
            },
            {"toolCalls": [{"name": "list_dir", "arguments": {"path": "."}}]},
            {"text": "never reached"}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut b = Bridge::start(&ws, &home, &format!("scripted:{}", script.display()), &[]);
    let sid = b.start_session("s1", "{}");

    // Bad limits are refused with the field, and change nothing.
    b.request(&sid, "bad1", r#"{"message":"x","budget":{"costUsd":-1}}"#);
    let bad = b.until("request.rejected", "bad1");
    let Event::RequestRejected(e) = &bad.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(e.details["field"], "payload.budget.costUsd");
    b.request(&sid, "bad2", r#"{"message":"x","maxOutputTokens":-5}"#);
    let bad = b.until("error", "bad2");
    let Event::Error(e) = &bad.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(e.code, ErrorCode::RequestInvalid);
    assert_eq!(e.details["field"], "payload.maxOutputTokens");

    b.request(
        &sid,
        "r1",
        r#"{"message":"look around","budget":{"toolCalls":{"list_dir":1}}}"#,
    );
    let all = b.until("session.completed", "r1");
    let mine: Vec<&Envelope> = all.iter().filter(|e| e.request_id == "r1").collect();
    let skipped: Vec<(String, ErrorCode)> = mine
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(s) => Some((s.tool_name.clone(), s.error.code)),
            _ => None,
        })
        .collect();
    assert_eq!(
        skipped,
        [
            ("read_file".to_owned(), ErrorCode::ToolPermissionDenied),
            ("list_dir".to_owned(), ErrorCode::BudgetExceeded),
        ]
    );
    let kinds: Vec<&str> = mine.iter().map(|e| e.type_name()).collect();
    let warned = kinds.iter().position(|k| *k == "budget.warning").unwrap();
    let n = kinds.len();
    assert_eq!(kinds[n - 2..], ["warning", "session.completed"]);
    assert!(warned < n - 2, "{kinds:?}");
    let Event::SessionCompleted(c) = &mine[n - 1].event else {
        unreachable!()
    };
    assert_eq!(c.stop_reason, StopReason::MaxTurns);
    let hit = c.budget.as_ref().unwrap();
    assert_eq!(
        (hit.scope, hit.limit, hit.tool_name.as_deref()),
        (
            BudgetScope::Request,
            BudgetLimit::ToolCalls,
            Some("list_dir")
        )
    );
    assert_eq!(c.telemetry.turns, 3);
    b.stop();
}

#[test]
fn the_output_cap_reaches_the_server_through_the_bridge() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(FakeServer::start([
            FakeResponse::sse(openai::text_stream(&["OK"])),
            FakeResponse::sse(openai::text_stream(&["OK"])),
            FakeResponse::sse(openai::text_stream(&["OK"])),
        ]))
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("config.toml"), "maxOutputTokens = 256\n").unwrap();
    let env = [("OPENAI_BASE_URL", format!("{}/v1", server.base_url()))];
    let mut b = Bridge::start(&ws, &home, "openai:qwen2.5-coder:7b", &env);
    let s1 = b.start_session("s1", "{}");
    b.request(&s1, "r1", r#"{"message":"Say OK."}"#);
    b.until("session.completed", "r1");
    let s2 = b.start_session("s2", r#"{"maxOutputTokens":128}"#);
    b.request(&s2, "r2", r#"{"message":"Say OK."}"#);
    b.until("session.completed", "r2");
    b.request(&s2, "r3", r#"{"message":"Say OK.","maxOutputTokens":64}"#);
    b.until("session.completed", "r3");
    b.stop();
    let caps: Vec<serde_json::Value> = server
        .requests()
        .iter()
        .map(|r| r.json().unwrap()["max_tokens"].clone())
        .collect();
    assert_eq!(caps, [256, 128, 64]);
}

/// A repository's own `.keel/config.toml` cannot bring hooks (commands) until the
/// user trusts that workspace in their own file.
#[test]
fn project_hooks_run_only_in_a_trusted_workspace() {
    let root = tempfile::tempdir().unwrap();
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir_all(ws.join(".keel")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let marker = root.path().join("ran");
    std::fs::write(
        ws.join(".keel/config.toml"),
        format!(
            "[[hooks.UserPromptSubmit]]\ncommand = \"touch '{}'\"\n",
            marker.display()
        ),
    )
    .unwrap();
    let script = root.path().join("script.json");
    std::fs::write(&script, r#"{"turns": [{"text": "hi"}]}"#).unwrap();
    let model = format!("scripted:{}", script.display());

    // Untrusted: the bridge does not start, says why, and runs nothing.
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["bridge", "--workspace"])
        .arg(&ws)
        .args(["--model", &model])
        .env("KEEL_HOME", &home)
        .env_remove("KEEL_MODEL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hooks.UserPromptSubmit") && stderr.contains("allowProjectHooks"),
        "{stderr}"
    );
    assert!(!marker.exists());

    // Trusted by the user: the project's hook runs.
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[hooks]\nallowProjectHooks = [{:?}]\n",
            ws.display().to_string()
        ),
    )
    .unwrap();
    let mut b = Bridge::start(&ws, &home, &model, &[]);
    let sid = b.start_session("s1", "{}");
    b.request(&sid, "r1", r#"{"message":"hello"}"#);
    b.until("session.completed", "r1");
    assert!(marker.exists(), "the trusted project's hook ran");
    b.stop();
}
