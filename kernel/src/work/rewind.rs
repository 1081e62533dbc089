//! Checkpoints of a session's workspace (`keel_tools::checkpoint`), `checkpoint.list`,
//! `session.rewind` and `session.fork`.
//!
//! A checkpoint is taken before each request starts and, as a step of the tool-call
//! pipeline, before each allowed call that may change files (the gate's verdict is
//! above the read level, or the call spawns a sub-agent). The checkpoint of a request
//! has the request's id; the checkpoint of a tool call has the call's id. Each records
//! where the conversation stood, so a rewind can cut the history back to the same point.
//! Checkpoints live under the session's store directory (`checkpoints/`), or under
//! [`crate::KernelConfig::checkpoint_dir`]; a session whose store keeps no files, or
//! whose workspace is over the file limit, takes none and says why in `checkpoint.list`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use keel_envelope::commands::{SessionFork, SessionRewind};
use keel_envelope::events::{
    CheckpointEntry, CheckpointFileChange, CheckpointList, FileChangeKind, NotRestorableFile,
    RewindAction, RewoundFile, SessionForked, SessionRewound,
};
use keel_envelope::{ErrorCode, ErrorPayload, Event, Sequencer};
use keel_tools::checkpoint::{
    ChangeKind, CheckpointConfig, CheckpointError, CheckpointInfo, Checkpoints, FileChange,
    RestoreAction, RestoreReport,
};
use serde::{Deserialize, Serialize};

use crate::base::model::Message;
use crate::base::store::RequestMark as Mark;
use crate::kernel::Kernel;
use crate::session::Session;

/// What a checkpoint records besides the files.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    request_id: String,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    /// History length to cut back to.
    history_len: usize,
}

#[derive(Debug, Default)]
struct Slot {
    engine: Option<Checkpoints>,
    /// Why there is no engine (after the first try).
    disabled: Option<String>,
    tried: bool,
}

/// A session's checkpoints. Operations run on the blocking pool.
#[derive(Debug, Clone, Default)]
pub(crate) struct Book(Arc<Mutex<Slot>>);

impl Book {
    /// Closes the engine (and its watcher); the next use reopens it from its files.
    pub(crate) fn release(&self) {
        *lock(&self.0) = Slot::default();
    }
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

fn store_dir(session: &Session) -> Option<PathBuf> {
    match &session.services.config().checkpoint_dir {
        Some(dir) => Some(dir.join(&session.id)),
        None => session
            .services
            .store()
            .session_dir(&session.id)
            .map(|d| d.join("checkpoints")),
    }
}

impl Slot {
    /// Opens the engine on first use.
    fn open(&mut self, workspace: &std::path::Path, dir: Option<PathBuf>) {
        if !self.tried {
            self.tried = true;
            match dir {
                None => {
                    self.disabled =
                        Some("the session store keeps no files (set a checkpoint directory)".into())
                }
                Some(dir) => {
                    match Checkpoints::open(workspace, &dir, CheckpointConfig::default()) {
                        Ok(e) => self.engine = Some(e),
                        Err(e) => self.disabled = Some(e.to_string()),
                    }
                }
            }
        }
    }
}

fn internal(e: impl std::fmt::Display) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RuntimeInternalError, format!("checkpoints: {e}"))
}

fn checkpoint_error(e: CheckpointError) -> ErrorPayload {
    match e {
        CheckpointError::UnknownCheckpoint(id) => not_found(&id),
        other => ErrorPayload::new(ErrorCode::SessionPersistenceFailed, other.to_string()),
    }
}

fn not_found(id: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::CheckpointNotFound,
        format!("no checkpoint was taken before {id:?} in this session"),
    )
    .with_detail("id", id)
}

/// Runs `f` on the session's checkpoints on the blocking pool.
async fn with_book<T: Send + 'static>(
    session: &Arc<Session>,
    f: impl FnOnce(Option<&mut Checkpoints>, &mut Option<String>) -> T + Send + 'static,
) -> Result<T, ErrorPayload> {
    let book = session.checkpoints.clone();
    let workspace = session.workspace.clone();
    let dir = store_dir(session);
    tokio::task::spawn_blocking(move || {
        let mut guard = lock(&book.0);
        let slot = &mut *guard;
        slot.open(&workspace, dir);
        f(slot.engine.as_mut(), &mut slot.disabled)
    })
    .await
    .map_err(internal)
}

/// Where a conversation cut for a tool call lands: before the model turn that made it.
fn cut_for_call(history: &[Message]) -> usize {
    history
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }))
        .unwrap_or(history.len())
}

