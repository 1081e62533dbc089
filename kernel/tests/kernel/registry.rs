//! The tool registry: unique names, and the kernel's own tools run through the same
//! pipeline (gate, events with the row's level and the real duration).

use super::*;

fn build_with(tools: Vec<Arc<TestTool>>, builtin: bool) -> Result<Kernel, ErrorPayload> {
    let mut b = Kernel::builder()
        .model(TestModel::new(Vec::new()))
        .memory_store()
        .builtin_tools(builtin);
    for t in tools {
        b = b.tool(t);
    }
    b.build()
}

#[tokio::test]
async fn a_tool_named_like_another_is_refused_naming_both() {
    // Like a built-in tool.
    let err = build_with(
        vec![tool(
            "read_file",
            PermissionLevel::Read,
            PlanBehavior::Allowed,
        )],
        true,
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::ToolNameConflict);
    assert!(err.message.contains("`read_file`"), "{}", err.message);
    assert!(err.message.contains("a built-in tool"), "{}", err.message);
    assert!(
        err.message.contains("a tool registered by the host"),
        "{}",
        err.message
    );
    // Like one of the kernel's own tools, even without the built-in ones.
    let err = build_with(
        vec![tool(
            "ask_user",
            PermissionLevel::Read,
            PlanBehavior::Allowed,
        )],
        false,
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::ToolNameConflict);
    assert!(
        err.message.contains("the kernel's own tools"),
        "{}",
        err.message
    );
    // Two custom tools with one name.
    let err = build_with(
        vec![
            tool("deploy", PermissionLevel::Execute, PlanBehavior::Denied),
            tool("deploy", PermissionLevel::Read, PlanBehavior::Allowed),
        ],
        false,
    )
    .unwrap_err();
    assert_eq!(err.code, ErrorCode::ToolNameConflict);
    // Distinct names build, and each name is offered to the model once.
    let model = TestModel::new(vec![say("ok")]);
    let k = Kernel::builder()
        .workspace(tempfile::tempdir().unwrap().keep())
        .model(model.clone())
        .memory_store()
        .tool(tool(
            "deploy",
            PermissionLevel::Execute,
            PlanBehavior::Denied,
        ))
        .build()
        .unwrap();
    let (s, mut events) = k.start_session(opts()).await.unwrap();
    s.send("hi").await.unwrap();
    until(&mut events, "session.completed").await;
    let seen = model.seen.lock().unwrap();
    let names: Vec<&str> = seen[0].tools.iter().map(|t| t.name.as_str()).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    assert!(names.contains(&"deploy") && names.contains(&"read_file"));
}

#[tokio::test]
async fn kernel_tools_report_their_row_level_and_real_duration() {
    let f = fixture(
        vec![
            call("ask_user", serde_json::json!({"question": "which?"})),
            say("fine"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("help").await.unwrap();
    let before = until(&mut events, "ask.requested").await;
    let ask = before
        .iter()
        .find_map(|e| match &e.event {
            Event::AskRequested(a) => Some(a.ask_id.clone()),
            _ => None,
        })
        .unwrap();
    let started = first_event!(before, ToolCallStarted).unwrap();
    let row = keel_tools::spec::kernel_specs()
        .into_iter()
        .find(|r| r.name == "ask_user")
        .unwrap();
    assert_eq!(started.permission_level, row.level);
    // The call lasts as long as the person takes to answer.
    tokio::time::sleep(Duration::from_millis(60)).await;
    s.answer_ask(&ask, "a").await.unwrap();
    let after = until(&mut events, "session.completed").await;
    let done = after
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolCallCompleted(t) => Some((t.clone(), e.meta.clone())),
            _ => None,
        })
        .unwrap();
    assert!(done.0.duration_ms >= 60, "{:?}", done.0);
    assert_eq!(done.1.and_then(|m| m.duration_ms), Some(done.0.duration_ms));
}

#[tokio::test]
async fn kernel_tool_arguments_are_decoded_before_the_gate() {
    let f = fixture(
        vec![
            call("ask_user", serde_json::json!({"candidates": ["a"]})),
            call("update_plan", serde_json::json!([1, 2])),
            say("ok"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("help").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let skipped: Vec<ErrorCode> = all
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(t) => Some(t.error.code.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        skipped,
        [
            ErrorCode::ToolArgumentsInvalid,
            ErrorCode::ToolArgumentsInvalid
        ]
    );
    assert!(!types(&all).contains(&"ask.requested".to_owned()));
    check_sequences(&all);
}
