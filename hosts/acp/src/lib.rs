//! Keel as an Agent Client Protocol (ACP) agent, protocol version 1.
//!
//! JSON-RPC 2.0 over newline-delimited streams: one message per line on the output,
//! nothing else. The server holds no agent logic: requests become kernel commands,
//! and kernel envelopes become `session/update` notifications and
//! `session/request_permission` requests (see `docs/acp.md`). It never sends `fs/*`
//! or `terminal/*` requests: Keel's tools work on the workspace themselves.

mod translate;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_envelope::commands::CommandPayload;
use keel_envelope::events::ApprovalRequested;
use keel_envelope::types::{ApprovalDecision, Cursor, PermissionMode, StopReason};
use keel_envelope::{Envelope, ErrorCode, ErrorPayload, Event};
use keel_kernel::{EventStream, Kernel, SessionHandle, SessionOptions};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use translate::{diff_contents, iso8601, modes_state, tool_kind, Translator};

/// The ACP protocol version spoken.
pub const PROTOCOL_VERSION: u64 = 1;

/// JSON-RPC error codes.
pub mod codes {
    /// The line is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON is not a request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The kernel failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// A session (or another resource) does not exist.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
}

/// Options of an ACP server.
#[derive(Debug, Clone, Default)]
pub struct AcpOptions {
    /// Largest accepted input line in bytes (default 16 MiB).
    pub max_line_bytes: Option<usize>,
}

/// A JSON-RPC error.
#[derive(Debug, Clone)]
struct RpcError {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn params(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_PARAMS, message)
    }

    fn to_value(&self) -> Value {
        let mut e = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        e
    }
}

impl From<ErrorPayload> for RpcError {
    fn from(e: ErrorPayload) -> Self {
        let code = match e.code {
            ErrorCode::SessionNotFound => codes::RESOURCE_NOT_FOUND,
            ErrorCode::RequestInvalid => codes::INVALID_PARAMS,
            _ => codes::INTERNAL_ERROR,
        };
        Self {
            code,
            message: e.message.clone(),
            data: serde_json::to_value(&e).ok(),
        }
    }
}

type RpcResult = Result<Value, RpcError>;

/// How a prompt ended.
#[derive(Debug)]
enum PromptEnd {
    Stop(&'static str, Option<Value>),
    Failed(ErrorPayload),
}

#[derive(Debug, Default)]
struct SessState {
    /// Prompt requests waiting for their end, by kernel request id.
    waiters: HashMap<String, oneshot::Sender<PromptEnd>>,
    /// Ends that arrived before their waiter.
    ended: HashMap<String, PromptEnd>,
    /// The last error of each request.
    errors: HashMap<String, ErrorPayload>,
    /// Calls the client rejected with `reject_always`: (tool, command or target).
    denies: HashSet<String>,
    /// First event of a command's stream, for extension methods.
    event_waiters: HashMap<String, oneshot::Sender<Envelope>>,
}

#[derive(Debug)]
struct Sess {
    handle: SessionHandle,
    workspace: PathBuf,
    state: Mutex<SessState>,
    stop: CancellationToken,
}

impl Sess {
    fn st(&self) -> std::sync::MutexGuard<'_, SessState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finish(&self, rid: &str, end: PromptEnd) {
        let mut st = self.st();
        match st.waiters.remove(rid) {
            Some(tx) => {
                let _ = tx.send(end);
            }
            None => {
                st.ended.insert(rid.to_owned(), end);
            }
        }
    }
}

