//! One session: its state ([`Data`], behind a short lock never held across an
//! await), its emitter, its checkpoint book, and the tools it holds (the overlay of
//! host and MCP tools on the kernel's registry). Its work runs above it
//! ([`crate::work`]) and talks to the command handlers through the one-shot channels
//! kept here (approvals, questions, plan decisions, host-tool answers). The shared
//! services reach it through [`Services`].

pub(crate) mod checkpoint_export;
pub(crate) mod checkpoints;
pub(crate) mod ext;
pub(crate) mod materialize;
pub(crate) mod mcp;
pub(crate) mod open;
pub(crate) mod overlay;
pub(crate) mod queue;
pub(crate) mod registry;
pub(crate) mod root_checkpoints;
pub(crate) mod roots;
pub(crate) mod services;
pub(crate) mod shared_checkpoints;
pub(crate) mod skills;
pub(crate) mod worktree;

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use keel_envelope::events::{SessionStateSnapshot, SessionTitleChanged};
use keel_envelope::types::{SessionInfo, SessionState};
use keel_envelope::{ErrorCode, ErrorPayload, Event, Sequencer};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::base::emit::Emitter;
use crate::base::model::{Message, Model, ToolDef};
use crate::base::ownership::LeaseCell;
use crate::base::probe::Point;
use crate::base::store::PersistedSession;
use crate::session::ext::ExtState;
use crate::session::mcp::McpServers;
use crate::session::overlay::Overlay;
use crate::session::queue::{Active, ApprovalAnswer, AskAnswer, HostWaiter, PlanAnswer, Queued};
use crate::session::registry::Entry;
use crate::session::services::Services;

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
    pub(crate) ext: ExtState,
    /// Whether the running unit of work (`active`) is a compaction by hand: it has no
    /// model call a steered message could join, so such messages are queued.
    pub(crate) compacting: bool,
    /// Host-tool calls waiting for `host-tool.respond`, by toolCallId.
    pub(crate) host_calls: HashMap<String, HostWaiter>,
    /// The extra roots ([`roots`]; kept in `state.extensions` too, by
    /// [`Data::set_roots`]).
    pub(crate) roots: keel_tools::jail::Roots,
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
    /// Checkpoints of the workspace ([`checkpoints`]).
    pub(crate) checkpoints: checkpoints::Book,
    /// Side questions being answered ([`crate::work::side`]).
    pub(crate) sides: std::sync::atomic::AtomicUsize,
    /// When a command last named the session or it last saved its state, ms of
    /// [`crate::base::time::now_ms`].
    pub(crate) last_used: std::sync::atomic::AtomicU64,
    /// Held while a state snapshot is taken and written, so snapshots of the session
    /// reach the store in the order they were taken.
    saving: tokio::sync::Mutex<()>,
    /// The session's own tools (host app, MCP servers) on top of the kernel's.
    pub(crate) tools: Overlay,
    /// The session's MCP servers.
    pub(crate) mcp: McpServers,
    /// This node's lease on the session ([`crate::base::ownership`]).
    pub(crate) lease: Arc<LeaseCell>,
    /// The session's skills and custom commands.
    pub(crate) skills: skills::SessionSkills,
    /// Sub-agents' worktrees still being made or removed, waited for before a
    /// request ends ([`worktree::Cleanups`]).
    pub(crate) cleanups: worktree::Cleanups,
    data: Mutex<Data>,
}

