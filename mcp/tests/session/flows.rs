//! Listing, calls through the gate and approvals, trust, crashes, hangs, close.

use super::*;
use keel_envelope::commands::McpListCmd;
use keel_envelope::types::{ApprovalDecision, PermissionLevel};
use keel_envelope::ErrorCode;
use serde_json::json;

#[tokio::test]
async fn servers_are_listed_and_their_tools_offered_to_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = stdio_server("files", dir.path(), &[]);
    let (broken, _) = stdio_server("broken", dir.path(), &["--fail-start"]);
    let h = Harness::new(vec![], PermissionMode::Ask, vec![files, broken]);
    let web = keel_mcp::testing::serve_http(None).await.unwrap();
    let given = McpServerSpec::new("web")
        .transport(Some("http".into()))
        .url(web.url())
        .headers(vec![])
        .trust(McpTrust::Read);
    let (session, mut events) = h.start(vec![given]).await;
    let started = until(&mut events, |e| matches!(e.event, Event::SessionStarted(_))).await;
    let start_rid = started.last().unwrap().request_id.clone();
    settled(&session).await;

    // The server that cannot start is reported on the start's stream.
    let warned = until(
        &mut events,
        |e| matches!(&e.event, Event::Warning(w) if w.code == ErrorCode::McpServerUnavailable),
    )
    .await;
    let w = warned.last().unwrap();
    assert_eq!(w.request_id, start_rid);
    let Event::Warning(w) = &w.event else {
        unreachable!()
    };
    assert_eq!(w.details["server"], "broken");

    let rid = run(
        &h.kernel,
        &session,
        CommandPayload::McpList(McpListCmd::new()),
    )
    .await;
    let answer = until(&mut events, |e| e.request_id == rid).await;
    let Event::McpList(list) = &answer.last().unwrap().event else {
        panic!("{:?}", answer.last())
    };
    let names: Vec<(&str, &str, McpServerState)> = list
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.origin.as_str(), s.state.clone()))
        .collect();
    assert_eq!(
        names,
        [
            ("broken", "config", McpServerState::Failed),
            ("files", "config", McpServerState::Ready),
            ("web", "session", McpServerState::Ready),
        ]
    );
    assert!(list.servers[0]
        .reason
        .as_deref()
        .unwrap()
        .contains("handshake"));
    assert!(list.servers[0].tools.is_empty());
    let files = &list.servers[1];
    assert_eq!(files.transport, "stdio");
    assert_eq!(files.trust, McpTrust::Ask);
    assert!(files
        .tools
        .iter()
        .any(|t| t.name == "mcp__files__echo" && t.tool == "echo"));
    assert!(files
        .tools
        .iter()
        .any(|t| t.name == "mcp__files__dotted_name" && t.tool == "dotted.name"));
    assert_eq!(list.servers[2].trust, McpTrust::Read);
    assert_eq!(list.servers[2].transport, "http");

    // The model is offered the kernel's tools, then the servers' tools.
    let rid = session.send("hello").await.unwrap();
    until(&mut events, end_of(&rid)).await;
    let offered = h.model.offered(0);
    assert!(offered.contains(&"read_file".to_owned()));
    assert!(offered.contains(&"mcp__files__echo".to_owned()));
    assert!(offered.contains(&"mcp__web__add".to_owned()));
    let schema = &h.model.seen.lock().unwrap()[0]
        .tools
        .iter()
        .find(|t| t.name == "mcp__files__echo")
        .unwrap()
        .parameters
        .clone();
    assert_eq!(schema["required"], json!(["text"]));
}

