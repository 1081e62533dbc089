//! The kernel: the command dispatcher, sessions start / resume / list, shutdown.

pub(crate) mod builder;
pub(crate) mod handle;
pub(crate) mod idle;

use std::path::PathBuf;
use std::sync::Arc;

use keel_envelope::commands::{CommandPayload, SessionStart};
use keel_envelope::events::{HarnessStatus, SessionList, SessionUnwatched};
use keel_envelope::ids::IdKind;
use keel_envelope::types::Cursor;
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event, Sequencer};

use crate::base::config::KernelConfig;
use crate::base::replay::unfinished_requests;
use crate::base::store::PersistedSession;
use crate::kernel::builder::KernelBuilder;
use crate::kernel::handle::{EventStream, SessionHandle, WatchStream, Watcher};
use crate::session::open::{Admission, Sessions};
use crate::session::services::Services;
use crate::session::Session;

pub use crate::session::services::ModelFactory;

/// What a kernel is: its shared services and its open sessions.
#[derive(Debug)]
pub(crate) struct KernelInner {
    pub(crate) services: Arc<Services>,
    pub(crate) open: Sessions,
    /// Whether the idle sweep's timer runs ([`idle`]).
    pub(crate) idle_timer: std::sync::atomic::AtomicBool,
}

/// The kernel. Cheap to clone; every clone is the same kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub(crate) inner: Arc<KernelInner>,
}

impl Kernel {
    /// A builder.
    pub fn builder() -> KernelBuilder {
        KernelBuilder::new()
    }

    /// The configuration.
    pub fn config(&self) -> &KernelConfig {
        &self.inner.services.config()
    }

    /// Every envelope of every session from now on.
    pub fn subscribe(&self) -> EventStream {
        EventStream {
            rx: self
                .inner
                .services
                .hub()
                .subscribe(None, self.inner.services.config().channel_capacity),
        }
    }

    /// A watcher: a subscriber for one client connection of a daemon. It receives the
    /// answers to the commands it executes and the events of the sessions it watches
    /// (`session.watch`, and those it starts, resumes or forks), never waits on delivery, and
    /// is cut off when `capacity` live events wait unread (see [`crate::WatchEnd`]).
    pub fn watcher(&self, capacity: usize) -> (Watcher, WatchStream) {
        let (shared, rx) = self.inner.services.hub().watch(capacity);
        (
            Watcher {
                kernel: self.clone(),
                shared: shared.clone(),
            },
            WatchStream { rx, shared },
        )
    }

    /// Whether anything is running: a request (also one waiting for an answer) or a
    /// background task.
    pub fn is_busy(&self) -> bool {
        let open: Vec<Arc<Session>> = self.inner.open.loaded();
        open.iter().any(|s| {
            matches!(
                s.info().state,
                keel_envelope::types::SessionState::Running
                    | keel_envelope::types::SessionState::WaitingApproval
            ) || s
                .data()
                .ext
                .background
                .tasks
                .iter()
                .any(|t| t.status == keel_envelope::ext::BackgroundStatus::Running)
        })
    }

    /// Delivers an envelope made by a host (e.g. a transport's own `runtime.ready` or a
    /// decode error) to every subscriber, in order with the kernel's own events.
    pub async fn publish(&self, env: Envelope) {
        self.inner.services.hub().deliver(&env).await;
    }

    /// Mints a request id for commands built by the library API.
    pub fn new_request_id(&self) -> String {
        self.inner.services.next_id(IdKind::Request)
    }