struct Host {
    kernel: Kernel,
    out: mpsc::Sender<String>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Value>>>>,
    sessions: Mutex<HashMap<String, Arc<Sess>>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

fn parse<T: for<'de> Deserialize<'de>>(params: Value) -> Result<T, RpcError> {
    let params = if params.is_null() { json!({}) } else { params };
    serde_json::from_value(params).map_err(|e| RpcError::params(format!("invalid params: {e}")))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitializeParams {
    protocol_version: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewSessionParams {
    cwd: String,
    #[serde(default)]
    mcp_servers: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoadSessionParams {
    session_id: String,
    #[serde(default)]
    cwd: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionIdParams {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptParams {
    session_id: String,
    prompt: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetModeParams {
    session_id: String,
    mode_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListParams {
    #[serde(default)]
    cwd: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplayParams {
    session_id: String,
    #[serde(default)]
    cursor: Option<Cursor>,
}

/// The text the kernel receives for an ACP prompt.
fn prompt_text(blocks: &[Value]) -> Result<String, RpcError> {
    let mut text = String::new();
    for (i, b) in blocks.iter().enumerate() {
        let piece = match b.get("type").and_then(Value::as_str) {
            Some("text") => b
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| RpcError::params(format!("prompt[{i}]: text block without text")))?,
            Some("resource_link") => {
                let uri = b.get("uri").and_then(Value::as_str).unwrap_or("");
                let name = b.get("name").and_then(Value::as_str).unwrap_or(uri);
                format!("[{name}]({uri})")
            }
            Some("resource") => {
                let r = b.get("resource").cloned().unwrap_or(Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("");
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => format!("<context uri=\"{uri}\">\n{t}\n</context>"),
                    None => {
                        return Err(RpcError::params(format!(
                            "prompt[{i}]: binary resources are not supported"
                        )))
                    }
                }
            }
            Some(other) => {
                return Err(RpcError::params(format!(
                    "prompt[{i}]: content type {other:?} is not supported (see promptCapabilities)"
                )))
            }
            None => return Err(RpcError::params(format!("prompt[{i}]: missing `type`"))),
        };
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&piece);
    }
    if text.trim().is_empty() {
        return Err(RpcError::params("the prompt is empty"));
    }
    Ok(text)
}

fn stop_reason(s: StopReason) -> Option<&'static str> {
    match s {
        StopReason::EndTurn => Some("end_turn"),
        StopReason::MaxTurns => Some("max_turn_requests"),
        StopReason::Refusal => Some("refusal"),
        StopReason::Interrupted => Some("cancelled"),
        StopReason::Error => None,
    }
}

/// The key under which a `reject_always` is remembered for the session.
fn deny_key(a: &ApprovalRequested) -> String {
    let target = a
        .command
        .clone()
        .or_else(|| {
            a.arguments
                .get("path")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| a.arguments.to_string());
    format!("{}\u{0}{}", a.tool_name, target)
}

impl Host {
    async fn send_line(&self, v: &Value) {
        let _ = self.out.send(v.to_string()).await;
    }

    async fn respond(&self, id: Value, result: RpcResult) {
        let msg = match result {
            Ok(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
            Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.to_value()}),
        };
        self.send_line(&msg).await;
    }

    async fn notify(&self, method: &str, params: Value) {
        self.send_line(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    async fn update(&self, session_id: &str, update: Value) {
        self.notify(
            "session/update",
            json!({"sessionId": session_id, "update": update}),
        )
        .await;
    }

    /// Sends a request to the client and waits for its answer.
    async fn request(&self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        self.send_line(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        rx.await
            .unwrap_or_else(|_| Err(json!({"message": "connection closed"})))
    }

    fn session(&self, id: &str) -> Result<Arc<Sess>, RpcError> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| {
                RpcError::new(
                    codes::RESOURCE_NOT_FOUND,
                    format!("session {id:?} is not open (use session/load)"),
                )
            })
    }

    fn current_mode(sess: &Sess) -> PermissionMode {
        sess.handle.state().session.permission_mode
    }

    /// Registers an open session and starts translating its events.
    fn attach(self: &Arc<Self>, handle: SessionHandle, stream: EventStream) -> Arc<Sess> {
        let sess = Arc::new(Sess {
            workspace: handle.workspace().to_path_buf(),
            handle,
            state: Mutex::new(SessState::default()),
            stop: CancellationToken::new(),
        });
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sess.handle.id().to_owned(), sess.clone());
        tokio::spawn(pump(self.clone(), sess.clone(), stream));
        sess
    }

    async fn dispatch(self: &Arc<Self>, method: &str, params: Value) -> RpcResult {
        match method {
            "initialize" => {
                let p: InitializeParams = parse(params)?;
                if !p.protocol_version.is_u64() {
                    return Err(RpcError::params("protocolVersion must be an integer"));
                }
                Ok(json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "agentCapabilities": {
                        "loadSession": true,
                        "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                        "mcpCapabilities": {"http": false, "sse": false},
                        "sessionCapabilities": {"list": {}, "close": {}, "resume": {}},
                    },
                    "agentInfo": {"name": "keel", "title": "Keel", "version": env!("CARGO_PKG_VERSION")},
                    "authMethods": [],
                }))
            }
            "authenticate" => Ok(json!({})),
            "session/new" => {
                let p: NewSessionParams = parse(params)?;
                if !p.mcp_servers.is_empty() {
                    eprintln!(
                        "keel acp: MCP servers are not supported; ignoring {} server(s)",
                        p.mcp_servers.len()
                    );
                }
                let (handle, stream) = self
                    .kernel
                    .start_session(SessionOptions {
                        workspace_path: Some(p.cwd),
                        permission_mode: None,
                        model: None,
                        title: None,
                        ..Default::default()
                    })
                    .await?;
                let sess = self.attach(handle, stream);
                Ok(json!({
                    "sessionId": sess.handle.id(),
                    "modes": modes_state(Self::current_mode(&sess)),
                }))
            }
            "session/load" => {
                let p: LoadSessionParams = parse(params)?;
                self.load(&p.session_id, p.cwd.as_deref(), true).await
            }
            "session/resume" => {
                let p: LoadSessionParams = parse(params)?;
                self.load(&p.session_id, p.cwd.as_deref(), false).await
            }
            "session/list" => {
                let p: ListParams = parse(params)?;
                let sessions = self.kernel.list_sessions()?;
                let list: Vec<Value> = sessions
                    .into_iter()
                    .filter(|s| p.cwd.as_deref().is_none_or(|c| same_dir(c, &s.workspace)))
                    .map(|s| {
                        let mut v = json!({
                            "sessionId": s.session_id,
                            "cwd": s.workspace,
                            "updatedAt": iso8601(s.updated_at),
                            "_meta": {"keel": {"state": s.state, "permissionMode": s.permission_mode, "model": s.model}},
                        });
                        if let Some(t) = s.title {
                            v["title"] = json!(t);
                        }
                        v
                    })
                    .collect();
                Ok(json!({"sessions": list}))
            }
            "session/close" => {
                let p: SessionIdParams = parse(params)?;
                let sess = self.session(&p.session_id)?;
                sess.handle.close().await?;
                sess.stop.cancel();
                self.sessions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&p.session_id);
                Ok(json!({}))
            }
            "session/set_mode" => {
                let p: SetModeParams = parse(params)?;
                let sess = self.session(&p.session_id)?;
                let mode = PermissionMode::parse(&p.mode_id).ok_or_else(|| {
                    RpcError::params(format!(
                        "unknown mode {:?}: use ask, auto-edit, auto or plan",
                        p.mode_id
                    ))
                })?;
                sess.handle.set_mode(mode).await?;
                Ok(json!({}))
            }
            "session/prompt" => {
                // Answered by `start_prompt` and `finish_prompt`.
                let (sess, rid, wait) = self.start_prompt(params).await?;
                finish_prompt(sess, rid, wait).await
            }
            "_keel/replay" => {
                let p: ReplayParams = parse(params)?;
                let sess = self.session(&p.session_id)?;
                let log = self.log(&p.session_id)?;
                let start = match &p.cursor {
                    None => 0,
                    Some(c) => {
                        log.iter()
                            .position(|e| e.request_id == c.request_id && e.sequence == c.sequence)
                            .ok_or_else(|| {
                                RpcError::params("the cursor is not in the session's log")
                            })?
                            + 1
                    }
                };
                let mut t = Translator::new(sess.workspace.clone());
                let mut sent = 0u64;
                for env in &log[start..] {
                    for u in t.translate(env, true) {
                        self.update(&p.session_id, u).await;
                        sent += 1;
                    }
                }
                let last = log
                    .last()
                    .map(|e| json!({"requestId": e.request_id, "sequence": e.sequence}));
                Ok(json!({
                    "replayedEvents": log.len() - start,
                    "updates": sent,
                    "lastCursor": last,
                    "events": log[start..].iter().map(|e| serde_json::to_value(e).unwrap_or(Value::Null)).collect::<Vec<_>>(),
                }))
            }
            "_keel/session_state" => {
                let p: SessionIdParams = parse(params)?;
                let sess = self.session(&p.session_id)?;
                Ok(serde_json::to_value(sess.handle.state()).unwrap_or(Value::Null))
            }
            "_keel/task_graph" => {
                let p: SessionIdParams = parse(params)?;
                let sess = self.session(&p.session_id)?;
                let env = self
                    .command_event(
                        &sess,
                        CommandPayload::TaskGraphState(
                            keel_envelope::commands::TaskGraphStateCmd {},
                        ),
                    )
                    .await?;
                Ok(env.event.payload_value())
            }
            other => Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("method {other:?} not found"),
            )),
        }
    }

    /// Sends a prompt to the kernel; the caller then waits with [`finish_prompt`].
    /// Runs in the reader's order, so a later `session/cancel` always finds it.
    async fn start_prompt(&self, params: Value) -> Result<(Arc<Sess>, String, Wait), RpcError> {
        let p: PromptParams = parse(params)?;
        let sess = self.session(&p.session_id)?;
        let text = prompt_text(&p.prompt)?;
        let rid = sess.handle.send(text).await?;
        let wait = {
            let mut st = sess.st();
            match st.ended.remove(&rid) {
                Some(end) => Wait::Ended(end),
                None => {
                    let (tx, rx) = oneshot::channel();
                    st.waiters.insert(rid.clone(), tx);
                    Wait::Pending(rx)
                }
            }
        };
        Ok((sess, rid, wait))
    }

    /// Runs a session command and returns the first event answering it.
    async fn command_event(
        &self,
        sess: &Sess,
        payload: CommandPayload,
    ) -> Result<Envelope, RpcError> {
        let rid = self.kernel.new_request_id();
        let (tx, rx) = oneshot::channel();
        sess.st().event_waiters.insert(rid.clone(), tx);
        let cmd =
            keel_envelope::Command::new(rid.clone(), Some(sess.handle.id().to_owned()), payload);
        if let Err(e) = self.kernel.execute(cmd).await {
            sess.st().event_waiters.remove(&rid);
            return Err(e.into());
        }
        match tokio::time::timeout(Duration::from_secs(10), rx).await {
            Ok(Ok(env)) => Ok(env),
            _ => Err(RpcError::new(
                codes::INTERNAL_ERROR,
                "the kernel did not answer the command",
            )),
        }
    }

    fn log(&self, session_id: &str) -> Result<Vec<Envelope>, RpcError> {
        Ok(self.kernel.session_log(session_id)?)
    }

    async fn load(self: &Arc<Self>, id: &str, cwd: Option<&str>, replay: bool) -> RpcResult {
        if let Some(old) = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            old.stop.cancel();
        }
        let (handle, stream) = self.kernel.resume_session(id, None).await?;
        if let Some(c) = cwd {
            if !same_dir(c, &handle.workspace().display().to_string()) {
                eprintln!(
                    "keel acp: session {id} was created in {}, not {c}; keeping its workspace",
                    handle.workspace().display()
                );
            }
        }
        let sess = self.attach(handle, stream);
        if replay {
            let log = self.log(id)?;
            let mut t = Translator::new(sess.workspace.clone());
            for env in &log {
                for u in t.translate(env, true) {
                    self.update(id, u).await;
                }
            }
        }
        Ok(json!({"modes": modes_state(Self::current_mode(&sess))}))
    }

