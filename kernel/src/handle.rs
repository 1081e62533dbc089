//! The library API for host apps: a session's handle and event streams.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use keel_envelope::commands::{CommandPayload, RequestSend};
use keel_envelope::{Command, Envelope, ErrorPayload};
use tokio::sync::mpsc;

use crate::kernel::Kernel;
use crate::session::Session;

/// A stream of envelopes (all sessions, or one).
#[derive(Debug)]
pub struct EventStream {
    pub(crate) rx: mpsc::Receiver<Envelope>,
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

/// A handle to one open session. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    pub(crate) kernel: Kernel,
    pub(crate) session: Arc<Session>,
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
        // The live session: the kernel's copy when it was unloaded and reloaded.
        match self.kernel.session(&self.session.id) {
            Some(live) => live.snapshot(),
            None => self.session.snapshot(),
        }
    }

    /// Closes the session.
    pub async fn close(&self) -> Result<(), ErrorPayload> {
        self.kernel.close_session(&self.session.id).await
    }
}
