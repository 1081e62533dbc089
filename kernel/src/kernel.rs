//! The kernel: builder, the command dispatcher, and the library API for host apps.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use keel_envelope::commands::{CommandPayload, RequestSend, SessionStart};
use keel_envelope::events::{HarnessStatus, SessionList};
use keel_envelope::ids::{Clock, IdGen, IdKind, SystemClock, UlidGen};
use keel_envelope::types::{Cursor, SessionInfo};
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event, Sequencer};
use keel_tools::Tool;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::KernelConfig;
use crate::emit::{EmitCtx, Emitter, Hub};
use crate::model::Model;
use crate::session::Session;
use crate::store::{FileStore, MemoryStore, PersistedSession, Store};

/// Builds a model from its selection string (`provider:model`).
pub type ModelFactory = Arc<dyn Fn(&str) -> Result<Arc<dyn Model>, ErrorPayload> + Send + Sync>;

/// A stream of envelopes (all sessions, or one).
#[derive(Debug)]
pub struct EventStream {
    rx: mpsc::Receiver<Envelope>,
}

impl EventStream {
    /// The next envelope, or `None` when the kernel is gone.
    pub async fn recv(&mut self) -> Option<Envelope> {
        self.rx.recv().await
    }

    /// Whether no envelope is waiting.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// An envelope if one is ready now.
    pub fn try_recv(&mut self) -> Option<Envelope> {
        self.rx.try_recv().ok()
    }
}

impl Stream for EventStream {
    type Item = Envelope;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Envelope>> {
        self.rx.poll_recv(cx)
    }
}

/// Builds a [`Kernel`].
#[derive(Default)]
pub struct KernelBuilder {
    config: KernelConfig,
    model: Option<Arc<dyn Model>>,
    factory: Option<ModelFactory>,
    store: Option<Arc<dyn Store>>,
    clock: Option<Arc<dyn Clock>>,
    ids: Option<Arc<dyn IdGen>>,
    tools: Vec<Arc<dyn Tool>>,
    builtin_tools: bool,
}

impl std::fmt::Debug for KernelBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl KernelBuilder {
    /// Sets the whole configuration.
    pub fn config(mut self, config: KernelConfig) -> Self {
        self.config = config;
        self
    }

    /// The default workspace root.
    pub fn workspace(mut self, root: impl Into<PathBuf>) -> Self {
        self.config.workspace = Some(root.into());
        self
    }

    /// The default permission mode.
    pub fn permission_mode(mut self, mode: keel_envelope::types::PermissionMode) -> Self {
        self.config.permission_mode = mode;
        self
    }