    /// Answers an approval the kernel asked for, through the client.
    async fn ask_permission(self: Arc<Self>, sess: Arc<Sess>, a: ApprovalRequested) {
        let key = deny_key(&a);
        if sess.st().denies.contains(&key) {
            let _ = sess
                .handle
                .respond_approval(&a.approval_id, ApprovalDecision::Deny)
                .await;
            return;
        }
        let mut options =
            vec![json!({"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"})];
        if a.decisions.contains(&ApprovalDecision::AllowSession) {
            options.push(json!({"optionId": "allow_session", "name": "Allow for this session", "kind": "allow_always"}));
        }
        options.push(json!({"optionId": "deny", "name": "Reject", "kind": "reject_once"}));
        options.push(json!({"optionId": "deny_always", "name": "Reject for this session", "kind": "reject_always"}));
        let params = json!({
            "sessionId": sess.handle.id(),
            "toolCall": translate::permission_tool_call(&sess.workspace, &a),
            "options": options,
            "_meta": {"keel": {
                "approvalId": a.approval_id,
                "reason": a.reason,
                "riskLevel": a.risk_level,
                "actionType": a.action_type,
                "command": a.command,
                "expiresAt": a.expires_at,
            }},
        });
        let answer = self.request("session/request_permission", params).await;
        let option = answer.ok().and_then(|v| {
            let o = v.get("outcome")?;
            match o.get("outcome").and_then(Value::as_str) {
                Some("selected") => o.get("optionId").and_then(Value::as_str).map(str::to_owned),
                _ => None,
            }
        });
        let decision = match option.as_deref() {
            Some("allow_once") => ApprovalDecision::AllowOnce,
            Some("allow_session") => ApprovalDecision::AllowSession,
            Some("deny_always") => {
                sess.st().denies.insert(key);
                ApprovalDecision::Deny
            }
            // reject_once, cancelled, an unknown option or an error: deny.
            _ => ApprovalDecision::Deny,
        };
        // After an interrupt the approval is already released; the kernel then
        // answers APPROVAL_NOT_FOUND, which is expected.
        let _ = sess.handle.respond_approval(&a.approval_id, decision).await;
    }
}

