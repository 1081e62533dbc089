//! One session: its state, its emitter, and the handling of session commands.
//!
//! State lives behind a short-lived lock that is never held across an await. The
//! running request is a task ([`crate::request`]) that talks to command handlers through
//! one-shot channels registered here (approvals, questions, plan decisions).

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
    ApprovalDecision, ApprovalRules, Cursor, HistoryMessage, PermissionMode, Role, SessionInfo,
    SessionState,
};
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event, Sequencer};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::emit::Emitter;
use crate::kernel::KernelInner;
use crate::model::{Message, Model, ToolCallRequest};
use crate::store::PersistedSession;

/// A request waiting to run.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub(crate) id: String,
    pub(crate) message: String,
    pub(crate) images: Vec<String>,
    /// Whether `edit_file` / `write_file` are proposed as patches in this request.
    pub(crate) patch_preview: bool,
}

/// The running request.
#[derive(Debug)]
pub(crate) struct Active {
    pub(crate) id: String,
    pub(crate) cancel: CancellationToken,
    /// The requestId of the command that interrupted it.
    pub(crate) interrupt_reply: Option<String>,
    /// Messages steered into the running request, not yet given to the model.
    pub(crate) steer: Vec<String>,
    /// Whether `edit_file` / `write_file` are proposed as patches.
    pub(crate) patch_preview: bool,
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
    /// Review, patches and task graph (kept in `state.extensions` when persisted).
    pub(crate) ext: crate::ext::ExtState,
}

/// One session.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) workspace: PathBuf,
    pub(crate) emitter: Emitter,
    pub(crate) kernel: Arc<KernelInner>,
    pub(crate) cancel: CancellationToken,
    /// Held while a request ends and the next one starts, and by commands that
    /// look at the running request, so a host that saw a terminal event finds the
    /// session already switched.
    pub(crate) turnover: tokio::sync::Mutex<()>,
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
        kernel: Arc<KernelInner>,
        state: PersistedSession,
        model: Arc<dyn Model>,
        sequencer: Sequencer,
    ) -> Arc<Self> {
        let emitter = Emitter::new(
            kernel.ctx.clone(),
            Some(state.session_id.clone()),
            true,
            sequencer,
        );
        let ext = crate::ext::ExtState::load(&state.extensions, kernel.ctx.clock.now_ms());
        Arc::new(Self {
            id: state.session_id.clone(),
            workspace: PathBuf::from(&state.workspace),
            emitter,
            cancel: kernel.cancel.child_token(),
            turnover: tokio::sync::Mutex::new(()),
            kernel,
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
                ext,
            }),
        })
    }

    pub(crate) fn data(&self) -> MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn now(&self) -> u64 {
        self.kernel.ctx.clock.now_ms()
    }

    /// A request reached `point`: a test probe may pause it there.
    pub(crate) async fn probe(&self, point: crate::probe::Point, request_id: &str) {
        if let Some(p) = &self.kernel.probe {
            p.reached(point, &self.id, request_id).await;
        }
    }

    /// Saves the state snapshot; a failure becomes a warning on `request_id`.
    pub(crate) async fn persist(&self, request_id: &str) {
        let snapshot = {
            let mut d = self.data();
            d.state.updated_at = self.now();
            let Data { state, ext, .. } = &mut *d;
            ext.save(&mut state.extensions);
            d.state.clone()
        };
        if let Err(e) = self.kernel.ctx.store.save_state(&snapshot) {
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
        }
    }

    fn state_of(d: &Data) -> SessionState {
        if d.state.closed {
            SessionState::Closed
        } else if !d.approvals.is_empty() || !d.asks.is_empty() || d.plan_wait.is_some() {
            SessionState::WaitingApproval
        } else if d.active.is_some() {
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
            active_request_id: d.active.as_ref().map(|a| a.id.clone()),
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
        g: &mut crate::emit::EmitGuard<'_>,
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
                let model = (self.kernel.factory)(&p.model)?;
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
                let rules = ApprovalRules {
                    always_allow_global: p.always_allow_global.clone(),
                    always_allow_project: p.always_allow_project.clone(),
                };
                self.data().state.rules = rules.clone();
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
                    let converted = convert_history(&p.messages)?;
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
                let title = crate::title::validate(&p.title)?;
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
                    patch_preview: p.patch_preview.unwrap_or(self.kernel.config.patch_preview),
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
            CommandPayload::ContextCompact(_) => {
                if self.data().active.is_some() {
                    return Err(ErrorPayload::new(
                        ErrorCode::SessionBusy,
                        "compaction by hand runs while the session is idle",
                    ));
                }
                crate::compact::run(self, rid, "manual", &CancellationToken::new()).await;
                self.persist(rid).await;
            }
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
            match (&mut d.active, when_busy) {
                (None, _) => {
                    let cancel = self.cancel.child_token();
                    d.active = Some(Active {
                        id: q.id.clone(),
                        cancel: cancel.clone(),
                        interrupt_reply: None,
                        steer: Vec::new(),
                        patch_preview: q.patch_preview,
                    });
                    Outcome::Start(cancel)
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
                let handle = tokio::spawn(crate::request::run_requests(me, q, cancel));
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
        crate::ext::process::stop_all(self).await;
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

/// Converts host history (seed 000 §5.5) into model messages.
fn convert_history(messages: &[HistoryMessage]) -> Result<Vec<Message>, ErrorPayload> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m.role {
            Role::User => out.push(Message::User {
                text: m.content.clone(),
                images: Vec::new(),
            }),
            Role::Assistant => {
                let calls = m
                    .tool_calls
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|c| ToolCallRequest {
                        id: c.id,
                        name: c.name,
                        arguments: c.arguments,
                    })
                    .collect::<Vec<_>>();
                out.push(Message::Assistant {
                    text: m.content.clone(),
                    tool_calls: calls.clone(),
                });
                for r in m.tool_results.clone().unwrap_or_default() {
                    let name = calls
                        .iter()
                        .find(|c| c.id == r.tool_call_id)
                        .map(|c| c.name.clone())
                        .unwrap_or_default();
                    out.push(Message::Tool {
                        tool_call_id: r.tool_call_id,
                        name,
                        content: r.content,
                        is_error: r.is_error,
                    });
                }
            }
            Role::Tool => {
                for r in m.tool_results.clone().unwrap_or_default() {
                    out.push(Message::Tool {
                        tool_call_id: r.tool_call_id,
                        name: String::new(),
                        content: r.content,
                        is_error: r.is_error,
                    });
                }
            }
            Role::System => {
                return Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    "history cannot contain system messages (the system prompt is the kernel's)",
                )
                .with_detail("field", format!("payload.messages[{i}].role")));
            }
        }
    }
    Ok(out)
}
