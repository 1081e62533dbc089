//! Resume, torn logs, listing, requests cut off by a dead process, panics.

use super::*;

#[tokio::test]
async fn resume_after_restart_restores_history_and_replays_from_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let store_path = store.path().to_path_buf();
    let f = fixture_in(
        vec![say("first answer")],
        Duration::from_secs(60),
        dir,
        store,
    );
    let (s, mut events) = start(&f).await;
    s.set_mode(PermissionMode::AutoEdit).await.unwrap();
    s.send("remember me").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let sid = s.id().to_owned();
    let cursor_env = all
        .iter()
        .find(|e| e.type_name() == "request.accepted")
        .unwrap()
        .clone();
    f.kernel.shutdown("test").await;
    drop(f.kernel);
    let log = std::fs::read_to_string(store_path.join("sessions").join(&sid).join("events.jsonl"))
        .unwrap();
    let logged: Vec<Envelope> = log
        .lines()
        .map(|l| keel_envelope::codec::decode_envelope(l.as_bytes()).unwrap())
        .collect();
    assert_eq!(logged.last().unwrap().type_name(), "session.closed");

    // A fresh kernel over the same store.
    let model = TestModel::new(vec![say("second answer")]);
    let kernel = reopen(&ws, &store_path, model.clone());
    let (s2, mut ev2) = kernel
        .resume_session(
            &sid,
            Some(keel_envelope::types::Cursor::new(
                cursor_env.request_id.clone(),
                cursor_env.sequence,
            )),
        )
        .await
        .unwrap();
    let resumed = ev2.recv().await.unwrap();
    let Event::SessionResumed(r) = &resumed.event else {
        panic!("{resumed:?}")
    };
    assert_eq!(r.session.permission_mode, PermissionMode::AutoEdit);
    assert_eq!(r.message_count, 2);
    // Replay: exactly the events after the cursor in the old log.
    let expected: Vec<String> = logged
        .iter()
        .skip_while(|e| e.event_id != cursor_env.event_id)
        .skip(1)
        .map(|e| e.event_id.clone())
        .collect();
    assert_eq!(r.replayed as usize, expected.len());
    let mut replayed = Vec::new();
    for _ in 0..expected.len() {
        replayed.push(ev2.recv().await.unwrap());
    }
    assert_eq!(
        replayed
            .iter()
            .map(|e| e.event_id.clone())
            .collect::<Vec<_>>(),
        expected
    );
    assert!(replayed
        .iter()
        .all(|e| e.meta.as_ref().and_then(|m| m.replay) == Some(true)));
    s2.send("and now?").await.unwrap();
    until(&mut ev2, "session.completed").await;
    let seen = model.seen.lock().unwrap();
    assert!(seen[0].messages.iter().any(
        |m| matches!(m, keel_kernel::model::Message::User { text, .. } if text == "remember me")
    ));
}

#[tokio::test]
async fn a_torn_log_tail_is_dropped_and_nothing_before_it_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let store_path = store.path().to_path_buf();
    let f = fixture_in(vec![say("answer")], Duration::from_secs(60), dir, store);
    let (s, mut events) = start(&f).await;
    s.send("hello").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let sid = s.id().to_owned();
    f.kernel.shutdown("test").await;
    let log = store_path.join("sessions").join(&sid).join("events.jsonl");
    let mut bytes = std::fs::read(&log).unwrap();
    let last_line = String::from_utf8(bytes.clone())
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let last = keel_envelope::codec::decode_envelope(last_line.as_bytes()).unwrap();
    assert!(all.iter().any(|e| e.type_name() == "session.completed"));
    let lines_before = bytes.iter().filter(|b| **b == b'\n').count();
    bytes.extend_from_slice(br#"{"version":"1.0","sessionId":"#);
    std::fs::write(&log, &bytes).unwrap();
    let kernel = reopen(&ws, &store_path, TestModel::new(vec![]));
    let (_s2, mut ev2) = kernel.resume_session(&sid, None).await.unwrap();
    let warn = ev2.recv().await.unwrap();
    assert!(
        matches!(&warn.event, Event::Warning(w) if w.code == ErrorCode::SessionPersistenceFailed)
    );
    let resumed = ev2.recv().await.unwrap();
    let Event::SessionResumed(r) = &resumed.event else {
        panic!()
    };
    let cursor = r.last_cursor.clone().unwrap();
    assert_eq!(
        (cursor.request_id.as_str(), cursor.sequence),
        (last.request_id.as_str(), last.sequence)
    );
    kernel.shutdown("test").await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.ends_with('\n'));
    assert!(
        text.lines().count() > lines_before,
        "appending goes on after the cut"
    );
    for line in text.lines() {
        keel_envelope::codec::decode_envelope(line.as_bytes()).unwrap();
    }
}

