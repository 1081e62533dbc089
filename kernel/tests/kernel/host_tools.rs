//! Tools the host app defines: offered to the model, gated by their level, run by
//! the host (`host-tool.requested` → `host-tool.respond`), ended by the host's answer,
//! the time limit or an interrupt; and every bad input refused.

use super::*;
use keel_envelope::commands::{HostToolRespond, SessionStart, SetHostTools};
use keel_envelope::host::{HostToolApproval, HostToolError, HostToolSpec};
use serde_json::json;

fn host_tool(name: &str, level: PermissionLevel) -> HostToolSpec {
    HostToolSpec::new(
        name,
        format!("the host's {name}"),
        json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        level,
    )
}

fn kernel(turns: Vec<Turn>, host_timeout: Duration) -> (Kernel, Arc<TestModel>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let model = TestModel::new(turns);
    let kernel = Kernel::builder()
        .config(keel_kernel::KernelConfig {
            workspace: Some(dir.path().to_path_buf()),
            host_tool_timeout: host_timeout,
            ..Default::default()
        })
        .model(model.clone())
        .memory_store()
        .build()
        .unwrap();
    (kernel, model, dir)
}

fn with_tools(tools: Vec<HostToolSpec>, mode: Option<PermissionMode>) -> SessionStart {
    SessionStart::new().permission_mode(mode).host_tools(tools)
}

fn requested(envs: &[Envelope]) -> keel_envelope::events::HostToolRequested {
    first_event!(envs, HostToolRequested).expect("host-tool.requested")
}

