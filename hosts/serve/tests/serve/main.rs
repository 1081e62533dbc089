//! The daemon through its public API: real Unix sockets in temporary directories, a
//! kernel with an in-test model and tool, clients speaking the wire protocol.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream;
use keel_envelope::commands::{CommandPayload, RequestSend, SessionStart, SessionWatch};
use keel_envelope::types::{Cursor, PermissionLevel, Usage};
use keel_envelope::{codec, Envelope, ErrorPayload, Event};
use keel_kernel::model::{
    FinishReason, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_kernel::Kernel;
use keel_serve::{Client, ConnectionOptions, ServeOptions};
use keel_tools::{ApprovalRequirement, PlanBehavior, Tool, ToolContext, ToolSpec};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod connection;
mod multi;
mod remote;
mod remote_auth;
mod remote_load;
mod remote_roles;
mod roles_doc;
mod socket;

/// One model turn: text pieces, then optionally a call of `poke` (needs approval).
#[derive(Debug, Clone, Default)]
pub struct Turn {
    pub deltas: usize,
    pub poke: bool,
    /// Wait this long (cancellably) before streaming.
    pub delay: Option<Duration>,
    /// Stream at a pace a reading client keeps up with: a 1 ms pause every this many
    /// pieces.
    pub pace: Option<usize>,
    /// Pad each text piece to this many bytes.
    pub width: Option<usize>,
}

pub fn say(deltas: usize) -> Turn {
    Turn {
        deltas,
        ..Turn::default()
    }
}

pub fn poke() -> Turn {
    Turn {
        poke: true,
        ..Turn::default()
    }
}

#[derive(Debug, Default)]
pub struct TestModel {
    turns: Mutex<VecDeque<Turn>>,
}

impl Model for TestModel {
    fn id(&self) -> String {
        "test:model".into()
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    fn stream(&self, _r: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let turn = self
            .turns
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| say(1));
        let mut items: Vec<Result<ModelEvent, keel_kernel::model::ModelError>> = Vec::new();
        for i in 0..turn.deltas {
            let mut piece = format!("t{i} ");
            if let Some(w) = turn.width {
                while piece.len() < w {
                    piece.push('.');
                }
            }
            items.push(Ok(ModelEvent::TextDelta(piece)));
        }
        if turn.poke {
            items.push(Ok(ModelEvent::ToolCall(ToolCallRequest {
                id: "call_1".into(),
                name: "poke".into(),
                arguments: serde_json::json!({}),
            })));
        }
        items.push(Ok(ModelEvent::Usage(Usage::new(10, 5, 0))));
        items.push(Ok(ModelEvent::Finished(if turn.poke {
            FinishReason::ToolUse
        } else {
            FinishReason::EndTurn
        })));
        let delay = turn.delay;
        let pace = turn.pace;
        let start = stream::once(async move {
            if let Some(d) = delay {
                tokio::select! {
                    _ = tokio::time::sleep(d) => {}
                    _ = cancel.cancelled() => {}
                }
            }
        });
        Box::pin(futures::StreamExt::flat_map(start, move |()| {
            futures::StreamExt::then(
                stream::iter(items.clone().into_iter().enumerate()),
                move |(i, item)| async move {
                    if pace.is_some_and(|n| i % n == n - 1) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    item
                },
            )
        }))
    }
}

/// A write-level tool: every call asks for approval in `ask` mode.
#[derive(Debug)]
pub struct Poke(ToolSpec);

#[async_trait]
impl Tool for Poke {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(
        &self,
        _a: serde_json::Value,
        _c: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        Ok(serde_json::json!({"poked": true}))
    }
}

#[allow(missing_debug_implementations)]
pub struct Daemon {
    pub kernel: Kernel,
    pub model: Arc<TestModel>,
    pub socket: PathBuf,
    pub stop: CancellationToken,
    pub task: tokio::task::JoinHandle<keel_serve::ServeOutcome>,
    pub dir: tempfile::TempDir,
    pub _ws: tempfile::TempDir,
    pub _store: tempfile::TempDir,
}

pub fn kernel(turns: Vec<Turn>) -> (Kernel, Arc<TestModel>, tempfile::TempDir, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let model = Arc::new(TestModel {
        turns: Mutex::new(turns.into()),
    });
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(model.clone())
        .store_dir(store.path())
        .builtin_tools(false)
        .approval_timeout(Duration::from_secs(600))
        .tool(Arc::new(Poke(ToolSpec::custom(
            "poke",
            "pokes",
            serde_json::json!({"type": "object"}),
            PermissionLevel::Write,
            PlanBehavior::Denied,
            ApprovalRequirement::Always,
        ))))
        .build()
        .unwrap();
    (kernel, model, ws, store)
}

/// A private socket directory (tempdir is 0700).
pub fn socket_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

pub async fn daemon(turns: Vec<Turn>, connection: ConnectionOptions) -> Daemon {
    let (kernel, model, ws, store) = kernel(turns);
    let dir = socket_dir();
    let socket = dir.path().join("keel.sock");
    let stop = CancellationToken::new();
    let options = ServeOptions {
        socket: socket.clone(),
        connection,
        exit_when_idle: None,
    };
    let task = {
        let (k, s) = (kernel.clone(), stop.clone());
        tokio::spawn(async move { keel_serve::serve(k, options, s).await.unwrap() })
    };
    // Listening once it answers.
    for _ in 0..1000 {
        if keel_serve::answers(&socket).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Daemon {
        kernel,
        model,
        socket,
        stop,
        task,
        dir,
        _ws: ws,
        _store: store,
    }
}

pub async fn connect(path: &Path) -> (Client, mpsc::UnboundedReceiver<Envelope>) {
    let (c, ready, rx) = Client::connect(path).await.unwrap();
    assert_eq!(ready.protocol_version, keel_envelope::PROTOCOL_VERSION);
    (c, rx)
}

/// Reads envelopes until `pred` holds for one (inclusive).
pub async fn until(
    rx: &mut mpsc::UnboundedReceiver<Envelope>,
    what: &str,
    pred: impl Fn(&Envelope) -> bool,
) -> Vec<Envelope> {
    let mut out = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(600), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}; got {:?}", types(&out)))
            .unwrap_or_else(|| panic!("stream ended waiting for {what}; got {:?}", types(&out)));
        let done = pred(&env);
        out.push(env);
        if done {
            return out;
        }
    }
}

