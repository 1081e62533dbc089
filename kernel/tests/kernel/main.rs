//! Kernel behaviour through its public API, with an in-test model that replays turns
//! and in-test tools.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream;
use keel_envelope::commands::{CommandPayload, RequestSend, WhenBusy};
use keel_envelope::ids::{ManualClock, SeqIdGen};
use keel_envelope::types::{ApprovalDecision, PermissionLevel, PermissionMode, StopReason, Usage};
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event, SequenceChecker};
use keel_kernel::model::{
    FinishReason, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_kernel::{EventStream, Kernel, SessionHandle, SessionOptions};
use keel_tools::{ApprovalRequirement, PlanBehavior, Tool, ToolContext, ToolSpec};
use tokio_util::sync::CancellationToken;

/// One scripted model turn.
#[derive(Debug, Clone, Default)]
struct Turn {
    text: Vec<&'static str>,
    calls: Vec<(&'static str, serde_json::Value)>,
    delay: Option<Duration>,
    fail: bool,
}

fn say(text: &'static str) -> Turn {
    Turn {
        text: vec![text],
        ..Turn::default()
    }
}

fn call(name: &'static str, args: serde_json::Value) -> Turn {
    Turn {
        calls: vec![(name, args)],
        ..Turn::default()
    }
}

#[derive(Debug, Default)]
struct TestModel {
    turns: Mutex<VecDeque<Turn>>,
    seen: Mutex<Vec<ModelRequest>>,
    window: Option<u64>,
}

impl TestModel {
    fn new(turns: Vec<Turn>) -> Arc<Self> {
        Arc::new(Self {
            turns: Mutex::new(turns.into()),
            seen: Mutex::new(Vec::new()),
            window: None,
        })
    }
    fn push(&self, turns: Vec<Turn>) {
        self.turns.lock().unwrap().extend(turns);
    }
}

impl Model for TestModel {
    fn id(&self) -> String {
        "test:model".into()
    }
    fn context_window(&self) -> u64 {
        self.window.unwrap_or(100_000)
    }
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        self.seen.lock().unwrap().push(request);
        let turn = self
            .turns
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| say("done"));
        Box::pin(stream::unfold(
            Some((turn, 0usize, cancel)),
            |state| async move {
                let (turn, step, cancel) = state?;
                if step == 0 {
                    if let Some(d) = turn.delay {
                        tokio::select! {
                            _ = tokio::time::sleep(d) => {}
                            _ = cancel.cancelled() => return None,
                        }
                    }
                    if turn.fail {
                        let e = ErrorPayload::new(ErrorCode::ModelError, "provider exploded");
                        return Some((Err(keel_kernel::model::ModelError(e)), None));
                    }
                }
                let texts = turn.text.len();
                let calls = turn.calls.len();
                let item = if step < texts {
                    ModelEvent::TextDelta(turn.text[step].to_owned())
                } else if step < texts + calls {
                    let (name, args) = &turn.calls[step - texts];
                    ModelEvent::ToolCall(ToolCallRequest {
                        id: format!("call_{step}"),
                        name: (*name).to_owned(),
                        arguments: args.clone(),
                    })
                } else if step == texts + calls {
                    ModelEvent::Usage(Usage::new(10, 5, 0))
                } else if step == texts + calls + 1 {
                    ModelEvent::Finished(if calls > 0 {
                        FinishReason::ToolUse
                    } else {
                        FinishReason::EndTurn
                    })
                } else {
                    return None;
                };
                Some((Ok(item), Some((turn, step + 1, cancel))))
            },
        ))
    }
}

/// A tool that records its calls; `sleep_ms` makes it wait (cancellably).
#[derive(Debug)]
struct TestTool {
    spec: ToolSpec,
    calls: Mutex<Vec<serde_json::Value>>,
}

fn tool(name: &str, level: PermissionLevel, plan: PlanBehavior) -> Arc<TestTool> {
    Arc::new(TestTool {
        spec: ToolSpec::custom(
            name,
            format!("test tool {name}"),
            serde_json::json!({"type": "object"}),
            level.clone(),
            plan,
            if level == PermissionLevel::Read {
                ApprovalRequirement::Never
            } else {
                ApprovalRequirement::Always
            },
        ),
        calls: Mutex::new(Vec::new()),
    })
}

#[async_trait]
impl Tool for TestTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn run(
        &self,
        args: serde_json::Value,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        self.calls.lock().unwrap().push(args.clone());
        if let Some(ms) = args.get("sleep_ms").and_then(|v| v.as_u64()) {
            (ctx.progress)(keel_tools::ProgressStream::Stdout, "working\n".into());
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
                _ = ctx.cancel.cancelled() => {
                    return Err(ErrorPayload::new(ErrorCode::Interrupted, "cancelled"));
                }
            }
        }
        Ok(serde_json::json!({"ok": true, "echo": args}))
    }
}

struct Fixture {
    kernel: Kernel,
    model: Arc<TestModel>,
    reader: Arc<TestTool>,
    writer: Arc<TestTool>,
    _dir: tempfile::TempDir,
    store: tempfile::TempDir,
}

fn fixture(turns: Vec<Turn>, timeout: Duration) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    fixture_in(turns, timeout, dir, store)
}

