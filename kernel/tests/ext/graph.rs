//! The task graph, and extension state across restarts.

use super::*;

#[tokio::test]
async fn task_graph_commands_check_the_dag_and_complete_it() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;

    // No graph yet.
    assert_eq!(
        h.err(CommandPayload::TaskGraphAdvance(TaskGraphAdvance::new()))
            .await
            .code,
        ErrorCode::GraphNotFound
    );
    assert_eq!(
        h.err(update("a", NodeStatus::Completed)).await.code,
        ErrorCode::GraphNotFound
    );
    assert_eq!(
        h.err(CommandPayload::TaskGraphAddNode(TaskGraphAddNode::new(
            node("a", &[])
        )))
        .await
        .code,
        ErrorCode::GraphNotFound
    );
    match h
        .ok(CommandPayload::TaskGraphState(TaskGraphStateCmd::new()))
        .await
        .event
    {
        Event::TaskGraphState(s) => assert!(s.graph.is_none()),
        other => panic!("{other:?}"),
    }
    // Bad graphs.
    assert_eq!(
        h.err(create(vec![node("a", &[]), node("a", &[])]))
            .await
            .code,
        ErrorCode::DuplicateNode
    );
    assert_eq!(
        h.err(create(vec![node("a", &["ghost"])])).await.code,
        ErrorCode::InvalidDependency
    );
    let e = h
        .err(create(vec![
            node("a", &["b"]),
            node("b", &["c"]),
            node("c", &["a"]),
        ]))
        .await;
    assert_eq!(e.code, ErrorCode::CycleDetected);
    assert_eq!(e.details["cycle"], serde_json::json!(["a", "b", "c"]));

    let env = h
        .ok(create(vec![
            node("build", &[]),
            node("test", &["build"]),
            node("docs", &[]),
        ]))
        .await;
    let g = match env.event {
        Event::TaskGraphCreated(e) => e.graph.unwrap(),
        other => panic!("{other:?}"),
    };
    check_graph(&g);
    assert_eq!(g.order, ["build", "docs", "test"]);
    assert_eq!(
        h.err(CommandPayload::TaskGraphAddNode(TaskGraphAddNode::new(
            node("docs", &[])
        )))
        .await
        .code,
        ErrorCode::DuplicateNode
    );
    assert_eq!(
        h.err(CommandPayload::TaskGraphAddNode(TaskGraphAddNode::new(
            node("x", &["nope"])
        )))
        .await
        .code,
        ErrorCode::InvalidDependency
    );
    assert_eq!(
        h.err(CommandPayload::TaskGraphAddNode(TaskGraphAddNode::new(
            node("x", &["x"])
        )))
        .await
        .code,
        ErrorCode::CycleDetected
    );
    assert_eq!(
        h.err(update("nope", NodeStatus::Running)).await.code,
        ErrorCode::GraphNotFound
    );
    // Not before its dependency.
    assert_eq!(
        h.err(update("test", NodeStatus::Running)).await.code,
        ErrorCode::RequestInvalid
    );
    match h
        .ok(CommandPayload::TaskGraphAddNode(TaskGraphAddNode::new(
            node("ship", &["test", "docs"]),
        )))
        .await
        .event
    {
        Event::TaskGraphNodeAdded(e) => assert_eq!(e.node.status, NodeStatus::Pending),
        other => panic!("{other:?}"),
    }
    match h
        .ok(CommandPayload::TaskGraphAdvance(TaskGraphAdvance::new()))
        .await
        .event
    {
        Event::TaskGraphAdvanced(a) => {
            assert_eq!(a.became_ready, ["build", "docs"]);
            check_graph(&a.graph);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        types(&h.run(update("build", NodeStatus::Running)).await.1),
        ["task-graph.node.updated"]
    );
    assert_eq!(
        types(&h.run(update("build", NodeStatus::Completed)).await.1),
        ["task-graph.node.completed"]
    );
    assert_eq!(
        types(&h.run(update("docs", NodeStatus::Skipped)).await.1),
        ["task-graph.node.updated"]
    );
    match h
        .ok(CommandPayload::TaskGraphAdvance(TaskGraphAdvance::new()))
        .await
        .event
    {
        Event::TaskGraphAdvanced(a) => assert_eq!(a.became_ready, ["test"]),
        other => panic!("{other:?}"),
    }
    // A failure propagates at the next advance and completes the graph as failed.
    assert_eq!(
        types(&h.run(update("test", NodeStatus::Failed)).await.1),
        ["task-graph.node.failed"]
    );
    let (_, evs) = h
        .run(CommandPayload::TaskGraphAdvance(TaskGraphAdvance::new()))
        .await;
    assert_eq!(types(&evs), ["task-graph.advanced", "task-graph.completed"]);
    match &evs[1].event {
        Event::TaskGraphCompleted(e) => {
            let g = e.graph.clone().unwrap();
            check_graph(&g);
            assert_eq!(g.status, GraphStatus::Failed);
            assert_eq!(g.nodes["ship"].status, NodeStatus::Failed);
            assert!(g.completed_at.is_some());
        }
        other => panic!("{other:?}"),
    }
    // Completed nodes stay completed.
    assert_eq!(
        h.err(update("build", NodeStatus::Pending)).await.code,
        ErrorCode::RequestInvalid
    );
    // An all-completed graph completes on the update itself.
    h.ok(create(vec![node("only", &[])])).await;
    let (_, evs) = h.run(update("only", NodeStatus::Completed)).await;
    assert_eq!(
        types(&evs),
        ["task-graph.node.completed", "task-graph.completed"]
    );
    check_sequences(&h.log);
}