/// Records where the conversation stands as request `rid` starts (before its message
/// enters the history).
pub(crate) fn mark_request(session: &Session, rid: &str) {
    let mut d = session.data();
    let history_len = d.state.history.len();
    let marks = &mut d.state.request_marks;
    marks.retain(|m| m.request_id != rid);
    marks.push(Mark {
        request_id: rid.to_owned(),
        history_len,
    });
}

fn marks(session: &Session) -> Vec<Mark> {
    session.data().state.request_marks.clone()
}

/// Whether a call allowed by the gate may change files.
pub(crate) fn may_change_files(level: keel_envelope::types::PermissionLevel, tool: &str) -> bool {
    level != keel_envelope::types::PermissionLevel::Read
        || tool == crate::base::prompt::SPAWN_SUB_AGENT
}

/// Takes a checkpoint before request `rid` (`call`: `None`) or before one of its tool
/// calls (`Some((toolCallId, toolName))`). A failure is logged and returned (once per
/// session) as a warning for the request's stream; the request goes on. When `cancel`
/// fires first, the request stops waiting (the checkpoint finishes in the background).
pub(crate) async fn checkpoint(
    session: &Arc<Session>,
    rid: &str,
    call: Option<(&str, &str)>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<ErrorPayload> {
    if !session.services.config().checkpoints {
        return None;
    }
    let history_len = {
        let d = session.data();
        match call {
            None => d.state.history.len(),
            Some(_) => cut_for_call(&d.state.history),
        }
    };
    let meta = Meta {
        request_id: rid.to_owned(),
        tool_call_id: call.map(|c| c.0.to_owned()),
        tool_name: call.map(|c| c.1.to_owned()),
        history_len,
    };
    let id = call.map_or(rid, |c| c.0).to_owned();
    let value = serde_json::to_value(&meta).unwrap_or_default();
    let work = with_book(session, move |engine, disabled| {
        let engine = engine?;
        match engine.checkpoint(&id, value) {
            Ok(_) | Err(CheckpointError::DuplicateId(_)) => None,
            Err(e @ CheckpointError::TooManyFiles { .. }) => {
                let text = e.to_string();
                *disabled = Some(text.clone());
                Some((text, true))
            }
            Err(e) => Some((e.to_string(), false)),
        }
    });
    let result = tokio::select! {
        r = work => r,
        _ = cancel.cancelled() => return None,
    };
    let failure = match result {
        Ok(f) => f,
        Err(e) => Some((e.message, false)),
    };
    if let Some((message, off)) = failure {
        tracing::warn!(session_id = %session.id, request_id = %rid, %message, "checkpoint failed");
        if off {
            lock(&session.checkpoints.0).engine = None;
        }
        let warned = std::mem::replace(&mut session.data().checkpoint_warned, true);
        if !warned {
            return Some(
                ErrorPayload::new(
                    ErrorCode::SessionPersistenceFailed,
                    format!(
                        "no checkpoint of the workspace: {message}; rewinding files may not be possible"
                    ),
                )
                .severity(keel_envelope::error::Severity::Warning),
            );
        }
    }
    None
}

fn wire_change(c: ChangeKind) -> FileChangeKind {
    match c {
        ChangeKind::Created => FileChangeKind::Created,
        ChangeKind::Modified => FileChangeKind::Modified,
        ChangeKind::Deleted => FileChangeKind::Deleted,
    }
}

fn wire_changes(v: &[FileChange]) -> Vec<CheckpointFileChange> {
    v.iter()
        .map(|c| CheckpointFileChange {
            path: c.path.clone(),
            change: wire_change(c.change),
        })
        .collect()
}

fn entry(info: &CheckpointInfo, after: &[FileChange]) -> CheckpointEntry {
    let meta: Option<Meta> = serde_json::from_value(info.meta.clone()).ok();
    CheckpointEntry {
        checkpoint_id: info.id.clone(),
        request_id: meta
            .as_ref()
            .map(|m| m.request_id.clone())
            .unwrap_or_default(),
        tool_call_id: meta.as_ref().and_then(|m| m.tool_call_id.clone()),
        tool_name: meta.as_ref().and_then(|m| m.tool_name.clone()),
        created_at: info.created_ms,
        files_changed: wire_changes(after),
    }
}

/// `checkpoint.list`.
pub(crate) async fn list(session: &Arc<Session>) -> Result<CheckpointList, ErrorPayload> {
    let enabled = session.services.config().checkpoints;
    with_book(session, move |engine, disabled| {
        let Some(engine) = engine.filter(|_| enabled) else {
            return Ok(CheckpointList {
                checkpoints: Vec::new(),
                disabled_reason: Some(
                    disabled
                        .clone()
                        .unwrap_or_else(|| "checkpoints are off in the configuration".into()),
                ),
            });
        };
        let pending = if engine.list().is_empty() {
            Vec::new()
        } else {
            engine.pending_changes().map_err(checkpoint_error)?
        };
        let infos = engine.list();
        let checkpoints = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                let after = infos.get(i + 1).map_or(&pending[..], |n| &n.changed[..]);
                entry(info, after)
            })
            .collect();
        Ok(CheckpointList {
            checkpoints,
            disabled_reason: None,
        })
    })
    .await?
}

