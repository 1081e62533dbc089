//! Bad `mcpServers` entries, name clashes, and where a server's stderr goes.

use super::*;
use keel_envelope::commands::SessionResume;
use keel_envelope::host::HostToolSpec;
use keel_envelope::types::PermissionLevel;
use keel_envelope::ErrorCode;
use serde_json::json;

fn spec(name: &str) -> McpServerSpec {
    McpServerSpec::new(name)
}

#[tokio::test]
async fn bad_mcp_servers_refuse_the_session_with_the_field() {
    let h = Harness::new(vec![], PermissionMode::Ask, vec![]);
    let nv = |n: &str, v: &str| NameValue::new(n, v);
    let cases: Vec<(McpServerSpec, &str, &str)> = vec![
        (spec("a"), "payload.mcpServers[0]", "needs either `command`"),
        (
            spec("a")
                .command(Some("x".into()))
                .url(Some("http://127.0.0.1:1/mcp".into())),
            "payload.mcpServers[0]",
            "not both",
        ),
        (
            spec("a")
                .transport(Some("sse".into()))
                .url(Some("http://127.0.0.1:1/sse".into())),
            "payload.mcpServers[0].type",
            "SSE transport is not supported",
        ),
        (
            spec("a")
                .transport(Some("carrier-pigeon".into()))
                .command(Some("x".into())),
            "payload.mcpServers[0].type",
            "unknown transport",
        ),
        (
            spec("a").url(Some("ftp://example.com".into())),
            "payload.mcpServers[0].url",
            "not an http",
        ),
        (
            spec("a")
                .url(Some("http://127.0.0.1:1/mcp".into()))
                .headers(vec![nv("bad header", "v")]),
            "payload.mcpServers[0].headers",
            "not a valid HTTP header name",
        ),
        (
            spec("a")
                .command(Some("x".into()))
                .headers(vec![nv("A", "b")]),
            "payload.mcpServers[0].headers",
            "for http servers",
        ),
        (
            spec("a")
                .url(Some("http://127.0.0.1:1/mcp".into()))
                .env(vec![nv("A", "b")]),
            "payload.mcpServers[0].env",
            "for stdio servers",
        ),
        (
            spec("a")
                .command(Some("x".into()))
                .env(vec![nv("A=B", "c")]),
            "payload.mcpServers[0].env",
            "not a valid environment variable name",
        ),
        (
            spec("a").command(Some("  ".into())),
            "payload.mcpServers[0].command",
            "empty",
        ),
        (
            spec(" ").command(Some("x".into())),
            "payload.mcpServers[0].name",
            "empty",
        ),
    ];
    for (bad, field, says) in cases {
        let err = h
            .kernel
            .start_session(SessionStart::new().mcp_servers(vec![bad.clone()]))
            .await
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::RequestInvalid, "{bad:?}");
        assert_eq!(err.details["field"], field, "{bad:?}: {err}");
        assert!(err.message.contains(says), "{bad:?}: {}", err.message);
    }
    // Two servers of one name.
    let twice = spec("a").command(Some("x".into()));
    let err = h
        .kernel
        .start_session(SessionStart::new().mcp_servers(vec![twice.clone(), twice]))
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(err.details["field"], "payload.mcpServers[1].name");
    // No session was made by any of them.
    assert!(h.kernel.open_sessions().is_empty());
    assert!(h.kernel.list_sessions().unwrap().is_empty());
}

#[tokio::test]
async fn a_bad_resume_entry_is_refused_too() {
    let h = Harness::new(vec![], PermissionMode::Ask, vec![]);
    let (session, _events) = h.start(vec![]).await;
    let id = session.id().to_owned();
    session.close().await.unwrap();
    let rid = h.kernel.new_request_id();
    let err = h
        .kernel
        .execute(Command::new(
            rid,
            None,
            CommandPayload::SessionResume(
                SessionResume::new(id).mcp_servers(vec![spec("nothing")]),
            ),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::RequestInvalid);
    assert_eq!(err.details["field"], "payload.mcpServers[0]");
}

#[tokio::test]
async fn a_resumed_session_starts_its_servers_again() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    let h = Harness::new(
        vec![vec![("mcp__again__echo", json!({"text": "resumed"}))]],
        PermissionMode::Auto,
        vec![],
    );
    let (session, _events) = h.start(vec![]).await;
    let id = session.id().to_owned();
    session.close().await.unwrap();
    let rid = h.kernel.new_request_id();
    h.kernel
        .execute(Command::new(
            rid,
            None,
            CommandPayload::SessionResume(
                SessionResume::new(id.clone())
                    .mcp_servers(vec![stdio_spec("again", &journal, None)]),
            ),
        ))
        .await
        .unwrap();
    let session = h.kernel.session_handle(&id).unwrap();
    let mut events = session.subscribe();
    let rid = session.send("again").await.unwrap();
    let seen = until(&mut events, end_of(&rid)).await;
    assert!(
        types(&seen).contains(&"tool.call.completed".to_owned()),
        "{:?}",
        types(&seen)
    );
    assert_eq!(h.model.tool_results()[0].0, "echo: resumed");
}

