//! `session.list` from the per-session summaries, and idle sessions dropped from
//! memory then reloaded from their log by the next command naming them.

use super::*;

fn idle_kernel(turns: Vec<Turn>, ws: &std::path::Path, store: &std::path::Path) -> Kernel {
    Kernel::builder()
        .workspace(ws)
        .model(TestModel::new(turns))
        .store_dir(store)
        .clock(Arc::new(ManualClock::new(1_775_600_000_000, 1)))
        .ids(Arc::new(SeqIdGen::default()))
        .builtin_tools(false)
        .tool(tool("poke", PermissionLevel::Write, PlanBehavior::Denied))
        .idle_unload_after(Some(Duration::ZERO))
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_listing_shows_request_counts_and_last_messages_from_summaries() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let kernel = idle_kernel(
        vec![say("First answer\nwith details"), say("Second answer")],
        ws.path(),
        store.path(),
    );
    let (a, mut events) = kernel.start_session(opts()).await.unwrap();
    a.send("Fix the parser").await.unwrap();
    until(&mut events, "session.completed").await;
    a.send("Then the lexer").await.unwrap();
    until(&mut events, "session.completed").await;
    let (b, _) = kernel.start_session(opts()).await.unwrap();

    let listed = kernel.list_sessions().unwrap();
    let info = |id: &str| listed.iter().find(|i| i.session_id == id).unwrap().clone();
    assert_eq!(info(a.id()).request_count, 2);
    assert_eq!(info(a.id()).last_message.as_deref(), Some("Second answer"));
    assert_eq!(info(b.id()).request_count, 0);
    assert_eq!(info(b.id()).last_message, None);

    // What a listing reads is the small summary beside the state.
    let dir = store.path().join("sessions").join(a.id());
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["requestCount"], 2);
    assert_eq!(summary["lastMessage"], "Second answer");
    assert!(summary.get("history").is_none());
    kernel.shutdown("test").await;

    // A new kernel lists from the files: the summary, or the state when a session has
    // none (stored before summaries existed) or a damaged one.
    std::fs::remove_file(dir.join("summary.json")).unwrap();
    let bdir = store.path().join("sessions").join(b.id());
    std::fs::write(bdir.join("summary.json"), b"{ not json").unwrap();
    let again = idle_kernel(vec![], ws.path(), store.path());
    let listed = again.list_sessions().unwrap();
    assert_eq!(listed.len(), 2);
    let a2 = listed.iter().find(|i| i.session_id == a.id()).unwrap();
    assert_eq!(a2.request_count, 2);
    assert_eq!(a2.last_message.as_deref(), Some("Second answer"));
    assert_eq!(a2.state, keel_envelope::types::SessionState::Closed);
    assert!(listed.iter().any(|i| i.session_id == b.id()));
}

#[tokio::test]
async fn an_idle_session_leaves_memory_and_the_next_command_reloads_it_unseen() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let model = TestModel::new(vec![say("Noted."), say("Still here.")]);
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(model.clone())
        .store_dir(store.path())
        .builtin_tools(false)
        .idle_unload_after(Some(Duration::ZERO))
        .build()
        .unwrap();
    let mut all = kernel.subscribe();
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    let first = s.send("Remember the word kestrel").await.unwrap();
    until(&mut events, "session.completed").await;
    let id = s.id().to_owned();

    assert_eq!(kernel.unload_idle_sessions(), vec![id.clone()]);
    assert!(kernel.loaded_sessions().is_empty());
    // Still open for the host: listed, named by open_sessions, state readable.
    assert_eq!(kernel.open_sessions(), vec![id.clone()]);
    let listed = kernel.list_sessions().unwrap();
    assert_eq!(listed[0].state, keel_envelope::types::SessionState::Idle);
    assert_eq!(listed[0].request_count, 1);
    assert!(
        kernel.loaded_sessions().is_empty(),
        "listing reloads nothing"
    );

    // The next command naming it brings it back, with its history and checkpoints.
    std::fs::write(ws.path().join("a.txt"), "two\n").unwrap();
    let second = s.send("Which word?").await.unwrap();
    let evs = until(&mut events, "session.completed").await;
    assert!(evs.iter().any(|e| e.request_id == second));
    assert_eq!(kernel.loaded_sessions(), vec![id.clone()]);
    let seen = model.seen.lock().unwrap().last().cloned().unwrap();
    let texts = format!("{:?}", seen.messages);
    assert!(
        texts.contains("kestrel") && texts.contains("Noted."),
        "{texts}"
    );
    assert_eq!(s.state().session.request_count, 2);

    // Rewinding to the first request (taken before the unload) still works.
    assert_eq!(kernel.unload_idle_sessions(), vec![id.clone()]);
    let rid = s
        .command(CommandPayload::SessionRewind(
            keel_envelope::commands::SessionRewind::new()
                .to_request_id(first.clone())
                .files(true)
                .conversation(true),
        ))
        .await
        .unwrap();
    let evs = until(&mut events, "session.rewound").await;
    assert!(evs.iter().any(|e| e.request_id == rid));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "one\n"
    );

    // Every event of the session, across both unloads, in sequence without gaps.
    let mut mine = Vec::new();
    while let Some(e) = all.try_recv() {
        if e.session_id.as_deref() == Some(id.as_str()) {
            mine.push(e);
        }
    }
    check_sequences(&mine);
    kernel.shutdown("test").await;
    let closed =
        std::fs::read_to_string(store.path().join("sessions").join(&id).join("state.json"))
            .unwrap();
    assert!(
        closed.contains("\"closed\":true"),
        "shutdown closes unloaded sessions too"
    );
}