#[tokio::test]
async fn session_list_and_state_answer_on_the_commands_own_stream() {
    let f = fixture(vec![], Duration::from_secs(60));
    let (s, _events) = start(&f).await;
    let mut all = f.kernel.subscribe();
    f.kernel
        .execute(Command::new(
            "req_list",
            None,
            CommandPayload::SessionList(keel_envelope::commands::SessionListCmd::new()),
        ))
        .await
        .unwrap();
    let env = all.recv().await.unwrap();
    assert_eq!((env.request_id.as_str(), env.sequence), ("req_list", 1));
    let Event::SessionList(list) = &env.event else {
        panic!()
    };
    assert!(list.sessions.iter().any(|i| i.session_id == s.id()));
    let state = s.state();
    assert_eq!(state.session.title.as_deref(), Some("t"));
    let _ = f.store.path();
}

#[tokio::test]
async fn a_request_cut_off_by_a_dead_process_ends_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let store_path = store.path().to_path_buf();
    let f = fixture_in(vec![], Duration::from_secs(60), dir, store);
    let (s, mut events) = start(&f).await;
    let sid = s.id().to_owned();
    let rid = s.send("hello").await.unwrap();
    until(&mut events, "session.completed").await;
    // Simulate a process that died mid-request: drop the terminal events of the log.
    let log = store_path.join("sessions").join(&sid).join("events.jsonl");
    f.kernel.shutdown("test").await;
    let text = std::fs::read_to_string(&log).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .take_while(|l| !l.contains("\"assistant.final\""))
        .collect();
    let last_seq = keel_envelope::codec::decode_envelope(kept.last().unwrap().as_bytes())
        .unwrap()
        .sequence;
    std::fs::write(&log, kept.join("\n") + "\n").unwrap();
    let kernel = reopen(&ws, &store_path, TestModel::new(vec![]));
    let (_s2, mut ev2) = kernel.resume_session(&sid, None).await.unwrap();
    let resumed = ev2.recv().await.unwrap();
    assert_eq!(resumed.type_name(), "session.resumed");
    let ended = ev2.recv().await.unwrap();
    assert_eq!(ended.request_id, rid);
    assert_eq!(
        ended.sequence,
        last_seq + 1,
        "the stream goes on without a gap"
    );
    assert!(matches!(&ended.event, Event::SessionInterrupted(i) if i.reason == "restart"));
}

#[derive(Debug)]
struct Boom(ToolSpec);

#[async_trait]
impl Tool for Boom {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(
        &self,
        _args: serde_json::Value,
        _ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        panic!("tool bug")
    }
}

#[tokio::test]
async fn a_panic_inside_a_request_is_reported_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let model = TestModel::new(vec![call("boom", serde_json::json!({})), say("after")]);
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model)
        .memory_store()
        .builtin_tools(false)
        .tool(Arc::new(Boom(ToolSpec::custom(
            "boom",
            "panics",
            serde_json::json!({"type": "object"}),
            PermissionLevel::Read,
            PlanBehavior::Allowed,
            ApprovalRequirement::Never,
        ))))
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
    s.send("x").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(all
        .iter()
        .any(|e| matches!(&e.event, Event::Error(x) if x.code == ErrorCode::RuntimeInternalError)));
    assert!(
        matches!(&all.last().unwrap().event, Event::SessionCompleted(c) if c.stop_reason == StopReason::Error)
    );
    s.send("again").await.unwrap();
    let next = until(&mut events, "session.completed").await;
    assert!(types(&next).contains(&"assistant.final".to_owned()));
}
