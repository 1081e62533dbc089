//! Plan mode, questions, failures, unknown tools, the turn limit.

use super::*;

#[tokio::test]
async fn plan_mode_refuses_writes_at_the_gate_then_runs_the_approved_plan() {
    let f = fixture(
        vec![
            call("poke", serde_json::json!({})),
            call("peek", serde_json::json!({})),
            call(
                "propose_plan",
                serde_json::json!({"summary": "do it", "steps": [{"id": "s1", "title": "poke"}]}),
            ),
            call(
                "update_plan",
                serde_json::json!({"steps": [{"id": "s1", "status": "in_progress"}]}),
            ),
            call("poke", serde_json::json!({})),
            call(
                "update_plan",
                serde_json::json!({"steps": [{"id": "s1", "status": "completed"}]}),
            ),
            say("finished"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.set_mode(PermissionMode::Plan).await.unwrap();
    s.send("please poke").await.unwrap();
    let before = until(&mut events, "plan.approval_required").await;
    let skipped = before
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolCallSkipped(x) => Some(x.error.code.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(skipped, ErrorCode::PlanApprovalRequired);
    assert!(
        !types(&before).contains(&"approval.requested".to_owned()),
        "no approval is even asked"
    );
    assert!(f.writer.calls.lock().unwrap().is_empty());
    assert_eq!(
        f.reader.calls.lock().unwrap().len(),
        1,
        "reads run in plan mode"
    );
    let plan_id = before
        .iter()
        .find_map(|e| match &e.event {
            Event::PlanApprovalRequired(p) => Some(p.plan_id.clone()),
            _ => None,
        })
        .unwrap();
    // Approve into auto mode so the write runs without another approval.
    let arid = s
        .approve_plan(&plan_id, Some(PermissionMode::Auto))
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    let approved = after
        .iter()
        .find(|e| e.type_name() == "plan.approved")
        .unwrap();
    assert_eq!(approved.reply_to(), Some(arid.as_str()));
    assert_eq!(f.writer.calls.lock().unwrap().len(), 1);
    let statuses: Vec<String> = after
        .iter()
        .filter_map(|e| match &e.event {
            Event::PlanUpdated(p) => Some(format!("{:?}", p.steps[0].status)),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, ["InProgress", "Completed"]);
    assert_eq!(s.state().session.permission_mode, PermissionMode::Auto);
    let again = s.approve_plan(&plan_id, None).await;
    assert_eq!(again.unwrap_err().code, ErrorCode::PlanNotFound);
}

#[tokio::test]
async fn a_rejected_plan_keeps_plan_mode_and_feeds_back() {
    let f = fixture(
        vec![
            call(
                "propose_plan",
                serde_json::json!({"steps": [{"title": "x"}]}),
            ),
            say("will revise"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.set_mode(PermissionMode::Plan).await.unwrap();
    s.send("plan").await.unwrap();
    let before = until(&mut events, "plan.approval_required").await;
    let plan_id = before
        .iter()
        .find_map(|e| match &e.event {
            Event::PlanApprovalRequired(p) => Some(p.plan_id.clone()),
            _ => None,
        })
        .unwrap();
    s.reject_plan(&plan_id, Some("smaller steps".into()))
        .await
        .unwrap();
    until(&mut events, "session.completed").await;
    assert_eq!(s.state().session.permission_mode, PermissionMode::Plan);
    let seen = f.model.seen.lock().unwrap();
    assert!(seen.last().unwrap().messages.iter().any(
        |m| matches!(m, keel_kernel::model::Message::Tool { content, .. } if content.contains("smaller steps"))
    ));
}

#[tokio::test]
async fn ask_user_waits_for_the_answer() {
    let f = fixture(
        vec![
            call(
                "ask_user",
                serde_json::json!({"question": "which?", "candidates": ["a", "b"]}),
            ),
            say("b it is"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("help").await.unwrap();
    let before = until(&mut events, "ask.requested").await;
    let ask = first_event!(before, AskRequested).unwrap();
    assert_eq!(ask.candidates, ["a", "b"]);
    s.answer_ask(&ask.ask_id, "b").await.unwrap();
    until(&mut events, "session.completed").await;
    let answered = f.model.seen.lock().unwrap().last().unwrap().messages.iter().any(
        |m| matches!(m, keel_kernel::model::Message::Tool { content, .. } if content.contains("answered: b")),
    );
    assert!(answered);
    let again = s.answer_ask(&ask.ask_id, "b").await;
    assert_eq!(again.unwrap_err().code, ErrorCode::AskNotFound);
}

#[tokio::test]
async fn a_model_failure_is_an_error_then_completion() {
    let f = fixture(
        vec![Turn {
            fail: true,
            ..Turn::default()
        }],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("x").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(all
        .iter()
        .any(|e| matches!(&e.event, Event::Error(x) if x.code == ErrorCode::ModelError)));
    assert!(
        matches!(&all.last().unwrap().event, Event::SessionCompleted(c) if c.stop_reason == StopReason::Error)
    );
}

#[tokio::test]
async fn unknown_tools_and_sessions_get_stable_codes() {
    let f = fixture(
        vec![call("nope", serde_json::json!({})), say("ok")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("x").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(all
        .iter()
        .any(|e| matches!(&e.event, Event::ToolCallSkipped(x) if x.error.code == ErrorCode::ToolNotRegistered)));
    let mut any = f.kernel.subscribe();
    let cmd = Command::new(
        "req_x",
        Some("sess_missing".into()),
        CommandPayload::SessionState(keel_envelope::commands::SessionStateCmd::new()),
    );
    let err = f.kernel.execute(cmd).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionNotFound);
    let env = any.recv().await.unwrap();
    assert_eq!(
        (env.request_id.as_str(), env.session_id.as_deref()),
        ("req_x", Some("sess_missing"))
    );
    assert!(matches!(&env.event, Event::Error(e) if e.code == ErrorCode::SessionNotFound));
}

#[tokio::test]
async fn max_turns_ends_the_request_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let model = TestModel::new(
        (0..10)
            .map(|_| call("peek", serde_json::json!({})))
            .collect(),
    );
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model)
        .memory_store()
        .max_turns(3)
        .builtin_tools(false)
        .tool(tool("peek", PermissionLevel::Read, PlanBehavior::Allowed))
        .build()
        .unwrap();
    let (s, mut events) = kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            title: None,
        })
        .await
        .unwrap();
    s.send("loop").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(all
        .iter()
        .any(|e| matches!(&e.event, Event::Warning(w) if w.code == ErrorCode::MaxTurnsExceeded)));
    assert!(
        matches!(&all.last().unwrap().event, Event::SessionCompleted(c) if c.stop_reason == StopReason::MaxTurns && c.telemetry.turns == 3)
    );
}
