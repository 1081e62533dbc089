//! Hooks, budgets and the output cap end to end through the real `keel bridge`
//! binary: the configuration file, JSON-lines commands in, envelopes out, and (for
//! the output cap) a local server speaking the OpenAI wire format.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};

use keel_envelope::budget::{BudgetLimit, BudgetScope};
use keel_envelope::types::StopReason;
use keel_envelope::{Envelope, ErrorCode, Event};
use keel_testsupport::bridge::{Bridge, Setup};
use keel_testsupport::model_server::{openai, FakeResponse, FakeServer};

const KEEL: &str = env!("CARGO_BIN_EXE_keel");

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
    let model = format!("scripted:{}", script.display());
    let mut b = Bridge::start(Setup::new(KEEL, &home, &ws, &model));
    let sid = b.start_session("s1", "{}");

    // Bad limits are refused with the field, and change nothing.
    b.request(&sid, "bad1", r#"{"message":"x","budget":{"costUsd":-1}}"#);
    let bad = b.until_on("bad1", "request.rejected");
    let Event::RequestRejected(e) = &bad.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(e.details["field"], "payload.budget.costUsd");
    b.request(&sid, "bad2", r#"{"message":"x","maxOutputTokens":-5}"#);
    let bad = b.until_on("bad2", "error");
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
    let all = b.until_on("r1", "session.completed");
    let mine: Vec<&Envelope> = all.iter().filter(|e| e.request_id == "r1").collect();
    let skipped: Vec<(String, ErrorCode)> = mine
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(s) => Some((s.tool_name.clone(), s.error.code.clone())),
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
        (
            hit.scope.clone(),
            hit.limit.clone(),
            hit.tool_name.as_deref()
        ),
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
    let rt = keel_testsupport::runtime();
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
    let url = format!("{}/v1", server.base_url());
    let mut b = Bridge::start(Setup {
        env: &[("OPENAI_BASE_URL", &url)],
        ..Setup::new(KEEL, &home, &ws, "openai:qwen2.5-coder:7b")
    });
    let s1 = b.start_session("s1", "{}");
    b.request(&s1, "r1", r#"{"message":"Say OK."}"#);
    b.until_on("r1", "session.completed");
    let s2 = b.start_session("s2", r#"{"maxOutputTokens":128}"#);
    b.request(&s2, "r2", r#"{"message":"Say OK."}"#);
    b.until_on("r2", "session.completed");
    b.request(&s2, "r3", r#"{"message":"Say OK.","maxOutputTokens":64}"#);
    b.until_on("r3", "session.completed");
    b.stop();
    let caps: Vec<serde_json::Value> = server
        .requests()
        .iter()
        .map(|r| r.json().unwrap()["max_tokens"].clone())
        .collect();
    assert_eq!(caps, [256, 128, 64]);
}

/// With no cap set anywhere, a llama-server with an 8 192-token context gets a
/// quarter of it (it got 8 192 before: the whole window), and a call's own cap still
/// wins; the server is asked once for its window.
#[test]
fn the_default_cap_follows_the_window_llama_server_reports() {
    let rt = keel_testsupport::runtime();
    let server = rt
        .block_on(FakeServer::start([
            FakeResponse::sse(openai::text_stream(&["banana"])),
            FakeResponse::sse(openai::text_stream(&["banana"])),
            FakeResponse::sse(openai::text_stream(&["banana"])),
        ]))
        .unwrap();
    server.route(
        "GET",
        "/props",
        FakeResponse::json(200, &openai::llama_props(8192)),
    );
    server.route(
        "GET",
        "/v1/models",
        FakeResponse::json(
            200,
            &openai::llama_models("/models/qwen2.5-0.5b-instruct-q4_k_m.gguf", 32_768),
        ),
    );
    let root = tempfile::tempdir().unwrap();
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let url = format!("{}/v1", server.base_url());
    let mut b = Bridge::start(Setup {
        env: &[("OPENAI_BASE_URL", &url)],
        ..Setup::new(KEEL, &home, &ws, "openai:small-local")
    });
    let s = b.start_session("s", "{}");
    b.request(&s, "r1", r#"{"message":"Write banana 5000 times."}"#);
    b.until_on("r1", "session.completed");
    b.request(&s, "r2", r#"{"message":"Again.","maxOutputTokens":300}"#);
    b.until_on("r2", "session.completed");
    b.request(&s, "r3", r#"{"message":"Again."}"#);
    b.until_on("r3", "session.completed");
    b.stop();
    let caps: Vec<serde_json::Value> = server
        .requests()
        .iter()
        .map(|r| r.json().unwrap()["max_tokens"].clone())
        .collect();
    assert_eq!(caps, [2048, 300, 2048]);
    let props = server
        .endpoint_requests()
        .iter()
        .filter(|r| r.path == "/props")
        .count();
    assert_eq!(props, 1);
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
    let out = Command::new(KEEL)
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
    let mut b = Bridge::start(Setup::new(KEEL, &home, &ws, &model));
    let sid = b.start_session("s1", "{}");
    b.request(&sid, "r1", r#"{"message":"hello"}"#);
    b.until_on("r1", "session.completed");
    assert!(marker.exists(), "the trusted project's hook ran");
    b.stop();
}

/// Every model call of a session follows its output cap: the request's own turns, a
/// sub-agent's, a side question's and a compaction's (those two at most 2048, or the
/// session's cap when it is smaller). Checked in the bodies the server received.
#[test]
fn every_model_call_of_a_session_follows_its_output_cap() {
    let rt = keel_testsupport::runtime();
    let server = rt
        .block_on(FakeServer::start([
            FakeResponse::sse(openai::tool_calls_stream(&[(
                "c1",
                "spawn_sub_agent",
                r#"{"task":"Look around."}"#,
            )])),
            FakeResponse::sse(openai::text_stream(&["Found it."])),
            FakeResponse::sse(openai::text_stream(&["Done."])),
            FakeResponse::sse(openai::text_stream(&["A side answer."])),
            FakeResponse::sse(openai::text_stream(&["A summary."])),
        ]))
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("config.toml"), "maxOutputTokens = 300\n").unwrap();
    let url = format!("{}/v1", server.base_url());
    let mut b = Bridge::start(Setup {
        env: &[("OPENAI_BASE_URL", &url)],
        ..Setup::new(KEEL, &home, &ws, "openai:qwen2.5-coder:7b")
    });
    let s = b.start_session("s", r#"{"permissionMode":"auto"}"#);
    b.request(&s, "r1", r#"{"message":"Use a sub-agent."}"#);
    b.until_on("r1", "session.completed");
    b.send(&format!(
        r#"{{"version":"1.0","type":"request.side","requestId":"q1","sessionId":"{s}","payload":{{"message":"Why?"}}}}"#
    ));
    b.until_on("q1", "side.answered");
    b.send(&format!(
        r#"{{"version":"1.0","type":"context.compact","requestId":"k1","sessionId":"{s}","payload":{{}}}}"#
    ));
    b.until_on("k1", "context.compaction.completed");
    b.stop();
    let requests = server.requests();
    let caps: Vec<serde_json::Value> = requests
        .iter()
        .map(|r| r.json().unwrap()["max_tokens"].clone())
        .collect();
    assert!(caps.len() >= 4, "{caps:?}");
    // The parent's two turns and the sub-agent's take the session's cap itself.
    assert_eq!(caps[..3], [300, 300, 300], "{caps:?}");
    assert!(
        caps.iter().all(|c| c.as_u64().is_some_and(|c| c <= 300)),
        "{caps:?}"
    );
}