    /// The approval timeout (`Duration::ZERO` = wait forever).
    pub fn approval_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.config.approval_timeout = timeout;
        self
    }

    /// Maximum model calls per request.
    pub fn max_turns(mut self, n: u32) -> Self {
        self.config.max_turns = n;
        self
    }

    /// The default model.
    pub fn model(mut self, model: Arc<dyn Model>) -> Self {
        self.model = Some(model);
        self
    }

    /// How to build other models (`session.start {model}`, `session.set_model`).
    pub fn model_factory(mut self, factory: ModelFactory) -> Self {
        self.factory = Some(factory);
        self
    }

    /// A store; default: files under `$KEEL_HOME` or the platform data dir.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Keeps sessions in files under `dir`.
    pub fn store_dir(self, dir: impl Into<PathBuf>) -> Self {
        self.store(Arc::new(FileStore::new(dir)))
    }

    /// Keeps sessions in memory only.
    pub fn memory_store(self) -> Self {
        self.store(Arc::new(MemoryStore::default()))
    }

    /// The clock (inject a fixed one for deterministic transcripts).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The id generator (inject a sequential one for deterministic transcripts).
    pub fn ids(mut self, ids: Arc<dyn IdGen>) -> Self {
        self.ids = Some(ids);
        self
    }

    /// Registers a custom tool (same metadata as the built-in ones).
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Whether to register the seven built-in tools (default true).
    pub fn builtin_tools(mut self, on: bool) -> Self {
        self.builtin_tools = on;
        self
    }

    /// Builds the kernel. Must be called inside a tokio runtime.
    pub fn build(self) -> Result<Kernel, ErrorPayload> {
        let store: Arc<dyn Store> = match self.store {
            Some(s) => s,
            None => Arc::new(FileStore::new(default_store_dir()?)),
        };
        let default_model = self.model;
        let factory: ModelFactory = match (self.factory, default_model.clone()) {
            (Some(f), _) => f,
            (None, Some(m)) => {
                let m2 = m.clone();
                Arc::new(move |id: &str| {
                    if id == m2.id() {
                        Ok(m2.clone())
                    } else {
                        Err(ErrorPayload::new(
                            ErrorCode::ModelUnavailable,
                            format!("model {id:?} is not configured"),
                        ))
                    }
                })
            }
            (None, None) => {
                return Err(ErrorPayload::new(
                    ErrorCode::ModelUnavailable,
                    "no model configured",
                ));
            }
        };
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        if self.builtin_tools {
            tools.extend(keel_tools::builtin_tools());
        }
        tools.extend(self.tools);
        let ctx = EmitCtx {
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            ids: self.ids.unwrap_or_else(|| Arc::new(UlidGen::default())),
            hub: Arc::new(Hub::default()),
            store,
        };
        let emitter = Emitter::new(ctx.clone(), None, false, Sequencer::new());
        Ok(Kernel {
            inner: Arc::new(KernelInner {
                config: self.config,
                default_model,
                factory,
                tool_defs: crate::prompt::tool_defs(&tools),
                tools,
                ctx,
                emitter,
                sessions: Mutex::new(HashMap::new()),
                cancel: CancellationToken::new(),
            }),
        })
    }
}

/// Requests that were accepted in `log` but never reached a terminal event.
fn unfinished_requests(log: &[Envelope]) -> Vec<String> {
    let mut open: Vec<String> = Vec::new();
    for env in log {
        match &env.event {
            Event::RequestAccepted(_) => open.push(env.request_id.clone()),
            Event::SessionCompleted(_)
            | Event::SessionInterrupted(_)
            | Event::RequestCancelled(_) => {
                open.retain(|r| r != &env.request_id);
            }
            _ => {}
        }
    }
    open
}

