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
            spec: ToolSpec::custom(
                name,
                format!("test tool {name}"),
                serde_json::json!({"type": "object"}),
                level.clone(),
                PlanBehavior::Allowed,
                if level == PermissionLevel::Read {
                    ApprovalRequirement::Never
                } else {
                    ApprovalRequirement::Always
                },
            ),
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
    NewTaskNode::new(id, format!("task {id}"))
        .depends_on(deps.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>())
}

fn status(s: NodeStatus) -> NodeUpdates {
    NodeUpdates::new().status(s)
}

fn enter(blocking: bool) -> CommandPayload {
    CommandPayload::ReviewEnter(
        ReviewEnter::new("check the migration")
            .blocking(blocking)
            .checklist(vec!["tests pass".into()]),
    )
}

fn resolve(decision: ReviewDecision) -> CommandPayload {
    CommandPayload::ReviewResolve(ReviewResolve::new(decision).summary(Some("ok".into())))
}

fn submit(comment: Option<&str>, item: Option<(&str, bool)>) -> CommandPayload {
    CommandPayload::ReviewSubmit(
        ReviewSubmit::new()
            .comment(comment.map(str::to_owned))
            .checklist_item(item.map(|(id, done)| ChecklistUpdate::new(id).done(done))),
    )
}

fn propose(files: &[(&str, Option<&str>)]) -> CommandPayload {
    CommandPayload::PatchPropose(
        PatchPropose::new(
            files
                .iter()
                .map(|(p, c)| ProposedFile::new((*p).to_owned()).content(c.map(str::to_owned)))
                .collect::<Vec<_>>(),
        )
        .reason(Some("tidy".into())),
    )
}

fn send(message: &str, preview: Option<bool>) -> CommandPayload {
    CommandPayload::RequestSend(RequestSend::new(message).patch_preview(preview))
}

fn create(nodes: Vec<NewTaskNode>) -> CommandPayload {
    CommandPayload::TaskGraphCreate(TaskGraphCreate::new(nodes).title(Some("release".into())))
}

fn update(id: &str, s: NodeStatus) -> CommandPayload {
    CommandPayload::TaskGraphUpdateNode(TaskGraphUpdateNode::new(id, status(s)))
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
    let terminal = |s: NodeStatus| done(s.clone()) || s == NodeStatus::Failed;
    for (id, n) in &g.nodes {
        for d in &n.depends_on {
            assert!(pos[d.as_str()] < pos[id.as_str()], "topological order");
            if matches!(
                n.status,
                NodeStatus::Ready | NodeStatus::Running | NodeStatus::Completed
            ) {
                assert!(done(g.nodes[d].status.clone()), "{id} started before {d}");
            }
        }
    }
    let all = !g.nodes.is_empty() && g.nodes.values().all(|n| terminal(n.status.clone()));
    assert_eq!(
        g.status != GraphStatus::Active,
        all,
        "completed iff terminal"
    );
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

mod background;
mod graph;
mod review_patch;
mod sub_agents;
