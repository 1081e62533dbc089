//! The library API for host apps: a session's handle and event streams.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use keel_envelope::commands::{CommandPayload, RequestSend};
use keel_envelope::{Command, Envelope, ErrorPayload};
use tokio::sync::mpsc;

use crate::base::hub::{WatchEnd, WatchItem, WatchShared};
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

/// The command side of a watcher (see [`Kernel::watcher`]): executes commands so that
/// their answers reach this watcher, and queues a transport's own envelopes. Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct Watcher {
    pub(crate) kernel: Kernel,
    pub(crate) shared: Arc<WatchShared>,
}

impl Watcher {
    /// Executes a command on behalf of this watcher: its answers, and the events of a
    /// session it starts, resumes, forks or watches, are delivered to this watcher's stream.
    pub async fn execute(&self, cmd: Command) -> Result<(), ErrorPayload> {
        self.shared.track(&cmd.request_id);
        self.kernel.execute(cmd).await
    }

    /// Delivers events carrying `request_id` (or answering it) to this watcher.
    pub fn track(&self, request_id: &str) {
        self.shared.track(request_id);
    }

    /// Queues an envelope for this watcher alone, in order with the kernel's events
    /// (a transport's own answers: decode errors, `runtime.stopped`).
    pub fn publish(&self, env: &Envelope) {
        self.shared.publish(env);
    }

    /// The sessions watched, sorted.
    pub fn watching(&self) -> Vec<String> {
        self.shared.sessions()
    }

    /// Why the stream ended, once it has.
    pub fn end(&self) -> Option<WatchEnd> {
        self.shared.end()
    }

    /// A token cancelled once delivery to this watcher has stopped (cut off, closed,
    /// or its stream dropped).
    pub fn ended(&self) -> tokio_util::sync::CancellationToken {
        self.shared.ended()
    }

    /// Stops delivery to this watcher (what is queued can still be read).
    pub fn close(&self) {
        self.shared.close(WatchEnd::Closed);
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }
}

/// The event side of a watcher: its envelopes, in order. Dropping it ends the watch.
#[derive(Debug)]
pub struct WatchStream {
    pub(crate) rx: mpsc::UnboundedReceiver<WatchItem>,
    pub(crate) shared: Arc<WatchShared>,
}

impl WatchStream {
    /// The next envelope, or `None` once the watcher was cut off or closed and its
    /// queue is empty ([`WatchStream::end`] says why).
    pub async fn recv(&mut self) -> Option<Envelope> {
        let item = self.rx.recv().await?;
        self.shared.read_one(&item);
        Some(item.env)
    }

    /// An envelope if one is ready now.
    pub fn try_recv(&mut self) -> Option<Envelope> {
        let item = self.rx.try_recv().ok()?;
        self.shared.read_one(&item);
        Some(item.env)
    }

    /// Whether no envelope is waiting.
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }

    /// Why the stream ended, once it has.
    pub fn end(&self) -> Option<WatchEnd> {
        self.shared.end()
    }
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        self.shared.close(WatchEnd::Closed);
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
            rx: self.kernel.inner.services.hub().subscribe(
                Some(self.session.id.clone()),
                self.kernel.inner.services.config().channel_capacity,
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
        self.send_with(RequestSend::new(message)).await
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
            keel_envelope::commands::RequestInterrupt::new(),
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
            keel_envelope::commands::ApprovalRespond::new(approval_id.to_owned(), decision),
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
            keel_envelope::commands::PlanApprove::new(plan_id.to_owned()).mode(mode),
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
            keel_envelope::commands::PlanReject::new(plan_id.to_owned()).feedback(feedback),
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
            keel_envelope::commands::AskRespond::new(ask_id.to_owned(), answer),
        ))
        .await
    }

    /// Changes the permission mode.
    pub async fn set_mode(
        &self,
        mode: keel_envelope::types::PermissionMode,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::SessionSetMode(
            keel_envelope::commands::SetMode::new(mode),
        ))
        .await
    }

    /// Syncs the always-allow and always-deny rules (the session-only deny rules
    /// are cleared).
    pub async fn set_rules(
        &self,
        rules: keel_envelope::types::ApprovalRules,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::SessionSetRules(
            keel_envelope::commands::SetRules::new()
                .always_allow_global(rules.always_allow_global)
                .always_allow_project(rules.always_allow_project)
                .always_deny_global(rules.always_deny_global)
                .always_deny_project(rules.always_deny_project),
        ))
        .await
    }

    /// Switches the model (idle only).
    pub async fn set_model(&self, model: impl Into<String>) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::SessionSetModel(
            keel_envelope::commands::SetModel::new(model),
        ))
        .await
    }

    /// Loads history.
    pub async fn load_history(
        &self,
        messages: Vec<keel_envelope::types::HistoryMessage>,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::SessionLoadHistory(
            keel_envelope::commands::LoadHistory::new(messages),
        ))
        .await
    }

    /// Replaces the session's host tools (idle only); answered by
    /// `session.host_tools_updated`.
    pub async fn set_host_tools(
        &self,
        tools: Vec<keel_envelope::host::HostToolSpec>,
    ) -> Result<String, ErrorPayload> {
        self.run(CommandPayload::SessionSetHostTools(
            keel_envelope::commands::SetHostTools::new(tools),
        ))
        .await
    }

    /// Answers a `host-tool.requested` call with a result or an error message.
    pub async fn respond_host_tool(
        &self,
        tool_call_id: &str,
        answer: Result<serde_json::Value, String>,
    ) -> Result<String, ErrorPayload> {
        let (result, error) = match answer {
            Ok(v) => (Some(v), None),
            Err(message) => (None, Some(keel_envelope::host::HostToolError::new(message))),
        };
        self.run(CommandPayload::HostToolRespond(
            keel_envelope::commands::HostToolRespond::new(tool_call_id.to_owned())
                .result(result)
                .error(error),
        ))
        .await
    }

    /// The session's MCP servers, their state and tools (as `mcp.list` answers).
    pub fn mcp_servers(&self) -> Vec<keel_envelope::host::McpServerInfo> {
        self.session.mcp.list()
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
