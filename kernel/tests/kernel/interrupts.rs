//! Interrupts, the queue, steering.

use super::*;

#[tokio::test]
async fn interrupting_a_model_stream_keeps_the_session_usable() {
    let f = fixture(
        vec![Turn {
            text: vec!["never"],
            delay: Some(Duration::from_secs(3600)),
            ..Turn::default()
        }],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    let rid = s.send("slow").await.unwrap();
    until(&mut events, "request.accepted").await;
    let irid = s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    let last = got.last().unwrap();
    assert_eq!(last.request_id, rid);
    assert_eq!(last.reply_to(), Some(irid.as_str()));
    match &last.event {
        Event::SessionInterrupted(i) => {
            assert!(i.was_running);
            assert_eq!(i.interrupted_request_id.as_deref(), Some(rid.as_str()));
        }
        other => panic!("{other:?}"),
    }
    f.model.push(vec![say("back")]);
    s.send("again").await.unwrap();
    let next = until(&mut events, "session.completed").await;
    assert!(types(&next).contains(&"assistant.final".to_owned()));
}

#[tokio::test]
async fn interrupting_during_an_approval_releases_it() {
    let f = fixture(
        vec![call("poke", serde_json::json!({}))],
        Duration::from_secs(600),
    );
    let (s, mut events) = start(&f).await;
    let rid = s.send("go").await.unwrap();
    let before = until(&mut events, "approval.requested").await;
    let appr = approval_id(&before);
    s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    let t = types(&got);
    let e = t
        .iter()
        .position(|x| x == "approval.expired")
        .expect("expired");
    assert!(e < t.len() - 1);
    let expired = got
        .iter()
        .find_map(|e| match &e.event {
            Event::ApprovalExpired(x) => Some((
                x.approval_id.clone(),
                x.reason.clone(),
                e.request_id.clone(),
            )),
            _ => None,
        })
        .unwrap();
    assert_eq!(expired, (appr.clone(), "interrupted".into(), rid));
    let late = s.respond_approval(&appr, ApprovalDecision::AllowOnce).await;
    assert_eq!(late.unwrap_err().code, ErrorCode::ApprovalNotFound);
    assert!(f.writer.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn interrupting_a_running_tool_cancels_it() {
    let f = fixture(
        vec![call("peek", serde_json::json!({"sleep_ms": 3_600_000}))],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    s.send("go").await.unwrap();
    until(&mut events, "tool.call.progress").await;
    s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    assert!(!types(&got).contains(&"tool.call.completed".to_owned()));
}

#[tokio::test]
async fn interrupting_an_idle_session_is_a_noop_with_an_answer() {
    let f = fixture(vec![], Duration::from_secs(60));
    let (s, mut events) = start(&f).await;
    until(&mut events, "session.started").await;
    let irid = s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    let env = got.last().unwrap();
    assert_eq!(env.request_id, irid);
    assert_eq!(env.sequence, 1);
    match &env.event {
        Event::SessionInterrupted(i) => {
            assert!(!i.was_running && i.interrupted_request_id.is_none())
        }
        other => panic!("{other:?}"),
    }
    // Twice is the same.
    let irid2 = s.interrupt().await.unwrap();
    let got = until(&mut events, "session.interrupted").await;
    assert_eq!(got.last().unwrap().request_id, irid2);
}

#[tokio::test]
async fn busy_sessions_queue_steer_reject_and_cancel() {
    let f = fixture(
        vec![
            Turn {
                text: vec!["first"],
                delay: Some(Duration::from_millis(300)),
                ..Turn::default()
            },
            say("second"),
        ],
        Duration::from_secs(60),
    );
    let (s, mut events) = start(&f).await;
    let r1 = s.send("one").await.unwrap();
    until(&mut events, "request.accepted").await;
    let send = |m: &str, w: WhenBusy| RequestSend::new(m).when_busy(w);
    let rejected = s.send_with(send("no", WhenBusy::Reject)).await;
    assert_eq!(rejected.unwrap_err().code, ErrorCode::SessionBusy);
    let steer_rid = s
        .send_with(send("also this", WhenBusy::Steer))
        .await
        .unwrap();
    let q2 = s.send_with(send("two", WhenBusy::Queue)).await.unwrap();
    let q3 = s.send_with(send("three", WhenBusy::Queue)).await.unwrap();
    let cancel_rid = s
        .command(CommandPayload::RequestCancelQueued(
            keel_envelope::commands::CancelQueued::new(q3.clone()),
        ))
        .await
        .unwrap();
    let first = until(&mut events, "session.completed").await;
    let steered = first
        .iter()
        .find(|e| e.type_name() == "request.steered")
        .unwrap();
    assert_eq!(steered.request_id, r1);
    assert_eq!(steered.reply_to(), Some(steer_rid.as_str()));
    let queued = first
        .iter()
        .find(|e| e.type_name() == "request.queued" && e.request_id == q2)
        .unwrap();
    assert!(matches!(&queued.event, Event::RequestQueued(q) if q.position == 1));
    let cancelled = first
        .iter()
        .find(|e| e.type_name() == "request.cancelled")
        .unwrap();
    assert_eq!(cancelled.request_id, q3);
    assert_eq!(cancelled.reply_to(), Some(cancel_rid.as_str()));
    let rejected_env = first
        .iter()
        .find(|e| e.type_name() == "request.rejected")
        .unwrap();
    assert!(
        matches!(&rejected_env.event, Event::RequestRejected(e) if e.code == ErrorCode::SessionBusy)
    );
    // The queued request runs after the first.
    let second = until(&mut events, "session.completed").await;
    let acc = second
        .iter()
        .find(|e| e.type_name() == "request.accepted")
        .unwrap();
    assert_eq!(acc.request_id, q2);
    assert!(matches!(&acc.event, Event::RequestAccepted(a) if a.from_queue));
    assert_eq!(acc.sequence, 2, "request.queued was 1");
    // The steered text reached the model in the first request.
    let steered_seen = f.model.seen.lock().unwrap().iter().any(|r| {
        r.messages.iter().any(
            |m| matches!(m, keel_kernel::model::Message::User { text, .. } if text == "also this"),
        )
    });
    assert!(steered_seen);
    let cancel_again = s
        .command(CommandPayload::RequestCancelQueued(
            keel_envelope::commands::CancelQueued::new(q3),
        ))
        .await;
    assert_eq!(
        cancel_again.unwrap_err().code,
        ErrorCode::QueuedRequestNotFound
    );
}
