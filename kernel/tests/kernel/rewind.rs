//! Checkpoints, `session.rewind`, `session.fork` and `request.side` with the built-in
//! tools changing real files in a temporary directory that is not a git repository.

use std::collections::BTreeMap;
use std::path::Path;

use keel_envelope::commands::{
    CheckpointListCmd, RequestSide, SessionFork, SessionRewind, SessionStateCmd,
};
use keel_envelope::events::{CheckpointList, FileChangeKind, RewindAction};
use keel_kernel::KernelConfig;
use serde_json::json;

use super::*;

struct Rw {
    kernel: Kernel,
    model: Arc<TestModel>,
    ws: tempfile::TempDir,
    _store: tempfile::TempDir,
}

fn rw(turns: Vec<Turn>, file_store: bool) -> Rw {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    std::fs::write(ws.path().join("b.txt"), "bee\n").unwrap();
    let model = TestModel::new(turns);
    let config = KernelConfig {
        permission_mode: PermissionMode::Auto,
        sandbox: keel_tools::SandboxConfig::off(),
        ..KernelConfig::default()
    };
    let builder = Kernel::builder()
        .config(config)
        .workspace(ws.path())
        .model(model.clone())
        .ids(Arc::new(SeqIdGen::default()));
    let builder = if file_store {
        builder.store_dir(store.path())
    } else {
        builder.memory_store()
    };
    Rw {
        kernel: builder.build().unwrap(),
        model,
        ws,
        _store: store,
    }
}