fn wire_report(r: RestoreReport) -> (Vec<RewoundFile>, Vec<NotRestorableFile>) {
    let files = r
        .files
        .into_iter()
        .map(|f| RewoundFile {
            path: f.path,
            action: match f.action {
                RestoreAction::Removed => RewindAction::Removed,
                RestoreAction::Recreated => RewindAction::Recreated,
                RestoreAction::Reverted => RewindAction::Reverted,
            },
        })
        .collect();
    let not = r
        .not_restorable
        .into_iter()
        .map(|n| NotRestorableFile {
            path: n.path,
            reason: n.reason,
        })
        .collect();
    (files, not)
}

/// Restores the files of checkpoint `id`; returns the report and the checkpoint's meta.
async fn restore_files(
    session: &Arc<Session>,
    id: String,
) -> Result<(RestoreReport, usize), ErrorPayload> {
    with_book(session, move |engine, disabled| {
        let Some(engine) = engine else {
            let why = disabled.clone().unwrap_or_default();
            return Err(not_found(&id).with_detail("reason", why));
        };
        let info = engine.list().iter().find(|i| i.id == id).cloned();
        let Some(info) = info else {
            return Err(not_found(&id));
        };
        let meta: Meta = serde_json::from_value(info.meta).map_err(internal)?;
        let report = engine.restore(&id).map_err(checkpoint_error)?;
        Ok((report, meta.history_len))
    })
    .await?
}

/// The history length recorded for checkpoint `id` (without touching files).
async fn history_len_of(session: &Arc<Session>, id: String) -> Result<Option<usize>, ErrorPayload> {
    with_book(session, move |engine, _| {
        engine.and_then(|e| {
            e.list()
                .iter()
                .find(|i| i.id == id)
                .and_then(|i| serde_json::from_value::<Meta>(i.meta.clone()).ok())
                .map(|m| m.history_len)
        })
    })
    .await
}

fn invalid(message: &str, field: &str) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message).with_detail("field", field)
}

fn busy(session: &Session, what: &str) -> Option<ErrorPayload> {
    let d = session.data();
    let active = d.active.as_ref().map(|a| a.id.clone())?;
    Some(
        ErrorPayload::new(
            ErrorCode::SessionBusy,
            format!("{what} is refused while request {active} runs; interrupt it first"),
        )
        .retryable(true)
        .with_detail("activeRequestId", active),
    )
}

/// `session.rewind`.
pub(crate) async fn rewind(
    session: &Arc<Session>,
    rid: &str,
    p: &SessionRewind,
) -> Result<(), ErrorPayload> {
    let id = match (&p.to_request_id, &p.to_tool_call_id) {
        (Some(r), None) => r.clone(),
        (None, Some(c)) => c.clone(),
        _ => {
            return Err(invalid(
                "give exactly one of `toRequestId` and `toToolCallId`",
                "payload.toRequestId",
            ))
        }
    };
    let files = p.files.unwrap_or(true);
    let conversation = p.conversation.unwrap_or(true);
    if !files && !conversation {
        return Err(invalid(
            "nothing to rewind: `files` and `conversation` are both false",
            "payload.files",
        ));
    }
    // Held to the end: no request starts while files are put back.
    let _turnover = session.turnover.lock().await;
    if let Some(e) = busy(session, "a rewind") {
        return Err(e);
    }
    let (report, history_len) = if files {
        let (report, len) = restore_files(session, id.clone()).await?;
        (Some(report), Some(len))
    } else {
        let len = match history_len_of(session, id.clone()).await? {
            Some(len) => Some(len),
            None => marks(session)
                .iter()
                .find(|m| m.request_id == id)
                .map(|m| m.history_len),
        };
        (None, len)
    };
    let mut conversation_cut = false;
    if conversation {
        let Some(len) = history_len else {
            return Err(not_found(&id));
        };
        let mut d = session.data();
        if len < d.state.history.len() {
            d.state.history.truncate(len);
            conversation_cut = true;
        }
        d.state
            .request_marks
            .retain(|m| m.history_len < len || (m.history_len == len && m.request_id != id));
    }
    let (files, not_restorable) = report.map(wire_report).unwrap_or_default();
    session
        .emitter
        .emit(
            rid,
            Event::SessionRewound(SessionRewound {
                files,
                not_restorable,
                conversation_cut,
            }),
        )
        .await;
    session.persist(rid).await;
    Ok(())
}

/// Extension keys a fork copies (the plan, rules and mode are in the state itself).
const FORK_COPIES: &[&str] = &["review", "patches", "taskGraph"];