impl Session {
    pub(crate) fn new(
        services: Arc<Services>,
        state: PersistedSession,
        model: Arc<dyn Model>,
        sequencer: Sequencer,
        lease: Arc<LeaseCell>,
    ) -> Arc<Self> {
        let emitter = Emitter::new(
            services.ctx().clone(),
            Some(state.session_id.clone()),
            true,
            sequencer,
        )
        .with_lease(lease.clone());
        let mut ext = ExtState::load(&state.extensions, services.now());
        let orphaned = std::mem::take(&mut ext.orphaned_trees);
        let extra = roots::of_state(&state);
        let session = Arc::new(Self {
            id: state.session_id.clone(),
            workspace: PathBuf::from(&state.workspace),
            emitter,
            cancel: services.cancel().child_token(),
            turnover: tokio::sync::Mutex::new(()),
            checkpoints: checkpoints::Book::default(),
            sides: Default::default(),
            last_used: std::sync::atomic::AtomicU64::new(crate::base::time::now_ms()),
            saving: tokio::sync::Mutex::new(()),
            tools: Default::default(),
            mcp: Default::default(),
            lease,
            skills: Default::default(),
            cleanups: Default::default(),
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
                roots: extra,
            }),
        });
        worktree::remove_orphans(&session, orphaned);
        session
    }

    /// Records that a command named the session, or its state changed, now (real
    /// time: the kernel's clock is left alone).
    pub(crate) fn touch(&self) {
        self.last_used.store(
            crate::base::time::now_ms(),
            std::sync::atomic::Ordering::Release,
        );
    }

    pub(crate) fn data(&self) -> MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tool named `name` in this session's view (the kernel's, then its own).
    pub(crate) fn tool(&self, name: &str) -> Option<Entry> {
        self.tools.get(self.services.registry(), name)
    }

    /// The definitions this session offers the model.
    pub(crate) fn tool_defs(&self) -> Arc<[ToolDef]> {
        self.tools.defs(self.services.registry())
    }

    pub(crate) fn now(&self) -> u64 {
        self.services.now()
    }

    /// A request reached `point`: a test probe may pause it there.
    pub(crate) async fn probe(&self, point: Point, request_id: &str) {
        self.services.probe(point, &self.id, request_id).await;
    }

    /// Saves the state snapshot; a failure becomes a warning on `request_id`.
    ///
    /// The write runs on the blocking pool: replacing a file can wait for the disk
    /// (ext4 flushes the new data before a rename over an existing file), and many
    /// sessions saving at once must not hold the runtime's worker threads.
    pub(crate) async fn persist(&self, request_id: &str) {
        self.touch();
        if !self.lease.is_live() {
            // The lease is lost: this node writes nothing more of the session (a
            // save now could mark it closed in the store while another node takes
            // it over).
            return;
        }
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

    /// Emits `event` on `request_id`'s stream, then saves the state it reports.
    pub(crate) async fn emit_persist(&self, request_id: &str, event: Event) {
        self.emitter.emit(request_id, event).await;
        self.persist(request_id).await;
    }

    /// The session as `session.list` and `session.state` describe it.
    pub(crate) fn info(&self) -> SessionInfo {
        self.info_of(&self.data())
    }

    /// [`Session::info`] from state already locked.
    pub(crate) fn info_of(&self, d: &Data) -> SessionInfo {
        SessionInfo::new(
            self.id.clone(),
            d.state.workspace.clone(),
            d.state.created_at,
            d.state.updated_at,
            d.session_state(),
            d.state.mode.clone(),
            d.state.model.clone(),
            crate::base::summary::request_count(&d.state),
        )
        .title(d.state.title.clone())
        .last_message(crate::base::summary::last_message(&d.state.history))
        .additional_roots(roots::wire(&d.roots))
    }

    /// `session.state`'s answer.
    pub(crate) fn snapshot(&self) -> SessionStateSnapshot {
        let d = self.data();
        SessionStateSnapshot::new(
            self.info_of(&d),
            d.queue.iter().map(|q| q.id.clone()).collect::<Vec<_>>(),
            {
                let mut ids: Vec<String> = d.approvals.keys().cloned().collect();
                ids.sort();
                ids
            },
            d.state.rules.clone(),
            d.state.usage,
            d.state.history.len() as u32,
            d.session_state(),
        )
        .active_request_id(d.active.as_ref().filter(|a| !a.ended).map(|a| a.id.clone()))
        .plan(d.state.plan.clone())
    }

    /// Whether anything runs: a request (also one waiting for an answer) or a
    /// background task.
    pub(crate) fn is_busy(&self) -> bool {
        let d = self.data();
        matches!(
            d.session_state(),
            SessionState::Running | SessionState::WaitingApproval
        ) || d.ext.background.has_running()
    }

    /// Sets the title and reports it on `request_id`'s stream; persists the session.
    pub(crate) async fn set_title(&self, request_id: &str, title: String, source: &str) {
        let previous = self.data().state.title.replace(title.clone());
        self.emitter
            .emit(
                request_id,
                Event::SessionTitleChanged(
                    SessionTitleChanged::new(title, source.to_owned()).previous_title(previous),
                ),
            )
            .await;
        self.persist(request_id).await;
    }

    /// After a request's work (before its terminal event): a session without a title
    /// gets one generated from its first user message ([`crate::base::title`]).
    pub(crate) async fn generate_title(&self, request_id: &str) {
        let title = {
            let d = self.data();
            if d.state.title.is_some() {
                return;
            }
            d.state.history.iter().find_map(|m| match m {
                Message::User { text, .. } => crate::base::title::generate(text),
                _ => None,
            })
        };
        if let Some(title) = title {
            self.set_title(request_id, title, "generated").await;
        }
    }
}

impl Data {
    /// Sets the extra roots, in the state that is saved too.
    pub(crate) fn set_roots(&mut self, extra: keel_tools::jail::Roots) {
        roots::keep_in(&mut self.state, &extra);
        self.roots = extra;
    }

    /// The session's state as hosts see it.
    pub(crate) fn session_state(&self) -> SessionState {
        if self.state.closed {
            SessionState::Closed
        } else if !self.approvals.is_empty() || !self.asks.is_empty() || self.plan_wait.is_some() {
            SessionState::WaitingApproval
        } else if self.active.as_ref().is_some_and(|a| !a.ended) || !self.queue.is_empty() {
            SessionState::Running
        } else {
            SessionState::Idle
        }
    }
}

/// The refusal of a command or start of work in a closed session.
pub(crate) fn closed() -> ErrorPayload {
    ErrorPayload::new(ErrorCode::SessionNotFound, "the session is closed")
}
