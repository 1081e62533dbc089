//! Compaction, project instructions, switching models.

use super::*;

#[tokio::test]
async fn context_past_the_threshold_is_compacted_through_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(4000);
    // Window 1000 tokens: four 1000-token user turns pass the 80 % threshold.
    let (kernel, model) = small_window_kernel(
        vec![
            say("a1"),
            say("a2"),
            say("a3"),
            say("SUMMARY: earlier turns"),
            say("a4"),
        ],
        1000,
        dir.path(),
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    for _ in 0..3 {
        s.send(long.clone()).await.unwrap();
        until(&mut events, "session.completed").await;
    }
    s.send("short question").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let t = types(&all);
    let started = t
        .iter()
        .position(|x| x == "context.compaction.started")
        .expect("compaction");
    let done = t
        .iter()
        .position(|x| x == "context.compaction.completed")
        .unwrap();
    assert!(started < done);
    let Event::CompactionCompleted(c) = &all[done].event else {
        panic!()
    };
    assert!(c.tokens_after < c.tokens_before && !c.fallback, "{c:?}");
    // The next model call sees the summary instead of the old turns.
    let seen = model.seen.lock().unwrap();
    let last = seen.last().unwrap();
    assert!(last.messages.iter().any(
        |m| matches!(m, keel_kernel::model::Message::User { text, .. } if text.contains("SUMMARY: earlier turns"))
    ));
    assert!(last.messages.len() < 8);
}

#[tokio::test]
async fn a_failed_summary_falls_back_to_truncation_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, _model) = small_window_kernel(
        vec![
            say("a1"),
            say("a2"),
            say("a3"),
            Turn {
                fail: true,
                ..Turn::default()
            },
        ],
        100_000,
        dir.path(),
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    for m in ["one", "two", "three"] {
        s.send(m).await.unwrap();
        until(&mut events, "session.completed").await;
    }
    // By hand, while idle: answered on the command's own stream.
    let crid = s
        .command(CommandPayload::ContextCompact(
            keel_envelope::commands::ContextCompact::new(),
        ))
        .await
        .unwrap();
    let all = until(&mut events, "context.compaction.completed").await;
    assert!(all.iter().all(|e| e.request_id == crid));
    assert!(all.iter().any(
        |e| matches!(&e.event, Event::Warning(w) if w.code == ErrorCode::ContextCompactionFailed)
    ));
    let Event::CompactionCompleted(c) = &all.last().unwrap().event else {
        panic!()
    };
    assert!(c.fallback && c.tokens_after < c.tokens_before, "{c:?}");
    assert_eq!(c.messages_compacted, 2);
    assert_eq!(
        s.state().message_count,
        4,
        "the two oldest messages were dropped"
    );
}

#[tokio::test]
async fn project_instructions_join_the_system_prompt() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "Always answer in haiku.").unwrap();
    let (kernel, model) = small_window_kernel(vec![say("ok")], 100_000, dir.path());
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("hi").await.unwrap();
    until(&mut events, "session.completed").await;
    let system = model.seen.lock().unwrap()[0].system.clone();
    assert!(system.contains("Always answer in haiku."), "{system}");
}

#[tokio::test]
async fn an_agents_md_that_leads_out_of_the_workspace_is_not_read() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("id_ed25519");
    std::fs::write(&secret, "-----BEGIN OPENSSH PRIVATE KEY----- secret").unwrap();
    // A symlink at the top, and one through a linked directory.
    for link in ["direct", "through-dir"] {
        let dir = tempfile::tempdir().unwrap();
        if link == "direct" {
            std::os::unix::fs::symlink(&secret, dir.path().join("AGENTS.md")).unwrap();
        } else {
            std::os::unix::fs::symlink(outside.path(), dir.path().join("cfg")).unwrap();
            std::os::unix::fs::symlink("cfg/id_ed25519", dir.path().join("AGENTS.md")).unwrap();
        }
        let (kernel, model) = small_window_kernel(vec![say("ok"), say("ok")], 100_000, dir.path());
        let (s, mut events) = kernel.start_session(opts()).await.unwrap();
        for _ in 0..2 {
            s.send("hi").await.unwrap();
            until(&mut events, "session.completed").await;
        }
        let seen = model.seen.lock().unwrap();
        for req in seen.iter() {
            assert!(
                !req.system.contains("PRIVATE KEY"),
                "{link}: the key reached the model"
            );
            assert!(!req.system.contains("Project instructions"), "{link}");
        }
        drop(seen);
        let log = kernel.session_log(s.id()).unwrap();
        let warned: Vec<&Envelope> = log
            .iter()
            .filter(|e| matches!(&e.event, Event::Warning(w) if w.code == ErrorCode::PathOutsideWorkspace))
            .collect();
        assert_eq!(warned.len(), 1, "{link}: warned once per session");
    }
}