impl Host {
    /// Offers a question's candidate answers as permission options (ACP has no
    /// question request); declining answers that nobody answered.
    async fn ask_question(
        self: Arc<Self>,
        sess: Arc<Sess>,
        q: keel_envelope::events::AskRequested,
    ) {
        let mut options: Vec<Value> = q
            .candidates
            .iter()
            .enumerate()
            .map(|(i, c)| json!({"optionId": format!("answer_{i}"), "name": c, "kind": "allow_once"}))
            .collect();
        options
            .push(json!({"optionId": "decline", "name": "Do not answer", "kind": "reject_once"}));
        let params = json!({
            "sessionId": sess.handle.id(),
            "toolCall": {
                "toolCallId": q.tool_call_id,
                "title": q.question,
                "kind": "other",
                "status": "pending",
                "content": [{"type": "content", "content": {"type": "text", "text": q.question}}],
            },
            "options": options,
            "_meta": {"keel": {"askId": q.ask_id, "expiresAt": q.expires_at}},
        });
        let answer = self.request("session/request_permission", params).await;
        let chosen = answer.ok().and_then(|v| {
            let o = v.get("outcome")?;
            let id = o.get("optionId").and_then(Value::as_str)?;
            let i: usize = id.strip_prefix("answer_")?.parse().ok()?;
            q.candidates.get(i).cloned()
        });
        let text = chosen.unwrap_or_else(|| "(The user did not answer.)".to_owned());
        let _ = sess.handle.answer_ask(&q.ask_id, text).await;
    }

