//! A session's checkpoint book: checkpoints of its workspace (`keel_tools::checkpoint`,
//! on the blocking pool), what `checkpoint.list` shows, and the restore of one, for
//! `session.rewind` and `session.fork` ([`crate::commands::checkpoints`],
//! [`crate::commands::fork`]).
//!
//! A checkpoint is taken as each request starts and, as a step of the tool-call
//! pipeline, before each allowed call that may change files (the gate's verdict is
//! above the read level, or the call spawns a sub-agent). The request's checkpoint is
//! taken beside the request, on the blocking pool: its first model call never waits
//! for it; the first tool call that may change files waits for it (and a
//! `UserPromptSubmit` hook, which may change files too), and so does the request's
//! terminal event, so a request that is over always has its checkpoint. The checkpoint
//! of a request has the request's id; the checkpoint of a tool call has the call's id.
//! Each records where the conversation stood, so a rewind can cut the history back to
//! the same point. A rewind that restores files first records the state it replaces
//! (`restore_undoable`), as a checkpoint of its own listed like the others.
//! Checkpoints live in the workspace's store under
//! [`crate::KernelConfig::checkpoint_dir`] (else under the session's store directory);
//! a session whose store keeps no files, or whose workspace is over the file limit,
//! takes none and says why in `checkpoint.list`. The session's `write` extra roots
//! are recorded and restored beside the workspace, under the same ids
//! ([`crate::session::root_checkpoints`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::future::{BoxFuture, FutureExt, Shared};
use keel_envelope::events::{
    CheckpointEntry, CheckpointFileChange, CheckpointList, FileChangeKind, ForeignFileChange,
    NotRestorableFile, RewindAction, RewoundFile,
};
use keel_envelope::ids::IdKind;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use keel_tools::checkpoint::{
    ChangeKind, CheckpointConfig, CheckpointError, CheckpointHome, CheckpointInfo, Checkpoints,
    FileChange, ForeignChange, RestoreAction, RestoreReport,
};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::base::model::Message;
use crate::base::store::RequestMark as Mark;
use crate::base::store::Store;
use crate::session::shared_checkpoints::Sharing;
use crate::session::Session;

/// What a checkpoint records besides the files.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta {
    pub(crate) request_id: String,
    #[serde(default)]
    pub(crate) tool_call_id: Option<String>,
    #[serde(default)]
    pub(crate) tool_name: Option<String>,
    /// History length to cut back to.
    pub(crate) history_len: usize,
    /// Taken by a rewind before it restored files: the checkpoint it went back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) before_rewind: Option<String>,
}

#[derive(Debug, Default)]
struct Slot {
    engine: Option<Checkpoints>,
    /// Why there is no engine (after the first try).
    disabled: Option<String>,
    tried: bool,
    /// Opening failed and no checkpoint has told it yet: (why, the disk is full).
    untold: Option<(String, bool)>,
    /// The engines of the session's `write` extra roots.
    extras: crate::session::root_checkpoints::Extras,
    /// The carrying of its checkpoints to a store several nodes share.
    sharing: Option<Sharing>,
}

/// The checkpoint of a request being taken beside its first model call: what it
/// warns of when it ends (`None`: recorded, or its failure was told already).
type Pending = Shared<BoxFuture<'static, Option<ErrorPayload>>>;

/// A session's checkpoints. Operations run on the blocking pool.
#[derive(Debug, Clone, Default)]
pub(crate) struct Book {
    slot: Arc<Mutex<Slot>>,
    /// The running request's checkpoint while it is taken (its request id).
    baseline: Arc<Mutex<Option<(String, Pending)>>>,
}

impl Book {
    /// Closes the engine (and its watcher); the next use reopens it from its files.
    pub(crate) fn release(&self) {
        *lock(&self.slot) = Slot::default();
    }
}

fn lock<T>(slot: &Mutex<T>) -> MutexGuard<'_, T> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

fn store_dir(session: &Session) -> Option<PathBuf> {
    crate::session::materialize::checkpoint_home(&session.services, &session.id)
}

