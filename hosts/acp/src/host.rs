//! The state of one ACP connection: the kernel, the connection to the client, and the
//! sessions open on it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use agent_client_protocol::v1::schema::{SessionConfigOption, SessionNotification, SessionUpdate};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error};
use keel_envelope::{Envelope, ErrorPayload};
use keel_kernel::{EventStream, Kernel, SessionHandle};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::error::not_open;

/// How a prompt ended.
#[derive(Debug)]
pub(crate) enum PromptEnd {
    /// A stop reason, with the request's usage when it completed.
    Stop(
        agent_client_protocol::v1::schema::StopReason,
        Option<agent_client_protocol::v1::schema::Usage>,
    ),
    /// The request failed: the prompt is answered with this error.
    Failed(ErrorPayload),
}

/// What the host keeps for a session besides the kernel's own state.
#[derive(Debug, Default)]
pub(crate) struct SessState {
    /// Prompt requests waiting for their end, by kernel request id.
    pub(crate) waiters: HashMap<String, oneshot::Sender<PromptEnd>>,
    /// Ends that arrived before their waiter.
    pub(crate) ended: HashMap<String, PromptEnd>,
    /// The last error of each request.
    pub(crate) errors: HashMap<String, ErrorPayload>,
    /// Session deny rules added by `reject_always` answers (sent with
    /// `session.set_rules`).
    pub(crate) denies: Vec<String>,
    /// First event of a command's stream, for extension methods.
    pub(crate) event_waiters: HashMap<String, oneshot::Sender<Envelope>>,
}

/// A session open on this connection.
#[derive(Debug)]
pub(crate) struct Sess {
    pub(crate) handle: SessionHandle,
    pub(crate) workspace: PathBuf,
    state: Mutex<SessState>,
    /// Stops the translation of its events (closed, deleted, replaced, or EOF).
    pub(crate) stop: CancellationToken,
    /// Its custom commands and skills, found when it was opened here.
    pub(crate) catalog: Option<keel_skills::Catalog>,
}

impl Sess {
    pub(crate) fn st(&self) -> MutexGuard<'_, SessState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands a prompt's end to its waiter (or keeps it until the waiter comes).
    pub(crate) fn finish(&self, rid: &str, end: PromptEnd) {
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

    /// The session's config options with their current values.
    pub(crate) fn config_options(&self, kernel: &Kernel) -> Vec<SessionConfigOption> {
        let state = self.handle.state();
        crate::config::config_options(
            state.session.permission_mode,
            &state.session.model,
            &kernel.config().available_models,
        )
    }
}

/// One connection's host.
pub(crate) struct Host {
    pub(crate) kernel: Kernel,
    /// The connection, known from the first message on.
    cx: OnceLock<ConnectionTo<Client>>,
    sessions: Mutex<HashMap<String, Arc<Sess>>>,
    /// Where custom commands and skills come from, if anywhere.
    commands: Option<crate::commands::Commands>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

impl Host {
    pub(crate) fn new(kernel: Kernel, commands: Option<crate::commands::Commands>) -> Arc<Self> {
        Arc::new(Self {
            kernel,
            cx: OnceLock::new(),
            sessions: Mutex::new(HashMap::new()),
            commands,
        })
    }

    /// Sends a session's `available_commands_update` (its custom commands and skills),
    /// if it is open and slash commands are on.
    pub(crate) fn announce_commands(&self, session_id: &str) {
        let Ok(sess) = self.session(session_id) else {
            return;
        };
        // Nothing to announce is not announced (a client starts with no commands).
        if let Some(catalog) = sess
            .catalog
            .as_ref()
            .filter(|c| !c.commands.items.is_empty() || !c.skills.items.is_empty())
        {
            self.update(session_id, crate::commands::update(catalog));
        }
    }

    /// Remembers the connection (every handler passes it).
    pub(crate) fn connected(&self, cx: &ConnectionTo<Client>) {
        let _ = self.cx.set(cx.clone());
    }

    /// The connection to the client.
    pub(crate) fn cx(&self) -> Option<&ConnectionTo<Client>> {
        self.cx.get()
    }

    /// Sends one `session/update`. A closed connection drops it.
    pub(crate) fn update(&self, session_id: &str, update: SessionUpdate) {
        if let Some(cx) = self.cx() {
            let _ = cx.send_notification(SessionNotification::new(session_id.to_owned(), update));
        }
    }

    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Arc<Sess>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An open session, or `-32002`.
    pub(crate) fn session(&self, id: &str) -> Result<Arc<Sess>, Error> {
        self.sessions().get(id).cloned().ok_or_else(|| not_open(id))
    }

    /// Forgets an open session and stops its translation (events already delivered
    /// are translated first).
    pub(crate) fn forget(&self, id: &str) -> Option<Arc<Sess>> {
        let sess = self.sessions().remove(id);
        if let Some(s) = &sess {
            s.stop.cancel();
        }
        sess
    }

    /// Registers an open session and starts translating its events.
    pub(crate) fn attach(
        self: &Arc<Self>,
        handle: SessionHandle,
        stream: EventStream,
    ) -> Arc<Sess> {
        let catalog = self
            .commands
            .as_ref()
            .map(|c| c.catalog(handle.workspace()));
        let sess = Arc::new(Sess {
            workspace: handle.workspace().to_path_buf(),
            handle,
            state: Mutex::new(SessState::default()),
            stop: CancellationToken::new(),
            catalog,
        });
        if let Some(old) = self
            .sessions()
            .insert(sess.handle.id().to_owned(), sess.clone())
        {
            old.stop.cancel();
        }
        tokio::spawn(crate::pump::pump(self.clone(), sess.clone(), stream));
        sess
    }

    /// The end of the connection: stop every translation, interrupt what runs,
    /// close the sessions and flush the store.
    pub(crate) async fn shutdown(&self) {
        let open: Vec<Arc<Sess>> = self.sessions().drain().map(|(_, s)| s).collect();
        for sess in open {
            sess.stop.cancel();
        }
        self.kernel.shutdown("eof").await;
    }
}
