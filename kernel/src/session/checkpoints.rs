//! A session's checkpoint book: checkpoints of its workspace (`keel_tools::checkpoint`,
//! on the blocking pool), what `checkpoint.list` shows, and the restore of one, for
//! `session.rewind` and `session.fork` ([`crate::commands::checkpoints`],
//! [`crate::commands::fork`]).
//!
//! A checkpoint is taken before each request starts and, as a step of the tool-call
//! pipeline, before each allowed call that may change files (the gate's verdict is
//! above the read level, or the call spawns a sub-agent). The checkpoint of a request
//! has the request's id; the checkpoint of a tool call has the call's id. Each records
//! where the conversation stood, so a rewind can cut the history back to the same point.
//! Checkpoints live in the workspace's store under
//! [`crate::KernelConfig::checkpoint_dir`] (else under the session's store directory);
//! a session whose store keeps no files, or whose workspace is over the file limit,
//! takes none and says why in `checkpoint.list`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use keel_envelope::events::{
    CheckpointEntry, CheckpointFileChange, CheckpointList, FileChangeKind, NotRestorableFile,
    RewindAction, RewoundFile,
};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::checkpoint::{
    ChangeKind, CheckpointConfig, CheckpointError, CheckpointInfo, Checkpoints, FileChange,
    RestoreAction, RestoreReport,
};
use serde::{Deserialize, Serialize};

use crate::base::model::Message;
use crate::base::store::RequestMark as Mark;
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
        Some(dir) => Some(dir.clone()),
        None => session
            .services
            .store()
            .session_dir(&session.id)
            .map(|d| d.join("checkpoints")),
    }
}

impl Slot {
    /// Opens the engine on first use.
    fn open(&mut self, workspace: &std::path::Path, session_id: &str, dir: Option<PathBuf>) {
        if !self.tried {
            self.tried = true;
            match dir {
                None => {
                    self.disabled =
                        Some("the session store keeps no files (set a checkpoint directory)".into())
                }
                Some(dir) => {
                    match Checkpoints::open(
                        workspace,
                        &dir,
                        session_id,
                        CheckpointConfig::default(),
                    ) {
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

pub(crate) fn not_found(id: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::CheckpointNotFound,
        format!("no checkpoint was taken before {id:?} in this session"),
    )
    .with_detail("id", id)
}

/// How many checkpoint operations run at once in the process.
const MAX_OPERATIONS: usize = 16;

fn operations() -> &'static tokio::sync::Semaphore {
    static OPS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    OPS.get_or_init(|| tokio::sync::Semaphore::new(MAX_OPERATIONS))
}

/// Runs `f` on the session's checkpoints on the blocking pool.
async fn with_book<T: Send + 'static>(
    session: &Arc<Session>,
    f: impl FnOnce(Option<&mut Checkpoints>, &mut Option<String>) -> T + Send + 'static,
) -> Result<T, ErrorPayload> {
    let book = session.checkpoints.clone();
    let workspace = session.workspace.clone();
    let dir = store_dir(session);
    let id = session.id.clone();
    // A bounded number of operations at once in the process: each holds a few files
    // open (the store's lock, a pack, the files it reads) and a blocking thread, and
    // thousands of sessions may checkpoint at once.
    let permit = operations().acquire().await.map_err(internal)?;
    tokio::task::spawn_blocking(move || {
        // Held by the operation itself, even if its caller stops waiting.
        let _permit = permit;
        let mut guard = lock(&book.0);
        let slot = &mut *guard;
        slot.open(&workspace, &id, dir);
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

/// Where the conversation stood as each request started.
pub(crate) fn marks(session: &Session) -> Vec<Mark> {
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

pub(crate) fn wire_report(r: RestoreReport) -> (Vec<RewoundFile>, Vec<NotRestorableFile>) {
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
pub(crate) async fn restore_files(
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
pub(crate) async fn history_len_of(
    session: &Arc<Session>,
    id: String,
) -> Result<Option<usize>, ErrorPayload> {
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
