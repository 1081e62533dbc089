//! The kernel: its public API. [`Kernel::execute`] runs one wire command through the
//! command table ([`crate::commands::table`]); the typed methods (`start_session`,
//! `resume_session`, `fork_session`, …) call the same feature handlers. Every
//! `impl Kernel` is in this file.

pub(crate) mod builder;
pub(crate) mod handle;
pub(crate) mod idle;
pub(crate) mod leases;
pub(crate) mod portable;
pub(crate) mod prune;

use std::path::PathBuf;
use std::sync::Arc;

use keel_envelope::commands::{
    CommandPayload, SessionClose, SessionDelete, SessionFork, SessionStart, SetTitle,
};
use keel_envelope::host::McpServerSpec;
use keel_envelope::ids::IdKind;
use keel_envelope::types::{Cursor, SessionInfo};
use keel_envelope::{Command, Envelope, ErrorPayload, Event};

use crate::base::config::KernelConfig;
use crate::commands::{fork, lifecycle, stored, table, Cx};
use crate::kernel::builder::KernelBuilder;
use crate::kernel::handle::{EventStream, SessionHandle, WatchStream, Watcher};
use crate::session::open::Sessions;
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
    /// Automatic pruning of the checkpoint stores ([`prune`]).
    pub(crate) prune: prune::State,
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
        self.inner.services.config()
    }

    /// The context of a command answered on `rid`'s stream.
    fn cx<'a>(&'a self, rid: &'a str) -> Cx<'a> {
        Cx {
            services: &self.inner.services,
            open: &self.inner.open,
            rid,
        }
    }

    /// Every envelope of every session from now on.
    pub fn subscribe(&self) -> EventStream {
        self.stream(None)
    }

    /// A stream of one session's envelopes (`None`: all), from now on.
    pub(crate) fn stream(&self, session_id: Option<&str>) -> EventStream {
        let services = &self.inner.services;
        EventStream {
            rx: services.hub().subscribe(
                session_id.map(str::to_owned),
                services.config().channel_capacity,
            ),
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
        self.inner.open.loaded().iter().any(|s| s.is_busy())
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

    fn handle(&self, session: Arc<Session>) -> SessionHandle {
        SessionHandle {
            kernel: self.clone(),
            session,
        }
    }

    /// A handle to an open session.
    pub fn session_handle(&self, id: &str) -> Option<SessionHandle> {
        self.session(id).map(|s| self.handle(s))
    }

    /// Ids of open sessions (also those unloaded while idle).
    pub fn open_sessions(&self) -> Vec<String> {
        let mut ids = self.loaded_sessions();
        ids.extend(self.inner.open.unloaded_ids());
        ids
    }

    /// Ids of the sessions held in memory (open sessions not unloaded).
    pub fn loaded_sessions(&self) -> Vec<String> {
        self.inner.open.loaded_ids()
    }

    /// Drops from memory the open sessions idle for longer than
    /// [`crate::KernelConfig::idle_unload_after`] (nothing when it is `None`); returns
    /// their ids. They stay open: the next command naming one reloads it.
    pub fn unload_idle_sessions(&self) -> Vec<String> {
        idle::sweep(&self.inner)
    }

    /// Prunes the checkpoint stores now, by the configured limits
    /// ([`crate::KernelConfig::checkpoint_max_bytes`], and `older_than` or else
    /// [`crate::KernelConfig::checkpoint_max_age`]), or only says what would go
    /// (`dry_run`). The checkpoints of a running request, and of sessions another
    /// process holds open, stay. `Ok(None)`: the kernel keeps no checkpoint stores (no
    /// checkpoint directory). The kernel also prunes by itself, at most every ten
    /// minutes, when the stores are past a limit.
    pub async fn prune_checkpoints(
        &self,
        older_than: Option<std::time::Duration>,
        dry_run: bool,
    ) -> Result<Option<keel_tools::checkpoint::PruneReport>, ErrorPayload> {
        prune::run_now(&self.inner, older_than, dry_run).await
    }

    /// Writes session `id` as the kernel's store holds it (state, conversation, event
    /// log) with its checkpoints to `file`, one gzip-compressed tar (docs/cli.md,
    /// `keel sessions export`); `file` is replaced whole or left as it was.
    pub async fn export_session(
        &self,
        id: &str,
        file: &std::path::Path,
    ) -> Result<portable::ExportReport, ErrorPayload> {
        portable::export(&self.inner, id, file).await
    }

    /// Takes a session exported by [`Kernel::export_session`] into the kernel's store,
    /// and its checkpoints into the checkpoint store of its workspace on this machine
    /// (see [`portable::ImportOptions`]). A file that is not a whole export of a
    /// version this kernel reads is `REQUEST_INVALID` with `details.reason`.
    pub async fn import_session(
        &self,
        file: &std::path::Path,
        options: portable::ImportOptions,
    ) -> Result<portable::ImportReport, ErrorPayload> {
        portable::import(&self.inner, file, options).await
    }

    /// Executes one command. Every command is answered by events on the stream (see
    /// docs/protocol.md); the result is also returned for library callers.
    pub async fn execute(&self, mut cmd: Command) -> Result<(), ErrorPayload> {
        idle::start_timer(&self.inner);
        prune::maybe(&self.inner);
        // A session named in the envelope alone is the payload's too (the codec did
        // this already for a decoded line; not for a command built in Rust).
        let result = match cmd.settle_session() {
            Ok(()) => table::dispatch(&self.cx(&cmd.request_id), &cmd).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            self.emit_error(&cmd, e.clone()).await;
        }
        result
    }

    /// Reports a command's failure on its stream: `request.rejected` for a
    /// `request.send`, `error` for the others.
    async fn emit_error(&self, cmd: &Command, error: ErrorPayload) {
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

    /// Runs `payload` as a command of the library API.
    async fn run(
        &self,
        session_id: Option<&str>,
        payload: CommandPayload,
    ) -> Result<(), ErrorPayload> {
        let cmd = Command::new(
            self.new_request_id(),
            session_id.map(str::to_owned),
            payload,
        );
        self.execute(cmd).await
    }

    /// Starts a session; returns its handle and its event stream (subscribed before
    /// `session.started`, so nothing is missed).
    pub async fn start_session(
        &self,
        opts: impl Into<SessionStart>,
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        let request_id = self.new_request_id();
        let id = self.inner.services.next_id(IdKind::Session);
        let stream = self.stream(Some(&id));
        let session = match lifecycle::open_new(&self.cx(&request_id), opts.into(), id).await {
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
        Ok((self.handle(session), stream))
    }

    /// Resumes a stored session (replaying events after `after`).
    pub async fn resume_session(
        &self,
        id: &str,
        after: Option<Cursor>,
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        self.resume_session_with_mcp(id, after, &[]).await
    }

    /// [`Kernel::resume_session`] of a session whose workspace may not exist on this
    /// machine: it is then made in `dir` (an absolute path, absent or empty) from the
    /// session's newest checkpoint (`session.resume {materializeTo}`); what was made
    /// comes back too (`None`: the workspace existed).
    pub async fn resume_session_into(
        &self,
        id: &str,
        dir: &std::path::Path,
    ) -> Result<
        (
            SessionHandle,
            EventStream,
            Option<keel_envelope::events::MaterializedWorkspace>,
        ),
        ErrorPayload,
    > {
        let request_id = self.new_request_id();
        let stream = self.stream(Some(id));
        let cx = self.cx(&request_id);
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let to = dir.display().to_string();
        let (session, made) = lifecycle::reopen(&cx, id, None, &[], None, Some(&to)).await?;
        Ok((self.handle(session), stream, made))
    }

    /// [`Kernel::resume_session`] with the MCP servers the host gives the session
    /// (`mcpServers` of `session.resume`); ignored when the session is already open,
    /// which keeps its servers.
    pub async fn resume_session_with_mcp(
        &self,
        id: &str,
        after: Option<Cursor>,
        mcp_servers: &[McpServerSpec],
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        self.resume_session_with(id, after, mcp_servers, None).await
    }

    /// [`Kernel::resume_session_with_mcp`], and, when `additional_roots` is given,
    /// the session's extra roots from now on (`session.resume {additionalRoots}`:
    /// checked as `session.start`'s, replacing those it kept; those of an open
    /// session only while it is idle).
    pub async fn resume_session_with(
        &self,
        id: &str,
        after: Option<Cursor>,
        mcp_servers: &[McpServerSpec],
        additional_roots: Option<&[keel_envelope::worktree::AdditionalRoot]>,
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        let request_id = self.new_request_id();
        let stream = self.stream(Some(id));
        let cx = self.cx(&request_id);
        let (session, _) =
            lifecycle::reopen(&cx, id, after.as_ref(), mcp_servers, additional_roots, None).await?;
        Ok((self.handle(session), stream))
    }

    /// Forks an open session (`session.fork`) and opens the fork, for library hosts
    /// (ACP's `session/fork`). The fork's stream starts after its `session.forked`.
    pub async fn fork_session(
        &self,
        parent_id: &str,
        p: SessionFork,
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        self.fork_session_with_mcp(parent_id, p, &[]).await
    }

    /// [`Kernel::fork_session`], with MCP servers of its own for the fork: they come
    /// first, and replace a server of the parent's of the same name (ACP's
    /// `session/fork {mcpServers}`). A malformed one refuses the fork with
    /// `REQUEST_INVALID` before anything is done.
    pub async fn fork_session_with_mcp(
        &self,
        parent_id: &str,
        p: SessionFork,
        mcp_servers: &[McpServerSpec],
    ) -> Result<(SessionHandle, EventStream), ErrorPayload> {
        let parent = self.inner.open.require(parent_id)?;
        let rid = self.new_request_id();
        let session = fork::open_fork(&self.cx(&rid), &parent, &p, mcp_servers).await?;
        let stream = self.stream(Some(&session.id));
        Ok((self.handle(session), stream))
    }

    /// Closes a session.
    pub async fn close_session(&self, id: &str) -> Result<(), ErrorPayload> {
        self.run(Some(id), CommandPayload::SessionClose(SessionClose::new()))
            .await
    }

    /// Deletes a session (open or stored) and its stored files (`session.delete`).
    pub async fn delete_session(&self, id: &str) -> Result<(), ErrorPayload> {
        let p = SessionDelete::new(id.to_owned());
        self.run(None, CommandPayload::SessionDelete(p)).await
    }

    /// Sets an open session's title (`session.set_title`).
    pub async fn set_session_title(&self, id: &str, title: &str) -> Result<(), ErrorPayload> {
        let p = SetTitle::new(title.to_owned());
        self.run(Some(id), CommandPayload::SessionSetTitle(p)).await
    }

    /// A session's whole event log, oldest first, as stored (for hosts that replay a
    /// session in their own format, e.g. ACP's `session/load`).
    pub fn session_log(&self, id: &str) -> Result<Vec<Envelope>, ErrorPayload> {
        Ok(self.inner.services.store().load_events(id)?.events)
    }

    /// Stored and open sessions, most recently updated first.
    pub fn list_sessions(&self) -> Result<Vec<SessionInfo>, ErrorPayload> {
        stored::infos(&self.inner.services, &self.inner.open)
    }

    /// Interrupts everything, closes every session, flushes the store, and waits
    /// until the worktrees of session starts and forks given up are taken back.
    pub async fn shutdown(&self, reason: &str) {
        lifecycle::close_all(&self.inner.services, &self.inner.open, reason).await;
        // Then the worktrees of starts and forks given up meanwhile.
        self.inner.services.cleanups().settle().await;
    }

    /// The workspace of an open session.
    pub fn session_workspace(&self, id: &str) -> Option<PathBuf> {
        self.session(id).map(|s| s.workspace.clone())
    }
}