#[tokio::test]
async fn a_call_needs_approval_in_ask_mode_and_its_result_reaches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let (files, journal) = stdio_server("files", dir.path(), &[]);
    let h = Harness::new(
        vec![
            vec![("mcp__files__echo", json!({"text": "hi"}))],
            vec![("mcp__files__image", json!({}))],
        ],
        PermissionMode::Ask,
        vec![files],
    );
    let (session, mut events) = h.start(vec![]).await;
    let rid = session.send("echo").await.unwrap();
    let seen = until(&mut events, |e| {
        matches!(e.event, Event::ApprovalRequested(_))
    })
    .await;
    let Event::ApprovalRequested(asked) = &seen.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(asked.tool_name, "mcp__files__echo");
    assert_eq!(asked.permission_level, PermissionLevel::Execute);
    assert!(
        !journal.lines().contains(&"call echo".to_owned()),
        "nothing runs before the approval"
    );
    session
        .respond_approval(&asked.approval_id, ApprovalDecision::AllowOnce)
        .await
        .unwrap();
    let seen = until(&mut events, |e| {
        matches!(e.event, Event::ApprovalRequested(_))
    })
    .await;
    let Event::ToolCallCompleted(done) = &seen
        .iter()
        .find(|e| matches!(e.event, Event::ToolCallCompleted(_)))
        .unwrap()
        .event
    else {
        unreachable!()
    };
    assert_eq!(done.tool_name, "mcp__files__echo");
    assert_eq!(done.result["message"], "echo: hi");
    assert_eq!(done.result["server"], "files");
    assert_eq!(done.result["content"][0]["text"], "echo: hi");
    let Event::ApprovalRequested(asked) = &seen.last().unwrap().event else {
        unreachable!()
    };
    session
        .respond_approval(&asked.approval_id, ApprovalDecision::AllowOnce)
        .await
        .unwrap();
    let rest = until(&mut events, end_of(&rid)).await;
    let Some(Event::ToolCallCompleted(img)) = rest
        .iter()
        .map(|e| &e.event)
        .find(|e| matches!(e, Event::ToolCallCompleted(_)))
    else {
        panic!("{:?}", types(&rest))
    };
    // Images reach events as type and size; the model reads a note.
    assert_eq!(img.result["content"][1]["type"], "image");
    assert_eq!(img.result["content"][1]["mimeType"], "image/png");
    let results = h.model.tool_results();
    assert_eq!(results[0], ("echo: hi".to_owned(), false));
    assert!(
        results[1].0.starts_with("a red dot\n[image: image/png"),
        "{results:?}"
    );
}

#[tokio::test]
async fn plan_mode_refuses_ask_servers_and_read_servers_run_without_approval() {
    let dir = tempfile::tempdir().unwrap();
    let (files, journal) = stdio_server("files", dir.path(), &[]);
    let ro_journal = dir.path().join("ro.journal");
    let h = Harness::new(
        vec![vec![
            ("mcp__files__echo", json!({"text": "no"})),
            ("mcp__ro__echo", json!({"text": "yes"})),
        ]],
        PermissionMode::Plan,
        vec![files],
    );
    let (session, mut events) = h
        .start(vec![stdio_spec("ro", &ro_journal, Some(McpTrust::Read))])
        .await;
    let rid = session.send("look").await.unwrap();
    let seen = until(&mut events, end_of(&rid)).await;
    assert!(
        !types(&seen).contains(&"approval.requested".to_owned()),
        "{:?}",
        types(&seen)
    );
    let skipped: Vec<_> = seen
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].tool_name, "mcp__files__echo");
    assert_eq!(skipped[0].error.code, ErrorCode::PlanApprovalRequired);
    let started: Vec<_> = seen
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallStarted(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].tool_name, "mcp__ro__echo");
    assert_eq!(started[0].permission_level, PermissionLevel::Read);
    assert!(!journal.lines().contains(&"call echo".to_owned()));
    assert!(Journal::File(ro_journal)
        .lines()
        .contains(&"call echo".to_owned()));
}

#[tokio::test]
async fn a_crash_mid_call_fails_it_and_the_next_call_restarts_the_server_once() {
    let dir = tempfile::tempdir().unwrap();
    // The second start is the last one this server allows.
    let (files, journal) = stdio_server("files", dir.path(), &["--max-starts", "2"]);
    let h = Harness::new(
        vec![
            vec![("mcp__files__crash", json!({}))],
            vec![("mcp__files__echo", json!({"text": "back"}))],
            vec![("mcp__files__crash", json!({}))],
            vec![("mcp__files__echo", json!({"text": "gone"}))],
            vec![("mcp__files__echo", json!({"text": "still gone"}))],
        ],
        PermissionMode::Auto,
        vec![files],
    );
    let (session, mut events) = h.start(vec![]).await;
    let rid = session.send("go").await.unwrap();
    let seen = until(&mut events, end_of(&rid)).await;
    let ends: Vec<(String, Option<ErrorCode>)> = seen
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallCompleted(c) => Some((c.tool_name.clone(), None)),
            Event::ToolCallFailed(f) => Some((f.tool_name.clone(), Some(f.error.code.clone()))),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        [
            (
                "mcp__files__crash".to_owned(),
                Some(ErrorCode::McpServerUnavailable)
            ),
            ("mcp__files__echo".to_owned(), None),
            (
                "mcp__files__crash".to_owned(),
                Some(ErrorCode::McpServerUnavailable)
            ),
            (
                "mcp__files__echo".to_owned(),
                Some(ErrorCode::McpServerUnavailable)
            ),
            (
                "mcp__files__echo".to_owned(),
                Some(ErrorCode::McpServerUnavailable)
            ),
        ]
    );
    // Two starts, then one refused restart, and no attempt after that.
    let attempts = journal
        .lines()
        .iter()
        .filter(|l| *l == "start attempt")
        .count();
    assert_eq!(attempts, 3, "{:?}", journal.lines());
    let results = h.model.tool_results();
    assert_eq!(results[1], ("echo: back".to_owned(), false));
    assert!(
        results[4].0.starts_with("MCP_SERVER_UNAVAILABLE"),
        "{results:?}"
    );
    let list = session.mcp_servers();
    assert_eq!(list[0].state, McpServerState::Failed);
    // The session goes on.
    assert!(matches!(
        seen.last().unwrap().event,
        Event::SessionCompleted(_)
    ));
}

