//! The MCP client against the real test server: over stdio (the
//! `keel-mcp-test-server` binary) and over streamable HTTP on loopback.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use keel_mcp::testing::{serve_http, Journal};
use keel_mcp::{CallError, Connection, ContentSummary, Transport};
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_keel-mcp-test-server");

fn stdio(args: &[&str]) -> Transport {
    Transport::Stdio {
        command: SERVER.to_owned(),
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        env: vec![("KEEL_TEST_VAR".into(), "1".into())],
        cwd: None,
    }
}

/// Waits (bounded) until the journal has a line; the server writes it from another
/// process or task.
async fn journal_has(journal: &Journal, line: &str) -> bool {
    for _ in 0..500 {
        if journal.lines().iter().any(|l| l == line) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn stdio_lists_and_calls_tools() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let conn = Connection::connect("t", &stdio(&["--journal", journal.to_str().unwrap()]))
        .await
        .unwrap();
    let names: Vec<&str> = conn.tools().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "echo",
            "add",
            "image",
            "fail",
            "protocol_error",
            "dotted.name",
            "hang",
            "crash",
            "big",
            "garbage",
            "stderr_flood"
        ]
    );
    assert_eq!(conn.tools()[0].input_schema["required"], json!(["text"]));

    let out = conn.call("echo", &json!({"text": "hi"})).await.unwrap();
    assert!(!out.is_error);
    assert_eq!(out.text_for_model(), "echo: hi");

    let out = conn.call("add", &json!({"a": 2, "b": 3})).await.unwrap();
    assert_eq!(out.structured, Some(json!({"sum": 5.0})));

    let out = conn.call("image", &json!({})).await.unwrap();
    assert!(
        matches!(&out.content[1], ContentSummary::Image { mime_type, bytes } if mime_type == "image/png" && *bytes > 60)
    );
    assert!(out.text_for_model().contains("[image: image/png"));

    let out = conn
        .call("fail", &json!({"message": "no rows"}))
        .await
        .unwrap();
    assert!(out.is_error);
    assert_eq!(out.text_for_model(), "no rows");

    let err = conn.call("protocol_error", &json!({})).await.unwrap_err();
    assert_eq!(err, CallError::Failed("the test server refuses".into()));
    let err = conn.call("nope", &json!({})).await.unwrap_err();
    assert!(matches!(err, CallError::Failed(m) if m.contains("nope")));
    assert_eq!(
        Journal::File(journal).lines(),
        [
            "start",
            "call echo",
            "call add",
            "call image",
            "call fail",
            "call protocol_error",
            "call nope"
        ]
    );
}

#[tokio::test]
async fn dropping_a_call_sends_the_cancellation_and_a_crash_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let journal = Journal::File(path.clone());
    let conn = Connection::connect("t", &stdio(&["--journal", path.to_str().unwrap()]))
        .await
        .unwrap();
    // The hang is abandoned once the server has it.
    let no_args = json!({});
    let call = conn.call("hang", &no_args);
    tokio::select! {
        _ = call => panic!("hang answered"),
        ok = journal_has(&journal, "hanging") => assert!(ok),
    }
    assert!(
        journal_has(&journal, "hang cancelled").await,
        "{:?}",
        journal.lines()
    );
    assert!(journal
        .lines()
        .iter()
        .any(|l| l.starts_with("notifications/cancelled")));
    // The connection still works.
    assert_eq!(
        conn.call("echo", &json!({"text": "again"}))
            .await
            .unwrap()
            .text_for_model(),
        "echo: again"
    );
    // A crash in the middle of a call: the connection is gone.
    let err = conn.call("crash", &json!({})).await.unwrap_err();
    assert!(matches!(err, CallError::Closed(_)), "{err:?}");
    assert!(conn.is_closed());
}

#[tokio::test]
async fn a_server_that_cannot_start_is_an_error() {
    let err = Connection::connect("t", &stdio(&["--fail-start"]))
        .await
        .unwrap_err();
    assert!(err.contains("handshake"), "{err}");
    let err = Connection::connect(
        "t",
        &Transport::Stdio {
            command: "/nonexistent/keel-no-such-server".into(),
            args: vec![],
            env: vec![],
            cwd: None,
        },
    )
    .await
    .unwrap_err();
    assert!(err.contains("could not start"), "{err}");
    // A server that never answers the handshake: the caller's time limit ends it.
    let hung = tokio::time::timeout(
        Duration::from_millis(300),
        Connection::connect("t", &stdio(&["--hang-start"])),
    )
    .await;
    assert!(hung.is_err());
}