    /// Asks the client to approve a plan proposed in plan mode.
    async fn ask_plan(
        self: Arc<Self>,
        sess: Arc<Sess>,
        tool_call_id: String,
        p: keel_envelope::events::PlanApprovalRequired,
    ) {
        let mut content = String::new();
        if let Some(summary) = &p.summary {
            content.push_str(summary);
            content.push_str("\n\n");
        }
        for (i, step) in p.steps.iter().enumerate() {
            content.push_str(&format!("{}. {}\n", i + 1, step.title));
        }
        let params = json!({
            "sessionId": sess.handle.id(),
            "toolCall": {
                "toolCallId": tool_call_id,
                "title": "Approve the plan",
                "kind": "switch_mode",
                "status": "pending",
                "content": [{"type": "content", "content": {"type": "text", "text": content}}],
            },
            "options": [
                {"optionId": "approve_auto_edit", "name": "Approve, and accept edits automatically", "kind": "allow_always"},
                {"optionId": "approve_ask", "name": "Approve, and ask before edits", "kind": "allow_once"},
                {"optionId": "reject", "name": "Keep planning", "kind": "reject_once"},
            ],
            "_meta": {"keel": {"planId": p.plan_id}},
        });
        let answer = self.request("session/request_permission", params).await;
        let option = answer.ok().and_then(|v| {
            let o = v.get("outcome")?;
            match o.get("outcome").and_then(Value::as_str) {
                Some("selected") => o.get("optionId").and_then(Value::as_str).map(str::to_owned),
                _ => None,
            }
        });
        let _ = match option.as_deref() {
            Some("approve_auto_edit") => {
                sess.handle
                    .approve_plan(&p.plan_id, Some(PermissionMode::AutoEdit))
                    .await
            }
            Some("approve_ask") => {
                sess.handle
                    .approve_plan(&p.plan_id, Some(PermissionMode::Ask))
                    .await
            }
            _ => sess.handle.reject_plan(&p.plan_id, None).await,
        };
    }
}