    /// An open session, reloaded if it was unloaded while idle ([`idle`]).
    pub(crate) fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.inner.open.get(id)
    }

    /// Reserves a place for one more open session.
    pub(crate) fn admit(&self) -> Result<Admission<'_>, ErrorPayload> {
        self.inner.open.admit()
    }

    /// Lets the store close what it holds open for a closed session; a failure is a
    /// warning on the closing command's stream.
    async fn release(&self, session: &Session, request_id: &str) {
        if let Err(e) = self.inner.services.store().release(&session.id) {
            let warning = e.severity(keel_envelope::error::Severity::Warning);
            session
                .emitter
                .emit(request_id, Event::Warning(warning))
                .await;
        }
    }

    /// A handle to an open session.
    pub fn session_handle(&self, id: &str) -> Option<SessionHandle> {
        self.session(id).map(|session| SessionHandle {
            kernel: self.clone(),
            session,
        })
    }

    /// Ids of open sessions (also those unloaded while idle).
    pub fn open_sessions(&self) -> Vec<String> {
        let mut ids = self.loaded_sessions();
        ids.extend(self.inner.open.unloaded_ids());
        ids
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
                    .services
                    .emitter()
                    .emit_as(cmd.session_id.clone(), &cmd.request_id, event)
                    .await;
            }
        }
    }

    /// Executes one command. Every command is answered by events on the stream (see
    /// docs/protocol.md); the result is also returned for library callers.
    pub async fn execute(&self, cmd: Command) -> Result<(), ErrorPayload> {
        self.start_idle_timer();
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
                let id = self.inner.services.next_id(IdKind::Session);
                self.start(&cmd.request_id, p.clone(), id).await.map(|_| ())
            }
            CommandPayload::SessionResume(p) => self
                .resume(
                    &cmd.request_id,
                    &p.session_id,
                    p.after_sequence.as_ref(),
                    p.mcp_servers.as_deref().unwrap_or_default(),
                )
                .await
                .map(|_| ()),
            CommandPayload::SessionWatch(p) => self.watch(&cmd.request_id, p).await,
            CommandPayload::SessionUnwatch(p) => {
                let ev = Event::SessionUnwatched(SessionUnwatched {
                    session_id: p.session_id.clone(),
                });
                match self.session(&p.session_id) {
                    Some(s) => {
                        s.emitter
                            .lock()
                            .await
                            .emit_unlogged(&cmd.request_id, ev)
                            .await;
                    }
                    None => {
                        self.inner
                            .services
                            .emitter()
                            .emit_as(Some(p.session_id.clone()), &cmd.request_id, ev)
                            .await;
                    }
                }
                Ok(())
            }
            CommandPayload::SessionDelete(p) => self.delete(&cmd.request_id, &p.session_id).await,
            CommandPayload::SessionList(_) => {
                let sessions = self.list_sessions()?;
                self.inner
                    .services
                    .emitter()
                    .emit(
                        &cmd.request_id,
                        Event::SessionList(SessionList { sessions }),
                    )
                    .await;
                Ok(())
            }
            CommandPayload::HarnessStatus(_) => {
                let open: Vec<Arc<Session>> = self.inner.open.loaded();
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
                for id in self.inner.open.unloaded_ids() {
                    if let Ok(Some(state)) = self.inner.services.store().load_state(&id) {
                        status
                            .sessions
                            .push(crate::base::summary::SessionSummary::of(&state).info());
                    }
                }
                status
                    .sessions
                    .sort_by(|a, b| a.session_id.cmp(&b.session_id));
                self.inner
                    .services
                    .emitter()
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
                let session = self.inner.open.require(sid)?;
                if let CommandPayload::SessionFork(p) = &cmd.payload {
                    return self
                        .fork(&session, &cmd.request_id, p, &[])
                        .await
                        .map(|_| ());
                }
                if let CommandPayload::SessionClose(_) = cmd.payload {
                    session.close(&cmd.request_id, "requested").await;
                    self.inner.open.remove(sid);
                    self.release(&session, &cmd.request_id).await;
                    return Ok(());
                }
                session.handle_command(cmd).await
            }
        }
    }

    fn resolve_workspace(&self, path: Option<&str>) -> Result<PathBuf, ErrorPayload> {
        let raw = match path {
            Some(p) => PathBuf::from(p),
            None => self
                .inner
                .services
                .config()
                .workspace
                .clone()
                .ok_or_else(|| {
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

    /// Starts the session's MCP servers: those given with the command first (a
    /// configured server of the same name is then left out), then the configured
    /// ones. Start problems are reported on `request_id`'s stream.
    pub(crate) fn start_mcp(
        &self,
        session: &Arc<Session>,
        given: Vec<crate::base::mcp_config::McpServerConfig>,
        request_id: &str,
    ) {
        use crate::session::mcp::{McpServers, ServerOrigin};
        McpServers::start(session, given, ServerOrigin::Session, request_id);
        McpServers::start(
            session,
            self.inner.services.config().mcp_servers.clone(),
            ServerOrigin::Config,
            request_id,
        );
    }

    async fn start(
        &self,
        request_id: &str,
        opts: SessionStart,
        id: String,
    ) -> Result<Arc<Session>, ErrorPayload> {
        let admission = self.admit()?;
        let workspace = self.resolve_workspace(opts.workspace_path.as_deref())?;
        let mut model = self.inner.services.model(opts.model.as_deref())?;
        let extensions = crate::work::budget::session_extensions(&opts)?;
        let mcp =
            crate::base::mcp_config::from_specs(opts.mcp_servers.as_deref().unwrap_or_default())?;
        let host = crate::pipeline::host_tools::entries(
            opts.host_tools.as_deref().unwrap_or_default(),
            "payload.hostTools",
        )?;
        // A host tool whose name is taken refuses the session before it exists.
        crate::session::overlay::Overlay::default()
            .set_host(&self.inner.services.registry(), host.clone())?;
        if let Some(path) = opts.record.as_deref() {
            model = Arc::new(crate::base::record::RecordingModel::new(model, path)?);
        }
        let now = self.inner.services.now();
        let state = PersistedSession {
            session_id: id.clone(),
            title: opts.title,
            workspace: workspace.display().to_string(),
            model: model.id(),
            mode: opts
                .permission_mode
                .unwrap_or(self.inner.services.config().permission_mode),
            rules: Default::default(),
            session_keys: Vec::new(),
            session_deny: Vec::new(),
            history: Default::default(),
            plan: None,
            usage: Default::default(),
            created_at: now,
            updated_at: now,
            closed: false,
            extensions,
            request_marks: Vec::new(),
        };
        self.inner.services.store().save_state(&state)?;
        let session = Session::new(self.inner.services.clone(), state, model, Sequencer::new());
        session
            .tools
            .set_host(&self.inner.services.registry(), host)?;
        let session = admission.insert(&id, session);
        tracing::info!(session_id = %id, workspace = %session.workspace.display(), "session started");
        session.emit_started(request_id).await;
        crate::base::hooks::spawn_session_start(&session, request_id, "startup");
        self.start_mcp(&session, mcp, request_id);
        Ok(session)
    }

    async fn resume(
        &self,
        request_id: &str,
        id: &str,
        after: Option<&Cursor>,
        mcp_servers: &[keel_envelope::host::McpServerSpec],
    ) -> Result<Arc<Session>, ErrorPayload> {
        if let Some(live) = self.session(id) {
            // Already open: answer with its state and replay what the host missed. The
            // log is read with the emitter held, so nothing slips between the two.
            let mut g = live.emitter.lock().await;
            let log = self.inner.services.store().load_events(id)?;
            live.emit_resumed(&mut g, request_id, &log.events, after)
                .await?;
            drop(g);
            return Ok(live);
        }
        let admission = self.admit()?;
        let mcp = crate::base::mcp_config::from_specs(mcp_servers)?;
        let Some(mut state) = self.inner.services.store().load_state(id)? else {
            return Err(ErrorPayload::new(
                ErrorCode::SessionNotFound,
                format!("no session {id:?} in the store"),
            )
            .with_detail("sessionId", id));
        };
        let log = self.inner.services.store().load_events(id)?;
        let mut seq = Sequencer::new();
        for env in &log.events {
            seq.restore(&env.request_id, env.sequence);
        }
        let model = match self.inner.services.model(Some(&state.model)) {
            Ok(m) => m,
            Err(_) => self.inner.services.model(None)?,
        };
        state.model = model.id();
        state.closed = false;
        let fresh = Session::new(self.inner.services.clone(), state, model, seq);
        let session = admission.insert(id, fresh.clone());
        if !Arc::ptr_eq(&session, &fresh) {
            // Another resume of the same session won the race: answer from it.
            let mut g = session.emitter.lock().await;
            let log = self.inner.services.store().load_events(id)?;
            session
                .emit_resumed(&mut g, request_id, &log.events, after)
                .await?;
            drop(g);
            return Ok(session);
        }
        let mut g = session.emitter.lock().await;
        if log.torn_tail_dropped {
            g.emit(
                    request_id,
                    Event::Warning(ErrorPayload::new(
                        ErrorCode::SessionPersistenceFailed,
                        "the last event of the log was torn (the process died while writing it) and was dropped",
                    )
                    .severity(keel_envelope::error::Severity::Warning)),
                )
                .await;
        }
        session
            .emit_resumed(&mut g, request_id, &log.events, after)
            .await?;
        // A request the previous process never finished (it died or was killed) gets
        // its terminal event now, so a host following that stream sees it end.
        for unfinished in unfinished_requests(&log.events) {
            g.emit(
                &unfinished,
                Event::SessionInterrupted(keel_envelope::events::SessionInterrupted {
                    interrupted_request_id: Some(unfinished.clone()),
                    reason: "restart".into(),
                    was_running: true,
                }),
            )
            .await;
        }
        drop(g);
        crate::base::hooks::spawn_session_start(&session, request_id, "resume");
        self.start_mcp(&session, mcp, request_id);
        Ok(session)
    }

    pub(crate) fn session_stream(&self, session_id: &str) -> EventStream {
        EventStream {
            rx: self.inner.services.hub().subscribe(
                Some(session_id.to_owned()),
                self.inner.services.config().channel_capacity,
            ),
        }
    }

    /// Starts a session; returns its handle and its event stream (subscribed before
    /// `session.started`, so nothing is missed).
    pub async fn start_session(
        &self,
        opts: impl Into<SessionStart>,
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        let opts: SessionStart = opts.into();
        let request_id = self.new_request_id();
        let id = self.inner.services.next_id(IdKind::Session);
        let stream = self.session_stream(&id);
        let session = match self.start(&request_id, opts, id).await {
            Ok(s) => s,
            Err(e) => {
                self.inner
                    .services
                    .emitter()
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
        self.resume_session_with_mcp(id, after, &[]).await
    }

    /// [`Kernel::resume_session`] with the MCP servers the host gives the session
    /// (`mcpServers` of `session.resume`); ignored when the session is already open,
    /// which keeps its servers.
    pub async fn resume_session_with_mcp(
        &self,
        id: &str,
        after: Option<Cursor>,
        mcp_servers: &[keel_envelope::host::McpServerSpec],
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        let request_id = self.new_request_id();
        let stream = self.session_stream(id);
        let session = self
            .resume(&request_id, id, after.as_ref(), mcp_servers)
            .await?;
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
        // Sessions unloaded while idle are closed like the others.
        self.inner.open.reload_all();
        let sessions: Vec<Arc<Session>> = self.inner.open.drain();
        for s in sessions {
            let rid = self.new_request_id();
            s.close(&rid, reason).await;
            self.release(&s, &rid).await;
        }
        self.inner.services.cancel().cancel();
        let _ = self.inner.services.store().flush();
    }

    /// The workspace of an open session.
    pub fn session_workspace(&self, id: &str) -> Option<PathBuf> {
        self.session(id).map(|s| s.workspace.clone())
    }
}
