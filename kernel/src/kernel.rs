//! The kernel: the command dispatcher, sessions start / resume / list, shutdown.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use keel_envelope::commands::{CommandPayload, SessionStart, SessionWatch};
use keel_envelope::events::{HarnessStatus, SessionList, SessionUnwatched, SessionWatched};
use keel_envelope::ids::IdKind;
use keel_envelope::types::{Cursor, SessionInfo};
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event, Sequencer};
use tokio_util::sync::CancellationToken;

use crate::builder::KernelBuilder;
use crate::config::KernelConfig;
use crate::emit::{EmitCtx, Emitter};
use crate::handle::{EventStream, SessionHandle, WatchStream, Watcher};
use crate::model::Model;
use crate::probe::Probe;
use crate::registry::Registry;
use crate::session::Session;
use crate::store::PersistedSession;

/// Builds a model from its selection string (`provider:model`).
pub type ModelFactory = Arc<dyn Fn(&str) -> Result<Arc<dyn Model>, ErrorPayload> + Send + Sync>;

/// The events of `log` after `after` (none without a cursor); a cursor that is not in
/// the log is refused.
fn after_cursor<'a>(
    log: &'a [Envelope],
    after: Option<&Cursor>,
) -> Result<&'a [Envelope], ErrorPayload> {
    let Some(c) = after else { return Ok(&[]) };
    let pos = log
        .iter()
        .position(|e| e.request_id == c.request_id && e.sequence == c.sequence)
        .ok_or_else(|| {
            ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!(
                    "cursor {}#{} is not in the session's log",
                    c.request_id, c.sequence
                ),
            )
            .with_detail("field", "payload.afterSequence")
        })?;
    Ok(&log[pos + 1..])
}