fn fixture_in(
    turns: Vec<Turn>,
    timeout: Duration,
    dir: tempfile::TempDir,
    store: tempfile::TempDir,
) -> Fixture {
    let model = TestModel::new(turns);
    let reader = tool("peek", PermissionLevel::Read, PlanBehavior::Allowed);
    let writer = tool("poke", PermissionLevel::Write, PlanBehavior::Denied);
    let kernel = Kernel::builder()
        .workspace(dir.path())
        .model(model.clone())
        .store_dir(store.path())
        .clock(Arc::new(ManualClock::new(1_775_600_000_000, 1)))
        .ids(Arc::new(SeqIdGen::default()))
        .approval_timeout(timeout)
        .builtin_tools(false)
        .tool(reader.clone())
        .tool(writer.clone())
        .build()
        .unwrap();
    Fixture {
        kernel,
        model,
        reader,
        writer,
        _dir: dir,
        store,
    }
}

async fn start(f: &Fixture) -> (SessionHandle, EventStream) {
    f.kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            title: Some("t".into()),
        })
        .await
        .unwrap()
}

/// A new kernel (no built-in tools) over the store of an earlier one, as after a
/// restart.
fn reopen(ws: &std::path::Path, store: &std::path::Path, model: Arc<TestModel>) -> Kernel {
    Kernel::builder()
        .workspace(ws)
        .model(model)
        .store_dir(store)
        .builtin_tools(false)
        .build()
        .unwrap()
}

/// Reads envelopes until one of type `ty` arrives; returns all read (inclusive).
async fn until(events: &mut EventStream, ty: &str) -> Vec<Envelope> {
    let mut out = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(600), events.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {ty}; got {:?}", types(&out)))
            .expect("stream ended");
        let done = env.type_name() == ty;
        out.push(env);
        if done {
            return out;
        }
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

fn approval_id(envs: &[Envelope]) -> String {
    envs.iter()
        .find_map(|e| match &e.event {
            Event::ApprovalRequested(a) => Some(a.approval_id.clone()),
            _ => None,
        })
        .expect("approval.requested")
}

fn small_window_kernel(
    turns: Vec<Turn>,
    window: u64,
    dir: &std::path::Path,
) -> (Kernel, Arc<TestModel>) {
    let model = Arc::new(TestModel {
        turns: Mutex::new(turns.into()),
        seen: Mutex::new(Vec::new()),
        window: Some(window),
    });
    let kernel = Kernel::builder()
        .workspace(dir)
        .model(model.clone())
        .memory_store()
        .builtin_tools(false)
        .build()
        .unwrap();
    (kernel, model)
}

/// The state read just after `ended`'s terminal event, with `next` sent behind it:
/// never still `ended`. `next` runs, is handed over to (first in the queue), or, when
/// this reader lags behind the session on a busy machine, has ended too (so it is no
/// longer queued); with no `next` the session is idle.
fn assert_not_still_running(
    state: &keel_envelope::events::SessionStateSnapshot,
    ended: &str,
    next: Option<&str>,
    round: usize,
) {
    use keel_envelope::types::SessionState;
    assert_ne!(
        state.active_request_id.as_deref(),
        Some(ended),
        "round {round}"
    );
    let Some(next) = next else {
        assert_eq!(state.session.state, SessionState::Idle, "round {round}");
        assert_eq!(state.active_request_id, None, "round {round}");
        return;
    };
    if state.session.state == SessionState::Running {
        match state.active_request_id.as_deref() {
            Some(active) => assert_eq!(active, next, "round {round}"),
            None => assert_eq!(
                state.queued_request_ids.first().map(String::as_str),
                Some(next),
                "round {round}"
            ),
        }
    } else {
        assert!(
            !state.queued_request_ids.iter().any(|q| q == next),
            "round {round}: idle with {next} still queued"
        );
    }
}

fn opts() -> SessionOptions {
    SessionOptions {
        workspace_path: None,
        permission_mode: None,
        model: None,
        title: None,
    }
}

/// The payload of the first event of one kind, cloned: `first_event!(envs, ToolCallFailed)`.
macro_rules! first_event {
    ($envs:expr, $kind:ident) => {
        $envs.iter().find_map(|e| match &e.event {
            Event::$kind(p) => Some(p.clone()),
            _ => None,
        })
    };
}

/// The payloads of every event of one kind, cloned, in order.
macro_rules! all_events {
    ($envs:expr, $kind:ident) => {
        $envs
            .iter()
            .filter_map(|e| match &e.event {
                Event::$kind(p) => Some(p.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
}

mod bounds;
mod budget;
mod checkpoint_store;
mod compaction;
mod context;
mod history_store;
mod hooks;
mod host_tools;
mod interrupts;
mod listing;
mod persistence;
mod plans;
mod registry;
mod requests;
mod rewind;
mod roots;
mod sessions;
mod skills;
mod stop;
mod store;
mod sub_agent_worktrees;
mod watch;
mod worktree_scale;
mod worktrees;

/// Two threads that spin until dropped, competing with the kernel for the cores.
struct Busy(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Busy {
    fn start(n: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        std::hint::black_box(x);
                    }
                })
            })
            .collect();
        Self(stop, handles)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        for h in self.1.drain(..) {
            let _ = h.join();
        }
    }
}
