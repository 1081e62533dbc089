//! Random command sequences and sub-agents.

use super::*;

/// A small deterministic generator (no outside randomness, reproducible by seed).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[tokio::test]
async fn random_command_sequences_keep_the_envelope_rules() {
    for seed in 0..12u64 {
        let ws = tempfile::tempdir().unwrap();
        let store = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("f.txt"), "0\n").unwrap();
        let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;
        let mut rng = Lcg(seed);
        let mut patches: Vec<String> = Vec::new();
        for step in 0..80 {
            let id = |r: &mut Lcg| format!("n{}", r.next(6));
            let payload = match rng.next(12) {
                0 => enter(rng.next(2) == 0),
                1 => submit(Some("c"), (rng.next(2) == 0).then_some(("k1", true))),
                2 => resolve(if rng.next(2) == 0 {
                    ReviewDecision::Approved
                } else {
                    ReviewDecision::Rejected
                }),
                3 => CommandPayload::ReviewStatus(ReviewStatusCmd::new()),
                4 => {
                    let name = format!("f{}.txt", rng.next(3));
                    let content = format!("{step}\n");
                    CommandPayload::PatchPropose(PatchPropose::new(vec![
                        ProposedFile::new(name).content(content)
                    ]))
                }
                5 => {
                    let pid = patches
                        .get(rng.next(patches.len() as u64 + 1) as usize)
                        .cloned()
                        .unwrap_or_else(|| "patch_x".into());
                    if rng.next(2) == 0 {
                        CommandPayload::PatchApply(PatchApply::new(pid))
                    } else {
                        CommandPayload::PatchReject(PatchReject::new(pid))
                    }
                }
                6 => {
                    let n = rng.next(5) as usize;
                    let nodes = (0..n)
                        .map(|i| {
                            let deps: Vec<String> = (0..rng.next(3))
                                .map(|_| format!("n{}", rng.next(6)))
                                .collect();
                            NewTaskNode::new(format!("n{i}"), String::new()).depends_on(deps)
                        })
                        .collect();
                    create(nodes)
                }
                7 => {
                    let deps: Vec<String> = (0..rng.next(3)).map(|_| id(&mut rng)).collect();
                    let nid = id(&mut rng);
                    CommandPayload::TaskGraphAddNode(TaskGraphAddNode::new(
                        NewTaskNode::new(nid, String::new()).depends_on(deps),
                    ))
                }
                8 | 9 => {
                    let s = [
                        NodeStatus::Pending,
                        NodeStatus::Ready,
                        NodeStatus::Running,
                        NodeStatus::Completed,
                        NodeStatus::Failed,
                        NodeStatus::Skipped,
                    ][rng.next(6) as usize]
                        .clone();
                    update(&id(&mut rng), s)
                }
                10 => CommandPayload::TaskGraphAdvance(TaskGraphAdvance::new()),
                _ => CommandPayload::TaskGraphState(TaskGraphStateCmd::new()),
            };
            let (rid, evs) = h.run(payload).await;
            // Exactly one answer, first in the command's own stream; an optional
            // `task-graph.completed` may follow it.
            assert!(!evs.is_empty(), "seed {seed} step {step}: no answer");
            assert_eq!(evs[0].sequence, 1);
            let rest = types(&evs[1..]);
            assert!(
                rest.is_empty() || rest == ["task-graph.completed"],
                "seed {seed}: {rest:?}"
            );
            for e in &evs {
                assert_eq!(e.request_id, rid);
                match &e.event {
                    Event::PatchProposed(p) => patches.push(p.patch.patch_id.clone()),
                    Event::TaskGraphCreated(g)
                    | Event::TaskGraphState(g)
                    | Event::TaskGraphCompleted(g) => {
                        if let Some(g) = &g.graph {
                            check_graph(g);
                        }
                    }
                    Event::TaskGraphAdvanced(a) => check_graph(&a.graph),
                    Event::Error(err) => assert!(
                        !matches!(err.code, ErrorCode::RuntimeInternalError),
                        "{err:?}"
                    ),
                    _ => {}
                }
            }
        }
        check_sequences(&h.log);
    }
}