/// The approval, plan and question prompts of request `active` that are still waiting
/// for an answer, in log order, leaving out those in `skip`.
fn pending_prompts(log: &[Envelope], active: &str, skip: &[Envelope]) -> Vec<Envelope> {
    let mut open: Vec<(String, &Envelope)> = Vec::new();
    for env in log.iter().filter(|e| e.request_id == active) {
        let (opens, key) = match &env.event {
            Event::ApprovalRequested(p) => (true, format!("approval:{}", p.approval_id)),
            Event::ApprovalGranted(p) => (false, format!("approval:{}", p.approval_id)),
            Event::ApprovalDenied(p) => (false, format!("approval:{}", p.approval_id)),
            Event::ApprovalExpired(p) => (false, format!("approval:{}", p.approval_id)),
            Event::PlanApprovalRequired(p) => (true, format!("plan:{}", p.plan_id)),
            Event::PlanApproved(p) => (false, format!("plan:{}", p.plan_id)),
            Event::PlanRejected(p) => (false, format!("plan:{}", p.plan_id)),
            Event::AskRequested(p) => (true, format!("ask:{}", p.ask_id)),
            Event::AskAnswered(p) => (false, format!("ask:{}", p.ask_id)),
            Event::AskExpired(p) => (false, format!("ask:{}", p.ask_id)),
            _ => continue,
        };
        if opens {
            open.push((key, env));
        } else {
            open.retain(|(k, _)| *k != key);
        }
    }
    open.into_iter()
        .map(|(_, e)| e)
        .filter(|e| !skip.iter().any(|s| s.event_id == e.event_id))
        .cloned()
        .collect()
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

pub(crate) struct KernelInner {
    pub(crate) config: KernelConfig,
    pub(crate) default_model: Option<Arc<dyn Model>>,
    pub(crate) factory: ModelFactory,
    /// Every tool the model can call, and the pipeline's stages.
    pub(crate) registry: Registry,
    /// A test probe, called at every point of a request's life.
    pub(crate) probe: Option<Arc<dyn Probe>>,
    pub(crate) ctx: EmitCtx,
    pub(crate) emitter: Emitter,
    pub(crate) sessions: Mutex<HashMap<String, Arc<Session>>>,
    pub(crate) cancel: CancellationToken,
}

impl std::fmt::Debug for KernelInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("config", &self.config)
            .field("tools", &self.registry.entries().len())
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
        KernelBuilder::new()
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

    /// A watcher: a subscriber for one client connection of a daemon. It receives the
    /// answers to the commands it executes and the events of the sessions it watches
    /// (`session.watch`, and those it starts or resumes), never waits on delivery, and
    /// is cut off when `capacity` live events wait unread (see [`crate::WatchEnd`]).
    pub fn watcher(&self, capacity: usize) -> (Watcher, WatchStream) {
        let (shared, rx) = self.inner.ctx.hub.watch(capacity);
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
        let open: Vec<Arc<Session>> = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect();
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
                            .emitter
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

    /// `session.watch`: under the session's emitter, so that no event slips between
    /// the log read here and the live stream, answers with `session.watched`, replays
    /// the events after the cursor and the running request's pending prompts.
    async fn watch(&self, request_id: &str, p: &SessionWatch) -> Result<(), ErrorPayload> {
        let Some(session) = self.session(&p.session_id) else {
            return Err(ErrorPayload::new(
                ErrorCode::SessionNotFound,
                format!("session {:?} is not open (resume it first)", p.session_id),
            )
            .with_detail("sessionId", p.session_id.as_str()));
        };
        let mut g = session.emitter.lock().await;
        let log = self.inner.ctx.store.load_events(&p.session_id)?.events;
        let replay = after_cursor(&log, p.after_sequence.as_ref())?;
        let snapshot = session.snapshot();
        let pending = match &snapshot.active_request_id {
            Some(active) => pending_prompts(&log, active, replay),
            None => Vec::new(),
        };
        let answer = SessionWatched {
            session: snapshot.session,
            active_request_id: snapshot.active_request_id,
            last_cursor: log.last().map(|e| Cursor {
                request_id: e.request_id.clone(),
                sequence: e.sequence,
            }),
            replayed: (replay.len() + pending.len()) as u32,
        };
        g.emit_unlogged(request_id, Event::SessionWatched(answer))
            .await;
        g.replay(request_id, replay).await;
        g.replay(request_id, &pending).await;
        Ok(())
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
            history: Default::default(),
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
        tracing::info!(session_id = %id, workspace = %session.workspace.display(), "session started");
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
            // Already open: answer with its state and replay what the host missed. The
            // log is read with the emitter held, so nothing slips between the two.
            let mut g = live.emitter.lock().await;
            let log = self.inner.ctx.store.load_events(id)?;
            live.emit_resumed(&mut g, request_id, &log.events, after)
                .await?;
            drop(g);
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
        Ok(session)
    }

    /// `session.delete`: closes the session if it is open (on a request id of its own,
    /// as a shutdown does), removes its stored files, then answers `session.deleted`
    /// on `request_id`'s stream (not logged: the log is gone).
    async fn delete(&self, request_id: &str, id: &str) -> Result<(), ErrorPayload> {
        let open = self
            .inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let Some(session) = &open {
            let rid = self.new_request_id();
            session.close(&rid, "deleted").await;
        }
        let stored = self.inner.ctx.store.delete(id)?;
        if open.is_none() && !stored {
            return Err(ErrorPayload::new(
                ErrorCode::SessionNotFound,
                format!("no session {id:?} in the store"),
            )
            .with_detail("sessionId", id));
        }
        self.inner
            .emitter
            .emit_as(
                Some(id.to_owned()),
                request_id,
                Event::SessionDeleted(keel_envelope::events::SessionDeleted {
                    session_id: id.to_owned(),
                }),
            )
            .await;
        Ok(())
    }

    /// Deletes a session (open or stored) and its stored files (`session.delete`).
    pub async fn delete_session(&self, id: &str) -> Result<(), ErrorPayload> {
        let cmd = Command::new(
            self.new_request_id(),
            None,
            CommandPayload::SessionDelete(keel_envelope::commands::SessionDelete {
                session_id: id.to_owned(),
            }),
        );
        self.execute(cmd).await
    }

    /// Sets an open session's title (`session.set_title`).
    pub async fn set_session_title(&self, id: &str, title: &str) -> Result<(), ErrorPayload> {
        let cmd = Command::new(
            self.new_request_id(),
            Some(id.to_owned()),
            CommandPayload::SessionSetTitle(keel_envelope::commands::SetTitle {
                title: title.to_owned(),
            }),
        );
        self.execute(cmd).await
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