impl Slot {
    /// Opens the engine on first use (after taking in, from a store several nodes
    /// share, the checkpoints it holds newer than this node's).
    fn open(
        &mut self,
        store: &Arc<dyn Store>,
        workspace: &std::path::Path,
        session_id: &str,
        dir: Option<PathBuf>,
    ) {
        if !self.tried {
            self.tried = true;
            self.sharing = dir
                .as_deref()
                .and_then(|d| Sharing::new(store, d, workspace, session_id));
            if let Some(Err(e)) = self.sharing.as_ref().map(Sharing::pull) {
                tracing::warn!(session_id, error = %e.message, "taking checkpoints in from the shared store failed");
            }
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
                        Ok(e) => {
                            self.engine = Some(e);
                            self.disabled = None;
                        }
                        Err(e) => {
                            // A full disk may not stay full: the next use tries again.
                            self.tried = !e.is_disk_full();
                            self.untold = Some((e.to_string(), e.is_disk_full()));
                            self.disabled = Some(e.to_string());
                        }
                    }
                }
            }
        }
    }
}

/// Carries the checkpoints `engine` recorded since the last time to the shared store,
/// if the session has one (`sharing`); a failure is logged and returned. Called where
/// the book records a checkpoint: a request's or a tool call's, a rewind's undo point.
fn share(sharing: &mut Option<Sharing>, engine: &Checkpoints) -> Result<(), ErrorPayload> {
    let Some(sharing) = sharing.as_mut() else {
        return Ok(());
    };
    let newest = engine.list().last().map_or(0, |i| i.seq);
    sharing.push(newest).map(drop).inspect_err(|e| {
        tracing::warn!(session_id = %engine.session_id(), error = %e.message, "checkpoint not kept in the shared store");
    })
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

/// Runs `f` on the session's checkpoints on the blocking pool.
async fn with_book<T: Send + 'static>(
    session: &Session,
    f: impl FnOnce(Option<&mut Checkpoints>, &mut Option<String>) -> T + Send + 'static,
) -> Result<T, ErrorPayload> {
    with_slot(session, move |slot| {
        f(slot.engine.as_mut(), &mut slot.disabled)
    })
    .await
}

/// At most this many checkpoint engines are open at once in the process (each holds
/// file descriptors and inotify watches); beyond it the least recently used idle one
/// is closed, and reopened from its records by its next use (whose next checkpoint
/// then stats the whole tree), as the store bounds its open logs.
pub(crate) const MAX_OPEN_ENGINES: usize = 16;

/// At most this many checkpoint operations run at once in the process (on the
/// blocking pool): they are bound by the disk and the cores, and each may open an
/// engine, so a burst of sessions starting together does not open hundreds of them
/// (and their files) at once.
pub(crate) const MAX_RUNNING: usize = 4;

static RUNNING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_RUNNING);

/// The slots with an open engine, least recently used first.
static OPEN: Mutex<Vec<Weak<Mutex<Slot>>>> = Mutex::new(Vec::new());

/// Marks `slot` (locked by the caller, with an engine) as just used, and closes the
/// least recently used others beyond [`MAX_OPEN_ENGINES`] that are not in use.
fn touch(slot: &Arc<Mutex<Slot>>) {
    let mut open = lock(&OPEN);
    open.retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(slot)));
    open.push(Arc::downgrade(slot));
    let mut over = open.len().saturating_sub(MAX_OPEN_ENGINES);
    let mut i = 0;
    while over > 0 && i + 1 < open.len() {
        let closed = open[i]
            .upgrade()
            .is_none_or(|other| match other.try_lock() {
                Ok(mut s) => {
                    *s = Slot::default();
                    true
                }
                // In use (a checkpoint runs): kept open.
                Err(_) => false,
            });
        if closed {
            open.remove(i);
            over -= 1;
        } else {
            i += 1;
        }
    }
}

