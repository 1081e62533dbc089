//! One session: its state, its emitter, and the handling of session commands.
//!
//! State lives behind a short-lived lock that is never held across an await. The
//! running request is a task ([`crate::work::request`]) that talks to command handlers through
//! one-shot channels registered here (approvals, questions, plan decisions).

pub(crate) mod ext;
pub(crate) mod mcp;
pub(crate) mod open;
pub(crate) mod overlay;
pub(crate) mod registry;
pub(crate) mod services;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use keel_envelope::commands::{CommandPayload, WhenBusy};
use keel_envelope::events::{
    RequestCancelled, RequestQueued, RequestSteered, SessionClosed, SessionHistoryLoaded,
    SessionInterrupted, SessionModeChanged, SessionModelChanged, SessionResumed,
    SessionRulesUpdated, SessionStarted, SessionStateSnapshot,
};
use keel_envelope::types::{
    ApprovalDecision, ApprovalRules, Cursor, PermissionMode, SessionInfo, SessionState,
};
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event, Sequencer};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::base::emit::Emitter;
use crate::base::model::{Message, Model};
use crate::base::store::PersistedSession;
use crate::session::services::Services;
use crate::work::request::Active;

/// Most messages waiting on a busy session (queued requests plus steered messages not
/// yet given to the model); beyond it `request.send` is refused with `SESSION_BUSY`
/// (`details.reason: "queue_full"`).
pub(crate) const MAX_WAITING: usize = 64;

/// A request waiting to run.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub(crate) id: String,
    pub(crate) message: String,
    pub(crate) images: Vec<String>,
    /// Whether `edit_file` / `write_file` are proposed as patches in this request.
    pub(crate) patch_preview: bool,
    /// The request's own budget and output cap.
    pub(crate) overrides: crate::work::budget::RequestOverrides,
}

/// An answer to a pending approval: the decision and the answering command's requestId.
pub(crate) type ApprovalAnswer = (ApprovalDecision, String);
/// An answer to a question: the text and the answering command's requestId.
pub(crate) type AskAnswer = (String, String);

/// A plan decision.
#[derive(Debug)]
pub(crate) enum PlanAnswer {
    Approve {
        mode: PermissionMode,
        reply_to: String,
    },
    Reject {
        feedback: Option<String>,
        reply_to: String,
    },
}

/// Mutable session state.
#[derive(Debug)]
pub(crate) struct Data {
    pub(crate) state: PersistedSession,
    pub(crate) model: Arc<dyn Model>,
    pub(crate) active: Option<Active>,
    pub(crate) queue: VecDeque<Queued>,
    pub(crate) approvals: HashMap<String, oneshot::Sender<ApprovalAnswer>>,
    pub(crate) asks: HashMap<String, oneshot::Sender<AskAnswer>>,
    pub(crate) plan_wait: Option<(String, oneshot::Sender<PlanAnswer>)>,
    pub(crate) runner: Option<JoinHandle<()>>,
    /// Whether the session already warned that shell commands run unsandboxed.
    pub(crate) sandbox_warned: bool,
    /// Whether the session already warned that `AGENTS.md` was not read.
    pub(crate) instructions_warned: bool,
    /// Whether the session already warned that a checkpoint failed.
    pub(crate) checkpoint_warned: bool,
    /// Review, patches and task graph (kept in `state.extensions` when persisted).
    pub(crate) ext: crate::session::ext::ExtState,
    /// Whether the running unit of work (`active`) is a compaction by hand: it has no
    /// model call a steered message could join, so such messages are queued.
    pub(crate) compacting: bool,
    /// Host-tool calls waiting for `host-tool.respond`, by toolCallId.
    pub(crate) host_calls: HashMap<String, crate::pipeline::host_tools::HostWaiter>,
}