fn same_dir(a: &str, b: &str) -> bool {
    let canon = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
    canon(a) == canon(b)
}

/// Where a prompt's end will come from.
#[derive(Debug)]
enum Wait {
    Ended(PromptEnd),
    Pending(oneshot::Receiver<PromptEnd>),
}

/// Waits for a prompt's end and builds its answer.
async fn finish_prompt(sess: Arc<Sess>, rid: String, wait: Wait) -> RpcResult {
    let end = match wait {
        Wait::Ended(end) => end,
        Wait::Pending(rx) => rx.await.unwrap_or_else(|_| {
            PromptEnd::Failed(ErrorPayload::new(
                ErrorCode::RuntimeInternalError,
                "the session closed before the prompt ended",
            ))
        }),
    };
    drop(sess);
    match end {
        PromptEnd::Stop(reason, usage) => {
            let mut r = json!({"stopReason": reason, "_meta": {"keel": {"requestId": rid}}});
            if let Some(u) = usage {
                r["usage"] = u;
            }
            Ok(r)
        }
        PromptEnd::Failed(e) => Err(e.into()),
    }
}

/// Translates one session's envelopes until it is closed or replaced.
async fn pump(host: Arc<Host>, sess: Arc<Sess>, mut stream: EventStream) {
    let mut t = Translator::new(sess.workspace.clone());
    let sid = sess.handle.id().to_owned();
    let mut plan_call: Option<String> = None;
    loop {
        let env = tokio::select! {
            biased;
            e = stream.recv() => match e { Some(e) => e, None => break },
            _ = sess.stop.cancelled() => break,
        };
        // Replayed envelopes (a resume with a cursor) are sent by `session/load`.
        if env.meta.as_ref().and_then(|m| m.replay) == Some(true) {
            continue;
        }
        for u in t.translate(&env, false) {
            host.update(&sid, u).await;
        }
        let rid = env.request_id.clone();
        if let Some(tx) = sess.st().event_waiters.remove(&rid) {
            let _ = tx.send(env.clone());
        }
        match env.event {
            Event::ApprovalRequested(a) => {
                tokio::spawn(host.clone().ask_permission(sess.clone(), a));
            }
            Event::ToolCallStarted(c) if c.tool_name == keel_kernel::PROPOSE_PLAN => {
                plan_call = Some(c.tool_call_id);
            }
            Event::AskRequested(q) => {
                tokio::spawn(host.clone().ask_question(sess.clone(), q));
            }
            Event::PlanApprovalRequired(p) => {
                let call = plan_call.clone().unwrap_or_else(|| p.plan_id.clone());
                tokio::spawn(host.clone().ask_plan(sess.clone(), call, p));
            }
            Event::Error(e) => {
                sess.st().errors.insert(rid, e);
            }
            Event::RequestRejected(e) => sess.finish(&rid, PromptEnd::Failed(e)),
            Event::SessionCompleted(c) => {
                let last_error = sess.st().errors.remove(&rid);
                let end = match stop_reason(c.stop_reason) {
                    Some(r) => PromptEnd::Stop(
                        r,
                        Some(json!({
                            "inputTokens": c.telemetry.input_tokens,
                            "outputTokens": c.telemetry.output_tokens,
                            "totalTokens": c.telemetry.input_tokens + c.telemetry.output_tokens,
                        })),
                    ),
                    None => PromptEnd::Failed(last_error.unwrap_or_else(|| {
                        ErrorPayload::new(ErrorCode::RuntimeInternalError, "the request failed")
                    })),
                };
                sess.finish(&rid, end);
            }
            Event::SessionInterrupted(i) => {
                if let Some(r) = i.interrupted_request_id {
                    sess.st().errors.remove(&r);
                    sess.finish(&r, PromptEnd::Stop("cancelled", None));
                }
            }
            _ => {}
        }
    }
}