fn last_tool_result(model: &TestModel) -> (String, bool) {
    let seen = model.seen.lock().unwrap();
    seen.last()
        .unwrap()
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            keel_kernel::model::Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn a_read_host_tool_runs_on_the_host_without_approval() {
    let (k, model, _dir) = kernel(
        vec![call("lookup", json!({"q": "answer"})), say("ok")],
        Duration::from_secs(60),
    );
    let (s, mut events) = k
        .start_session(with_tools(
            vec![host_tool("lookup", PermissionLevel::Read)],
            None,
        ))
        .await
        .unwrap();
    let rid = s.send("look it up").await.unwrap();
    let seen = until(&mut events, "host-tool.requested").await;
    assert!(!types(&seen).contains(&"approval.requested".to_owned()));
    let req = requested(&seen);
    assert_eq!(req.tool_name, "lookup");
    assert_eq!(req.arguments, json!({"q": "answer"}));
    assert!(req.expires_at.is_some());
    let started = first_event!(seen, ToolCallStarted).unwrap();
    assert_eq!(started.tool_call_id, req.tool_call_id);
    assert_eq!(started.permission_level, PermissionLevel::Read);
    assert_eq!(seen.last().unwrap().request_id, rid);

    let crid = s
        .respond_host_tool(&req.tool_call_id, Ok(json!("42")))
        .await
        .unwrap();
    let rest = until(&mut events, "session.completed").await;
    assert_eq!(
        types(&rest)[..3],
        [
            "host-tool.responded",
            "tool.call.completed",
            "turn.completed"
        ]
    );
    assert_eq!(rest[0].request_id, rid);
    assert_eq!(
        rest[0].meta.as_ref().unwrap().reply_to.as_deref(),
        Some(crid.as_str())
    );
    let Event::ToolCallCompleted(done) = &rest[1].event else {
        unreachable!()
    };
    assert_eq!(done.result, json!({"result": "42", "message": "42"}));
    assert_eq!(last_tool_result(&model), ("42".to_owned(), false));
    // The model was offered the host tool with its description and schema.
    let offered = model.seen.lock().unwrap()[0].tools.clone();
    let def = offered.iter().find(|t| t.name == "lookup").unwrap();
    assert_eq!(def.description, "the host's lookup");
    assert_eq!(def.parameters["required"], json!(["q"]));
    let mut all: Vec<Envelope> = seen;
    all.extend(rest);
    check_sequences(&all);
}

#[tokio::test]
async fn an_error_answer_fails_the_call_and_a_structured_result_reaches_the_model() {
    let (k, model, _dir) = kernel(
        vec![
            call("lookup", json!({"q": "a"})),
            call("lookup", json!({"q": "b"})),
            say("ok"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = k
        .start_session(with_tools(
            vec![host_tool("lookup", PermissionLevel::Read)],
            None,
        ))
        .await
        .unwrap();
    s.send("go").await.unwrap();
    let seen = until(&mut events, "host-tool.requested").await;
    s.respond_host_tool(
        &requested(&seen).tool_call_id,
        Err("the index is offline".into()),
    )
    .await
    .unwrap();
    let seen = until(&mut events, "host-tool.requested").await;
    let failed = first_event!(seen, ToolCallFailed).unwrap();
    assert_eq!(failed.error.code, ErrorCode::ToolExecutionFailed);
    assert_eq!(failed.error.message, "the index is offline");
    let responded = first_event!(seen, HostToolResponded).unwrap();
    assert!(responded.is_error);
    s.respond_host_tool(&requested(&seen).tool_call_id, Ok(json!({"rows": [1, 2]})))
        .await
        .unwrap();
    until(&mut events, "session.completed").await;
    let seen = model.seen.lock().unwrap();
    let tool_messages: Vec<(String, bool)> = seen
        .last()
        .unwrap()
        .messages
        .iter()
        .filter_map(|m| match m {
            keel_kernel::model::Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        tool_messages,
        [
            (
                "TOOL_EXECUTION_FAILED: the index is offline".to_owned(),
                true
            ),
            ("{\"rows\":[1,2]}".to_owned(), false)
        ]
    );
}

#[tokio::test]
async fn levels_decide_approval_and_plan_mode() {
    let mut never = host_tool("save_note", PermissionLevel::Write);
    never.approval = Some(HostToolApproval::Never);
    let (k, _model, _dir) = kernel(
        vec![
            call("send_mail", json!({"q": "x"})),
            call("save_note", json!({"q": "y"})),
            say("ok"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = k
        .start_session(with_tools(
            vec![
                host_tool("send_mail", PermissionLevel::Execute),
                never.clone(),
            ],
            None,
        ))
        .await
        .unwrap();
    s.send("mail").await.unwrap();
    // Execute level: asks first.
    let seen = until(&mut events, "approval.requested").await;
    assert!(!types(&seen).contains(&"host-tool.requested".to_owned()));
    s.respond_approval(&approval_id(&seen), ApprovalDecision::AllowOnce)
        .await
        .unwrap();
    let seen = until(&mut events, "host-tool.requested").await;
    s.respond_host_tool(&requested(&seen).tool_call_id, Ok(json!("sent")))
        .await
        .unwrap();
    // `approval: never` runs at once.
    let seen = until(&mut events, "host-tool.requested").await;
    assert!(!types(&seen).contains(&"approval.requested".to_owned()));
    s.respond_host_tool(&requested(&seen).tool_call_id, Ok(json!("saved")))
        .await
        .unwrap();
    until(&mut events, "session.completed").await;

    // In plan mode a write-level tool is refused without asking.
    let (k, _model, _dir) = kernel(
        vec![call("save_note", json!({"q": "y"})), say("ok")],
        Duration::from_secs(60),
    );
    let (s, mut events) = k
        .start_session(with_tools(vec![never], Some(PermissionMode::Plan)))
        .await
        .unwrap();
    s.send("plan").await.unwrap();
    let seen = until(&mut events, "session.completed").await;
    let skipped = first_event!(seen, ToolCallSkipped).unwrap();
    assert_eq!(skipped.error.code, ErrorCode::PlanApprovalRequired);
    assert!(!types(&seen).contains(&"host-tool.requested".to_owned()));
}

#[tokio::test]
async fn an_unanswered_call_times_out_and_a_late_answer_is_refused() {
    let (k, model, _dir) = kernel(
        vec![call("lookup", json!({"q": "a"})), say("ok")],
        Duration::from_millis(150),
    );
    let (s, mut events) = k
        .start_session(with_tools(
            vec![host_tool("lookup", PermissionLevel::Read)],
            None,
        ))
        .await
        .unwrap();
    s.send("go").await.unwrap();
    let seen = until(&mut events, "host-tool.requested").await;
    let id = requested(&seen).tool_call_id;
    let seen = until(&mut events, "session.completed").await;
    let failed = first_event!(seen, ToolCallFailed).unwrap();
    assert_eq!(failed.error.code, ErrorCode::ToolTimeout);
    assert_eq!(failed.error.details["limitMs"], 150);
    assert!(last_tool_result(&model).0.starts_with("TOOL_TIMEOUT"));
    let err = s
        .respond_host_tool(&id, Ok(json!("late")))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::HostToolCallNotFound);
    let answer = until(&mut events, "error").await;
    let Event::Error(e) = &answer.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(e.details["toolCallId"], id.as_str());
}

#[tokio::test]
async fn an_interrupt_releases_a_waiting_call() {
    let (k, _model, _dir) = kernel(vec![call("lookup", json!({"q": "a"}))], Duration::ZERO);
    let (s, mut events) = k
        .start_session(with_tools(
            vec![host_tool("lookup", PermissionLevel::Read)],
            None,
        ))
        .await
        .unwrap();
    let rid = s.send("go").await.unwrap();
    let seen = until(&mut events, "host-tool.requested").await;
    // No time limit: `expiresAt` is null.
    let req = requested(&seen);
    assert_eq!(req.expires_at, None);
    s.interrupt().await.unwrap();
    let seen = until(&mut events, "session.interrupted").await;
    let failed = first_event!(seen, ToolCallFailed).unwrap();
    assert_eq!(failed.error.code, ErrorCode::Interrupted);
    assert_eq!(failed.tool_call_id, req.tool_call_id);
    assert_eq!(seen.last().unwrap().request_id, rid);
    let err = s
        .respond_host_tool(&req.tool_call_id, Ok(json!("late")))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::HostToolCallNotFound);
    // The session goes on.
    assert_eq!(s.state().state, keel_envelope::types::SessionState::Idle);
}

#[tokio::test]
async fn bad_answers_are_refused_and_change_nothing() {
    let (k, _model, _dir) = kernel(
        vec![call("lookup", json!({"q": "a"})), say("ok")],
        Duration::from_secs(60),
    );
    let (s, mut events) = k
        .start_session(with_tools(
            vec![host_tool("lookup", PermissionLevel::Read)],
            None,
        ))
        .await
        .unwrap();
    s.send("go").await.unwrap();
    let seen = until(&mut events, "host-tool.requested").await;
    let id = requested(&seen).tool_call_id;
    let respond = |tool_call_id: &str, result: Option<serde_json::Value>, error: Option<&str>| {
        CommandPayload::HostToolRespond(
            HostToolRespond::new(tool_call_id)
                .result(result)
                .error(error.map(HostToolError::new)),
        )
    };
    let cases = [
        (
            respond("call_nope", Some(json!(1)), None),
            ErrorCode::HostToolCallNotFound,
            None,
        ),
        (
            respond("", Some(json!(1)), None),
            ErrorCode::RequestInvalid,
            Some("payload.toolCallId"),
        ),
        (
            respond(&id, Some(json!(1)), Some("and an error")),
            ErrorCode::RequestInvalid,
            Some("payload.error"),
        ),
        (
            respond(&id, None, Some("  ")),
            ErrorCode::RequestInvalid,
            Some("payload.error.message"),
        ),
    ];
    for (payload, code, field) in cases {
        let err = s.command(payload).await.unwrap_err();
        assert_eq!(err.code, code, "{err}");
        if let Some(f) = field {
            assert_eq!(err.details["field"], f);
        }
    }
    // The call still waits, and the right answer still lands.
    s.respond_host_tool(&id, Ok(json!("fine"))).await.unwrap();
    let seen = until(&mut events, "session.completed").await;
    assert!(types(&seen).contains(&"tool.call.completed".to_owned()));
    // A second answer for the finished call is refused.
    let err = s
        .respond_host_tool(&id, Ok(json!("again")))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::HostToolCallNotFound);
}

#[tokio::test]
async fn bad_host_tools_are_refused_at_session_start() {
    let (k, _model, _dir) = kernel(vec![], Duration::from_secs(60));
    let mut cases: Vec<(HostToolSpec, ErrorCode, &str)> = Vec::new();
    cases.push((
        host_tool("has space", PermissionLevel::Read),
        ErrorCode::RequestInvalid,
        "name",
    ));
    cases.push((
        host_tool("", PermissionLevel::Read),
        ErrorCode::RequestInvalid,
        "name",
    ));
    cases.push((
        host_tool(&"x".repeat(65), PermissionLevel::Read),
        ErrorCode::RequestInvalid,
        "name",
    ));
    let mut t = host_tool("t", PermissionLevel::Read);
    t.input_schema = json!("a string");
    cases.push((t, ErrorCode::RequestInvalid, "inputSchema"));
    let mut t = host_tool("t", PermissionLevel::Read);
    t.input_schema = json!({"type": "string"});
    cases.push((t, ErrorCode::RequestInvalid, "inputSchema"));
    let mut t = host_tool("t", PermissionLevel::Read);
    t.input_schema = json!({"type": "object", "properties": {"a": {"type": "no-such-type"}}});
    cases.push((t, ErrorCode::RequestInvalid, "inputSchema"));
    let mut t = host_tool("t", PermissionLevel::Read);
    t.input_schema = json!({"type": "object", "required": "q"});
    cases.push((t, ErrorCode::RequestInvalid, "inputSchema"));
    for (tool, code, field) in cases {
        let err = k
            .start_session(with_tools(vec![tool.clone()], None))
            .await
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.code, code, "{tool:?}");
        assert_eq!(
            err.details["field"],
            format!("payload.hostTools[0].{field}"),
            "{tool:?}"
        );
    }
    // A name taken by a built-in tool, or given twice: both registrations named.
    let err = k
        .start_session(with_tools(
            vec![host_tool("read_file", PermissionLevel::Read)],
            None,
        ))
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ToolNameConflict);
    assert!(
        err.message.contains("a built-in tool") && err.message.contains("a tool of the host app"),
        "{}",
        err.message
    );
    let err = k
        .start_session(with_tools(
            vec![
                host_tool("twice", PermissionLevel::Read),
                host_tool("twice", PermissionLevel::Write),
            ],
            None,
        ))
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ToolNameConflict);
    assert_eq!(err.details["toolName"], "twice");
    assert!(k.open_sessions().is_empty(), "no session was made");
}

#[tokio::test]
async fn set_host_tools_replaces_them_while_idle() {
    let (k, model, _dir) = kernel(
        vec![
            say("first"),
            Turn {
                calls: vec![("slow_tool", json!({"q": "x"}))],
                delay: Some(Duration::from_millis(0)),
                ..Turn::default()
            },
            say("third"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = k
        .start_session(with_tools(
            vec![host_tool("lookup", PermissionLevel::Read)],
            None,
        ))
        .await
        .unwrap();
    let set =
        |tools: Vec<HostToolSpec>| CommandPayload::SessionSetHostTools(SetHostTools::new(tools));
    let rid = s
        .command(set(vec![host_tool("slow_tool", PermissionLevel::Read)]))
        .await
        .unwrap();
    let answer = until(&mut events, "session.host_tools_updated").await;
    let last = answer.last().unwrap();
    assert_eq!(last.request_id, rid);
    let Event::SessionHostToolsUpdated(u) = &last.event else {
        unreachable!()
    };
    assert_eq!(u.tools, ["slow_tool"]);
    let r1 = s.send("one").await.unwrap();
    until(&mut events, "session.completed").await;
    let offered: Vec<String> = model.seen.lock().unwrap()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(offered.contains(&"slow_tool".to_owned()) && !offered.contains(&"lookup".to_owned()));
    let _ = r1;

    // Bad input is refused and changes nothing.
    let err = s
        .command(set(vec![host_tool("read_file", PermissionLevel::Read)]))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ToolNameConflict);
    let mut bad = host_tool("x", PermissionLevel::Read);
    bad.input_schema = json!([]);
    let err = s.command(set(vec![bad])).await.unwrap_err();
    assert_eq!(err.details["field"], "payload.tools[0].inputSchema");

    // While a request runs: SESSION_BUSY.
    s.send("two").await.unwrap();
    until(&mut events, "host-tool.requested").await;
    let err = s.command(set(vec![])).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionBusy);
    s.interrupt().await.unwrap();
    until(&mut events, "session.interrupted").await;
    // Idle again: an empty list removes them.
    s.command(set(vec![])).await.unwrap();
    let answer = until(&mut events, "session.host_tools_updated").await;
    let Event::SessionHostToolsUpdated(u) = &answer.last().unwrap().event else {
        unreachable!()
    };
    assert!(u.tools.is_empty());
    // The next model call is offered the kernel's tools only.
    s.send("three").await.unwrap();
    until(&mut events, "session.completed").await;
    let seen = model.seen.lock().unwrap();
    let offered: Vec<&str> = seen
        .last()
        .unwrap()
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert!(
        !offered.contains(&"slow_tool") && offered.contains(&"read_file"),
        "{offered:?}"
    );
    // Two calls of the session with the same tools share one list.
    assert!(std::sync::Arc::ptr_eq(&seen[0].tools, &seen[1].tools));
}