/// One session.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) workspace: PathBuf,
    pub(crate) emitter: Emitter,
    /// The kernel's shared services.
    pub(crate) services: Arc<Services>,
    pub(crate) cancel: CancellationToken,
    /// Held while a request ends and the next one starts, and by commands that
    /// look at the running request, so a host that saw a terminal event finds the
    /// session already switched.
    pub(crate) turnover: tokio::sync::Mutex<()>,
    /// Checkpoints of the workspace ([`crate::work::rewind`]).
    pub(crate) checkpoints: crate::work::rewind::Book,
    /// Side questions being answered ([`crate::work::side`]).
    pub(crate) sides: std::sync::atomic::AtomicUsize,
    /// When a command last named the session or it last saved its state, ms of
    /// [`crate::base::time::now_ms`].
    pub(crate) last_used: std::sync::atomic::AtomicU64,
    /// Held while a state snapshot is taken and written, so snapshots of the session
    /// reach the store in the order they were taken.
    saving: tokio::sync::Mutex<()>,
    /// The session's own tools (host app, MCP servers) on top of the kernel's.
    pub(crate) tools: crate::session::overlay::Overlay,
    /// The session's MCP servers.
    pub(crate) mcp: crate::session::mcp::McpServers,
    data: Mutex<Data>,
}

fn not_found(code: ErrorCode, what: &str, id: &str) -> ErrorPayload {
    ErrorPayload::new(
        code,
        format!("no pending {what} {id:?} (unknown, or already resolved)"),
    )
    .with_detail("id", id)
}

impl Session {
    pub(crate) fn new(
        services: Arc<Services>,
        state: PersistedSession,
        model: Arc<dyn Model>,
        sequencer: Sequencer,
    ) -> Arc<Self> {
        let emitter = Emitter::new(
            services.ctx().clone(),
            Some(state.session_id.clone()),
            true,
            sequencer,
        );
        let ext = crate::session::ext::ExtState::load(&state.extensions, services.now());
        Arc::new(Self {
            id: state.session_id.clone(),
            workspace: PathBuf::from(&state.workspace),
            emitter,
            cancel: services.cancel().child_token(),
            turnover: tokio::sync::Mutex::new(()),
            checkpoints: crate::work::rewind::Book::default(),
            sides: Default::default(),
            last_used: std::sync::atomic::AtomicU64::new(crate::base::time::now_ms()),
            saving: tokio::sync::Mutex::new(()),
            tools: Default::default(),
            mcp: Default::default(),
            services,
            data: Mutex::new(Data {
                state,
                model,
                active: None,
                queue: VecDeque::new(),
                approvals: HashMap::new(),
                asks: HashMap::new(),
                plan_wait: None,
                runner: None,
                sandbox_warned: false,
                instructions_warned: false,
                checkpoint_warned: false,
                ext,
                compacting: false,
                host_calls: HashMap::new(),
            }),
        })
    }

    /// Records that a command named the session, or its state changed, now (real
    /// time: the kernel's clock is left alone).
    pub(crate) fn touch(&self) {
        self.last_used.store(
            crate::base::time::now_ms(),
            std::sync::atomic::Ordering::Release,
        );
    }

    pub(crate) fn info_state(&self, d: &Data) -> SessionState {
        Self::state_of(d)
    }