/// Runs `f` on the session's checkpoint slot (opened on first use) on the blocking pool.
async fn with_slot<T: Send + 'static>(
    session: &Session,
    f: impl FnOnce(&mut Slot) -> T + Send + 'static,
) -> Result<T, ErrorPayload> {
    let book = session.checkpoints.clone();
    let workspace = session.workspace.clone();
    let dir = store_dir(session);
    let id = session.id.clone();
    let writable = session.data().roots.writable();
    let store = session.services.store().clone();
    // Never closed, so it always gives a permit.
    let permit = RUNNING.acquire().await.map_err(internal)?;
    tokio::task::spawn_blocking(move || {
        // Held until the work ends, even when the caller stops waiting.
        let _permit = permit;
        let mut guard = lock(&book.slot);
        let slot = &mut *guard;
        slot.extras.sync(&writable, &id, dir.as_deref());
        slot.open(&store, &workspace, &id, dir);
        if slot.engine.is_some() {
            touch(&book.slot);
        }
        f(slot)
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

/// The checkpoint's id and what it records besides the files: where the
/// conversation stands now.
fn point(session: &Session, rid: &str, call: Option<(&str, &str)>) -> (String, serde_json::Value) {
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
        before_rewind: None,
    };
    let id = call.map_or(rid, |c| c.0).to_owned();
    (id, serde_json::to_value(&meta).unwrap_or_default())
}

/// Starts the checkpoint before request `rid` beside the request (the first model
/// call does not wait for it): the first tool call that may change files waits for
/// it ([`checkpoint`]), and so does the request's end ([`settle`]). Call it before
/// the request's message enters the history.
pub(crate) fn begin_request(session: &Arc<Session>, rid: &str) {
    if !session.services.config().checkpoints {
        return;
    }
    let (id, value) = point(session, rid, None);
    let s = session.clone();
    let r = rid.to_owned();
    // Spawned so that it starts now, whoever polls it.
    let task = tokio::spawn(async move { record(&s, &r, id, value, None).await });
    let pending: Pending = async move { task.await.ok().flatten() }.boxed().shared();
    *lock(&session.checkpoints.baseline) = Some((rid.to_owned(), pending));
}

/// Waits until the checkpoint [`begin_request`] started for `rid` is recorded (or
/// `cancel` fires), and emits its warning on the request's stream if it failed.
pub(crate) async fn settle(session: &Session, rid: &str, cancel: &CancellationToken) {
    let pending = match &*lock(&session.checkpoints.baseline) {
        Some((r, p)) if r == rid => p.clone(),
        _ => return,
    };
    let warning = tokio::select! {
        w = pending => w,
        _ = cancel.cancelled() => return,
    };
    // The first to see it end tells its warning.
    let taken = {
        let mut b = lock(&session.checkpoints.baseline);
        match &*b {
            Some((r, _)) if r == rid => b.take(),
            _ => None,
        }
    };
    if let (Some(_), Some(w)) = (taken, warning) {
        session.emitter.emit(rid, Event::Warning(w)).await;
    }
}

/// Takes a checkpoint before one of the tool calls of request `rid` (`call`:
/// `(toolCallId, toolName)`), after the request's own checkpoint ([`settle`]). A
/// failure is logged and returned (once per session) as a warning for the request's
/// stream; the request goes on. When `cancel` fires first, the request stops waiting
/// (the checkpoint finishes in the background).
pub(crate) async fn checkpoint(
    session: &Arc<Session>,
    rid: &str,
    call: (&str, &str),
    cancel: &CancellationToken,
) -> Option<ErrorPayload> {
    if !session.services.config().checkpoints {
        return None;
    }
    settle(session, rid, cancel).await;
    if cancel.is_cancelled() {
        return None;
    }
    let (id, value) = point(session, rid, Some(call));
    record(session, rid, id, value, Some(cancel)).await
}

/// Records checkpoint `id` with `value`; a failure is logged and returned once per
/// session as a warning (a full disk: with `details.reason` `disk_full`).
async fn record(
    session: &Session,
    rid: &str,
    id: String,
    value: serde_json::Value,
    cancel: Option<&CancellationToken>,
) -> Option<ErrorPayload> {
    let work = with_slot(session, move |slot| {
        // The write roots first, with the same id and record.
        let roots_failed = slot.extras.record(&id, &value);
        let in_roots = move || {
            roots_failed
                .into_iter()
                .next()
                .map(|(why, full)| Failure::local(why, false, full))
        };
        let Some(engine) = slot.engine.as_mut() else {
            // The store could not be opened: told once.
            return slot
                .untold
                .take()
                .map(|(why, full)| Failure::local(why, false, full))
                .or_else(in_roots);
        };
        let disabled = &mut slot.disabled;
        match engine.checkpoint(&id, value) {
            Ok(_) => match share(&mut slot.sharing, engine) {
                Ok(()) => in_roots(),
                Err(e) => Some(Failure {
                    shared_only: true,
                    ..Failure::local(e.message, false, false)
                }),
            },
            Err(CheckpointError::DuplicateId(_)) => in_roots(),
            Err(e @ CheckpointError::TooManyFiles { .. }) => {
                let text = e.to_string();
                *disabled = Some(text.clone());
                Some(Failure::local(text, true, false))
            }
            Err(e) => Some(Failure::local(e.to_string(), false, e.is_disk_full())),
        }
    });
    let result = match cancel {
        Some(cancel) => tokio::select! {
            r = work => r,
            _ = cancel.cancelled() => return None,
        },
        None => work.await,
    };
    let failure = match result {
        Ok(f) => f,
        Err(e) => Some(Failure::local(e.message, false, false)),
    };
    let Failure {
        message,
        off,
        full,
        shared_only,
    } = failure?;
    tracing::warn!(session_id = %session.id, request_id = %rid, %message, shared_only, "checkpoint failed");
    if off {
        lock(&session.checkpoints.slot).engine = None;
    }
    let warned = std::mem::replace(&mut session.data().checkpoint_warned, true);
    if warned {
        return None;
    }
    let text = if shared_only {
        format!(
            "a checkpoint was taken on this node but not kept in the shared store ({message}); a node that takes the session over may not rewind to it"
        )
    } else {
        format!("no checkpoint of the workspace: {message}; rewinding files may not be possible")
    };
    let mut w = ErrorPayload::new(ErrorCode::SessionPersistenceFailed, text)
        .severity(keel_envelope::error::Severity::Warning);
    if full {
        w = w.with_detail("reason", "disk_full");
    }
    Some(w)
}

/// Why a checkpoint failed.
struct Failure {
    message: String,
    /// Checkpoints are off for the session from now on (over the file limit).
    off: bool,
    /// The disk is full.
    full: bool,
    /// Taken on this node, but not carried to the shared store.
    shared_only: bool,
}

impl Failure {
    fn local(message: String, off: bool, full: bool) -> Self {
        Self {
            message,
            off,
            full,
            shared_only: false,
        }
    }
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
        .map(|c| CheckpointFileChange::new(c.path.clone(), wire_change(c.change)))
        .collect()
}

fn entry(info: &CheckpointInfo, after: &[FileChange]) -> CheckpointEntry {
    let meta: Option<Meta> = serde_json::from_value(info.meta.clone()).ok();
    CheckpointEntry::new(
        info.id.clone(),
        meta.as_ref()
            .map(|m| m.request_id.clone())
            .unwrap_or_default(),
        info.created_ms,
        wire_changes(after),
    )
    .tool_call_id(meta.as_ref().and_then(|m| m.tool_call_id.clone()))
    .tool_name(meta.as_ref().and_then(|m| m.tool_name.clone()))
    .before_rewind_to(meta.and_then(|m| m.before_rewind))
}

/// `checkpoint.list`.
pub(crate) async fn list(session: &Arc<Session>) -> Result<CheckpointList, ErrorPayload> {
    let enabled = session.services.config().checkpoints;
    with_slot(session, move |slot| {
        let roots_after = slot.extras.changes_after();
        let (engine, disabled) = (slot.engine.as_mut(), &mut slot.disabled);
        let Some(engine) = engine.filter(|_| enabled) else {
            return Ok(CheckpointList::new(Vec::new()).disabled_reason(
                disabled
                    .clone()
                    .unwrap_or_else(|| "checkpoints are off in the configuration".into()),
            ));
        };
        let pending = if engine.list().is_empty() {
            Vec::new()
        } else {
            engine.pending_changes().map_err(checkpoint_error)?
        };
        let infos = engine.list();
        let checkpoints: Vec<CheckpointEntry> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                let after = infos.get(i + 1).map_or(&pending[..], |n| &n.changed[..]);
                match roots_after.get(&info.id) {
                    Some(more) if !more.is_empty() => {
                        let mut all = after.to_vec();
                        all.extend(more.iter().cloned());
                        entry(info, &all)
                    }
                    _ => entry(info, after),
                }
            })
            .collect();
        Ok(CheckpointList::new(checkpoints))
    })
    .await?
}