#[tokio::test]
async fn a_sub_agent_works_with_a_subset_of_tools_and_returns_a_summary() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let turns = vec![
        Turn::Call(
            "spawn_sub_agent",
            serde_json::json!({"task": "count the files", "tools": ["peek"]}),
        ),
        // The child: a call, then its summary.
        Turn::Call("peek", serde_json::json!({"dir": "."})),
        Turn::Call("poke", serde_json::json!({})),
        Turn::Say("there are 3 files"),
        // The parent again.
        Turn::Call(
            "spawn_sub_agent",
            serde_json::json!({"task": "delete things", "tools": ["rm_everything"]}),
        ),
        Turn::Say("done"),
    ];
    let mut h = H::new(ws.path(), store.path(), turns, false, None).await;
    let (rid, _) = h.run(send("how many files?", None)).await;
    let evs = h.finish(&rid).await;
    check_sequences(&evs);
    let t = types(&evs);
    let pos = |ty: &str| {
        t.iter()
            .position(|x| x == ty)
            .unwrap_or_else(|| panic!("{ty} in {t:?}"))
    };
    assert!(pos("sub-agent.started") < pos("sub-agent.progress"));
    assert!(pos("sub-agent.progress") < pos("sub-agent.completed"));
    assert_eq!(
        t.iter().filter(|x| *x == "sub-agent.started").count(),
        1,
        "the wider set never starts"
    );
    let (sub_id, info) = evs
        .iter()
        .find_map(|e| match &e.event {
            Event::SubAgentCompleted(c) => {
                assert_eq!(c.parent_session_id, h.sid);
                Some((c.sub_agent_id.clone(), c.sub_agent.clone()))
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(info.summary.as_deref(), Some("there are 3 files"));
    assert_eq!(info.tools, ["peek"]);
    assert_eq!(info.parent_request_id, rid);
    assert_eq!(info.turns, 3);
    {
        let seen = h.model.seen.lock().unwrap();
        // The child's own requests: only its tools, its own history.
        let child_tools: Vec<&str> = seen[1].tools.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(child_tools, ["peek"]);
        assert_eq!(seen[1].messages.len(), 1);
        // The parent's history holds the summary, not the child's calls.
        let parent = &seen[4];
        assert!(!parent.messages.iter().any(|m| matches!(m,
            keel_kernel::model::Message::Assistant { tool_calls, .. } if tool_calls.iter().any(|c| c.name == "peek"))));
    }
    // A call outside the child's set is refused inside the child.
    let child = tool_results(&h.model, 3);
    assert!(child[1].0.contains("not available") && child[1].1);
    let parent = tool_results(&h.model, 5);
    assert!(parent[0].0.contains("there are 3 files") && !parent[0].1);
    assert!(parent[1].0.contains("rm_everything") && parent[1].1);

    match h
        .ok(CommandPayload::SubAgentList(SubAgentListCmd::new()))
        .await
        .event
    {
        Event::SubAgentList(l) => {
            assert!(l.active.is_empty());
            assert_eq!(l.recent.len(), 1);
            assert_eq!(l.recent[0].status, SubAgentStatus::Completed);
        }
        other => panic!("{other:?}"),
    }
    match h
        .ok(CommandPayload::SubAgentGet(SubAgentGetCmd::new(
            sub_id.clone(),
        )))
        .await
        .event
    {
        Event::SubAgentGet(g) => assert_eq!(g.sub_agent.sub_agent_id, sub_id),
        other => panic!("{other:?}"),
    }
    let e = h
        .err(CommandPayload::SubAgentGet(SubAgentGetCmd::new("sub_nope")))
        .await;
    assert_eq!(e.code, ErrorCode::SubAgentNotFound);
}

#[tokio::test]
async fn sub_agent_approvals_reach_the_host_and_interrupts_stop_the_child() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let turns = vec![
        Turn::Call("spawn_sub_agent", serde_json::json!({"task": "poke it"})),
        Turn::Call("poke", serde_json::json!({"n": 1})),
        Turn::Say("poked"),
        Turn::Say("parent done"),
        Turn::Call("spawn_sub_agent", serde_json::json!({"task": "poke again"})),
        Turn::Call("poke", serde_json::json!({"n": 2})),
    ];
    let mut h = H::new(ws.path(), store.path(), turns, false, None).await;
    let (rid, _) = h.run(send("poke", None)).await;
    // The child's approval is asked on the parent's stream; the host answers it.
    let approval = loop {
        let env = tokio::time::timeout(Duration::from_secs(600), h.all.recv())
            .await
            .unwrap()
            .unwrap();
        h.log.push(env.clone());
        if let Event::ApprovalRequested(a) = &env.event {
            assert_eq!(env.request_id, rid);
            break a.approval_id.clone();
        }
    };
    let (answer, _) = h
        .run(CommandPayload::ApprovalRespond(
            keel_envelope::commands::ApprovalRespond::new(approval, ApprovalDecision::AllowOnce),
        ))
        .await;
    let evs = h.finish(&rid).await;
    let granted = evs
        .iter()
        .find(|e| e.type_name() == "approval.granted")
        .unwrap();
    assert_eq!(
        granted.meta.as_ref().and_then(|m| m.reply_to.clone()),
        Some(answer)
    );
    assert!(types(&evs).contains(&"sub-agent.completed".to_owned()));

    // Interrupting the parent while the child waits stops the child.
    let (rid, _) = h.run(send("poke again", None)).await;
    loop {
        let env = tokio::time::timeout(Duration::from_secs(600), h.all.recv())
            .await
            .unwrap()
            .unwrap();
        h.log.push(env.clone());
        if env.type_name() == "approval.requested" {
            break;
        }
    }
    h.run(CommandPayload::RequestInterrupt(
        keel_envelope::commands::RequestInterrupt::new(),
    ))
    .await;
    let evs = h.until(&rid, "session.interrupted").await;
    let t = types(&evs);
    assert!(t.contains(&"sub-agent.failed".to_owned()), "{t:?}");
    assert!(t.contains(&"session.interrupted".to_owned()), "{t:?}");
    check_sequences(&evs);
    match h
        .ok(CommandPayload::SubAgentList(SubAgentListCmd::new()))
        .await
        .event
    {
        Event::SubAgentList(l) => {
            assert!(l.active.is_empty());
            assert_eq!(l.recent[0].status, SubAgentStatus::Failed);
            assert_eq!(
                l.recent[0].error.as_ref().unwrap().code,
                ErrorCode::Interrupted
            );
            assert_eq!(l.recent[1].status, SubAgentStatus::Completed);
        }
        other => panic!("{other:?}"),
    }
}