    pub(crate) fn data(&self) -> MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tool named `name` in this session's view (the kernel's, then its own).
    pub(crate) fn tool(&self, name: &str) -> Option<crate::session::registry::Entry> {
        self.tools.get(&self.services.registry(), name)
    }

    /// The definitions this session offers the model.
    pub(crate) fn tool_defs(&self) -> Arc<[crate::base::model::ToolDef]> {
        self.tools.defs(&self.services.registry())
    }

    pub(crate) fn now(&self) -> u64 {
        self.services.now()
    }

    /// A request reached `point`: a test probe may pause it there.
    pub(crate) async fn probe(&self, point: crate::base::probe::Point, request_id: &str) {
        self.services.probe(point, &self.id, request_id).await;
    }

    /// Saves the state snapshot; a failure becomes a warning on `request_id`.
    ///
    /// The write runs on the blocking pool: replacing a file can wait for the disk
    /// (ext4 flushes the new data before a rename over an existing file), and many
    /// sessions saving at once must not hold the runtime's worker threads.
    pub(crate) async fn persist(&self, request_id: &str) {
        self.touch();
        let _saving = self.saving.lock().await;
        let snapshot = {
            let mut d = self.data();
            d.state.updated_at = self.now();
            let Data { state, ext, .. } = &mut *d;
            ext.save(&mut state.extensions);
            d.state.clone()
        };
        let store = self.services.store().clone();
        let saved = tokio::task::spawn_blocking(move || store.save_state(&snapshot))
            .await
            .unwrap_or_else(|e| {
                Err(ErrorPayload::new(
                    ErrorCode::RuntimeInternalError,
                    format!("saving the session state failed: {e}"),
                ))
            });
        if let Err(e) = saved {
            tracing::warn!(session_id = %self.id, code = %e.code, message = %e.message, "saving the session state failed");
            self.emitter.emit(request_id, Event::Warning(e)).await;
        }
    }

    pub(crate) fn info(&self) -> SessionInfo {
        let d = self.data();
        SessionInfo {
            session_id: self.id.clone(),
            title: d.state.title.clone(),
            workspace: d.state.workspace.clone(),
            created_at: d.state.created_at,
            updated_at: d.state.updated_at,
            state: Self::state_of(&d),
            permission_mode: d.state.mode,
            model: d.state.model.clone(),
            request_count: crate::base::summary::request_count(&d.state),
            last_message: crate::base::summary::last_message(&d.state.history),
        }
    }

    fn state_of(d: &Data) -> SessionState {
        if d.state.closed {
            SessionState::Closed
        } else if !d.approvals.is_empty() || !d.asks.is_empty() || d.plan_wait.is_some() {
            SessionState::WaitingApproval
        } else if d.active.as_ref().is_some_and(|a| !a.ended) || !d.queue.is_empty() {
            SessionState::Running
        } else {
            SessionState::Idle
        }
    }

    pub(crate) fn snapshot(&self) -> SessionStateSnapshot {
        let info = self.info();
        let d = self.data();
        SessionStateSnapshot {
            session: info,
            active_request_id: d.active.as_ref().filter(|a| !a.ended).map(|a| a.id.clone()),
            queued_request_ids: d.queue.iter().map(|q| q.id.clone()).collect(),
            pending_approval_ids: {
                let mut ids: Vec<String> = d.approvals.keys().cloned().collect();
                ids.sort();
                ids
            },
            plan: d.state.plan.clone(),
            rules: d.state.rules.clone(),
            usage: d.state.usage,
            message_count: d.state.history.len() as u32,
            state: Self::state_of(&d),
        }
    }

    pub(crate) async fn emit_started(&self, request_id: &str) {
        let ev = {
            let d = self.data();
            SessionStarted {
                session_id: self.id.clone(),
                workspace: d.state.workspace.clone(),
                permission_mode: d.state.mode,
                model: d.state.model.clone(),
                title: d.state.title.clone(),
                created_at: d.state.created_at,
            }
        };
        self.emitter
            .emit(request_id, Event::SessionStarted(ev))
            .await;
    }

    /// Emits `session.resumed` and the replay under `g`, this session's emitter held,
    /// so no event of the session slips between the log that was read and the answer.
    pub(crate) async fn emit_resumed(
        &self,
        g: &mut crate::base::emit::EmitGuard<'_>,
        request_id: &str,
        log: &[Envelope],
        after: Option<&Cursor>,
    ) -> Result<(), ErrorPayload> {
        let replay: &[Envelope] = match after {
            None => &[],
            Some(c) => {
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
                &log[pos + 1..]
            }
        };
        let last_cursor = log.last().map(|e| Cursor {
            request_id: e.request_id.clone(),
            sequence: e.sequence,
        });
        let payload = {
            let d = self.data();
            let first_user = d.state.history.iter().find_map(|m| match m {
                Message::User { text, .. } => Some(text.clone()),
                _ => None,
            });
            let summary = match first_user {
                Some(t) => {
                    let short: String = t.chars().take(80).collect();
                    format!("{} messages; started with: {short}", d.state.history.len())
                }
                None => "no messages yet".to_owned(),
            };
            SessionResumed {
                session: SessionInfo {
                    session_id: self.id.clone(),
                    title: d.state.title.clone(),
                    workspace: d.state.workspace.clone(),
                    created_at: d.state.created_at,
                    updated_at: d.state.updated_at,
                    state: Self::state_of(&d),
                    permission_mode: d.state.mode,
                    model: d.state.model.clone(),
                    request_count: crate::base::summary::request_count(&d.state),
                    last_message: crate::base::summary::last_message(&d.state.history),
                },
                summary,
                message_count: d.state.history.len() as u32,
                plan: d.state.plan.clone(),
                rules: d.state.rules.clone(),
                last_cursor,
                replayed: replay.len() as u32,
            }
        };
        g.emit(request_id, Event::SessionResumed(payload)).await;
        g.replay(request_id, replay).await;
        Ok(())
    }

    /// Handles a command addressed to this session.
    pub(crate) async fn handle_command(
        self: &Arc<Self>,
        cmd: &Command,
    ) -> Result<(), ErrorPayload> {
        let rid = cmd.request_id.as_str();
        match &cmd.payload {
            CommandPayload::SessionState(_) => {
                let snap = self.snapshot();
                self.emitter.emit(rid, Event::SessionState(snap)).await;
            }
            CommandPayload::SessionSetMode(p) => {
                let previous = {
                    let mut d = self.data();
                    std::mem::replace(&mut d.state.mode, p.mode)
                };
                self.emitter
                    .emit(
                        rid,
                        Event::SessionModeChanged(SessionModeChanged {
                            mode: p.mode,
                            previous_mode: previous,
                        }),
                    )
                    .await;
                self.persist(rid).await;
            }
            CommandPayload::SessionSetModel(p) => {
                if self.data().active.is_some() {
                    return Err(ErrorPayload::new(
                        ErrorCode::SessionBusy,
                        "the model can only be changed while the session is idle",
                    ));
                }
                let model = self.services.model(Some(&p.model))?;
                let previous = {
                    let mut d = self.data();
                    d.model = model.clone();
                    std::mem::replace(&mut d.state.model, model.id())
                };
                self.emitter
                    .emit(
                        rid,
                        Event::SessionModelChanged(SessionModelChanged {
                            model: model.id(),
                            previous_model: previous,
                        }),
                    )
                    .await;
                self.persist(rid).await;
            }
            CommandPayload::SessionSetRules(p) => {
                crate::pipeline::gate::check_rules(p)?;
                let rules = ApprovalRules {
                    always_allow_global: p.always_allow_global.clone(),
                    always_allow_project: p.always_allow_project.clone(),
                    always_deny_global: p.always_deny_global.clone(),
                    always_deny_project: p.always_deny_project.clone(),
                };
                {
                    let mut d = self.data();
                    d.state.rules = rules.clone();
                    if let Some(deny) = &p.deny {
                        d.state.session_deny = deny.clone();
                    }
                }
                self.emitter
                    .emit(
                        rid,
                        Event::SessionRulesUpdated(SessionRulesUpdated {
                            rules,
                            source: "host".into(),
                        }),
                    )
                    .await;
                self.persist(rid).await;
            }
            CommandPayload::SessionLoadHistory(p) => {
                let count = {
                    let mut d = self.data();
                    if d.active.is_some() {
                        return Err(ErrorPayload::new(
                            ErrorCode::SessionBusy,
                            "history can only be loaded while the session is idle",
                        ));
                    }
                    let converted = crate::base::history_import::convert_history(&p.messages)?;
                    d.state.history.extend(converted);
                    d.state.history.len() as u32
                };
                self.emitter
                    .emit(
                        rid,
                        Event::SessionHistoryLoaded(SessionHistoryLoaded {
                            message_count: count,
                        }),
                    )
                    .await;
                self.persist(rid).await;
            }
            CommandPayload::SessionSetTitle(p) => {
                let title = crate::base::title::validate(&p.title)?;
                self.set_title(rid, title, "host").await;
            }
            CommandPayload::RequestSend(p) => {
                if p.message.trim().is_empty() {
                    return Err(ErrorPayload::new(
                        ErrorCode::RequestInvalid,
                        "the message is empty",
                    )
                    .with_detail("field", "payload.message"));
                }
                if let Some(refusal) = self.data().ext.send_refusal() {
                    return Err(refusal);
                }
                let q = Queued {
                    id: rid.to_owned(),
                    message: p.message.clone(),
                    images: p.images.clone().unwrap_or_default(),
                    patch_preview: p
                        .patch_preview
                        .unwrap_or(self.services.config().patch_preview),
                    overrides: crate::work::budget::RequestOverrides::of(p)?,
                };
                self.send(q, p.when_busy.unwrap_or_default()).await?;
            }
            CommandPayload::RequestInterrupt(_) => self.interrupt(rid, "user").await,
            CommandPayload::RequestCancelQueued(p) => {
                let removed = {
                    let mut d = self.data();
                    let pos = d.queue.iter().position(|q| q.id == p.queued_request_id);
                    pos.and_then(|i| d.queue.remove(i))
                };
                let Some(q) = removed else {
                    return Err(not_found(
                        ErrorCode::QueuedRequestNotFound,
                        "queued request",
                        &p.queued_request_id,
                    ));
                };
                self.emitter
                    .emit_reply(
                        &q.id,
                        Some(rid),
                        Event::RequestCancelled(RequestCancelled {
                            queued_request_id: q.id.clone(),
                        }),
                    )
                    .await;
            }
            CommandPayload::ApprovalRespond(p) => {
                let tx = self.data().approvals.remove(&p.approval_id);
                let Some(tx) = tx else {
                    return Err(not_found(
                        ErrorCode::ApprovalNotFound,
                        "approval",
                        &p.approval_id,
                    ));
                };
                if tx.send((p.decision, rid.to_owned())).is_err() {
                    return Err(not_found(
                        ErrorCode::ApprovalNotFound,
                        "approval",
                        &p.approval_id,
                    ));
                }
            }
            CommandPayload::PlanApprove(p) => {
                let tx = self.take_plan_wait(&p.plan_id)?;
                let _ = tx.send(PlanAnswer::Approve {
                    mode: p.mode.unwrap_or(PermissionMode::Ask),
                    reply_to: rid.to_owned(),
                });
            }
            CommandPayload::PlanReject(p) => {
                let tx = self.take_plan_wait(&p.plan_id)?;
                let _ = tx.send(PlanAnswer::Reject {
                    feedback: p.feedback.clone(),
                    reply_to: rid.to_owned(),
                });
            }
            CommandPayload::AskRespond(p) => {
                let tx = self.data().asks.remove(&p.ask_id);
                let Some(tx) = tx else {
                    return Err(not_found(ErrorCode::AskNotFound, "question", &p.ask_id));
                };
                if tx.send((p.answer.clone(), rid.to_owned())).is_err() {
                    return Err(not_found(ErrorCode::AskNotFound, "question", &p.ask_id));
                }
            }
            CommandPayload::CheckpointList(_) => {
                let list = crate::work::rewind::list(self).await?;
                self.emitter.emit(rid, Event::CheckpointList(list)).await;
            }
            CommandPayload::SessionRewind(p) => crate::work::rewind::rewind(self, rid, p).await?,
            CommandPayload::RequestSide(p) => crate::work::side::spawn(self, rid, &p.message)?,
            CommandPayload::ContextCompact(_) => {
                crate::work::compact::start_manual(self, rid).await?
            }
            other if self.handle_host(rid, other).await? => {}
            other if self.handle_ext(rid, other).await? => {}
            other => {
                return Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!(
                        "command `{}` is not available in this build",
                        other.command_type().as_str()
                    ),
                )
                .with_detail("type", other.command_type().as_str()));
            }
        }
        Ok(())
    }

    fn take_plan_wait(&self, plan_id: &str) -> Result<oneshot::Sender<PlanAnswer>, ErrorPayload> {
        let mut d = self.data();
        match d.plan_wait.take() {
            Some((id, tx)) if id == plan_id => Ok(tx),
            other => {
                d.plan_wait = other;
                Err(not_found(ErrorCode::PlanNotFound, "plan", plan_id))
            }
        }
    }

    async fn send(self: &Arc<Self>, q: Queued, when_busy: WhenBusy) -> Result<(), ErrorPayload> {
        let _turnover = self.turnover.lock().await;
        enum Outcome {
            Start(CancellationToken),
            Queued(u32),
            Steered(String),
        }
        let outcome = {
            let mut d = self.data();
            if d.state.closed {
                return Err(ErrorPayload::new(
                    ErrorCode::SessionNotFound,
                    "the session is closed",
                ));
            }
            crate::work::request::refuse_reused_id(&d, &q.id)?;
            let compacting = d.compacting;
            let waiting = d.queue.len() + d.active.as_ref().map_or(0, |a| a.steer.len());
            if d.active.is_some()
                && !matches!(when_busy, WhenBusy::Reject)
                && waiting >= MAX_WAITING
            {
                return Err(ErrorPayload::new(
                    ErrorCode::SessionBusy,
                    format!("{waiting} messages already wait for the running request (the most a session keeps)"),
                )
                .retryable(true)
                .with_detail("reason", "queue_full")
                .with_detail("limit", MAX_WAITING as u64));
            }
            match (&mut d.active, when_busy) {
                (None, _) => {
                    let cancel = self.cancel.child_token();
                    d.active = Some(Active::new(&q.id, cancel.clone(), q.patch_preview));
                    Outcome::Start(cancel)
                }
                (Some(_), WhenBusy::Steer | WhenBusy::Queue) if compacting => {
                    d.queue.push_back(q.clone());
                    Outcome::Queued(d.queue.len() as u32)
                }
                (Some(active), WhenBusy::Steer) => {
                    active.steer.push(q.message.clone());
                    Outcome::Steered(active.id.clone())
                }
                (Some(active), WhenBusy::Reject) => {
                    return Err(ErrorPayload::new(
                        ErrorCode::SessionBusy,
                        format!("request {} is running", active.id),
                    )
                    .retryable(true)
                    .with_detail("activeRequestId", active.id.clone()));
                }
                (Some(_), WhenBusy::Queue) => {
                    d.queue.push_back(q.clone());
                    Outcome::Queued(d.queue.len() as u32)
                }
            }
        };
        match outcome {
            Outcome::Start(cancel) => {
                let me = self.clone();
                let handle = tokio::spawn(async move {
                    // The first model call offers the tools of MCP servers still
                    // starting (each start has its own time limit).
                    me.mcp.wait_started(&cancel).await;
                    crate::work::request::run_requests(me, q, cancel).await
                });
                self.data().runner = Some(handle);
            }
            Outcome::Queued(position) => {
                self.emitter
                    .emit(&q.id, Event::RequestQueued(RequestQueued { position }))
                    .await;
            }
            Outcome::Steered(target) => {
                self.emitter
                    .emit_reply(
                        &target,
                        Some(&q.id),
                        Event::RequestSteered(RequestSteered {
                            target_request_id: target.clone(),
                        }),
                    )
                    .await;
            }
        }
        Ok(())
    }

    /// Cancels the running request, or answers that there was nothing to do.
    pub(crate) async fn interrupt(&self, rid: &str, reason: &str) {
        let _turnover = self.turnover.lock().await;
        let target = {
            let mut d = self.data();
            match &mut d.active {
                Some(a) if a.interrupt_reply.is_none() => {
                    a.interrupt_reply = Some(rid.to_owned());
                    a.cancel.cancel();
                    None
                }
                Some(a) => Some(Some(a.id.clone())),
                None => Some(None),
            }
        };
        // `None`: the running request will emit `session.interrupted` (replyTo rid)
        // once its tools are stopped. Otherwise answer now, on the command's own stream.
        if let Some(already) = target {
            self.emitter
                .emit(
                    rid,
                    Event::SessionInterrupted(SessionInterrupted {
                        was_running: already.is_some(),
                        interrupted_request_id: already,
                        reason: if reason == "user" {
                            "noop".into()
                        } else {
                            reason.into()
                        },
                    }),
                )
                .await;
        }
    }

    /// Interrupts, drops the queue, waits for the runner, emits `session.closed`.
    pub(crate) async fn close(&self, rid: &str, reason: &str) {
        let turnover = self.turnover.lock().await;
        let (queued, runner, active) = {
            let mut d = self.data();
            let queued: Vec<Queued> = d.queue.drain(..).collect();
            let active = match &mut d.active {
                Some(a) => {
                    if a.interrupt_reply.is_none() {
                        a.interrupt_reply = Some(rid.to_owned());
                    }
                    a.cancel.cancel();
                    true
                }
                None => false,
            };
            (queued, d.runner.take(), active)
        };
        drop(turnover);
        for q in queued {
            self.emitter
                .emit_reply(
                    &q.id,
                    Some(rid),
                    Event::RequestCancelled(RequestCancelled {
                        queued_request_id: q.id.clone(),
                    }),
                )
                .await;
        }
        if let Some(runner) = runner {
            if active {
                let _ = runner.await;
            }
        }
        crate::work::process::stop_all(self).await;
        self.mcp.stop_all();
        self.data().state.closed = true;
        self.persist(rid).await;
        self.emitter
            .emit(
                rid,
                Event::SessionClosed(SessionClosed {
                    reason: reason.to_owned(),
                }),
            )
            .await;
        self.cancel.cancel();
    }
}