pub(crate) fn wire_report(r: RestoreReport) -> (Vec<RewoundFile>, Vec<NotRestorableFile>) {
    let files = r
        .files
        .into_iter()
        .map(|f| {
            RewoundFile::new(
                f.path,
                match f.action {
                    RestoreAction::Removed => RewindAction::Removed,
                    RestoreAction::Recreated => RewindAction::Recreated,
                    RestoreAction::Reverted => RewindAction::Reverted,
                },
            )
        })
        .collect();
    let not = r
        .not_restorable
        .into_iter()
        .map(|n| NotRestorableFile::new(n.path, n.reason))
        .collect();
    (files, not)
}

/// What restoring the files of a checkpoint did.
#[derive(Debug)]
pub(crate) struct Restored {
    pub(crate) report: RestoreReport,
    /// The history length the checkpoint recorded.
    pub(crate) history_len: usize,
    /// The checkpoint that undoes the restore.
    pub(crate) undo: String,
    /// Files other sessions' checkpoints recorded as changed after the target.
    pub(crate) changed_by_others: Vec<ForeignFileChange>,
}

/// Restores the files of checkpoint `id` for a command on stream `rid`, after
/// recording the state it replaces (when it changed since the last checkpoint) as a
/// checkpoint of its own, so the restore can be undone. If that state cannot be
/// recorded (a full disk), nothing is restored.
pub(crate) async fn restore_files(
    session: &Session,
    id: String,
    rid: &str,
) -> Result<Restored, ErrorPayload> {
    let undo_id = session.services.next_id(IdKind::Checkpoint);
    let undo_meta = Meta {
        request_id: rid.to_owned(),
        tool_call_id: None,
        tool_name: None,
        history_len: session.data().state.history.len(),
        before_rewind: Some(id.clone()),
    };
    let undo_meta = serde_json::to_value(&undo_meta).map_err(internal)?;
    with_slot(session, move |slot| {
        let (extras, disabled) = (&mut slot.extras, &slot.disabled);
        let Some(engine) = slot.engine.as_mut() else {
            let why = disabled.clone().unwrap_or_default();
            return Err(not_found(&id).with_detail("reason", why));
        };
        let info = engine.list().iter().find(|i| i.id == id).cloned();
        let Some(info) = info else {
            return Err(not_found(&id));
        };
        let meta: Meta = serde_json::from_value(info.meta).map_err(internal)?;
        let mut others = engine.changed_by_others_since(&id).unwrap_or_default();
        others.extend(extras.changed_by_others_since(&id));
        let unsaved = |other: CheckpointError| {
            ErrorPayload::new(
                ErrorCode::SessionPersistenceFailed,
                format!(
                    "the files as they are now could not be saved first, so nothing was rewound: {other}"
                ),
            )
            .with_detail("reason", if other.is_disk_full() { "disk_full" } else { "io" })
        };
        // The state it replaces is recorded everywhere first (the workspace, then
        // each write root under the same undo point), then everything is restored.
        let changed = !engine.pending_changes().map_err(unsaved)?.is_empty();
        let undo = match engine.list().last() {
            Some(last) if !changed => last.id.clone(),
            _ => {
                engine
                    .checkpoint(&undo_id, undo_meta.clone())
                    .map_err(unsaved)?
                    .id
            }
        };
        extras
            .record_undo(&id, &undo, &undo_meta)
            .map_err(unsaved)?;
        // The undo point goes to the shared store too (a failure is logged: the
        // rewind itself does not depend on it).
        let _ = share(&mut slot.sharing, engine);
        let mut report = engine.restore(&id).map_err(|e| match e {
            CheckpointError::UnknownCheckpoint(id) => not_found(&id),
            other => checkpoint_error(other),
        })?;
        extras.restore(&id, &mut report);
        Ok(Restored {
            report,
            history_len: meta.history_len,
            undo,
            changed_by_others: foreign(others),
        })
    })
    .await?
}