#[tokio::test]
async fn special_or_oversized_instructions_are_left_out_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "x".repeat(300 * 1024)).unwrap();
    let (kernel, model) = small_window_kernel(vec![say("ok")], 100_000, dir.path());
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("hi").await.unwrap();
    let evs = until(&mut events, "session.completed").await;
    assert!(!model.seen.lock().unwrap()[0].system.contains("xxxx"));
    assert!(evs
        .iter()
        .any(|e| matches!(&e.event, Event::Warning(w) if w.message.contains("larger than"))));
}

/// A second model under another id, for switching.
#[derive(Debug)]
struct Named(&'static str, Arc<TestModel>);

impl Model for Named {
    fn id(&self) -> String {
        self.0.to_owned()
    }
    fn context_window(&self) -> u64 {
        self.1.context_window()
    }
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        self.1.stream(request, cancel)
    }
}

#[tokio::test]
async fn switching_model_while_idle_keeps_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let first = TestModel::new(vec![
        say("first answer"),
        Turn {
            text: vec!["slow"],
            delay: Some(Duration::from_secs(3600)),
            ..Turn::default()
        },
    ]);
    let second = TestModel::new(vec![say("second answer")]);
    let (a, b) = (first.clone(), second.clone());
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(Arc::new(Named("test:first", a.clone())))
        .model_factory(Arc::new(
            move |id: &str| -> Result<Arc<dyn Model>, ErrorPayload> {
                match id {
                    "test:first" => Ok(Arc::new(Named("test:first", a.clone()))),
                    "test:second" => Ok(Arc::new(Named("test:second", b.clone()))),
                    other => Err(ErrorPayload::new(
                        ErrorCode::ModelUnavailable,
                        format!("no model {other}"),
                    )),
                }
            },
        ))
        .memory_store()
        .builtin_tools(false)
        .build()
        .unwrap();
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("remember the number 42").await.unwrap();
    until(&mut events, "session.completed").await;

    let rid = s.set_model("test:second").await.unwrap();
    let changed = until(&mut events, "session.model_changed").await;
    let env = changed.last().unwrap();
    assert_eq!(env.request_id, rid);
    assert!(
        matches!(&env.event, Event::SessionModelChanged(m) if m.model == "test:second" && m.previous_model == "test:first")
    );
    let unknown = s.set_model("test:nope").await.unwrap_err();
    assert_eq!(unknown.code, ErrorCode::ModelUnavailable);

    s.send("what was the number?").await.unwrap();
    until(&mut events, "session.completed").await;
    let seen = second.seen.lock().unwrap().last().unwrap().messages.clone();
    assert!(seen.iter().any(
        |m| matches!(m, keel_kernel::model::Message::User { text, .. } if text == "remember the number 42")
    ));
    assert!(seen.iter().any(
        |m| matches!(m, keel_kernel::model::Message::Assistant { text, .. } if text == "first answer")
    ));

    // Busy: refused, nothing changes.
    s.set_model("test:first").await.unwrap();
    until(&mut events, "session.model_changed").await;
    s.send("slow one").await.unwrap();
    until(&mut events, "request.accepted").await;
    let busy = s.set_model("test:second").await.unwrap_err();
    assert_eq!(busy.code, ErrorCode::SessionBusy);
    assert_eq!(s.state().session.model, "test:first");
    s.interrupt().await.unwrap();
    until(&mut events, "session.interrupted").await;
    assert!(!first.seen.lock().unwrap().is_empty());
}
