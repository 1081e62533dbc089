//! The optional extensions through the kernel's public API: review mode, patch
//! preview and the task graph, their errors, their persistence across a restart, and
//! the envelope rules over random command sequences.
#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream;
use keel_envelope::commands::{
    BackgroundGetCmd, BackgroundHistoryCmd, BackgroundListCmd, BackgroundStopCmd, ChecklistUpdate,
    CommandPayload, NewTaskNode, NodeUpdates, PatchApply, PatchPropose, PatchReject,
    PatchSummaryCmd, ProposedFile, RequestSend, ReviewDecision, ReviewEnter, ReviewResolve,
    ReviewStatusCmd, ReviewSubmit, SubAgentGetCmd, SubAgentListCmd, TaskGraphAddNode,
    TaskGraphAdvance, TaskGraphCreate, TaskGraphStateCmd, TaskGraphUpdateNode,
};
use keel_envelope::ext::{
    BackgroundStatus, GraphStatus, NodeStatus, PatchOp, PatchStatus, ReviewStatus, SubAgentStatus,
    TaskGraph,
};
use keel_envelope::ids::{ManualClock, SeqIdGen};
use keel_envelope::types::{ApprovalDecision, PermissionLevel, PermissionMode, Usage};
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event, SequenceChecker};
use keel_kernel::model::{
    FinishReason, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_kernel::{EventStream, Kernel, SessionOptions};
use keel_tools::{ApprovalRequirement, PlanBehavior, Tool, ToolContext, ToolSpec};
use tokio_util::sync::CancellationToken;

/// One scripted model turn: text, or tool calls.
#[derive(Debug, Clone)]
enum Turn {
    Say(&'static str),
    Call(&'static str, serde_json::Value),
}

#[derive(Debug, Default)]
struct TestModel {
    turns: Mutex<VecDeque<Turn>>,
    seen: Mutex<Vec<ModelRequest>>,
}

impl TestModel {
    fn new(turns: Vec<Turn>) -> Arc<Self> {
        Arc::new(Self {
            turns: Mutex::new(turns.into()),
            seen: Mutex::new(Vec::new()),
        })
    }
    fn calls(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

impl Model for TestModel {
    fn id(&self) -> String {
        "test:model".into()
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    fn stream(&self, request: ModelRequest, _cancel: CancellationToken) -> ModelStream {
        self.seen.lock().unwrap().push(request);
        let turn = self
            .turns
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Turn::Say("done"));
        let mut items = Vec::new();
        match turn {
            Turn::Say(t) => {
                items.push(ModelEvent::TextDelta(t.to_owned()));
                items.push(ModelEvent::Usage(Usage::default()));
                items.push(ModelEvent::Finished(FinishReason::EndTurn));
            }
            Turn::Call(name, args) => {
                items.push(ModelEvent::ToolCall(ToolCallRequest {
                    id: "call_1".into(),
                    name: name.to_owned(),
                    arguments: args,
                }));
                items.push(ModelEvent::Usage(Usage::default()));
                items.push(ModelEvent::Finished(FinishReason::ToolUse));
            }
        }
        Box::pin(stream::iter(items.into_iter().map(Ok)))
    }
}

/// A tool that echoes its arguments.
#[derive(Debug)]
struct TestTool {
    spec: ToolSpec,
}

impl TestTool {
    fn new(name: &str, level: PermissionLevel) -> Arc<Self> {
        Arc::new(Self {
            spec: ToolSpec {
                name: name.into(),
                description: format!("test tool {name}"),
                parameters: serde_json::json!({"type": "object"}),
                level,
                plan: PlanBehavior::Allowed,
                approval: if level == PermissionLevel::Read {
                    ApprovalRequirement::Never
                } else {
                    ApprovalRequirement::Always
                },
            },
        })
    }
}

#[async_trait::async_trait]
impl Tool for TestTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(
        &self,
        args: serde_json::Value,
        _ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        Ok(serde_json::json!({"ok": true, "echo": args}))
    }
}

/// A kernel over a workspace and a store directory, one open session, and a raw
/// subscription to everything it emits (delivered before `execute` returns).
struct H {
    kernel: Kernel,
    model: Arc<TestModel>,
    sid: String,
    all: EventStream,
    log: Vec<Envelope>,
    ws: std::path::PathBuf,
}

fn kernel(
    ws: &std::path::Path,
    store: &std::path::Path,
    model: Arc<TestModel>,
    builtin: bool,
) -> Kernel {
    let b = Kernel::builder()
        .tool(TestTool::new("peek", PermissionLevel::Read))
        .tool(TestTool::new("poke", PermissionLevel::Write))
        .workspace(ws)
        .model(model)
        .store_dir(store)
        .clock(Arc::new(ManualClock::new(1_775_600_000_000, 1)))
        .approval_timeout(Duration::from_secs(600))
        .builtin_tools(builtin);
    // After a restart, sequential ids would repeat the first run's; use fresh ones.
    let b = if store.join("sessions").exists() {
        b
    } else {
        b.ids(Arc::new(SeqIdGen::default()))
    };
    b.build().unwrap()
}

impl H {
    async fn new(
        ws: &std::path::Path,
        store: &std::path::Path,
        turns: Vec<Turn>,
        builtin: bool,
        mode: Option<PermissionMode>,
    ) -> Self {
        let model = TestModel::new(turns);
        let kernel = kernel(ws, store, model.clone(), builtin);
        let all = kernel.subscribe();
        let (s, _events) = kernel
            .start_session(SessionOptions {
                workspace_path: None,
                permission_mode: mode,
                model: None,
                title: None,
            })
            .await
            .unwrap();
        let mut h = Self {
            kernel,
            model,
            sid: s.id().to_owned(),
            all,
            log: Vec::new(),
            ws: s.workspace().to_owned(),
        };
        h.drain();
        h
    }

    fn drain(&mut self) -> Vec<Envelope> {
        let mut out = Vec::new();
        while let Some(e) = self.all.try_recv() {
            out.push(e);
        }
        self.log.extend(out.clone());
        out
    }

    /// Runs a command; returns its request id and the events on its own stream.
    async fn run(&mut self, payload: CommandPayload) -> (String, Vec<Envelope>) {
        let rid = self.kernel.new_request_id();
        let cmd = Command::new(rid.clone(), Some(self.sid.clone()), payload);
        let _ = self.kernel.execute(cmd).await;
        let evs = self
            .drain()
            .into_iter()
            .filter(|e| e.request_id == rid)
            .collect();
        (rid, evs)
    }

    /// Runs a command that must succeed; returns the answer (its first event).
    async fn ok(&mut self, payload: CommandPayload) -> Envelope {
        let (_, evs) = self.run(payload).await;
        let first = evs.first().cloned().expect("an answer");
        if let Event::Error(e) | Event::RequestRejected(e) = &first.event {
            panic!("unexpected error {e:?}");
        }
        first
    }

    /// Runs a command that must fail; returns the error (the only event).
    async fn err(&mut self, payload: CommandPayload) -> ErrorPayload {
        let (_, evs) = self.run(payload).await;
        assert_eq!(evs.len(), 1, "one answer: {:?}", types(&evs));
        match &evs[0].event {
            Event::Error(e) | Event::RequestRejected(e) => e.clone(),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    /// Waits until a request's stream has `session.completed`.
    async fn finish(&mut self, rid: &str) -> Vec<Envelope> {
        self.until(rid, "session.completed").await
    }

    /// Waits until a request's stream has an event of type `ty`.
    async fn until(&mut self, rid: &str, ty: &str) -> Vec<Envelope> {
        let mut got: Vec<Envelope> = self
            .log
            .iter()
            .filter(|e| e.request_id == rid)
            .cloned()
            .collect();
        while !got.iter().any(|e| e.type_name() == ty) {
            let env = tokio::time::timeout(Duration::from_secs(600), self.all.recv())
                .await
                .expect("timed out")
                .expect("stream ended");
            self.log.push(env.clone());
            if env.request_id == rid {
                got.push(env);
            }
        }
        got
    }

    fn file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.ws.join(name)).ok()
    }
}

fn types(envs: &[Envelope]) -> Vec<String> {
    envs.iter().map(|e| e.type_name().to_owned()).collect()
}

fn check_sequences(envs: &[Envelope]) {
    let mut checker = SequenceChecker::new();
    for e in envs {
        checker
            .check(e)
            .unwrap_or_else(|gap| panic!("sequence gap {gap:?} in {:?}", types(envs)));
    }
}

fn node(id: &str, deps: &[&str]) -> NewTaskNode {
    NewTaskNode {
        id: id.into(),
        title: format!("task {id}"),
        description: None,
        depends_on: deps.iter().map(|d| (*d).to_owned()).collect(),
        metadata: None,
    }
}

fn status(s: NodeStatus) -> NodeUpdates {
    NodeUpdates {
        status: Some(s),
        title: None,
        result: None,
        error: None,
        metadata: None,
    }
}

fn enter(blocking: bool) -> CommandPayload {
    CommandPayload::ReviewEnter(ReviewEnter {
        reason: "check the migration".into(),
        blocking,
        checklist: Some(vec!["tests pass".into()]),
    })
}

fn resolve(decision: ReviewDecision) -> CommandPayload {
    CommandPayload::ReviewResolve(ReviewResolve {
        decision,
        summary: Some("ok".into()),
    })
}

fn submit(comment: Option<&str>, item: Option<(&str, bool)>) -> CommandPayload {
    CommandPayload::ReviewSubmit(ReviewSubmit {
        comment: comment.map(str::to_owned),
        checklist_item: item.map(|(id, done)| ChecklistUpdate {
            id: id.into(),
            done,
            note: None,
        }),
    })
}

fn propose(files: &[(&str, Option<&str>)]) -> CommandPayload {
    CommandPayload::PatchPropose(PatchPropose {
        files: files
            .iter()
            .map(|(p, c)| ProposedFile {
                path: (*p).to_owned(),
                content: c.map(str::to_owned),
            })
            .collect(),
        reason: Some("tidy".into()),
    })
}

fn send(message: &str, preview: Option<bool>) -> CommandPayload {
    CommandPayload::RequestSend(RequestSend {
        message: message.into(),
        images: None,
        when_busy: None,
        patch_preview: preview,
    })
}

fn create(nodes: Vec<NewTaskNode>) -> CommandPayload {
    CommandPayload::TaskGraphCreate(TaskGraphCreate {
        title: Some("release".into()),
        description: None,
        nodes,
    })
}

fn update(id: &str, s: NodeStatus) -> CommandPayload {
    CommandPayload::TaskGraphUpdateNode(TaskGraphUpdateNode {
        node_id: id.into(),
        updates: status(s),
    })
}

fn patch_id(env: &Envelope) -> String {
    match &env.event {
        Event::PatchProposed(p) => p.patch.patch_id.clone(),
        other => panic!("{other:?}"),
    }
}

/// The graph invariants, checked on the wire value.
fn check_graph(g: &TaskGraph) {
    let pos: HashMap<&str, usize> = g
        .order
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    assert_eq!(pos.len(), g.nodes.len(), "order is a permutation");
    let done = |s: NodeStatus| matches!(s, NodeStatus::Completed | NodeStatus::Skipped);
    let terminal = |s: NodeStatus| done(s) || s == NodeStatus::Failed;
    for (id, n) in &g.nodes {
        for d in &n.depends_on {
            assert!(pos[d.as_str()] < pos[id.as_str()], "topological order");
            if matches!(
                n.status,
                NodeStatus::Ready | NodeStatus::Running | NodeStatus::Completed
            ) {
                assert!(done(g.nodes[d].status), "{id} started before {d}");
            }
        }
    }
    let all = !g.nodes.is_empty() && g.nodes.values().all(|n| terminal(n.status));
    assert_eq!(
        g.status != GraphStatus::Active,
        all,
        "completed iff terminal"
    );
}

#[tokio::test]
async fn review_mode_follows_its_state_machine() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;

    // Nothing to submit to or resolve yet.
    assert_eq!(
        h.err(submit(Some("hi"), None)).await.code,
        ErrorCode::ReviewNotFound
    );
    assert_eq!(
        h.err(resolve(ReviewDecision::Approved)).await.code,
        ErrorCode::ReviewNotFound
    );
    match h
        .ok(CommandPayload::ReviewStatus(ReviewStatusCmd {}))
        .await
        .event
    {
        Event::ReviewState(s) => assert!(s.review.is_none() && !s.blocking),
        other => panic!("{other:?}"),
    }

    let (rid, evs) = h.run(enter(false)).await;
    assert_eq!(types(&evs), ["review.requested"]);
    assert_eq!(evs[0].request_id, rid);
    let review_id = match &evs[0].event {
        Event::ReviewRequested(r) => {
            assert_eq!(r.review.status, ReviewStatus::Pending);
            assert_eq!(r.review.checklist[0].id, "k1");
            r.review.review_id.clone()
        }
        other => panic!("{other:?}"),
    };
    // One review at a time.
    assert_eq!(h.err(enter(true)).await.code, ErrorCode::RequestInvalid);
    // Bad submits change nothing.
    assert_eq!(
        h.err(submit(None, None)).await.code,
        ErrorCode::RequestInvalid
    );
    assert_eq!(
        h.err(submit(None, Some(("k9", true)))).await.code,
        ErrorCode::RequestInvalid
    );
    match h
        .ok(submit(Some("looks fine"), Some(("k1", true))))
        .await
        .event
    {
        Event::ReviewUpdated(r) => {
            assert_eq!(r.review.comments.len(), 1);
            assert!(r.review.checklist[0].done);
        }
        other => panic!("{other:?}"),
    }
    match h.ok(resolve(ReviewDecision::Rejected)).await.event {
        Event::ReviewResolved(r) => {
            assert_eq!(r.review.status, ReviewStatus::Rejected);
            assert_eq!(r.review.decision, Some(ReviewStatus::Rejected));
        }
        other => panic!("{other:?}"),
    }
    // A resolved review stays resolved.
    assert_eq!(
        h.err(resolve(ReviewDecision::Approved)).await.code,
        ErrorCode::ReviewNotFound
    );
    assert_eq!(
        h.err(submit(Some("late"), None)).await.code,
        ErrorCode::ReviewNotFound
    );
    match h
        .ok(CommandPayload::ReviewStatus(ReviewStatusCmd {}))
        .await
        .event
    {
        Event::ReviewState(s) => {
            let r = s.review.unwrap();
            assert_eq!(
                (r.review_id.as_str(), r.status),
                (review_id.as_str(), ReviewStatus::Rejected)
            );
        }
        other => panic!("{other:?}"),
    }
    // Entering again starts a new review.
    match h.ok(enter(false)).await.event {
        Event::ReviewRequested(r) => assert_ne!(r.review.review_id, review_id),
        other => panic!("{other:?}"),
    }
    check_sequences(&h.log);
}

#[tokio::test]
async fn a_blocking_review_refuses_requests_before_the_model_is_called() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut h = H::new(
        ws.path(),
        store.path(),
        vec![Turn::Say("hello")],
        false,
        None,
    )
    .await;
    h.ok(enter(true)).await;
    match h
        .ok(CommandPayload::ReviewStatus(ReviewStatusCmd {}))
        .await
        .event
    {
        Event::ReviewState(s) => assert!(s.blocking),
        other => panic!("{other:?}"),
    }
    let (rid, evs) = h.run(send("go", None)).await;
    assert_eq!(types(&evs), ["request.rejected"]);
    assert_eq!(evs[0].request_id, rid);
    match &evs[0].event {
        Event::RequestRejected(e) => assert_eq!(e.code, ErrorCode::ReviewBlocking),
        other => panic!("{other:?}"),
    }
    tokio::task::yield_now().await;
    assert_eq!(
        h.model.calls(),
        0,
        "a blocked request never reaches the model"
    );
    assert!(h
        .kernel
        .session_handle(&h.sid)
        .unwrap()
        .state()
        .active_request_id
        .is_none());

    // A non-blocking review does not refuse; resolving the blocking one unblocks.
    h.ok(resolve(ReviewDecision::Approved)).await;
    let (rid, _) = h.run(send("go", None)).await;
    let evs = h.finish(&rid).await;
    assert_eq!(evs[0].type_name(), "request.accepted");
    assert_eq!(h.model.calls(), 1);
    check_sequences(&h.log);
}

#[tokio::test]
async fn host_patches_are_applied_atomically_or_refused() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(ws.path().join("old.txt"), "bye\n").unwrap();
    let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;

    let env = h
        .ok(propose(&[
            ("a.txt", Some("one\n2\nthree\n")),
            ("dir/new.txt", Some("fresh\n")),
            ("old.txt", None),
        ]))
        .await;
    let id = patch_id(&env);
    match &env.event {
        Event::PatchProposed(p) => {
            let ops: Vec<PatchOp> = p.patch.files.iter().map(|f| f.op).collect();
            assert_eq!(ops, [PatchOp::Modify, PatchOp::Create, PatchOp::Delete]);
            assert_eq!(
                (p.patch.files[0].stats.added, p.patch.files[0].stats.removed),
                (2, 1)
            );
            assert!(p.patch.files[0].diff.contains("+three"));
            assert_eq!(p.patch.stats.file_count, 3);
            assert_eq!(p.patch.status, PatchStatus::Pending);
            assert_eq!(p.patch.origin, "host");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.file("a.txt").as_deref(),
        Some("one\ntwo\n"),
        "nothing written yet"
    );

    // A file changed since the proposal: the whole patch is refused and stays pending.
    std::fs::write(ws.path().join("old.txt"), "edited\n").unwrap();
    let e = h
        .err(CommandPayload::PatchApply(PatchApply {
            patch_id: id.clone(),
        }))
        .await;
    assert_eq!(e.code, ErrorCode::PatchConflict);
    assert_eq!(h.file("a.txt").as_deref(), Some("one\ntwo\n"));
    assert!(h.file("dir/new.txt").is_none());
    std::fs::write(ws.path().join("old.txt"), "bye\n").unwrap();
    match h
        .ok(CommandPayload::PatchApply(PatchApply {
            patch_id: id.clone(),
        }))
        .await
        .event
    {
        Event::PatchApplied(p) => assert_eq!(p.patch.status, PatchStatus::Applied),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.file("a.txt").as_deref(), Some("one\n2\nthree\n"));
    assert_eq!(h.file("dir/new.txt").as_deref(), Some("fresh\n"));
    assert!(h.file("old.txt").is_none());
    // Resolved patches are gone from the pending set.
    let e = h
        .err(CommandPayload::PatchApply(PatchApply {
            patch_id: id.clone(),
        }))
        .await;
    assert_eq!(e.code, ErrorCode::PatchNotFound);
    let e = h
        .err(CommandPayload::PatchReject(PatchReject {
            patch_id: "patch_nope".into(),
            reason: None,
        }))
        .await;
    assert_eq!(e.code, ErrorCode::PatchNotFound);

    // Bad proposals.
    assert_eq!(
        h.err(propose(&[("../escape.txt", Some("x"))])).await.code,
        ErrorCode::PathOutsideWorkspace
    );
    assert_eq!(
        h.err(propose(&["/etc/passwd"].map(|p| (p, Some("x")))))
            .await
            .code,
        ErrorCode::PathOutsideWorkspace
    );
    assert_eq!(h.err(propose(&[])).await.code, ErrorCode::RequestInvalid);
    assert_eq!(
        h.err(propose(&[("ghost.txt", None)])).await.code,
        ErrorCode::RequestInvalid
    );
    assert_eq!(
        h.err(propose(&[("a.txt", Some("x")), ("./a.txt", Some("y"))]))
            .await
            .code,
        ErrorCode::RequestInvalid
    );
    assert_eq!(
        h.err(propose(&[("dir", Some("x"))])).await.code,
        ErrorCode::RequestInvalid
    );
    assert!(!ws.path().parent().unwrap().join("escape.txt").exists());

    // Reject, then the summary.
    let id2 = patch_id(&h.ok(propose(&[("b.txt", Some("b\n"))])).await);
    let id3 = patch_id(&h.ok(propose(&[("c.txt", Some("c\nc\n"))])).await);
    match h
        .ok(CommandPayload::PatchReject(PatchReject {
            patch_id: id2.clone(),
            reason: Some("not now".into()),
        }))
        .await
        .event
    {
        Event::PatchRejected(p) => {
            assert_eq!(p.patch.status, PatchStatus::Rejected);
            assert_eq!(p.patch.reason.as_deref(), Some("not now"));
        }
        other => panic!("{other:?}"),
    }
    assert!(h.file("b.txt").is_none());
    match h
        .ok(CommandPayload::PatchSummary(PatchSummaryCmd {}))
        .await
        .event
    {
        Event::PatchSummary(s) => {
            let pending: Vec<&str> = s.pending.iter().map(|p| p.patch_id.as_str()).collect();
            let history: Vec<&str> = s.history.iter().map(|p| p.patch_id.as_str()).collect();
            assert_eq!(pending, [id3.as_str()]);
            assert_eq!(history, [id.as_str(), id2.as_str()]);
            assert_eq!((s.totals.file_count, s.totals.added), (1, 2));
        }
        other => panic!("{other:?}"),
    }
    check_sequences(&h.log);
}

#[tokio::test]
async fn patch_preview_turns_edits_into_pending_patches() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("lib.rs"), "fn a() {}\n").unwrap();
    let turns = vec![
        Turn::Call(
            "edit_file",
            serde_json::json!({"path": "lib.rs", "edits": [{"oldText": "fn a() {}", "newText": "fn b() {}"}]}),
        ),
        Turn::Call(
            "write_file",
            serde_json::json!({"path": "new.rs", "content": "x\n"}),
        ),
        Turn::Call(
            "write_file",
            serde_json::json!({"path": "../out.rs", "content": "x\n"}),
        ),
        Turn::Say("proposed"),
        Turn::Call(
            "write_file",
            serde_json::json!({"path": "direct.rs", "content": "d\n"}),
        ),
        Turn::Say("written"),
    ];
    let mut h = H::new(
        ws.path(),
        store.path(),
        turns,
        true,
        Some(PermissionMode::AutoEdit),
    )
    .await;
    let (rid, _) = h.run(send("change it", Some(true))).await;
    let evs = h.finish(&rid).await;
    let t = types(&evs);
    assert_eq!(
        t.iter().filter(|t| *t == "patch.proposed").count(),
        2,
        "{t:?}"
    );
    assert!(!t.contains(&"approval.requested".to_owned()));
    // Nothing was written.
    assert_eq!(h.file("lib.rs").as_deref(), Some("fn a() {}\n"));
    assert!(h.file("new.rs").is_none());
    let patches: Vec<_> = evs
        .iter()
        .filter_map(|e| match &e.event {
            Event::PatchProposed(p) => Some(p.patch.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(patches[0].files[0].op, PatchOp::Modify);
    assert_eq!(patches[0].files[0].after.as_deref(), Some("fn b() {}\n"));
    assert_eq!(patches[0].origin, "tool");
    assert_eq!(patches[0].request_id.as_deref(), Some(rid.as_str()));
    assert_eq!(patches[1].files[0].op, PatchOp::Create);
    // The model is told the change is pending; the escape fails like the tool would.
    {
        let seen = h.model.seen.lock().unwrap();
        let tool_results: Vec<(String, bool)> = seen
            .last()
            .unwrap()
            .messages
            .iter()
            .filter_map(|m| match m {
                keel_kernel::model::Message::Tool {
                    content, is_error, ..
                } => Some((content.clone(), *is_error)),
                _ => None,
            })
            .collect();
        assert!(tool_results[0].0.contains("pending review") && !tool_results[0].1);
        assert!(tool_results[2].0.contains("PATH_OUTSIDE_WORKSPACE") && tool_results[2].1);
    }
    assert!(!ws.path().parent().unwrap().join("out.rs").exists());
    check_sequences(&evs);

    // The host applies one.
    h.ok(CommandPayload::PatchApply(PatchApply {
        patch_id: patches[0].patch_id.clone(),
    }))
    .await;
    assert_eq!(h.file("lib.rs").as_deref(), Some("fn b() {}\n"));

    // Without the flag (and the kernel default off) edits are written as before.
    let (rid, _) = h.run(send("write", None)).await;
    let evs = h.finish(&rid).await;
    assert!(!types(&evs).contains(&"patch.proposed".to_owned()));
    assert_eq!(h.file("direct.rs").as_deref(), Some("d\n"));
}

#[tokio::test]
async fn task_graph_commands_check_the_dag_and_complete_it() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;

    // No graph yet.
    assert_eq!(
        h.err(CommandPayload::TaskGraphAdvance(TaskGraphAdvance {}))
            .await
            .code,
        ErrorCode::GraphNotFound
    );
    assert_eq!(
        h.err(update("a", NodeStatus::Completed)).await.code,
        ErrorCode::GraphNotFound
    );
    assert_eq!(
        h.err(CommandPayload::TaskGraphAddNode(TaskGraphAddNode {
            node: node("a", &[])
        }))
        .await
        .code,
        ErrorCode::GraphNotFound
    );
    match h
        .ok(CommandPayload::TaskGraphState(TaskGraphStateCmd {}))
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
        h.err(CommandPayload::TaskGraphAddNode(TaskGraphAddNode {
            node: node("docs", &[])
        }))
        .await
        .code,
        ErrorCode::DuplicateNode
    );
    assert_eq!(
        h.err(CommandPayload::TaskGraphAddNode(TaskGraphAddNode {
            node: node("x", &["nope"])
        }))
        .await
        .code,
        ErrorCode::InvalidDependency
    );
    assert_eq!(
        h.err(CommandPayload::TaskGraphAddNode(TaskGraphAddNode {
            node: node("x", &["x"])
        }))
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
        .ok(CommandPayload::TaskGraphAddNode(TaskGraphAddNode {
            node: node("ship", &["test", "docs"]),
        }))
        .await
        .event
    {
        Event::TaskGraphNodeAdded(e) => assert_eq!(e.node.status, NodeStatus::Pending),
        other => panic!("{other:?}"),
    }
    match h
        .ok(CommandPayload::TaskGraphAdvance(TaskGraphAdvance {}))
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
        .ok(CommandPayload::TaskGraphAdvance(TaskGraphAdvance {}))
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
        .run(CommandPayload::TaskGraphAdvance(TaskGraphAdvance {}))
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
    assert_eq!(
        t.iter().filter(|t| *t == "tool.call.failed").count(),
        2,
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
        .ok(CommandPayload::TaskGraphState(TaskGraphStateCmd {}))
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
        h.ok(CommandPayload::TaskGraphAdvance(TaskGraphAdvance {}))
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
        .ok(CommandPayload::ReviewStatus(ReviewStatusCmd {}))
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
        .ok(CommandPayload::PatchSummary(PatchSummaryCmd {}))
        .await
        .event
    {
        Event::PatchSummary(s) => assert_eq!(s.pending[0].patch_id, patch),
        other => panic!("{other:?}"),
    }
    match h
        .ok(CommandPayload::TaskGraphState(TaskGraphStateCmd {}))
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
        .ok(CommandPayload::TaskGraphAdvance(TaskGraphAdvance {}))
        .await
        .event
    {
        Event::TaskGraphAdvanced(a) => assert_eq!(a.became_ready, ["b"]),
        other => panic!("{other:?}"),
    }
    h.ok(CommandPayload::PatchApply(PatchApply { patch_id: patch }))
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
                3 => CommandPayload::ReviewStatus(ReviewStatusCmd {}),
                4 => {
                    let name = format!("f{}.txt", rng.next(3));
                    let content = format!("{step}\n");
                    CommandPayload::PatchPropose(PatchPropose {
                        files: vec![ProposedFile {
                            path: name,
                            content: Some(content),
                        }],
                        reason: None,
                    })
                }
                5 => {
                    let pid = patches
                        .get(rng.next(patches.len() as u64 + 1) as usize)
                        .cloned()
                        .unwrap_or_else(|| "patch_x".into());
                    if rng.next(2) == 0 {
                        CommandPayload::PatchApply(PatchApply { patch_id: pid })
                    } else {
                        CommandPayload::PatchReject(PatchReject {
                            patch_id: pid,
                            reason: None,
                        })
                    }
                }
                6 => {
                    let n = rng.next(5) as usize;
                    let nodes = (0..n)
                        .map(|i| {
                            let deps: Vec<String> = (0..rng.next(3))
                                .map(|_| format!("n{}", rng.next(6)))
                                .collect();
                            NewTaskNode {
                                id: format!("n{i}"),
                                title: String::new(),
                                description: None,
                                depends_on: deps,
                                metadata: None,
                            }
                        })
                        .collect();
                    create(nodes)
                }
                7 => {
                    let deps: Vec<String> = (0..rng.next(3)).map(|_| id(&mut rng)).collect();
                    let nid = id(&mut rng);
                    CommandPayload::TaskGraphAddNode(TaskGraphAddNode {
                        node: NewTaskNode {
                            id: nid,
                            title: String::new(),
                            description: None,
                            depends_on: deps,
                            metadata: None,
                        },
                    })
                }
                8 | 9 => {
                    let s = [
                        NodeStatus::Pending,
                        NodeStatus::Ready,
                        NodeStatus::Running,
                        NodeStatus::Completed,
                        NodeStatus::Failed,
                        NodeStatus::Skipped,
                    ][rng.next(6) as usize];
                    update(&id(&mut rng), s)
                }
                10 => CommandPayload::TaskGraphAdvance(TaskGraphAdvance {}),
                _ => CommandPayload::TaskGraphState(TaskGraphStateCmd {}),
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

fn tool_results(model: &TestModel, request: usize) -> Vec<(String, bool)> {
    model.seen.lock().unwrap()[request]
        .messages
        .iter()
        .filter_map(|m| match m {
            keel_kernel::model::Message::Tool {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
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
        .ok(CommandPayload::SubAgentList(SubAgentListCmd {}))
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
        .ok(CommandPayload::SubAgentGet(SubAgentGetCmd {
            sub_agent_id: sub_id.clone(),
        }))
        .await
        .event
    {
        Event::SubAgentGet(g) => assert_eq!(g.sub_agent.sub_agent_id, sub_id),
        other => panic!("{other:?}"),
    }
    let e = h
        .err(CommandPayload::SubAgentGet(SubAgentGetCmd {
            sub_agent_id: "sub_nope".into(),
        }))
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
            keel_envelope::commands::ApprovalRespond {
                approval_id: approval,
                decision: ApprovalDecision::AllowOnce,
            },
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
        keel_envelope::commands::RequestInterrupt {},
    ))
    .await;
    let evs = h.until(&rid, "session.interrupted").await;
    let t = types(&evs);
    assert!(t.contains(&"sub-agent.failed".to_owned()), "{t:?}");
    assert!(t.contains(&"session.interrupted".to_owned()), "{t:?}");
    check_sequences(&evs);
    match h
        .ok(CommandPayload::SubAgentList(SubAgentListCmd {}))
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

#[tokio::test]
async fn harness_status_aggregates_open_sessions() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut h = H::new(ws.path(), store.path(), vec![], false, None).await;
    let rid = h.kernel.new_request_id();
    h.kernel
        .execute(Command::new(
            rid.clone(),
            None,
            CommandPayload::HarnessStatus(keel_envelope::commands::HarnessStatusCmd {}),
        ))
        .await
        .unwrap();
    let evs: Vec<Envelope> = h
        .drain()
        .into_iter()
        .filter(|e| e.request_id == rid)
        .collect();
    assert_eq!(types(&evs), ["harness.status"]);
    match &evs[0].event {
        Event::HarnessStatus(s) => {
            assert_eq!(s.sessions.len(), 1);
            assert_eq!(s.sessions[0].session_id, h.sid);
            assert!(s.sub_agents.is_empty() && s.background_tasks.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

/// Polls a background task until `done` holds (the process runs on its own).
async fn wait_task(
    h: &mut H,
    id: &str,
    done: impl Fn(&keel_envelope::ext::BackgroundTask, &[String]) -> bool,
) -> (keel_envelope::ext::BackgroundTask, Vec<String>) {
    tokio::time::timeout(Duration::from_secs(600), async {
        loop {
            let task = match h
                .ok(CommandPayload::BackgroundGet(BackgroundGetCmd {
                    task_id: id.into(),
                }))
                .await
                .event
            {
                Event::BackgroundGet(b) => b.task,
                other => panic!("{other:?}"),
            };
            let lines = match h
                .ok(CommandPayload::BackgroundHistory(BackgroundHistoryCmd {
                    task_id: id.into(),
                }))
                .await
                .event
            {
                Event::BackgroundHistory(b) => b.lines,
                other => panic!("{other:?}"),
            };
            if done(&task, &lines) {
                return (task, lines);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the background task never got there")
}

fn started_task(evs: &[Envelope]) -> Vec<String> {
    evs.iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallCompleted(c) if c.tool_name == "run_shell" => c
                .result
                .get("taskId")
                .and_then(|v| v.as_str())
                .map(str::to_owned),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn background_tasks_run_report_and_stop() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let turns = vec![
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "echo started; sleep 600", "background": true}),
        ),
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "echo out; exit 3", "background": true}),
        ),
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "sleep 600", "background": true}),
        ),
        Turn::Say("started them"),
    ];
    let mut h = H::new(
        ws.path(),
        store.path(),
        turns,
        true,
        Some(PermissionMode::Auto),
    )
    .await;
    let (rid, _) = h.run(send("run things", None)).await;
    let evs = h.finish(&rid).await;
    let ids = started_task(&evs);
    assert_eq!(ids.len(), 3, "{:?}", types(&evs));
    let results = tool_results(&h.model, 3);
    assert!(
        results[0].0.contains("Started background task"),
        "{results:?}"
    );

    let (task, lines) = wait_task(&mut h, &ids[0], |_, l| l.iter().any(|x| x == "started")).await;
    assert_eq!(task.status, BackgroundStatus::Running);
    assert_eq!(lines, ["started"]);
    let (task, _) = wait_task(&mut h, &ids[1], |t, _| {
        t.status != BackgroundStatus::Running
    })
    .await;
    assert_eq!(
        (task.status, task.exit_code),
        (BackgroundStatus::Exited, Some(3))
    );
    assert_eq!(task.output_tail, "out");

    match h
        .ok(CommandPayload::BackgroundStop(BackgroundStopCmd {
            task_id: ids[0].clone(),
        }))
        .await
        .event
    {
        Event::BackgroundStopped(b) => {
            assert_eq!(b.task.status, BackgroundStatus::Stopped);
            assert!(b.task.ended_at.is_some());
        }
        other => panic!("{other:?}"),
    }
    match h
        .ok(CommandPayload::BackgroundList(BackgroundListCmd {}))
        .await
        .event
    {
        Event::BackgroundList(l) => {
            let st: Vec<BackgroundStatus> = l.tasks.iter().map(|t| t.status).collect();
            assert_eq!(
                st,
                [
                    BackgroundStatus::Stopped,
                    BackgroundStatus::Exited,
                    BackgroundStatus::Running
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    for payload in [
        CommandPayload::BackgroundGet(BackgroundGetCmd {
            task_id: "bg_nope".into(),
        }),
        CommandPayload::BackgroundHistory(BackgroundHistoryCmd {
            task_id: "bg_nope".into(),
        }),
        CommandPayload::BackgroundStop(BackgroundStopCmd {
            task_id: "bg_nope".into(),
        }),
    ] {
        assert_eq!(h.err(payload).await.code, ErrorCode::BackgroundTaskNotFound);
    }

    // Closing the session stops what still runs.
    h.kernel.close_session(&h.sid).await.unwrap();
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
    let statuses: Vec<&str> = state["extensions"]["background"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["stopped", "exited", "stopped"]);
}

#[tokio::test]
async fn background_output_survives_invalid_utf8_and_long_lines() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    // Invalid UTF-8 on the second line, then a 20,000-byte line, then more lines: the
    // whole output is read (no SIGPIPE), long lines are cut, bad bytes replaced.
    let script = "printf 'one\\n\\377\\376bad\\n'; head -c 20000 /dev/zero | tr '\\0' x; echo; \
                  i=0; while [ $i -lt 300 ]; do echo line$i; i=$((i+1)); done; echo done\n";
    std::fs::write(ws.path().join("gen.sh"), script).unwrap();
    let turns = vec![
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "sh gen.sh", "background": true}),
        ),
        Turn::Say("started"),
    ];
    let mut h = H::new(
        ws.path(),
        store.path(),
        turns,
        true,
        Some(PermissionMode::Auto),
    )
    .await;
    let (rid, _) = h.run(send("run it", None)).await;
    let evs = h.finish(&rid).await;
    let ids = started_task(&evs);
    assert_eq!(ids.len(), 1, "{:?}", types(&evs));
    let (task, lines) = wait_task(&mut h, &ids[0], |t, _| {
        t.status != BackgroundStatus::Running
    })
    .await;
    assert_eq!(
        (task.status, task.exit_code),
        (BackgroundStatus::Exited, Some(0)),
        "{lines:?}"
    );
    assert_eq!(lines[0], "one");
    assert_eq!(lines[1], "\u{fffd}\u{fffd}bad");
    assert!(
        lines[2].starts_with(&"x".repeat(8192)),
        "{}",
        &lines[2][..20]
    );
    assert!(
        lines[2].ends_with("[line truncated at 8192 bytes; 11808 more dropped]"),
        "{}",
        &lines[2][8000..]
    );
    assert_eq!(lines[3], "line0");
    assert_eq!(lines.last().map(String::as_str), Some("done"));
    assert_eq!(lines.len(), 3 + 300 + 1);
}

#[tokio::test]
async fn background_tasks_stop_at_their_time_limit() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let token = format!("6{}.25", std::process::id());
    let command = format!("echo started; sleep {token} & sleep {token}");
    let turns = vec![
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": command, "background": true, "timeoutMs": 500}),
        ),
        Turn::Call(
            "run_shell",
            serde_json::json!({"command": "true", "background": true, "timeoutMs": 3_600_001}),
        ),
        Turn::Say("started"),
    ];
    let mut h = H::new(
        ws.path(),
        store.path(),
        turns,
        true,
        Some(PermissionMode::Auto),
    )
    .await;
    let (rid, _) = h.run(send("run it", None)).await;
    let evs = h.finish(&rid).await;
    let ids = started_task(&evs);
    assert_eq!(ids.len(), 1, "the second call has a bad time limit");
    let failed: Vec<&ErrorPayload> = evs
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallFailed(f) => Some(&f.error),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].code, ErrorCode::ToolArgumentsInvalid);
    assert_eq!(failed[0].details["field"], "timeoutMs");
    let (task, lines) = wait_task(&mut h, &ids[0], |t, _| {
        t.status != BackgroundStatus::Running
    })
    .await;
    assert_eq!(task.status, BackgroundStatus::Stopped);
    assert_eq!(lines.first().map(String::as_str), Some("started"));
    assert!(
        lines
            .last()
            .is_some_and(|l| l.contains("timed out after 500 ms")),
        "{lines:?}"
    );
    // Nothing it started survives (a SIGKILL'd process may take a moment to go).
    let alive = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                let p = e.path();
                let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
                let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
                String::from_utf8_lossy(&cmd).contains(&token)
                    && !stat
                        .rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
            })
            .count()
    };
    for _ in 0..500 {
        if alive() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(alive(), 0, "a process of the timed-out task survived");
}