/// Each (session, path) once, with the last change recorded.
fn foreign(changes: Vec<ForeignChange>) -> Vec<ForeignFileChange> {
    let mut last: BTreeMap<(String, String), ChangeKind> = BTreeMap::new();
    for c in changes {
        last.insert((c.session_id, c.path), c.change);
    }
    last.into_iter()
        .map(|((session_id, path), change)| {
            ForeignFileChange::new(session_id, path, wire_change(change))
        })
        .collect()
}

/// The other open sessions whose workspace is `session`'s: those of `loaded` (the
/// sessions in memory of this process) on the same folder, then those the
/// workspace's checkpoint store says some process holds open; without `session`
/// itself and `except`.
pub(crate) async fn shared_with(
    session: &Session,
    loaded: Vec<Arc<Session>>,
    except: Option<&str>,
) -> Vec<String> {
    let ws = session.workspace.clone();
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let dir = store_dir(session);
    let enabled = session.services.config().checkpoints;
    let mine = session.id.clone();
    let except = except.map(str::to_owned);
    let found = tokio::task::spawn_blocking(move || {
        let here = canon(&ws);
        let mut out: Vec<String> = loaded
            .iter()
            .filter(|s| s.id != mine && !s.data().state.closed)
            .filter(|s| s.workspace == ws || canon(&s.workspace) == here)
            .map(|s| s.id.clone())
            .collect();
        out.sort();
        if let Some(dir) = dir.filter(|_| enabled) {
            for id in CheckpointHome::new(dir).open_sessions(&ws) {
                if id != mine && !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        out.retain(|s| Some(s) != except.as_ref());
        out
    })
    .await;
    found.unwrap_or_default()
}

/// Lets go of the session's engine (its watcher, and the mark that tells other
/// processes it is open), once its running checkpoint, if any, is recorded.
pub(crate) async fn release(session: &Session) {
    let book = session.checkpoints.clone();
    let _ = tokio::task::spawn_blocking(move || book.release()).await;
}

/// Drops every checkpoint of deleted session `id` from the stores under the kernel's
/// checkpoint directory, and what only it used. A failure is logged: the session is
/// deleted all the same (the next pruning collects what is left).
pub(crate) async fn forget_session(services: &crate::session::services::Services, id: &str) {
    let Some(dir) = services.config().checkpoint_dir.clone() else {
        return;
    };
    let sid = id.to_owned();
    let done =
        tokio::task::spawn_blocking(move || CheckpointHome::new(dir).delete_session(&sid, false))
            .await;
    match done {
        Ok(Ok(r)) => {
            tracing::info!(session_id = %id, freed = r.bytes_freed(), "checkpoints of a deleted session removed")
        }
        Ok(Err(e)) => {
            tracing::warn!(session_id = %id, error = %e, "removing a deleted session's checkpoints failed")
        }
        Err(e) => {
            tracing::warn!(session_id = %id, error = %e, "removing a deleted session's checkpoints failed")
        }
    }
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
