//! MCP servers in kernel sessions: a kernel with an in-test model whose tool calls
//! reach the real test server (stdio: the `keel-mcp-test-server` binary; streamable
//! HTTP: the same server on loopback), through the gate, approvals, interrupts and
//! time limits.

#![allow(clippy::unwrap_used)]

mod errors;
mod flows;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream;
use keel_envelope::commands::{CommandPayload, SessionStart};
use keel_envelope::host::{McpServerSpec, McpServerState, McpTrust, NameValue};
use keel_envelope::types::{PermissionMode, Usage};
use keel_envelope::{Command, Envelope, Event};
use keel_kernel::mcp::{McpServerConfig, McpTransport};
use keel_kernel::model::{
    FinishReason, Message, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_kernel::{EventStream, Kernel, KernelConfig, SessionHandle};
use keel_mcp::testing::Journal;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub const SERVER: &str = env!("CARGO_BIN_EXE_keel-mcp-test-server");

/// A model that answers each call with the next scripted turn: tool calls, else
/// text. It records every request.
#[derive(Debug, Default)]
pub struct TestModel {
    turns: Mutex<VecDeque<Vec<(String, Value)>>>,
    pub seen: Mutex<Vec<ModelRequest>>,
}

impl TestModel {
    pub fn new(turns: Vec<Vec<(&str, Value)>>) -> Arc<Self> {
        let turns = turns
            .into_iter()
            .map(|t| t.into_iter().map(|(n, a)| (n.to_owned(), a)).collect())
            .collect();
        Arc::new(Self {
            turns: Mutex::new(turns),
            seen: Mutex::new(Vec::new()),
        })
    }

    /// The tool names offered in the `i`th request.
    pub fn offered(&self, i: usize) -> Vec<String> {
        self.seen.lock().unwrap()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// The tool results the model read in its last request.
    pub fn tool_results(&self) -> Vec<(String, bool)> {
        let seen = self.seen.lock().unwrap();
        let Some(last) = seen.last() else {
            return Vec::new();
        };
        last.messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool {
                    content, is_error, ..
                } => Some((content.clone(), *is_error)),
                _ => None,
            })
            .collect()
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
        let calls = self.turns.lock().unwrap().pop_front().unwrap_or_default();
        let mut items: Vec<Result<ModelEvent, keel_kernel::model::ModelError>> = Vec::new();
        let finish = if calls.is_empty() {
            items.push(Ok(ModelEvent::TextDelta("done".into())));
            FinishReason::EndTurn
        } else {
            FinishReason::ToolUse
        };
        for (i, (name, arguments)) in calls.into_iter().enumerate() {
            items.push(Ok(ModelEvent::ToolCall(ToolCallRequest {
                id: format!("call_{i}"),
                name,
                arguments,
            })));
        }
        items.push(Ok(ModelEvent::Usage(Usage::default())));
        items.push(Ok(ModelEvent::Finished(finish)));
        Box::pin(stream::iter(items))
    }
}

/// A stdio server of the test binary with a journal in `dir`.
pub fn stdio_server(name: &str, dir: &Path, extra: &[&str]) -> (McpServerConfig, Journal) {
    let journal = dir.join(format!("{name}.journal"));
    let mut args = vec!["--journal".to_owned(), journal.display().to_string()];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let config = McpServerConfig {
        name: name.to_owned(),
        transport: McpTransport::Stdio {
            command: SERVER.to_owned(),
            args,
            env: Vec::new(),
            cwd: None,
        },
        trust: McpTrust::Ask,
        startup_timeout: None,
        call_timeout: None,
    };
    (config, Journal::File(journal))
}

/// The same server as a `session.start` entry.
pub fn stdio_spec(name: &str, journal: &Path, trust: Option<McpTrust>) -> McpServerSpec {
    let spec = McpServerSpec::new(name.to_owned())
        .command(SERVER.to_owned())
        .args(vec!["--journal".into(), journal.display().to_string()])
        .env(vec![NameValue::new("KEEL_TEST", "1")]);
    match trust {
        Some(trust) => spec.trust(trust),
        None => spec,
    }
}

#[derive(Debug)]
pub struct Harness {
    pub kernel: Kernel,
    pub model: Arc<TestModel>,
    pub dir: tempfile::TempDir,
}

impl Harness {
    pub fn new(
        turns: Vec<Vec<(&str, Value)>>,
        mode: PermissionMode,
        servers: Vec<McpServerConfig>,
    ) -> Self {
        Self::with(turns, mode, servers, |_| {})
    }

    pub fn with(
        turns: Vec<Vec<(&str, Value)>>,
        mode: PermissionMode,
        servers: Vec<McpServerConfig>,
        tune: impl FnOnce(&mut KernelConfig),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let model = TestModel::new(turns);
        let mut config = KernelConfig {
            workspace: Some(dir.path().to_path_buf()),
            permission_mode: mode,
            mcp_servers: servers,
            ..KernelConfig::default()
        };
        tune(&mut config);
        let kernel = Kernel::builder()
            .config(config)
            .memory_store()
            .model(model.clone())
            .build()
            .unwrap();
        Self { kernel, model, dir }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Starts a session with these MCP servers; returns its handle, its events and
    /// the requestId of the start.
    pub async fn start(&self, servers: Vec<McpServerSpec>) -> (SessionHandle, EventStream) {
        self.kernel
            .start_session(SessionStart::new().mcp_servers(servers))
            .await
            .unwrap()
    }
}

/// Reads events until one matches (a guard against hanging, not a timing check).
pub async fn until(events: &mut EventStream, pred: impl Fn(&Envelope) -> bool) -> Vec<Envelope> {
    let mut seen = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .unwrap_or_else(|_| panic!("no matching event; saw {:?}", types(&seen)))
            .expect("stream ended");
        let hit = pred(&env);
        seen.push(env);
        if hit {
            return seen;
        }
    }
}

pub fn types(events: &[Envelope]) -> Vec<String> {
    events.iter().map(|e| e.type_name().to_owned()).collect()
}

/// The end of request `rid`.
pub fn end_of(rid: &str) -> impl Fn(&Envelope) -> bool + '_ {
    move |e| {
        e.request_id == rid
            && matches!(
                e.event,
                Event::SessionCompleted(_) | Event::SessionInterrupted(_)
            )
    }
}

/// Waits until no server of the session is starting.
pub async fn settled(session: &SessionHandle) {
    for _ in 0..3000 {
        if session
            .mcp_servers()
            .iter()
            .all(|s| s.state != McpServerState::Starting)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("servers still starting: {:?}", session.mcp_servers());
}

/// Waits (bounded) until the journal has `line`.
pub async fn journal_has(journal: &Journal, line: &str) -> bool {
    for _ in 0..1000 {
        if journal.lines().iter().any(|l| l == line) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Runs a command on the kernel and returns its requestId.
pub async fn run(kernel: &Kernel, session: &SessionHandle, payload: CommandPayload) -> String {
    let rid = kernel.new_request_id();
    let _ = kernel
        .execute(Command::new(
            rid.clone(),
            Some(session.id().to_owned()),
            payload,
        ))
        .await;
    rid
}