#[tokio::test]
async fn an_interrupt_cancels_a_hung_call_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (files, journal) = stdio_server("files", dir.path(), &[]);
    let h = Harness::new(
        vec![vec![("mcp__files__hang", json!({}))]],
        PermissionMode::Auto,
        vec![files],
    );
    let (session, mut events) = h.start(vec![]).await;
    let rid = session.send("hang").await.unwrap();
    until(&mut events, |e| {
        matches!(e.event, Event::ToolCallStarted(_))
    })
    .await;
    assert!(journal_has(&journal, "hanging").await);
    let irid = session.interrupt().await.unwrap();
    let seen = until(&mut events, end_of(&rid)).await;
    let failed = seen
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolCallFailed(f) => Some(f),
            _ => None,
        })
        .unwrap();
    assert_eq!(failed.error.code, ErrorCode::Interrupted);
    let last = seen.last().unwrap();
    assert!(matches!(last.event, Event::SessionInterrupted(_)));
    assert_eq!(
        last.meta.as_ref().unwrap().reply_to.as_deref(),
        Some(irid.as_str())
    );
    // MCP's cancellation reached the server, which stopped the call.
    assert!(
        journal_has(&journal, "hang cancelled").await,
        "{:?}",
        journal.lines()
    );
    // The server journals the notification itself on its own task: wait for it.
    let mut notified = false;
    for _ in 0..1000 {
        notified = journal
            .lines()
            .iter()
            .any(|l| l.starts_with("notifications/cancelled"));
        if notified {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(notified, "{:?}", journal.lines());
    // The server is still usable.
    assert_eq!(session.mcp_servers()[0].state, McpServerState::Ready);
}

#[tokio::test]
async fn a_hung_call_ends_at_its_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (mut files, journal) = stdio_server("files", dir.path(), &[]);
    files.call_timeout = Some(Duration::from_millis(200));
    let h = Harness::new(
        vec![vec![("mcp__files__hang", json!({}))]],
        PermissionMode::Auto,
        vec![files],
    );
    let (session, mut events) = h.start(vec![]).await;
    let rid = session.send("hang").await.unwrap();
    let seen = until(&mut events, end_of(&rid)).await;
    let failed = seen
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolCallFailed(f) => Some(f),
            _ => None,
        })
        .unwrap();
    assert_eq!(failed.error.code, ErrorCode::ToolTimeout);
    assert_eq!(failed.error.details["limitMs"], 200);
    assert!(matches!(
        seen.last().unwrap().event,
        Event::SessionCompleted(_)
    ));
    assert!(
        journal_has(&journal, "hang cancelled").await,
        "{:?}",
        journal.lines()
    );
    assert!(h.model.tool_results()[0].0.starts_with("TOOL_TIMEOUT"));
}

#[tokio::test]
async fn servers_stop_when_the_session_closes() {
    let dir = tempfile::tempdir().unwrap();
    let (files, journal) = stdio_server("files", dir.path(), &[]);
    let h = Harness::new(vec![], PermissionMode::Ask, vec![files]);
    let (session, _events) = h.start(vec![]).await;
    settled(&session).await;
    assert_eq!(session.mcp_servers()[0].state, McpServerState::Ready);
    session.close().await.unwrap();
    assert!(journal_has(&journal, "exit").await, "{:?}", journal.lines());
}

#[tokio::test]
async fn a_server_that_hangs_at_start_fails_at_its_start_limit_and_requests_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let (mut slow, _) = stdio_server("slow", dir.path(), &["--hang-start"]);
    slow.startup_timeout = Some(Duration::from_millis(300));
    let h = Harness::new(vec![], PermissionMode::Ask, vec![slow]);
    let (session, mut events) = h.start(vec![]).await;
    // The request waits for the start to end, then runs without the server.
    let rid = session.send("hi").await.unwrap();
    let seen = until(&mut events, end_of(&rid)).await;
    assert!(matches!(
        seen.last().unwrap().event,
        Event::SessionCompleted(_)
    ));
    let list = session.mcp_servers();
    assert_eq!(list[0].state, McpServerState::Failed);
    assert!(
        list[0].reason.as_deref().unwrap().contains("did not start"),
        "{list:?}"
    );
    assert!(!h.model.offered(0).iter().any(|t| t.starts_with("mcp__")));
}
