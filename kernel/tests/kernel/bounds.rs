//! Limits without a test elsewhere: messages waiting on a busy session, a question
//! nobody answers.

use super::*;

#[tokio::test]
async fn a_busy_session_keeps_at_most_64_waiting_messages() {
    let f = fixture(
        vec![Turn {
            text: vec!["slow"],
            delay: Some(Duration::from_secs(3600)),
            ..Turn::default()
        }],
        Duration::from_secs(5),
    );
    let (s, mut events) = start(&f).await;
    let running = s.send("first").await.unwrap();
    until(&mut events, "turn.started").await;
    // Queued and steered messages count together.
    for i in 0..40 {
        s.send(format!("queued {i}")).await.unwrap();
    }
    for i in 0..24 {
        s.send_with(RequestSend::new(format!("steered {i}")).when_busy(WhenBusy::Steer))
            .await
            .unwrap();
    }
    for when in [WhenBusy::Queue, WhenBusy::Steer] {
        let e = s
            .send_with(RequestSend::new("one too many").when_busy(when))
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::SessionBusy);
        assert!(e.retryable);
        assert_eq!(
            (e.details["reason"].as_str(), e.details["limit"].as_u64()),
            (Some("queue_full"), Some(64))
        );
    }
    // `reject` still answers with the running request.
    let e = s
        .send_with(RequestSend::new("reject me").when_busy(WhenBusy::Reject))
        .await
        .unwrap_err();
    assert_eq!(e.details["activeRequestId"], running.as_str());
    let snap = s.state();
    assert_eq!(snap.queued_request_ids.len(), 40);
    // Once a queued request is cancelled there is room again.
    let first_queued = snap.queued_request_ids[0].clone();
    s.command(CommandPayload::RequestCancelQueued(
        keel_envelope::commands::CancelQueued::new(first_queued),
    ))
    .await
    .unwrap();
    s.send("fits again").await.unwrap();
    s.close().await.unwrap();
    until(&mut events, "session.closed").await;
}

#[tokio::test]
async fn a_question_nobody_answers_expires_and_the_request_goes_on() {
    let f = fixture(
        vec![
            call("ask_user", serde_json::json!({"question": "Which one?"})),
            say("I will pick one myself."),
        ],
        Duration::from_millis(200),
    );
    let (s, mut events) = start(&f).await;
    let rid = s.send("choose").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    check_sequences(&all);
    let t = types(&all);
    let asked = t.iter().position(|x| x == "ask.requested").unwrap();
    let expired = t.iter().position(|x| x == "ask.expired").unwrap();
    assert!(asked < expired);
    let Event::AskExpired(e) = &all[expired].event else {
        panic!()
    };
    assert_eq!(e.reason, "timeout");
    assert_eq!(all[expired].request_id, rid);
    // The model was told nobody answered.
    {
        let seen = f.model.seen.lock().unwrap();
        let last = seen.last().unwrap();
        assert!(
            last.messages.iter().any(|m| matches!(
                m,
                keel_kernel::model::Message::Tool { name, .. } if name == "ask_user"
            )),
            "{:?}",
            last.messages
        );
    }
    // Answering it now is a clear error.
    let Event::AskRequested(q) = &all[asked].event else {
        panic!()
    };
    let e = s.answer_ask(&q.ask_id, "late").await.unwrap_err();
    assert_eq!(e.code, ErrorCode::AskNotFound);
}