fn files(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                out.insert(format!("{rel}/"), String::new());
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// Request 1 writes a file and runs a shell command; request 2 only answers.
fn two_requests() -> Vec<Turn> {
    vec![
        call(
            "write_file",
            json!({"path": "new.txt", "content": "made\n"}),
        ),
        call(
            "run_shell",
            json!({"command": "sed -i s/one/two/ a.txt && rm b.txt && mkdir out && echo o > out/o.txt"}),
        ),
        say("first done"),
        say("second done"),
    ]
}

async fn run_two(r: &Rw) -> (SessionHandle, EventStream, String, String) {
    let (h, mut ev) = r.kernel.start_session(opts()).await.unwrap();
    let r1 = h.send("change things").await.unwrap();
    until(&mut ev, "session.completed").await;
    let r2 = h.send("say something").await.unwrap();
    until(&mut ev, "session.completed").await;
    (h, ev, r1, r2)
}

async fn list(h: &SessionHandle, ev: &mut EventStream) -> CheckpointList {
    h.command(CommandPayload::CheckpointList(CheckpointListCmd::new()))
        .await
        .unwrap();
    match until(ev, "checkpoint.list").await.pop().unwrap().event {
        Event::CheckpointList(l) => l,
        other => panic!("{other:?}"),
    }
}

fn rewind_to(request: Option<&str>, call: Option<&str>, files: bool, conv: bool) -> CommandPayload {
    CommandPayload::SessionRewind(
        SessionRewind::new()
            .to_request_id(request.map(str::to_owned))
            .to_tool_call_id(call.map(str::to_owned))
            .files(files)
            .conversation(conv),
    )
}

fn message_count(h: &SessionHandle) -> u32 {
    h.state().message_count
}

#[tokio::test]
async fn checkpoints_are_listed_with_the_changes_each_step_made() {
    let r = rw(two_requests(), true);
    let (h, mut ev, r1, r2) = run_two(&r).await;
    let l = list(&h, &mut ev).await;
    assert_eq!(l.disabled_reason, None);
    let shape: Vec<(String, Option<String>)> = l
        .checkpoints
        .iter()
        .map(|c| (c.request_id.clone(), c.tool_name.clone()))
        .collect();
    assert_eq!(
        shape,
        vec![
            (r1.clone(), None),
            (r1.clone(), Some("write_file".into())),
            (r1.clone(), Some("run_shell".into())),
            (r2.clone(), None),
        ]
    );
    let changes = |i: usize| -> Vec<(String, FileChangeKind)> {
        let mut v: Vec<_> = l.checkpoints[i]
            .files_changed
            .iter()
            .map(|c| (c.path.clone(), c.change.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(changes(0), vec![]);
    assert_eq!(
        changes(1),
        vec![("new.txt".into(), FileChangeKind::Created)]
    );
    assert_eq!(
        changes(2),
        vec![
            ("a.txt".into(), FileChangeKind::Modified),
            ("b.txt".into(), FileChangeKind::Deleted),
            ("out/o.txt".into(), FileChangeKind::Created),
        ]
    );
    assert_eq!(changes(3), vec![]);
    assert_eq!(
        l.checkpoints[1].checkpoint_id,
        l.checkpoints[1].tool_call_id.clone().unwrap()
    );
}

#[tokio::test]
async fn a_rewind_to_a_request_restores_files_and_cuts_the_conversation() {
    let r = rw(two_requests(), true);
    let before = files(r.ws.path());
    let (h, mut ev, r1, _r2) = run_two(&r).await;
    assert_ne!(files(r.ws.path()), before);
    assert!(message_count(&h) > 0);
    h.command(rewind_to(Some(&r1), None, true, true))
        .await
        .unwrap();
    let env = until(&mut ev, "session.rewound").await.pop().unwrap();
    let Event::SessionRewound(rw) = env.event else {
        panic!()
    };
    assert!(rw.conversation_cut);
    assert!(rw.not_restorable.is_empty(), "{:?}", rw.not_restorable);
    let mut got: Vec<(String, RewindAction)> = rw
        .files
        .iter()
        .map(|f| (f.path.clone(), f.action.clone()))
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        vec![
            ("a.txt".into(), RewindAction::Reverted),
            ("b.txt".into(), RewindAction::Recreated),
            ("new.txt".into(), RewindAction::Removed),
            ("out/o.txt".into(), RewindAction::Removed),
        ]
    );
    assert_eq!(files(r.ws.path()), before);
    assert_eq!(message_count(&h), 0);
    // The next request starts from the cut conversation.
    r.model.push(vec![say("again")]);
    h.send("start over").await.unwrap();
    until(&mut ev, "session.completed").await;
    let seen = r.model.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(seen.messages.len(), 1, "{:?}", seen.messages);
}

#[tokio::test]
async fn a_rewind_to_a_tool_call_can_leave_the_conversation_alone() {
    let r = rw(two_requests(), true);
    let (h, mut ev, _r1, _r2) = run_two(&r).await;
    let l = list(&h, &mut ev).await;
    let shell = l.checkpoints[2].tool_call_id.clone().unwrap();
    let count = message_count(&h);
    h.command(rewind_to(None, Some(&shell), true, false))
        .await
        .unwrap();
    let Event::SessionRewound(rw) = until(&mut ev, "session.rewound").await.pop().unwrap().event
    else {
        panic!()
    };
    assert!(!rw.conversation_cut);
    assert_eq!(message_count(&h), count);
    let now = files(r.ws.path());
    assert_eq!(
        now.get("new.txt").map(String::as_str),
        Some("made\n"),
        "kept: before the call"
    );
    assert_eq!(now.get("a.txt").map(String::as_str), Some("one\n"));
    assert_eq!(now.get("b.txt").map(String::as_str), Some("bee\n"));
    assert!(!now.contains_key("out/"));
    // Conversation only, to the same call: cut before the model turn that made it.
    h.command(rewind_to(None, Some(&shell), false, true))
        .await
        .unwrap();
    let Event::SessionRewound(rw) = until(&mut ev, "session.rewound").await.pop().unwrap().event
    else {
        panic!()
    };
    assert!(rw.conversation_cut && rw.files.is_empty());
    assert!(message_count(&h) < count);
}

#[tokio::test]
async fn bad_rewinds_are_refused_with_stable_codes() {
    let r = rw(two_requests(), true);
    let (h, mut ev, r1, _r2) = run_two(&r).await;
    let code = |res: Result<String, ErrorPayload>| res.unwrap_err().code;
    assert_eq!(
        code(
            h.command(rewind_to(Some("req_nope"), None, true, true))
                .await
        ),
        ErrorCode::CheckpointNotFound
    );
    assert_eq!(
        code(h.command(rewind_to(None, None, true, true)).await),
        ErrorCode::RequestInvalid
    );
    assert_eq!(
        code(h.command(rewind_to(Some(&r1), Some("x"), true, true)).await),
        ErrorCode::RequestInvalid
    );
    assert_eq!(
        code(h.command(rewind_to(Some(&r1), None, false, false)).await),
        ErrorCode::RequestInvalid
    );
    // While a request runs (its model call waits).
    r.model.push(vec![Turn {
        delay: Some(Duration::from_secs(600)),
        ..say("slow")
    }]);
    h.send("slow one").await.unwrap();
    until(&mut ev, "turn.started").await;
    let e = h
        .command(rewind_to(Some(&r1), None, true, true))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionBusy);
    assert!(
        files(r.ws.path()).contains_key("new.txt"),
        "nothing restored"
    );
    h.interrupt().await.unwrap();
    until(&mut ev, "session.interrupted").await;
    // An unknown session.
    let cmd = Command::new(
        "req_x",
        Some("sess_unknown".into()),
        rewind_to(Some(&r1), None, true, true),
    );
    assert_eq!(
        r.kernel.execute(cmd).await.unwrap_err().code,
        ErrorCode::SessionNotFound
    );
}

#[tokio::test]
async fn a_memory_store_keeps_no_checkpoints_but_can_cut_the_conversation() {
    let r = rw(two_requests(), false);
    let (h, mut ev, r1, _r2) = run_two(&r).await;
    let l = list(&h, &mut ev).await;
    assert!(l.checkpoints.is_empty());
    assert!(l.disabled_reason.is_some());
    let e = h
        .command(rewind_to(Some(&r1), None, true, true))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::CheckpointNotFound);
    h.command(rewind_to(Some(&r1), None, false, true))
        .await
        .unwrap();
    until(&mut ev, "session.rewound").await;
    assert_eq!(message_count(&h), 0);
}

#[tokio::test]
async fn a_fork_copies_the_history_up_to_a_request_and_leaves_the_parent_alone() {
    let r = rw(two_requests(), true);
    let (h, mut ev, _r1, r2) = run_two(&r).await;
    let parent_count = message_count(&h);
    let mut all = r.kernel.subscribe();
    h.command(CommandPayload::SessionFork(
        SessionFork::new().at_request_id(r2.clone()).files(true),
    ))
    .await
    .unwrap();
    let env = until(&mut all, "session.forked").await.pop().unwrap();
    let Event::SessionForked(f) = &env.event else {
        panic!()
    };
    assert_eq!(f.parent_session_id, h.id());
    assert_eq!(f.at_request_id.as_deref(), Some(r2.as_str()));
    assert_eq!(env.session_id.as_deref(), Some(f.session_id.as_str()));
    let child = r.kernel.session_handle(&f.session_id).unwrap();
    assert!(message_count(&child) < parent_count);
    assert!(message_count(&child) > 0);
    assert_eq!(message_count(&h), parent_count, "the parent is unchanged");
    assert_eq!(child.state().session.permission_mode, PermissionMode::Auto);
    // The fork's log starts with its parent.
    let log = r.kernel.session_log(&f.session_id).unwrap();
    assert!(matches!(&log[0].event, Event::SessionForked(p) if p.parent_session_id == h.id()));
    // The fork runs requests of its own.
    let mut cev = child.subscribe();
    r.model.push(vec![say("in the fork")]);
    child.send("go on").await.unwrap();
    until(&mut cev, "session.completed").await;
    // Bad input: unknown request, files without a point, a closed parent.
    let code = |res: Result<String, ErrorPayload>| res.unwrap_err().code;
    let fork = |at: Option<&str>, files: bool| {
        CommandPayload::SessionFork(
            SessionFork::new()
                .at_request_id(at.map(str::to_owned))
                .files(files),
        )
    };
    assert_eq!(
        code(h.command(fork(Some("req_nope"), false)).await),
        ErrorCode::RequestInvalid
    );
    assert_eq!(
        code(h.command(fork(None, true)).await),
        ErrorCode::RequestInvalid
    );
    h.close().await.unwrap();
    let cmd = Command::new("req_f", Some(h.id().to_owned()), fork(None, false));
    assert_eq!(
        r.kernel.execute(cmd).await.unwrap_err().code,
        ErrorCode::SessionNotFound
    );
    let _ = &mut ev;
}

#[tokio::test]
async fn a_side_question_is_answered_beside_a_running_request_without_entering_history() {
    let r = rw(vec![say("hello")], true);
    let (h, mut ev) = r.kernel.start_session(opts()).await.unwrap();
    h.send("hi").await.unwrap();
    until(&mut ev, "session.completed").await;
    let count = message_count(&h);
    // Idle.
    r.model.push(vec![say("side answer one")]);
    let side = h
        .command(CommandPayload::RequestSide(RequestSide::new(
            "what did I say?",
        )))
        .await
        .unwrap();
    let env = until(&mut ev, "side.answered").await.pop().unwrap();
    assert_eq!(env.request_id, side);
    assert!(matches!(&env.event, Event::SideAnswered(a) if a.text == "side answer one"));
    let seen = r.model.seen.lock().unwrap().last().cloned().unwrap();
    assert!(seen.tools.is_empty(), "no tools for a side question");
    assert_eq!(message_count(&h), count);
    // While a request runs.
    r.model.push(vec![
        Turn {
            delay: Some(Duration::from_secs(600)),
            ..say("slow")
        },
        say("side answer two"),
    ]);
    let running = h.send("slow").await.unwrap();
    until(&mut ev, "turn.started").await;
    let side = h
        .command(CommandPayload::RequestSide(RequestSide::new(
            "still there?",
        )))
        .await
        .unwrap();
    let got = until(&mut ev, "side.answered").await;
    assert_eq!(got.last().unwrap().request_id, side);
    assert_eq!(got.last().unwrap().sequence, 1, "its own stream");
    assert_eq!(
        h.state().active_request_id.as_deref(),
        Some(running.as_str())
    );
    h.interrupt().await.unwrap();
    until(&mut ev, "session.interrupted").await;
    // Bad input.
    let e = h
        .command(CommandPayload::RequestSide(RequestSide::new("  ")))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestInvalid);
    let _ = h
        .command(CommandPayload::SessionState(SessionStateCmd::new()))
        .await;
}

