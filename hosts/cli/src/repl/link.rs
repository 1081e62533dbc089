//! The REPL's link to a kernel: the one in this process, or the daemon's over its
//! socket (`keel attach`). The REPL sees one kind of session and one event stream
//! either way; every session call is one command (`Session::command`), answered by
//! the same events.

use keel_envelope::commands::{
    ApprovalRespond, AskRespond, CommandPayload, PlanApprove, PlanReject, RequestInterrupt,
    RequestSend, SessionListCmd, SessionResume, SessionStateCmd, SessionUnwatch, SessionWatch,
    SetMode, SetModel, SetRules,
};
use keel_envelope::events::{SessionResumed, SessionStateSnapshot};
use keel_envelope::types::{
    ApprovalDecision, ApprovalRules, ModelInfo, PermissionMode, SessionInfo,
};
use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event};
use keel_kernel::{EventStream, Kernel, SessionHandle};
use keel_serve::Client;
use std::sync::Mutex;
use tokio::sync::mpsc;

/// The daemon's side of an attached REPL.
#[derive(Debug)]
pub(crate) struct Remote {
    pub(crate) client: Client,
    pub(crate) models: Vec<ModelInfo>,
    pub(crate) patch_preview: bool,
}

/// Where the REPL's sessions live.
#[derive(Debug)]
pub(crate) enum Backend {
    Local(Kernel),
    Remote(Remote),
}

/// The session the REPL talks to.
#[derive(Debug)]
pub(crate) enum Session {
    Local(SessionHandle),
    Remote(Box<RemoteSession>),
}

/// A session of the daemon.
#[derive(Debug)]
pub(crate) struct RemoteSession {
    client: Client,
    id: String,
    rt: tokio::runtime::Handle,
    /// The last state read, for when the daemon cannot be asked.
    last: Mutex<Option<SessionStateSnapshot>>,
}

/// The events the REPL reads.
#[derive(Debug)]
pub(crate) enum Events {
    Local(EventStream),
    Remote(mpsc::UnboundedReceiver<Envelope>),
}

impl Events {
    pub(crate) async fn recv(&mut self) -> Option<Envelope> {
        match self {
            Events::Local(e) => e.recv().await,
            Events::Remote(r) => r.recv().await,
        }
    }

    pub(crate) fn try_recv(&mut self) -> Option<Envelope> {
        match self {
            Events::Local(e) => e.try_recv(),
            Events::Remote(r) => r.try_recv().ok(),
        }
    }
}

/// A session just opened by [`Backend::open`].
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) session: Session,
    /// A new event stream (a local session has its own; a remote one shares the
    /// connection's).
    pub(crate) events: Option<Events>,
    /// What the session is: from `session.resumed`, or made from its state when it was
    /// already open in the daemon.
    pub(crate) resumed: Option<SessionResumed>,
    /// The request running when it was opened (attaching to a busy session).
    pub(crate) running: Option<String>,
}

fn unexpected(env: &Envelope) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::RuntimeInternalError,
        format!("unexpected answer {}", env.type_name()),
    )
}

impl Backend {
    pub(crate) fn patch_preview(&self) -> bool {
        match self {
            Backend::Local(k) => k.config().patch_preview,
            Backend::Remote(r) => r.patch_preview,
        }
    }

    pub(crate) fn available_models(&self) -> Vec<ModelInfo> {
        match self {
            Backend::Local(k) => k.config().available_models.clone(),
            Backend::Remote(r) => r.models.clone(),
        }
    }

    pub(crate) async fn list_sessions(&self) -> Result<Vec<SessionInfo>, ErrorPayload> {
        match self {
            Backend::Local(k) => k.list_sessions(),
            Backend::Remote(r) => {
                let env = r
                    .client
                    .query(None, CommandPayload::SessionList(SessionListCmd::new()))
                    .await?;
                match env.event {
                    Event::SessionList(l) => Ok(l.sessions),
                    _ => Err(unexpected(&env)),
                }
            }
        }
    }

