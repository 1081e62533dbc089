//! Answers, read tools, approvals and what they remember.

use super::*;

#[tokio::test]
async fn a_plain_answer_streams_and_completes() {
    let f = fixture(
        vec![Turn {
            text: vec!["Hel", "lo"],
            ..Turn::default()
        }],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    let rid = s.send("hi").await.unwrap();
    let mut all = until(&mut events, "session.completed").await;
    assert_eq!(all[0].type_name(), "session.started");
    let req: Vec<Envelope> = all.drain(1..).collect();
    assert_eq!(
        types(&req),
        [
            "request.accepted",
            "turn.started",
            "assistant.delta",
            "assistant.delta",
            "usage.updated",
            "turn.completed",
            "assistant.final",
            "session.completed"
        ]
    );
    assert!(req.iter().all(|e| e.request_id == rid));
    check_sequences(&req);
    let Event::SessionCompleted(c) = &req[7].event else {
        panic!("{:?}", req[7]);
    };
    assert_eq!(c.stop_reason, StopReason::EndTurn);
    assert_eq!(c.final_text.as_deref(), Some("Hello"));
    assert_eq!(c.telemetry.turns, 1);
    assert_eq!(c.telemetry.input_tokens, 10);
    // The last turn carries the request's telemetry, the same as the terminal event's.
    let Event::TurnCompleted(t) = &req[5].event else {
        panic!("{:?}", req[5]);
    };
    assert_eq!(t.index, 1);
    assert_eq!(t.stop_reason, keel_envelope::types::TurnStopReason::EndTurn);
    assert_eq!(t.tool_calls, 0);
    assert_eq!(t.usage.input_tokens, 10);
    assert_eq!(t.telemetry, Some(c.telemetry));
}

#[tokio::test]
async fn read_tools_run_without_approval_and_results_reach_the_model() {
    let f = fixture(
        vec![
            call("peek", serde_json::json!({"path": "a"})),
            say("read it"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("look").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let t = types(&all);
    assert!(t.contains(&"tool.call.started".to_owned()));
    assert!(t.contains(&"tool.call.completed".to_owned()));
    assert!(!t.contains(&"approval.requested".to_owned()));
    assert_eq!(f.reader.calls.lock().unwrap().len(), 1);
    let seen = f.model.seen.lock().unwrap();
    let last = seen.last().unwrap();
    let tool_msg = last
        .messages
        .iter()
        .find_map(|m| match m {
            keel_kernel::model::Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    assert!(
        tool_msg.0.contains("\"ok\":true") && !tool_msg.1,
        "{tool_msg:?}"
    );
}

#[tokio::test]
async fn an_approved_write_runs_and_the_grant_answers_the_command() {
    let f = fixture(
        vec![call("poke", serde_json::json!({"x": 1})), say("ok")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    let rid = s.send("change it").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    assert!(
        f.writer.calls.lock().unwrap().is_empty(),
        "must not run before approval"
    );
    let appr = approval_id(&before);
    let answer_rid = s
        .respond_approval(&appr, ApprovalDecision::AllowOnce)
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    let granted = after
        .iter()
        .find(|e| e.type_name() == "approval.granted")
        .unwrap();
    assert_eq!(
        granted.request_id, rid,
        "the grant belongs to the running request"
    );
    assert_eq!(
        granted.reply_to(),
        Some(answer_rid.as_str()),
        "and answers the command"
    );
    let t = types(&after);
    let g = t.iter().position(|x| x == "approval.granted").unwrap();
    let st = t.iter().position(|x| x == "tool.call.started").unwrap();
    assert!(g < st, "granted before the tool starts: {t:?}");
    assert_eq!(f.writer.calls.lock().unwrap().len(), 1);
    let mut req: Vec<Envelope> = before
        .into_iter()
        .chain(after)
        .filter(|e| e.request_id == rid)
        .collect();
    req.sort_by_key(|e| e.sequence);
    check_sequences(&req);
    // Answering again is APPROVAL_NOT_FOUND, never a hang.
    let again = s.respond_approval(&appr, ApprovalDecision::AllowOnce).await;
    assert_eq!(again.unwrap_err().code, ErrorCode::ApprovalNotFound);
}

#[tokio::test]
async fn a_denied_call_is_skipped_and_the_loop_goes_on() {
    let f = fixture(
        vec![call("poke", serde_json::json!({})), say("understood")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("change it").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    s.respond_approval(&approval_id(&before), ApprovalDecision::Deny)
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    let t = types(&after);
    assert!(
        t.contains(&"approval.denied".to_owned()) && t.contains(&"tool.call.skipped".to_owned()),
        "{t:?}"
    );
    assert!(!t.contains(&"tool.call.started".to_owned()));
    assert!(f.writer.calls.lock().unwrap().is_empty());
    let skipped = after.iter().find_map(|e| match &e.event {
        Event::ToolCallSkipped(s) => Some(s.error.code.clone()),
        _ => None,
    });
    assert_eq!(skipped, Some(ErrorCode::ToolPermissionDenied));
    assert!(t.contains(&"assistant.final".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_approval_expires_and_counts_as_deny() {
    let f = fixture(
        vec![call("poke", serde_json::json!({})), say("fine")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("change it").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let t = types(&all);
    let exp = all
        .iter()
        .find_map(|e| match &e.event {
            Event::ApprovalExpired(x) => Some(x.reason.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(exp, "timeout");
    assert!(t.contains(&"tool.call.skipped".to_owned()));
    assert!(f.writer.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn allow_for_session_is_remembered_by_key() {
    let f = fixture(
        vec![
            call("poke", serde_json::json!({"x": 1})),
            call("poke", serde_json::json!({"x": 1})),
            say("twice"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("twice").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    s.respond_approval(&approval_id(&before), ApprovalDecision::AllowSession)
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    assert_eq!(
        types(&after)
            .iter()
            .filter(|t| *t == "approval.requested")
            .count(),
        0
    );
    assert_eq!(f.writer.calls.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn allow_always_reports_the_rule_to_the_host() {
    let f = fixture(
        vec![call("poke", serde_json::json!({})), say("k")],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("go").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    s.respond_approval(&approval_id(&before), ApprovalDecision::AllowAlwaysProject)
        .await
        .unwrap();
    let after = until(&mut events, "session.completed").await;
    let rules = first_event!(after, SessionRulesUpdated).unwrap();
    assert_eq!(rules.source, "approval");
    assert_eq!(rules.rules.always_allow_project, vec!["poke".to_owned()]);
    assert_eq!(
        s.state().rules.always_allow_project,
        vec!["poke".to_owned()]
    );
}

/// A host that reads the session's state as soon as it has a request's terminal event
/// sees it idle, or running the next queued request, never still running the one
/// that ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_read_after_a_terminal_event_is_not_the_ended_request() {
    use keel_envelope::types::SessionState;
    let _busy = Busy::start(2);
    let rounds = 40;
    let turns = (0..rounds * 2).map(|_| say("ok")).collect();
    let f = fixture(turns, Duration::from_secs(60));
    let (s, mut events) = start(&f).await;
    for round in 0..rounds {
        let first = s.send("one").await.unwrap();
        // Every other round a second request waits behind the first.
        let second = if round % 2 == 1 {
            Some(s.send("two").await.unwrap())
        } else {
            None
        };
        let ends =
            |e: &Envelope, rid: &str| e.request_id == rid && e.type_name() == "session.completed";
        loop {
            let env = events.recv().await.unwrap();
            if ends(&env, &first) {
                assert_not_still_running(&s.state(), &first, second.as_deref(), round);
                break;
            }
        }
        if let Some(second) = second {
            loop {
                let env = events.recv().await.unwrap();
                if ends(&env, &second) {
                    assert_eq!(s.state().session.state, SessionState::Idle, "round {round}");
                    break;
                }
            }
        }
    }
}

/// A request id names the request's stream, checkpoints and place in the history: a
/// second `request.send` with one already used by this session (running, queued or
/// done) is refused, and nothing runs for it.
#[tokio::test]
async fn a_request_id_used_before_in_the_session_is_refused() {
    let f = fixture(
        vec![
            Turn {
                text: vec!["slow"],
                delay: Some(Duration::from_millis(300)),
                ..Turn::default()
            },
            say("queued one"),
            say("fresh"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    let send = |rid: &str, text: &str| {
        Command::new(
            rid,
            Some(s.id().to_owned()),
            CommandPayload::RequestSend(RequestSend::new(text)),
        )
    };
    f.kernel.execute(send("r_one", "first")).await.unwrap();
    f.kernel.execute(send("r_two", "second")).await.unwrap();
    // Running, queued, then done: refused each time.
    for (rid, when) in [("r_one", "running"), ("r_two", "queued")] {
        let err = f.kernel.execute(send(rid, "again")).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::RequestInvalid, "{when}");
        assert_eq!(err.details["field"], "requestId", "{when}");
        assert_eq!(err.details["reason"], "duplicate_request_id", "{when}");
    }
    loop {
        let env = events.recv().await.unwrap();
        if env.request_id == "r_two" && env.type_name() == "session.completed" {
            break;
        }
    }
    let err = f.kernel.execute(send("r_one", "again")).await.unwrap_err();
    assert_eq!(err.details["reason"], "duplicate_request_id");
    // A new id runs; the model was called for the three accepted requests only.
    f.kernel.execute(send("r_three", "third")).await.unwrap();
    loop {
        let env = events.recv().await.unwrap();
        if env.request_id == "r_three" && env.type_name() == "session.completed" {
            break;
        }
    }
    assert_eq!(f.model.seen.lock().unwrap().len(), 3);
}