#[tokio::test]
async fn the_plan_survives_compaction_and_forks() {
    let r = rw(
        vec![
            call(
                "propose_plan",
                json!({"summary": "parser work", "steps": [
                    {"id": "s1", "title": "write the parser"},
                    {"id": "s2", "title": "test the parser"}]}),
            ),
            call(
                "update_plan",
                json!({"steps": [{"id": "s1", "status": "completed"}]}),
            ),
            say("planned"),
            say("second"),
            say("third"),
            say("summary of the earlier work"),
            say("after compaction"),
            say("in the fork"),
        ],
        true,
    );
    let (h, mut ev) = r.kernel.start_session(opts()).await.unwrap();
    for m in ["plan it", "two", "three"] {
        h.send(m).await.unwrap();
        until(&mut ev, "session.completed").await;
    }
    h.command(CommandPayload::ContextCompact(
        keel_envelope::commands::ContextCompact::new(),
    ))
    .await
    .unwrap();
    let done = until(&mut ev, "context.compaction.completed").await;
    let Some(Event::CompactionCompleted(c)) = done.last().map(|e| e.event.clone()) else {
        panic!()
    };
    assert!(c.messages_compacted > 0 && !c.fallback, "{c:?}");
    h.send("go on").await.unwrap();
    until(&mut ev, "session.completed").await;
    let seen = r.model.seen.lock().unwrap().last().cloned().unwrap();
    let folded = seen.messages.iter().any(|m| {
        matches!(m, keel_kernel::model::Message::Assistant { tool_calls, .. }
            if tool_calls.iter().any(|c| c.name == "propose_plan"))
    });
    assert!(!folded, "the plan's messages were compacted away");
    assert!(
        seen.system.contains("- [x] write the parser (s1)"),
        "{}",
        seen.system
    );
    assert!(seen.system.contains("- [ ] test the parser (s2)"));
    let plan = h.state().plan.expect("plan in session.state");
    assert_eq!(plan.steps.len(), 2);
    // A fork keeps it too.
    let mut all = r.kernel.subscribe();
    h.command(CommandPayload::SessionFork(SessionFork::new()))
        .await
        .unwrap();
    let Event::SessionForked(f) = until(&mut all, "session.forked").await.pop().unwrap().event
    else {
        panic!()
    };
    let child = r.kernel.session_handle(&f.session_id).unwrap();
    assert_eq!(child.state().plan, Some(plan));
    let mut cev = child.subscribe();
    child.send("continue").await.unwrap();
    until(&mut cev, "session.completed").await;
    let seen = r.model.seen.lock().unwrap().last().cloned().unwrap();
    assert!(seen.system.contains("- [x] write the parser (s1)"));
}