/// The store directory: `$KEEL_HOME`, else the platform data dir.
pub fn default_store_dir() -> Result<PathBuf, ErrorPayload> {
    if let Some(home) = std::env::var_os("KEEL_HOME") {
        return Ok(PathBuf::from(home));
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME") {
        return Ok(PathBuf::from(xdg).join("keel"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        return Ok(PathBuf::from(home)
            .join(".local")
            .join("share")
            .join("keel"));
    }
    Err(ErrorPayload::new(
        ErrorCode::SessionPersistenceFailed,
        "no store directory: set KEEL_HOME",
    ))
}

pub(crate) struct KernelInner {
    pub(crate) config: KernelConfig,
    pub(crate) default_model: Option<Arc<dyn Model>>,
    pub(crate) factory: ModelFactory,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    /// The tool definitions offered to the model, built once from `tools`.
    pub(crate) tool_defs: Vec<crate::model::ToolDef>,
    pub(crate) ctx: EmitCtx,
    emitter: Emitter,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    pub(crate) cancel: CancellationToken,
}

impl std::fmt::Debug for KernelInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("config", &self.config)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

/// The kernel. Cheap to clone; every clone is the same kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub(crate) inner: Arc<KernelInner>,
}

/// Options of [`Kernel::start_session`].
pub type SessionOptions = SessionStart;

impl Kernel {
    /// A builder.
    pub fn builder() -> KernelBuilder {
        KernelBuilder {
            builtin_tools: true,
            ..KernelBuilder::default()
        }
    }

    /// The configuration.
    pub fn config(&self) -> &KernelConfig {
        &self.inner.config
    }

    /// Every envelope of every session from now on.
    pub fn subscribe(&self) -> EventStream {
        EventStream {
            rx: self
                .inner
                .ctx
                .hub
                .subscribe(None, self.inner.config.channel_capacity),
        }
    }

    /// Delivers an envelope made by a host (e.g. a transport's own `runtime.ready` or a
    /// decode error) to every subscriber, in order with the kernel's own events.
    pub async fn publish(&self, env: Envelope) {
        self.inner.ctx.hub.deliver(&env).await;
    }

    /// Mints a request id for commands built by the library API.
    pub fn new_request_id(&self) -> String {
        self.inner.ctx.ids.next_id(IdKind::Request)
    }

    fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    /// A handle to an open session.
    pub fn session_handle(&self, id: &str) -> Option<SessionHandle> {
        self.session(id).map(|session| SessionHandle {
            kernel: self.clone(),
            session,
        })
    }

    /// Ids of open sessions.
    pub fn open_sessions(&self) -> Vec<String> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    pub(crate) async fn emit_error(&self, cmd: &Command, error: ErrorPayload) {
        let event = if matches!(cmd.payload, CommandPayload::RequestSend(_)) {
            Event::RequestRejected(error)
        } else {
            Event::Error(error)
        };
        match cmd.session_id.as_deref().and_then(|id| self.session(id)) {
            Some(s) => {
                s.emitter.emit(&cmd.request_id, event).await;
            }
            None => {
                self.inner
                    .emitter
                    .emit_as(cmd.session_id.clone(), &cmd.request_id, event)
                    .await;
            }
        }
    }

    /// Executes one command. Every command is answered by events on the stream (see
    /// docs/protocol.md); the result is also returned for library callers.
    pub async fn execute(&self, cmd: Command) -> Result<(), ErrorPayload> {
        let result = self.dispatch(&cmd).await;
        if let Err(e) = &result {
            self.emit_error(&cmd, e.clone()).await;
        }
        result
    }

    async fn dispatch(&self, cmd: &Command) -> Result<(), ErrorPayload> {
        match &cmd.payload {
            CommandPayload::RuntimeShutdown(_) => {
                self.shutdown("shutdown").await;
                Ok(())
            }
            CommandPayload::SessionStart(p) => {
                let id = self.inner.ctx.ids.next_id(IdKind::Session);
                self.start(&cmd.request_id, p.clone(), id).await.map(|_| ())
            }
            CommandPayload::SessionResume(p) => self
                .resume(&cmd.request_id, &p.session_id, p.after_sequence.as_ref())
                .await
                .map(|_| ()),
            CommandPayload::SessionList(_) => {
                let sessions = self.list_sessions()?;
                self.inner
                    .emitter
                    .emit(
                        &cmd.request_id,
                        Event::SessionList(SessionList { sessions }),
                    )
                    .await;
                Ok(())
            }
            CommandPayload::HarnessStatus(_) => {
                let open: Vec<Arc<Session>> = self
                    .inner
                    .sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                    .cloned()
                    .collect();
                let mut status = HarnessStatus {
                    sessions: Vec::new(),
                    background_tasks: Vec::new(),
                    sub_agents: Vec::new(),
                };
                for s in &open {
                    status.sessions.push(s.info());
                    status.background_tasks.extend(
                        s.data()
                            .ext
                            .background
                            .tasks
                            .iter()
                            .filter(|t| t.status == keel_envelope::ext::BackgroundStatus::Running)
                            .cloned(),
                    );
                    status
                        .sub_agents
                        .extend(s.data().ext.sub_agents.active.iter().cloned());
                }
                status
                    .sessions
                    .sort_by(|a, b| a.session_id.cmp(&b.session_id));
                self.inner
                    .emitter
                    .emit(&cmd.request_id, Event::HarnessStatus(status))
                    .await;
                Ok(())
            }
            _ => {
                let Some(sid) = cmd.session_id.as_deref() else {
                    return Err(ErrorPayload::new(
                        ErrorCode::RequestInvalid,
                        "missing field `sessionId`",
                    )
                    .with_detail("field", "sessionId"));
                };
                let Some(session) = self.session(sid) else {
                    return Err(ErrorPayload::new(
                        ErrorCode::SessionNotFound,
                        format!("session {sid:?} is not open (resume it first)"),
                    )
                    .with_detail("sessionId", sid));
                };
                if let CommandPayload::SessionClose(_) = cmd.payload {
                    session.close(&cmd.request_id, "requested").await;
                    self.inner
                        .sessions
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(sid);
                    return Ok(());
                }
                session.handle_command(cmd).await
            }
        }
    }

    fn resolve_workspace(&self, path: Option<&str>) -> Result<PathBuf, ErrorPayload> {
        let raw = match path {
            Some(p) => PathBuf::from(p),
            None => self.inner.config.workspace.clone().ok_or_else(|| {
                ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    "no workspace: give `workspacePath`",
                )
                .with_detail("field", "payload.workspacePath")
            })?,
        };
        let canon = std::fs::canonicalize(&raw).map_err(|e| {
            ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("workspace {} is not usable: {e}", raw.display()),
            )
            .with_detail("field", "payload.workspacePath")
        })?;
        if !canon.is_dir() {
            return Err(ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("workspace {} is not a directory", raw.display()),
            )
            .with_detail("field", "payload.workspacePath"));
        }
        Ok(canon)
    }

    fn model_for(&self, id: Option<&str>) -> Result<Arc<dyn Model>, ErrorPayload> {
        match (id, &self.inner.default_model) {
            (Some(id), _) => (self.inner.factory)(id),
            (None, Some(m)) => Ok(m.clone()),
            (None, None) => Err(ErrorPayload::new(
                ErrorCode::ModelUnavailable,
                "no default model",
            )),
        }
    }

    async fn start(
        &self,
        request_id: &str,
        opts: SessionStart,
        id: String,
    ) -> Result<Arc<Session>, ErrorPayload> {
        let workspace = self.resolve_workspace(opts.workspace_path.as_deref())?;
        let model = self.model_for(opts.model.as_deref())?;
        let now = self.inner.ctx.clock.now_ms();
        let state = PersistedSession {
            session_id: id.clone(),
            title: opts.title,
            workspace: workspace.display().to_string(),
            model: model.id(),
            mode: opts
                .permission_mode
                .unwrap_or(self.inner.config.permission_mode),
            rules: Default::default(),
            session_keys: Vec::new(),
            session_deny: Vec::new(),
            history: Vec::new(),
            plan: None,
            usage: Default::default(),
            created_at: now,
            updated_at: now,
            closed: false,
            extensions: Default::default(),
        };
        self.inner.ctx.store.save_state(&state)?;
        let session = Session::new(self.inner.clone(), state, model, Sequencer::new());
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), session.clone());
        session.emit_started(request_id).await;
        Ok(session)
    }

    async fn resume(
        &self,
        request_id: &str,
        id: &str,
        after: Option<&Cursor>,
    ) -> Result<Arc<Session>, ErrorPayload> {
        if let Some(live) = self.session(id) {
            // Already open: answer with its state and replay what the host missed.
            let log = self.inner.ctx.store.load_events(id)?;
            live.emit_resumed(request_id, &log.events, after).await?;
            return Ok(live);
        }
        let Some(mut state) = self.inner.ctx.store.load_state(id)? else {
            return Err(ErrorPayload::new(
                ErrorCode::SessionNotFound,
                format!("no session {id:?} in the store"),
            )
            .with_detail("sessionId", id));
        };
        let log = self.inner.ctx.store.load_events(id)?;
        let mut seq = Sequencer::new();
        for env in &log.events {
            seq.restore(&env.request_id, env.sequence);
        }
        let model = match self.model_for(Some(&state.model)) {
            Ok(m) => m,
            Err(_) => self.model_for(None)?,
        };
        state.model = model.id();
        state.closed = false;
        let session = Session::new(self.inner.clone(), state, model, seq);
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_owned(), session.clone());
        if log.torn_tail_dropped {
            session
                .emitter
                .emit(
                    request_id,
                    Event::Warning(ErrorPayload::new(
                        ErrorCode::SessionPersistenceFailed,
                        "the last event of the log was torn (the process died while writing it) and was dropped",
                    )
                    .severity(keel_envelope::error::Severity::Warning)),
                )
                .await;
        }
        session.emit_resumed(request_id, &log.events, after).await?;
        // A request the previous process never finished (it died or was killed) gets
        // its terminal event now, so a host following that stream sees it end.
        for unfinished in unfinished_requests(&log.events) {
            session
                .emitter
                .emit(
                    &unfinished,
                    Event::SessionInterrupted(keel_envelope::events::SessionInterrupted {
                        interrupted_request_id: Some(unfinished.clone()),
                        reason: "restart".into(),
                        was_running: true,
                    }),
                )
                .await;
        }
        Ok(session)
    }

    /// A session's whole event log, oldest first, as stored (for hosts that replay a
    /// session in their own format, e.g. ACP's `session/load`).
    pub fn session_log(&self, id: &str) -> Result<Vec<Envelope>, ErrorPayload> {
        Ok(self.inner.ctx.store.load_events(id)?.events)
    }

    /// Stored and open sessions, most recently updated first.
    pub fn list_sessions(&self) -> Result<Vec<SessionInfo>, ErrorPayload> {
        let live: HashMap<String, Arc<Session>> = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut out: Vec<SessionInfo> = Vec::new();
        for stored in self.inner.ctx.store.list()? {
            match live.get(&stored.session_id) {
                Some(s) => out.push(s.info()),
                None => out.push(SessionInfo {
                    session_id: stored.session_id.clone(),
                    title: stored.title.clone(),
                    workspace: stored.workspace.clone(),
                    created_at: stored.created_at,
                    updated_at: stored.updated_at,
                    state: if stored.closed {
                        keel_envelope::types::SessionState::Closed
                    } else {
                        keel_envelope::types::SessionState::Idle
                    },
                    permission_mode: stored.mode,
                    model: stored.model.clone(),
                }),
            }
        }
        for (id, s) in &live {
            if !out.iter().any(|i| &i.session_id == id) {
                out.push(s.info());
            }
        }
        out.sort_by(|a, b| {
            b.updated_at
                .cmp(&a.updated_at)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        Ok(out)
    }

    fn session_stream(&self, session_id: &str) -> EventStream {
        EventStream {
            rx: self.inner.ctx.hub.subscribe(
                Some(session_id.to_owned()),
                self.inner.config.channel_capacity,
            ),
        }
    }

    /// Starts a session; returns its handle and its event stream (subscribed before
    /// `session.started`, so nothing is missed).
    pub async fn start_session(
        &self,
        opts: SessionOptions,
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        let request_id = self.new_request_id();
        let id = self.inner.ctx.ids.next_id(IdKind::Session);
        let stream = self.session_stream(&id);
        let session = match self.start(&request_id, opts, id).await {
            Ok(s) => s,
            Err(e) => {
                self.inner
                    .emitter
                    .emit(&request_id, Event::Error(e.clone()))
                    .await;
                return Err(e);
            }
        };
        Ok((
            SessionHandle {
                kernel: self.clone(),
                session,
            },
            stream,
        ))
    }

    /// Resumes a stored session (replaying events after `after`).
    pub async fn resume_session(
        &self,
        id: &str,
        after: Option<Cursor>,
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        let request_id = self.new_request_id();
        let stream = self.session_stream(id);
        let session = self.resume(&request_id, id, after.as_ref()).await?;
        Ok((
            SessionHandle {
                kernel: self.clone(),
                session,
            },
            stream,
        ))
    }

    /// Closes a session.
    pub async fn close_session(&self, id: &str) -> Result<(), ErrorPayload> {
        let cmd = Command::new(
            self.new_request_id(),
            Some(id.to_owned()),
            CommandPayload::SessionClose(keel_envelope::commands::SessionClose {}),
        );
        self.execute(cmd).await
    }

    /// Interrupts everything, closes every session, flushes the store.
    pub async fn shutdown(&self, reason: &str) {
        let sessions: Vec<Arc<Session>> = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, s)| s)
            .collect();
        for s in sessions {
            let rid = self.new_request_id();
            s.close(&rid, reason).await;
        }
        self.inner.cancel.cancel();
        let _ = self.inner.ctx.store.flush();
    }

    /// The workspace of an open session.
    pub fn session_workspace(&self, id: &str) -> Option<PathBuf> {
        self.session(id).map(|s| s.workspace.clone())
    }
}