/// Reads one line of at most `limit` bytes: `Ok(None)` at EOF, `Ok(Some(Err(n)))`
/// for an oversized line of `n` bytes (consumed to its end).
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    limit: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Result<(), usize>>> {
    buf.clear();
    let mut total = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match total {
                0 => None,
                n if n > limit => Some(Err(n)),
                _ => Some(Ok(())),
            });
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let n = chunk.len();
        total += n;
        if total <= limit + 1 {
            buf.extend_from_slice(chunk);
        }
        reader.consume(n);
        if done {
            return Ok(Some(if total > limit + 1 {
                Err(total)
            } else {
                Ok(())
            }));
        }
    }
}

/// Serves one ACP connection until the input ends; returns when everything is
/// flushed. Running requests are interrupted and the store is flushed first.
pub async fn serve<R, W>(kernel: Kernel, input: R, output: W, options: AcpOptions)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, mut out_rx) = mpsc::channel::<String>(1024);
    let writer = tokio::spawn(async move {
        let mut output = tokio::io::BufWriter::with_capacity(64 * 1024, output);
        while let Some(line) = out_rx.recv().await {
            if output.write_all(line.as_bytes()).await.is_err()
                || output.write_all(b"\n").await.is_err()
            {
                return;
            }
            if out_rx.is_empty() && output.flush().await.is_err() {
                return;
            }
        }
        let _ = output.flush().await;
    });
    let host = Arc::new(Host {
        kernel: kernel.clone(),
        out: out_tx,
        next_id: AtomicU64::new(0),
        pending: Mutex::new(HashMap::new()),
        sessions: Mutex::new(HashMap::new()),
    });
    let limit = options.max_line_bytes.unwrap_or(16 * 1024 * 1024);
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut buf = Vec::with_capacity(4096);
    loop {
        let line = match read_line(&mut reader, limit, &mut buf).await {
            Ok(None) => break,
            Err(e) => {
                eprintln!("keel acp: input failed: {e}");
                break;
            }
            Ok(Some(Err(size))) => {
                let e = RpcError::new(
                    codes::INVALID_REQUEST,
                    format!("message of {size} bytes exceeds the limit of {limit} bytes"),
                );
                host.respond(Value::Null, Err(e)).await;
                continue;
            }
            Ok(Some(Ok(()))) => &buf,
        };
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let msg: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                host.respond(
                    Value::Null,
                    Err(RpcError::new(
                        codes::PARSE_ERROR,
                        format!("parse error: {e}"),
                    )),
                )
                .await;
                continue;
            }
        };
        handle_message(&host, msg).await;
    }
    // EOF: stop running requests, flush the store, then the output.
    for sess in host
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
    {
        sess.stop.cancel();
    }
    kernel.shutdown("eof").await;
    host.pending
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
    drop(host);
    let _ = writer.await;
}