#[tokio::test]
async fn the_model_plans_with_the_task_graph_tool() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let turns = vec![
        Turn::Call(
            "task_graph",
            serde_json::json!({"action": "create", "title": "refactor", "nodes": [
                {"id": "read", "title": "Read the code"},
                {"id": "edit", "title": "Edit", "dependsOn": ["read"]}
            ]}),
        ),
        Turn::Call("task_graph", serde_json::json!({"action": "advance"})),
        Turn::Call(
            "task_graph",
            serde_json::json!({"action": "add_node", "node": {"id": "loop", "title": "x", "dependsOn": ["loop"]}}),
        ),
        Turn::Call("task_graph", serde_json::json!({"action": "jump"})),
        Turn::Say("planned"),
    ];
    let mut h = H::new(ws.path(), store.path(), turns, false, None).await;
    let (rid, _) = h.run(send("plan it", None)).await;
    let evs = h.finish(&rid).await;
    let t = types(&evs);
    for ty in ["task-graph.created", "task-graph.advanced"] {
        assert!(t.contains(&ty.to_owned()), "{ty} in {t:?}");
    }
    // The cycle fails in the handler; the unknown action does not even decode, so the
    // pipeline skips the call before the gate.
    assert_eq!(
        t.iter().filter(|t| *t == "tool.call.failed").count(),
        1,
        "{t:?}"
    );
    assert_eq!(
        t.iter().filter(|t| *t == "tool.call.skipped").count(),
        1,
        "{t:?}"
    );
    check_sequences(&evs);
    let tool_results: Vec<String> = h
        .model
        .seen
        .lock()
        .unwrap()
        .last()
        .unwrap()
        .messages
        .iter()
        .filter_map(|m| match m {
            keel_kernel::model::Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert!(
        tool_results[1].contains("Now ready: read"),
        "{tool_results:?}"
    );
    assert!(tool_results[2].contains("CYCLE_DETECTED"));
    assert!(tool_results[3].contains("TOOL_ARGUMENTS_INVALID"));
    // The host sees the model's graph.
    match h
        .ok(CommandPayload::TaskGraphState(TaskGraphStateCmd::new()))
        .await
        .event
    {
        Event::TaskGraphState(s) => {
            let g = s.graph.unwrap();
            assert_eq!(g.nodes["read"].status, NodeStatus::Ready);
            assert_eq!(g.order, ["read", "edit"]);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn extension_state_survives_a_restart() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "a\n").unwrap();
    let (sid, patch, graph_id) = {
        let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;
        h.ok(enter(true)).await;
        h.ok(submit(Some("first pass"), Some(("k1", true)))).await;
        let patch = patch_id(&h.ok(propose(&[("a.txt", Some("b\n"))])).await);
        let graph_id = match h
            .ok(create(vec![node("a", &[]), node("b", &["a"])]))
            .await
            .event
        {
            Event::TaskGraphCreated(e) => e.graph.unwrap().graph_id,
            other => panic!("{other:?}"),
        };
        h.ok(CommandPayload::TaskGraphAdvance(TaskGraphAdvance::new()))
            .await;
        h.ok(update("a", NodeStatus::Completed)).await;
        h.kernel.shutdown("test").await;
        (h.sid.clone(), patch, graph_id)
    };

    let model = TestModel::new(vec![]);
    let k = kernel(ws.path(), store.path(), model.clone(), false);
    let mut all = k.subscribe();
    k.resume_session(&sid, None).await.unwrap();
    while all.try_recv().is_some() {}
    let mut h = H {
        kernel: k,
        model,
        sid,
        all,
        log: Vec::new(),
        ws: ws.path().to_owned(),
    };
    match h
        .ok(CommandPayload::ReviewStatus(ReviewStatusCmd::new()))
        .await
        .event
    {
        Event::ReviewState(s) => {
            let r = s.review.unwrap();
            assert!(s.blocking);
            assert_eq!(r.status, ReviewStatus::Pending);
            assert_eq!(r.comments[0].content, "first pass");
            assert!(r.checklist[0].done);
        }
        other => panic!("{other:?}"),
    }
    // Still blocking after the restart.
    assert_eq!(
        h.err(send("go", None)).await.code,
        ErrorCode::ReviewBlocking
    );
    match h
        .ok(CommandPayload::PatchSummary(PatchSummaryCmd::new()))
        .await
        .event
    {
        Event::PatchSummary(s) => assert_eq!(s.pending[0].patch_id, patch),
        other => panic!("{other:?}"),
    }
    match h
        .ok(CommandPayload::TaskGraphState(TaskGraphStateCmd::new()))
        .await
        .event
    {
        Event::TaskGraphState(s) => {
            let g = s.graph.unwrap();
            assert_eq!(g.graph_id, graph_id);
            assert_eq!(g.nodes["a"].status, NodeStatus::Completed);
            check_graph(&g);
        }
        other => panic!("{other:?}"),
    }
    // And it goes on: advance, apply, resolve.
    match h
        .ok(CommandPayload::TaskGraphAdvance(TaskGraphAdvance::new()))
        .await
        .event
    {
        Event::TaskGraphAdvanced(a) => assert_eq!(a.became_ready, ["b"]),
        other => panic!("{other:?}"),
    }
    h.ok(CommandPayload::PatchApply(PatchApply::new(patch)))
        .await;
    assert_eq!(h.file("a.txt").as_deref(), Some("b\n"));
    h.ok(resolve(ReviewDecision::Approved)).await;
    check_sequences(&h.log);
}

#[tokio::test]
async fn a_session_without_extensions_persists_none() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut h = H::new(ws.path(), store.path(), vec![Turn::Say("hi")], false, None).await;
    let (rid, _) = h.run(send("hello", None)).await;
    h.finish(&rid).await;
    h.kernel.shutdown("test").await;
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            store
                .path()
                .join("sessions")
                .join(&h.sid)
                .join("state.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(state["extensions"], serde_json::json!({}));
}