/// A handle to one open session. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    kernel: Kernel,
    session: Arc<Session>,
}

impl SessionHandle {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.session.id
    }

    /// The workspace root.
    pub fn workspace(&self) -> &Path {
        &self.session.workspace
    }

    /// A new subscription to this session's envelopes (from now on).
    pub fn subscribe(&self) -> EventStream {
        EventStream {
            rx: self.kernel.inner.ctx.hub.subscribe(
                Some(self.session.id.clone()),
                self.kernel.inner.config.channel_capacity,
            ),
        }
    }

    async fn run(&self, payload: CommandPayload) -> Result<String, ErrorPayload> {
        let request_id = self.kernel.new_request_id();
        let cmd = Command::new(request_id.clone(), Some(self.session.id.clone()), payload);
        self.kernel.execute(cmd).await.map(|()| request_id)
    }

    /// Sends a user message (queued when busy); returns its request id.
    pub async fn send(&self, message: impl Into<String>) -> Result<String, ErrorPayload> {
        self.send_with(RequestSend {
            message: message.into(),
            images: None,
            when_busy: None,
            patch_preview: None,
        })
        .await
    }

    /// Sends a user message with options; returns its request id.
    pub async fn send_with(&self, req: RequestSend) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::RequestSend(req)).await
    }

    /// Runs any session command; returns the command's request id.
    pub async fn command(&self, payload: CommandPayload) -> Result<String, ErrorPayload> {
        self.run(payload).await
    }

    /// Interrupts the running request (a no-op answered with a result when idle).
    pub async fn interrupt(&self) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::RequestInterrupt(
            keel_envelope::commands::RequestInterrupt {},
        ))
        .await
    }

    /// Answers an approval.
    pub async fn respond_approval(
        &self,
        approval_id: &str,
        decision: keel_envelope::types::ApprovalDecision,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::ApprovalRespond(
            keel_envelope::commands::ApprovalRespond {
                approval_id: approval_id.to_owned(),
                decision,
            },
        ))
        .await
    }

    /// Approves a plan.
    pub async fn approve_plan(
        &self,
        plan_id: &str,
        mode: Option<keel_envelope::types::PermissionMode>,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::PlanApprove(
            keel_envelope::commands::PlanApprove {
                plan_id: plan_id.to_owned(),
                mode,
            },
        ))
        .await
    }

    /// Rejects a plan.
    pub async fn reject_plan(
        &self,
        plan_id: &str,
        feedback: Option<String>,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::PlanReject(
            keel_envelope::commands::PlanReject {
                plan_id: plan_id.to_owned(),
                feedback,
            },
        ))
        .await
    }

    /// Answers a question.
    pub async fn answer_ask(
        &self,
        ask_id: &str,
        answer: impl Into<String>,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::AskRespond(
            keel_envelope::commands::AskRespond {
                ask_id: ask_id.to_owned(),
                answer: answer.into(),
            },
        ))
        .await
    }

    /// Changes the permission mode.
    pub async fn set_mode(
        &self,
        mode: keel_envelope::types::PermissionMode,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::SessionSetMode(
            keel_envelope::commands::SetMode { mode },
        ))
        .await
    }

    /// Syncs the always-allow rules.
    pub async fn set_rules(
        &self,
        rules: keel_envelope::types::ApprovalRules,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::SessionSetRules(
            keel_envelope::commands::SetRules {
                always_allow_global: rules.always_allow_global,
                always_allow_project: rules.always_allow_project,
                always_deny_global: rules.always_deny_global,
                always_deny_project: rules.always_deny_project,
                deny: Vec::new(),
            },
        ))
        .await
    }

    /// Switches the model (idle only).
    pub async fn set_model(&self, model: impl Into<String>) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::SessionSetModel(
            keel_envelope::commands::SetModel {
                model: model.into(),
            },
        ))
        .await
    }

    /// Loads history.
    pub async fn load_history(
        &self,
        messages: Vec<keel_envelope::types::HistoryMessage>,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::SessionLoadHistory(
            keel_envelope::commands::LoadHistory { messages },
        ))
        .await
    }

    /// The session's current state.
    pub fn state(&self) -> keel_envelope::events::SessionStateSnapshot {
        self.session.snapshot()
    }

    /// Closes the session.
    pub async fn close(&self) -> Result<(), ErrorPayload> {
        self.kernel.close_session(&self.session.id).await
    }
}