async fn handle_message(host: &Arc<Host>, msg: Value) {
    let Value::Object(obj) = msg else {
        let e = RpcError::new(codes::INVALID_REQUEST, "a message must be a JSON object");
        host.respond(Value::Null, Err(e)).await;
        return;
    };
    let id = obj.get("id").cloned();
    let valid_id = matches!(id, None | Some(Value::Number(_)) | Some(Value::String(_)));
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !valid_id {
        let e = RpcError::new(codes::INVALID_REQUEST, "not a JSON-RPC 2.0 message");
        host.respond(
            if valid_id {
                id.unwrap_or(Value::Null)
            } else {
                Value::Null
            },
            Err(e),
        )
        .await;
        return;
    }
    match obj.get("method").and_then(Value::as_str) {
        Some(method) => {
            let method = method.to_owned();
            let params = obj.get("params").cloned().unwrap_or(Value::Null);
            match id {
                Some(id) if method == "session/prompt" => {
                    // The prompt reaches the kernel now, in order; its end is awaited
                    // aside while `session/cancel` and permission answers come in.
                    match host.start_prompt(params).await {
                        Err(e) => host.respond(id, Err(e)).await,
                        Ok((sess, rid, wait)) => {
                            let host = host.clone();
                            tokio::spawn(async move {
                                let result = finish_prompt(sess, rid, wait).await;
                                host.respond(id, result).await;
                            });
                        }
                    }
                }
                Some(id) => {
                    // Everything else is answered in order.
                    let result = host.dispatch(&method, params).await;
                    host.respond(id, result).await;
                }
                None => notification(host, &method, params).await,
            }
        }
        None if obj.contains_key("method") => {
            let e = RpcError::new(codes::INVALID_REQUEST, "`method` must be a string");
            host.respond(id.unwrap_or(Value::Null), Err(e)).await;
        }
        None => {
            // A response to one of our requests.
            let Some(num) = id.as_ref().and_then(Value::as_u64) else {
                if !matches!(id, None | Some(Value::Null)) {
                    eprintln!("keel acp: response to an unknown request id {id:?}");
                }
                return;
            };
            let tx = host
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&num);
            if let Some(tx) = tx {
                let answer = match (obj.get("result"), obj.get("error")) {
                    (Some(r), _) => Ok(r.clone()),
                    (None, Some(e)) => Err(e.clone()),
                    (None, None) => Err(json!({"message": "empty response"})),
                };
                let _ = tx.send(answer);
            }
        }
    }
}

async fn notification(host: &Arc<Host>, method: &str, params: Value) {
    match method {
        "session/cancel" => {
            let Ok(p) = parse::<SessionIdParams>(params) else {
                eprintln!("keel acp: session/cancel without a sessionId");
                return;
            };
            match host.session(&p.session_id) {
                Ok(sess) => {
                    let _ = sess.handle.interrupt().await;
                }
                Err(e) => eprintln!("keel acp: session/cancel: {}", e.message),
            }
        }
        // Other notifications (including `$/cancel_request` and extensions) are
        // optional; unknown ones are ignored as JSON-RPC requires.
        other => eprintln!("keel acp: ignoring notification {other:?}"),
    }
}