    /// Opens a session by id: resumed here, or in the daemon watched when it is open
    /// there and resumed when it is only stored.
    pub(crate) async fn open(&self, id: &str) -> Result<Opened, ErrorPayload> {
        match self {
            Backend::Local(k) => {
                let (handle, mut events) = k.resume_session(id, None).await?;
                let mut resumed = None;
                while let Ok(Some(env)) =
                    tokio::time::timeout(std::time::Duration::from_secs(5), events.recv()).await
                {
                    if let Event::SessionResumed(p) = env.event {
                        resumed = Some(p);
                        break;
                    }
                }
                Ok(Opened {
                    session: Session::Local(handle),
                    events: Some(Events::Local(events)),
                    resumed,
                    running: None,
                })
            }
            Backend::Remote(r) => {
                let watch = CommandPayload::SessionWatch(SessionWatch::new(id.to_owned()));
                let session = Session::remote(r.client.clone(), id.to_owned());
                match r.client.request(None, watch).await {
                    Ok(env) => {
                        let Event::SessionWatched(w) = env.event else {
                            return Err(unexpected(&env));
                        };
                        let snap = session.fetch_state().await?;
                        Ok(Opened {
                            session,
                            events: None,
                            resumed: Some(
                                SessionResumed::new(
                                    w.session,
                                    String::new(),
                                    snap.message_count,
                                    snap.rules,
                                    w.replayed,
                                )
                                .plan(snap.plan)
                                .last_cursor(w.last_cursor),
                            ),
                            running: w.active_request_id,
                        })
                    }
                    Err(e) if e.code == ErrorCode::SessionNotFound => {
                        let resume =
                            CommandPayload::SessionResume(SessionResume::new(id.to_owned()));
                        let env = r.client.request(None, resume).await?;
                        let Event::SessionResumed(p) = env.event else {
                            return Err(unexpected(&env));
                        };
                        Ok(Opened {
                            session,
                            events: None,
                            resumed: Some(p),
                            running: None,
                        })
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Starts a new session in `workspace` with `mode` and `model` (`provider:model`).
    pub(crate) async fn start(
        &self,
        workspace: &str,
        mode: PermissionMode,
        model: &str,
    ) -> Result<Opened, ErrorPayload> {
        let options = keel_kernel::SessionOptions {
            workspace_path: Some(workspace.to_owned()),
            permission_mode: Some(mode),
            model: Some(model.to_owned()),
            title: None,
        };
        match self {
            Backend::Local(k) => {
                let (handle, events) = k.start_session(options).await?;
                Ok(Opened {
                    session: Session::Local(handle),
                    events: Some(Events::Local(events)),
                    resumed: None,
                    running: None,
                })
            }
            Backend::Remote(r) => {
                let start = CommandPayload::SessionStart(options.into());
                let env = r.client.request(None, start).await?;
                let Event::SessionStarted(s) = env.event else {
                    return Err(unexpected(&env));
                };
                Ok(Opened {
                    session: Session::remote(r.client.clone(), s.session_id),
                    events: None,
                    resumed: None,
                    running: None,
                })
            }
        }
    }

    /// Stops the local kernel; closes the connection to the daemon (whose sessions go
    /// on).
    pub(crate) async fn shutdown(&self) {
        match self {
            Backend::Local(k) => k.shutdown("exit").await,
            Backend::Remote(r) => r.client.close().await,
        }
    }
}

impl Session {
    /// A session of the daemon, used through `client`; call inside the runtime.
    pub(crate) fn remote(client: Client, id: String) -> Self {
        Session::Remote(Box::new(RemoteSession {
            client,
            id,
            rt: tokio::runtime::Handle::current(),
            last: Mutex::new(None),
        }))
    }

    pub(crate) fn id(&self) -> &str {
        match self {
            Session::Local(h) => h.id(),
            Session::Remote(r) => &r.id,
        }
    }

    pub(crate) fn is_remote(&self) -> bool {
        matches!(self, Session::Remote(_))
    }

    async fn fetch_state(&self) -> Result<SessionStateSnapshot, ErrorPayload> {
        match self {
            Session::Local(h) => Ok(h.state()),
            Session::Remote(r) => {
                let env = r
                    .client
                    .query(
                        Some(&r.id),
                        CommandPayload::SessionState(SessionStateCmd::new()),
                    )
                    .await?;
                let Event::SessionState(s) = env.event else {
                    return Err(unexpected(&env));
                };
                *r.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.clone());
                Ok(s)
            }
        }
    }

    /// The session's current state (over the socket: asked now, or the last one read
    /// when the daemon cannot be asked).
    pub(crate) fn state(&self) -> SessionStateSnapshot {
        match self {
            Session::Local(h) => h.state(),
            Session::Remote(r) => {
                let fresh = if tokio::runtime::Handle::try_current().is_err() {
                    r.rt.block_on(self.fetch_state()).ok()
                } else {
                    None
                };
                fresh
                    .or_else(|| r.last.lock().unwrap_or_else(|p| p.into_inner()).clone())
                    .unwrap_or_else(|| placeholder(&r.id))
            }
        }
    }

    /// The session's MCP servers, their state and tools (over the socket: asked now;
    /// none when the daemon cannot be asked).
    pub(crate) fn mcp_servers(&self) -> Vec<keel_envelope::host::McpServerInfo> {
        match self {
            Session::Local(h) => h.mcp_servers(),
            Session::Remote(r) => {
                if tokio::runtime::Handle::try_current().is_ok() {
                    return Vec::new();
                }
                let ask = r.client.query(
                    Some(&r.id),
                    CommandPayload::McpList(keel_envelope::commands::McpListCmd::new()),
                );
                match r.rt.block_on(ask) {
                    Ok(Envelope {
                        event: Event::McpList(l),
                        ..
                    }) => l.servers,
                    _ => Vec::new(),
                }
            }
        }
    }

    /// Runs a session command; returns its request id once it is answered (an `error`
    /// or `request.rejected` answer is the `Err`).
    pub(crate) async fn command(&self, payload: CommandPayload) -> Result<String, ErrorPayload> {
        match self {
            Session::Local(h) => h.command(payload).await,
            Session::Remote(r) => {
                let rid = r.client.next_request_id();
                r.client
                    .send(
                        Command::new(rid.clone(), Some(r.id.clone()), payload),
                        false,
                    )
                    .await
                    .map(|_| rid)
            }
        }
    }

    pub(crate) async fn send_with(&self, req: RequestSend) -> Result<String, ErrorPayload> {
        self.command(CommandPayload::RequestSend(req)).await
    }

    pub(crate) async fn interrupt(&self) -> Result<String, ErrorPayload> {
        self.command(CommandPayload::RequestInterrupt(RequestInterrupt::new()))
            .await
    }

    pub(crate) async fn respond_approval(
        &self,
        approval_id: &str,
        decision: ApprovalDecision,
    ) -> Result<String, ErrorPayload> {
        self.command(CommandPayload::ApprovalRespond(ApprovalRespond::new(
            approval_id.to_owned(),
            decision,
        )))
        .await
    }

    pub(crate) async fn approve_plan(
        &self,
        plan_id: &str,
        mode: Option<PermissionMode>,
    ) -> Result<String, ErrorPayload> {
        self.command(CommandPayload::PlanApprove(
            PlanApprove::new(plan_id.to_owned()).mode(mode),
        ))
        .await
    }

    pub(crate) async fn reject_plan(
        &self,
        plan_id: &str,
        feedback: Option<String>,
    ) -> Result<String, ErrorPayload> {
        self.command(CommandPayload::PlanReject(
            PlanReject::new(plan_id.to_owned()).feedback(feedback),
        ))
        .await
    }

    pub(crate) async fn answer_ask(
        &self,
        ask_id: &str,
        answer: impl Into<String>,
    ) -> Result<String, ErrorPayload> {
        self.command(CommandPayload::AskRespond(AskRespond::new(
            ask_id.to_owned(),
            answer,
        )))
        .await
    }

    pub(crate) async fn set_mode(&self, mode: PermissionMode) -> Result<String, ErrorPayload> {
        self.command(CommandPayload::SessionSetMode(SetMode::new(mode)))
            .await
    }

    pub(crate) async fn set_model(&self, model: &str) -> Result<String, ErrorPayload> {
        self.command(CommandPayload::SessionSetModel(SetModel::new(
            model.to_owned(),
        )))
        .await
    }

    pub(crate) async fn set_rules(&self, rules: ApprovalRules) -> Result<String, ErrorPayload> {
        self.command(CommandPayload::SessionSetRules(
            SetRules::new()
                .always_allow_global(rules.always_allow_global)
                .always_allow_project(rules.always_allow_project)
                .always_deny_global(rules.always_deny_global)
                .always_deny_project(rules.always_deny_project),
        ))
        .await
    }

    /// Leaves the session: a local one is closed; a remote one is only no longer
    /// watched, and goes on in the daemon.
    pub(crate) async fn close(&self) -> Result<(), ErrorPayload> {
        match self {
            Session::Local(h) => h.close().await,
            Session::Remote(r) => r
                .client
                .request(
                    None,
                    CommandPayload::SessionUnwatch(SessionUnwatch::new(r.id.clone())),
                )
                .await
                .map(|_| ()),
        }
    }
}

/// A state to show when nothing could be read.
fn placeholder(id: &str) -> SessionStateSnapshot {
    SessionStateSnapshot::new(
        SessionInfo::new(
            id.to_owned(),
            String::new(),
            0,
            0,
            keel_envelope::types::SessionState::Idle,
            PermissionMode::Ask,
            String::new(),
            0,
        ),
        Vec::new(),
        Vec::new(),
        ApprovalRules::default(),
        keel_envelope::types::Usage::default(),
        0,
        keel_envelope::types::SessionState::Idle,
    )
}