pub fn types(envs: &[Envelope]) -> Vec<String> {
    envs.iter().map(|e| e.type_name().to_owned()).collect()
}

pub fn ids(envs: &[Envelope]) -> Vec<String> {
    envs.iter().map(|e| e.event_id.clone()).collect()
}

pub fn is_replay(e: &Envelope) -> bool {
    e.meta.as_ref().and_then(|m| m.replay) == Some(true)
}

pub async fn start_session(c: &Client) -> String {
    let ans = c
        .request(None, CommandPayload::SessionStart(SessionStart::new()))
        .await
        .unwrap();
    ans.session_id.unwrap()
}

pub async fn send(c: &Client, sid: &str, text: &str) -> String {
    let ans = c
        .request(
            Some(sid),
            CommandPayload::RequestSend(RequestSend::new(text)),
        )
        .await
        .unwrap();
    ans.request_id
}

pub async fn watch(c: &Client, sid: &str, after: Option<Cursor>) -> Envelope {
    c.request(
        None,
        CommandPayload::SessionWatch(SessionWatch::new(sid).after_sequence(after)),
    )
    .await
    .unwrap()
}

pub fn completed(rid: &str) -> impl Fn(&Envelope) -> bool + '_ {
    move |e: &Envelope| e.request_id == rid && e.type_name() == "session.completed"
}

/// Two busy loops for the length of a test: races must not depend on idle cores.
#[allow(missing_debug_implementations)]
pub struct Load(
    Vec<std::thread::JoinHandle<()>>,
    Arc<std::sync::atomic::AtomicBool>,
);

pub fn cpu_load() -> Load {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let threads = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    Load(threads, stop)
}

impl Drop for Load {
    fn drop(&mut self) {
        self.1.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.0.drain(..) {
            let _ = t.join();
        }
    }
}

pub fn decode(line: &str) -> Envelope {
    codec::decode_envelope(line.as_bytes())
        .unwrap_or_else(|e| panic!("not an envelope: {line}: {}", e.message))
}

pub fn stopped_reason(e: &Envelope) -> Option<&str> {
    match &e.event {
        Event::RuntimeStopped(s) => Some(s.reason.as_str()),
        _ => None,
    }
}