#[tokio::test]
async fn an_mcp_tool_whose_name_is_taken_is_left_out_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = stdio_server("files", dir.path(), &[]);
    let h = Harness::new(vec![], PermissionMode::Ask, vec![files]);
    let (session, mut events) = h
        .kernel
        .start_session(SessionStart::new().host_tools(vec![HostToolSpec::new(
            "mcp__files__echo",
            "the host's echo",
            json!({"type": "object"}),
            PermissionLevel::Read,
        )]))
        .await
        .unwrap();
    let seen = until(
        &mut events,
        |e| matches!(&e.event, Event::Warning(w) if w.code == ErrorCode::ToolNameConflict),
    )
    .await;
    let Event::Warning(w) = &seen.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(w.details["toolName"], "mcp__files__echo");
    assert_eq!(w.details["server"], "files");
    assert!(
        w.message.contains("a tool of the host app")
            && w.message.contains("a tool of an MCP server"),
        "{}",
        w.message
    );
    settled(&session).await;
    let tools = &session.mcp_servers()[0].tools;
    assert!(!tools.iter().any(|t| t.name == "mcp__files__echo"));
    assert!(tools.iter().any(|t| t.name == "mcp__files__add"));
}

#[tokio::test]
async fn a_servers_stderr_goes_to_the_log() {
    let log = keel_mcp::testing::captured_log();
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = stdio_server("logged", dir.path(), &[]);
    let h = Harness::new(vec![], PermissionMode::Ask, vec![files]);
    let (session, _events) = h.start(vec![]).await;
    settled(&session).await;
    let mut found = false;
    for _ in 0..1000 {
        let text = String::from_utf8_lossy(&log.lock().unwrap()).to_string();
        if text.lines().any(|l| {
            l.contains("keel-mcp-test-server: serving on stdio") && l.contains("server=logged")
        }) {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(found, "the server's stderr line is in the log");
}

#[tokio::test]
async fn a_result_over_the_cap_is_cut_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = stdio_server("files", dir.path(), &[]);
    let big = "ü".repeat(keel_mcp::RESULT_CAP); // twice the cap in bytes
    let h = Harness::new(
        vec![vec![("mcp__files__echo", json!({ "text": big }))]],
        PermissionMode::Auto,
        vec![files],
    );
    let (session, mut events) = h.start(vec![]).await;
    let rid = session.send("echo").await.unwrap();
    let seen = until(&mut events, end_of(&rid)).await;
    let Some(Event::ToolCallCompleted(done)) = seen
        .iter()
        .map(|e| &e.event)
        .find(|e| matches!(e, Event::ToolCallCompleted(_)))
    else {
        panic!("no completed call")
    };
    let message = done.result["message"].as_str().unwrap();
    assert_capped(message);
    let (model_text, is_error) = h.model.tool_results().remove(0);
    assert!(!is_error);
    assert_eq!(model_text, message, "the model reads the same capped text");
}

#[tokio::test]
async fn unreadable_answers_fail_the_call_at_once_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = stdio_server("files", dir.path(), &[]);
    let over = keel_mcp::stdio::MAX_MESSAGE + 1024 * 1024;
    let h = Harness::new(
        vec![
            vec![("mcp__files__big", json!({ "bytes": over }))],
            vec![("mcp__files__garbage", json!({}))],
            vec![("mcp__files__big", json!({ "bytes": 2_000_000 }))],
        ],
        PermissionMode::Auto,
        vec![files],
    );
    let (session, mut events) = h.start(vec![]).await;
    // The three calls, one model turn each, in one request.
    let rid = session.send("go").await.unwrap();
    let seen = until(&mut events, end_of(&rid)).await;
    let ends: Vec<&Event> = seen
        .iter()
        .map(|e| &e.event)
        .filter(|e| matches!(e, Event::ToolCallFailed(_) | Event::ToolCallCompleted(_)))
        .collect();
    assert_eq!(ends.len(), 3, "{:?}", types(&seen));
    for (end, reason) in ends.iter().zip(["answer_too_large", "not_json_rpc"]) {
        let Event::ToolCallFailed(f) = end else {
            panic!("{end:?}")
        };
        assert_eq!(f.error.code, keel_envelope::ErrorCode::ToolExecutionFailed);
        assert_eq!(f.error.details["reason"], reason, "{:?}", f.error);
        assert_eq!(f.error.details["server"], "files");
    }
    // An answer under the line limit but over the result cap is cut as documented.
    let Event::ToolCallCompleted(done) = ends[2] else {
        panic!("{:?}", ends[2])
    };
    assert_capped(done.result["message"].as_str().unwrap());
}

/// A result text cut at the cap, with its note.
fn assert_capped(message: &str) {
    assert!(
        message.len() < keel_mcp::RESULT_CAP + 200,
        "{}",
        message.len()
    );
    assert!(
        message.ends_with("bytes of text]"),
        "{}",
        &message[message.len() - 100..]
    );
}