#[tokio::test]
async fn http_lists_and_calls_tools_with_headers() {
    let server = serve_http(Some("Bearer s3cret")).await.unwrap();
    let transport = Transport::Http {
        url: server.url(),
        headers: vec![("Authorization".into(), "Bearer s3cret".into())],
    };
    let conn = Connection::connect("h", &transport).await.unwrap();
    assert!(conn.tools().iter().any(|t| t.name == "echo"));
    assert!(!conn.tools().iter().any(|t| t.name == "crash"));
    let out = conn
        .call("echo", &json!({"text": "over http"}))
        .await
        .unwrap();
    assert_eq!(out.text_for_model(), "echo: over http");
    assert!(server.journal.lines().contains(&"call echo".to_owned()));

    // Without the header the server refuses the handshake.
    let bare = Transport::Http {
        url: server.url(),
        headers: vec![],
    };
    let err = Connection::connect("h", &bare).await.unwrap_err();
    assert!(err.contains("handshake"), "{err}");

    // A cancelled HTTP call reaches the server as a cancellation.
    let no_args = json!({});
    let call = conn.call("hang", &no_args);
    tokio::select! {
        _ = call => panic!("hang answered"),
        ok = journal_has(&server.journal, "hanging") => assert!(ok),
    }
    assert!(
        journal_has(&server.journal, "hang cancelled").await,
        "{:?}",
        server.journal.lines()
    );
}

#[test]
fn urls_and_headers_are_checked() {
    assert!(keel_mcp::check_url("http://127.0.0.1:1/mcp").is_ok());
    assert!(keel_mcp::check_url("https://example.com/mcp").is_ok());
    assert!(keel_mcp::check_url("ftp://example.com").is_err());
    assert!(keel_mcp::check_url("not a url").is_err());
    assert!(keel_mcp::check_headers(&[("X-Ok".into(), "v".into())]).is_ok());
    assert!(keel_mcp::check_headers(&[("bad header".into(), "v".into())]).is_err());
    assert!(keel_mcp::check_headers(&[("X".into(), "line\nbreak".into())]).is_err());
}

/// A call that would otherwise wait for ever (the client has no time limit of its
/// own): a hang guard, not a timing figure.
async fn guarded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"))
}

#[tokio::test]
async fn an_answer_over_the_line_limit_fails_at_once_naming_its_size() {
    let conn = Connection::connect("t", &stdio(&[])).await.unwrap();
    let over = keel_mcp::stdio::MAX_MESSAGE + 1024 * 1024;
    let err = guarded(
        "the oversized answer",
        conn.call("big", &json!({"bytes": over})),
    )
    .await
    .unwrap_err();
    let CallError::Protocol { reason, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(reason, "answer_too_large");
    assert!(
        message.contains("17.0 MiB") && message.contains("16.0 MiB"),
        "{message}"
    );
    // The connection goes on; an answer under the limit arrives whole (the kernel cuts
    // it for the model).
    let out = guarded(
        "a large answer",
        conn.call("big", &json!({"bytes": 1_000_000})),
    )
    .await
    .unwrap();
    assert_eq!(out.text_for_model().len(), 1_000_000);
    assert!(!conn.is_closed());
}

#[tokio::test]
async fn lines_that_are_not_json_rpc_fail_the_waiting_call_at_once() {
    let conn = Connection::connect("t", &stdio(&[])).await.unwrap();
    let err = guarded("the garbage call", conn.call("garbage", &json!({})))
        .await
        .unwrap_err();
    let CallError::Protocol { reason, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(reason, "not_json_rpc");
    assert!(message.contains("this line is not JSON-RPC"), "{message}");
    let out = guarded("echo", conn.call("echo", &json!({"text": "still here"})))
        .await
        .unwrap();
    assert_eq!(out.text_for_model(), "echo: still here");
}

#[tokio::test]
async fn a_server_that_never_speaks_json_rpc_fails_its_handshake_at_once() {
    let err = guarded(
        "the handshake",
        Connection::connect("t", &stdio(&["--garbage"])),
    )
    .await
    .unwrap_err();
    assert!(err.contains("handshake"), "{err}");
    assert!(
        err.contains("not a JSON-RPC message") && err.contains("garbage, not JSON-RPC"),
        "{err}"
    );
}

#[tokio::test]
async fn ten_megabytes_of_stderr_log_at_most_the_cap_with_notes() {
    let log = keel_mcp::testing::captured_log();
    let conn = Connection::connect("flood", &stdio(&[])).await.unwrap();
    let out = guarded(
        "the flood",
        conn.call("stderr_flood", &json!({"bytes": 10_000_000})),
    )
    .await
    .unwrap();
    assert_eq!(out.text_for_model(), "flooded 10000000");
    // Stopping the server ends its stderr: the last note is written then.
    conn.close();
    drop(conn);
    let ended = |text: &str| text.contains("[stderr ended:") && text.contains("server=flood");
    for _ in 0..1000 {
        if ended(&String::from_utf8_lossy(&log.lock().unwrap())) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let text = String::from_utf8_lossy(&log.lock().unwrap()).to_string();
    let ours: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("server=flood"))
        .collect();
    let bytes: usize = ours.iter().map(|l| l.len() + 1).sum();
    let flood_lines = ours.iter().filter(|l| l.contains(&"e".repeat(99))).count();
    // The lines of stderr logged hold at most the cap, plus each log line's prefix.
    assert!(
        flood_lines * 99 <= keel_mcp::stderr::TOTAL_CAP,
        "{flood_lines}"
    );
    assert!(flood_lines > 1000, "the start of the flood is logged");
    assert!(
        bytes < 3 * keel_mcp::stderr::TOTAL_CAP,
        "{bytes} bytes logged"
    );
    assert!(
        ours.iter().any(|l| l.contains("[stderr cut here:")),
        "no note where it was cut"
    );
    assert!(ended(&text), "no final count");
}