impl Kernel {
    /// `session.fork`: a new session with `parent`'s history up to `atRequestId`.
    pub(crate) async fn fork(
        &self,
        parent: &Arc<Session>,
        rid: &str,
        p: &SessionFork,
        mcp_servers: &[keel_envelope::host::McpServerSpec],
    ) -> Result<Arc<Session>, ErrorPayload> {
        // The servers given with the fork are checked before anything is done.
        let given = crate::base::mcp_config::from_specs(mcp_servers)?;
        let files = p.files.unwrap_or(false);
        if files && p.at_request_id.is_none() {
            return Err(invalid(
                "`files: true` needs `atRequestId` (the point to restore the workspace to)",
                "payload.atRequestId",
            ));
        }
        if parent.data().state.closed {
            return Err(ErrorPayload::new(
                ErrorCode::SessionNotFound,
                "the session is closed",
            ));
        }
        // The point of the cut: before `atRequestId`, or before the running request.
        let running = parent.data().active.as_ref().map(|a| a.id.clone());
        let at = p.at_request_id.clone().or(running.clone());
        let cut = match &at {
            None => None,
            Some(r) => Some(
                marks(parent)
                    .iter()
                    .find(|m| &m.request_id == r)
                    .map(|m| m.history_len)
                    .ok_or_else(|| {
                        invalid(
                            &format!("no request {r:?} in this session"),
                            "payload.atRequestId",
                        )
                    })?,
            ),
        };
        if files {
            if let Some(e) = busy(parent, "a fork with `files: true`") {
                return Err(e);
            }
            let r = p.at_request_id.clone().unwrap_or_default();
            restore_files(parent, r).await?;
        }
        let id = self
            .inner
            .services
            .next_id(keel_envelope::ids::IdKind::Session);
        let now = self.inner.services.now();
        let admission = self.admit()?;
        let mut state = {
            let mut d = parent.data();
            let crate::session::Data { state, ext, .. } = &mut *d;
            ext.save(&mut state.extensions);
            state.clone()
        };
        state.session_id = id.clone();
        state.created_at = now;
        state.updated_at = now;
        state.closed = false;
        if let Some(len) = cut {
            state.history.truncate(len);
        }
        state
            .request_marks
            .retain(|m| cut.is_none_or(|c| m.history_len < c));
        let budget = crate::work::budget::fork_extension(&state.extensions);
        state
            .extensions
            .retain(|k, _| FORK_COPIES.contains(&k.as_str()));
        if let Some(b) = budget {
            state
                .extensions
                .insert(crate::work::budget::EXT_KEY.to_owned(), b);
        }
        let model = match self.inner.services.model(Some(&state.model)) {
            Ok(m) => m,
            Err(_) => self.inner.services.model(None)?,
        };
        self.inner.services.store().save_state(&state)?;
        let session = Session::new(self.inner.services.clone(), state, model, Sequencer::new());
        // The parent's host tools (they were accepted beside the same kernel tools).
        session
            .tools
            .set_host(&self.inner.services.registry(), parent.tools.host_entries())?;
        let session = admission.insert(&id, session);
        session
            .emitter
            .emit(
                rid,
                Event::SessionForked(SessionForked {
                    session_id: id,
                    parent_session_id: parent.id.clone(),
                    at_request_id: at,
                }),
            )
            .await;
        // The same MCP servers: those given with the fork, the parent's own (one of the
        // same name as a given one is left out), then the configured ones.
        let mut servers = given;
        for s in parent.mcp.session_configs() {
            if !servers.iter().any(|g| g.name == s.name) {
                servers.push(s);
            }
        }
        self.start_mcp(&session, servers, rid);
        Ok(session)
    }

    /// Forks an open session (`session.fork`) and opens the fork, for library hosts
    /// (ACP's `session/fork`). The fork's stream starts after its `session.forked`.
    pub async fn fork_session(
        &self,
        parent_id: &str,
        p: SessionFork,
    ) -> Result<
        (
            crate::kernel::handle::SessionHandle,
            crate::kernel::handle::EventStream,
        ),
        ErrorPayload,
    > {
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
        mcp_servers: &[keel_envelope::host::McpServerSpec],
    ) -> Result<
        (
            crate::kernel::handle::SessionHandle,
            crate::kernel::handle::EventStream,
        ),
        ErrorPayload,
    > {
        let parent = self.inner.open.require(parent_id)?;
        let rid = self.new_request_id();
        let session = self.fork(&parent, &rid, &p, mcp_servers).await?;
        let stream = self.session_stream(&session.id);
        Ok((
            crate::kernel::handle::SessionHandle {
                kernel: self.clone(),
                session,
            },
            stream,
        ))
    }
}