#[tokio::test]
async fn busy_and_closed_sessions_stay_as_they_are() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let kernel = idle_kernel(
        vec![call("poke", serde_json::json!({})), say("done")],
        ws.path(),
        store.path(),
    );
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    s.send("poke it").await.unwrap();
    let evs = until(&mut events, "approval.requested").await;
    // Waiting for an approval: kept.
    assert!(kernel.unload_idle_sessions().is_empty());
    s.respond_approval(&approval_id(&evs), ApprovalDecision::AllowOnce)
        .await
        .unwrap();
    until(&mut events, "session.completed").await;
    let id = s.id().to_owned();
    s.close().await.unwrap();
    // Closed: nothing to unload, and commands naming it are refused as before.
    assert!(kernel.unload_idle_sessions().is_empty());
    let err = s.send("again").await.unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionNotFound);
    assert!(kernel.open_sessions().is_empty(), "{id}");
}

#[tokio::test]
async fn unloaded_sessions_count_against_the_limit_and_host_tools_keep_a_session_loaded() {
    use keel_envelope::commands::{SessionFork, SessionStart};
    use keel_envelope::host::HostToolSpec;
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder()
        .config(keel_kernel::KernelConfig {
            max_open_sessions: 2,
            ..Default::default()
        })
        .workspace(ws.path())
        .model(TestModel::new(vec![]))
        .store_dir(store.path())
        .builtin_tools(false)
        .idle_unload_after(Some(Duration::ZERO))
        .build()
        .unwrap();
    let mut all = kernel.subscribe();
    let (a, _) = kernel.start_session(opts()).await.unwrap();
    let lookup = HostToolSpec::new(
        "lookup",
        "the host's lookup",
        serde_json::json!({"type": "object"}),
        PermissionLevel::Read,
    );
    let (b, _) = kernel
        .start_session(SessionStart::new().host_tools(vec![lookup]))
        .await
        .unwrap();
    // `a` leaves memory; `b` has a host tool (it lives only in memory) and stays.
    assert_eq!(kernel.unload_idle_sessions(), vec![a.id().to_owned()]);
    assert_eq!(kernel.loaded_sessions(), vec![b.id().to_owned()]);
    // Unloaded is still open: a third session and a fork are refused.
    let err = kernel.start_session(opts()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionLimitReached);
    let fork = CommandPayload::SessionFork(SessionFork::new());
    let err = b.command(fork.clone()).await.unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionLimitReached);
    // Closing the unloaded one (reloaded to close it) frees its place.
    a.close().await.unwrap();
    let rid = b.command(fork).await.unwrap();
    let forked = loop {
        let e = all.recv().await.unwrap();
        if e.request_id == rid && matches!(e.event, Event::SessionForked(_)) {
            break e.session_id.unwrap();
        }
    };
    // The fork has the parent's host tool: it stays loaded too.
    assert!(kernel.unload_idle_sessions().is_empty());
    let mut loaded = kernel.loaded_sessions();
    loaded.sort();
    let mut want = vec![b.id().to_owned(), forked];
    want.sort();
    assert_eq!(loaded, want);
}
