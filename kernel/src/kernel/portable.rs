//! Moving a session to another machine: [`crate::Kernel::export_session`] writes one
//! file (the format is in `base::archive`) holding the session's state, conversation,
//! event log and checkpoints, read from the kernel's store, whatever it is;
//! [`crate::Kernel::import_session`] takes such a file into the kernel's store and its
//! checkpoints into the checkpoint store of the session's workspace on this machine,
//! so that `checkpoint.list` and `session.rewind` work there, and may make that
//! workspace from the newest checkpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_envelope::codec;
use keel_envelope::events::MaterializedWorkspace;
use keel_envelope::ids::IdKind;
use keel_envelope::{Envelope, ErrorCode, ErrorPayload};
use keel_tools::checkpoint::{BundleError, BundleItem, CheckpointHome, Importer};
use serde::Serialize;

use crate::base::archive::{self, bad, Header, Item, Writer};
use crate::base::model::Message;
use crate::base::store::PersistedSession;
use crate::kernel::KernelInner;
use crate::session::checkpoint_export::record_for_export;
use crate::session::materialize::{self, checkpoint_home};
use crate::session::services::Services;

/// What [`crate::Kernel::export_session`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportReport {
    /// The session.
    pub session_id: String,
    /// The file written.
    pub file: PathBuf,
    /// The session's workspace (where it was made).
    pub workspace: String,
    /// Events of its log.
    pub events: usize,
    /// Messages of its conversation.
    pub messages: usize,
    /// Checkpoints.
    pub checkpoints: usize,
    /// Checkpoint objects (file contents and trees), each once.
    pub objects: usize,
    /// Bytes of the file.
    pub bytes: u64,
    /// The checkpoint the export recorded of the workspace as it was then (when it
    /// existed here and had changed since the session's last checkpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<String>,
}

/// How [`crate::Kernel::import_session`] takes a session in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// The session's workspace on this machine (default: the path it had). A folder
    /// that does not exist or is empty is made from the newest checkpoint; one with
    /// files in it is used as it is.
    pub workspace: Option<PathBuf>,
    /// Give the session a new id. Without it the session keeps its id, and a store
    /// that has a session of that id refuses the import.
    pub as_new: bool,
    /// Take in the checkpoints only, for a session the store has already (a node of
    /// a shared database that lacks them): into the checkpoint store of the workspace
    /// the store names, replacing those this machine had of the session. The store is
    /// not written. Not with `workspace` or `as_new`.
    pub checkpoints_only: bool,
}

/// What [`crate::Kernel::import_session`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// The session's id in this store.
    pub session_id: String,
    /// Its id in the export (the same unless imported as new).
    pub exported_session_id: String,
    /// Its workspace now.
    pub workspace: String,
    /// Events of its log.
    pub events: usize,
    /// Messages of its conversation.
    pub messages: usize,
    /// Checkpoints taken in.
    pub checkpoints: usize,
    /// The workspace made from the newest checkpoint, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub materialized: Option<MaterializedWorkspace>,
    /// The workspace does not exist on this machine: `session.resume
    /// {materializeTo}` makes it.
    pub workspace_missing: bool,
}

fn internal(e: impl std::fmt::Display) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RuntimeInternalError, e.to_string())
}

fn write_err(file: &Path, e: impl std::fmt::Display) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::SessionPersistenceFailed,
        format!("cannot write {}: {e}", file.display()),
    )
    .with_detail("path", file.display().to_string())
}

fn not_found(id: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::SessionNotFound,
        format!("no session {id:?} in the store"),
    )
    .with_detail("sessionId", id)
}

/// Writes session `id` to `file` (replaced whole, or left as it was on failure).
pub(crate) async fn export(
    inner: &Arc<KernelInner>,
    id: &str,
    file: &Path,
) -> Result<ExportReport, ErrorPayload> {
    let services = inner.services.clone();
    let (id, file) = (id.to_owned(), file.to_path_buf());
    tokio::task::spawn_blocking(move || export_blocking(&services, &id, &file))
        .await
        .map_err(internal)?
}

fn export_blocking(
    services: &Services,
    id: &str,
    file: &Path,
) -> Result<ExportReport, ErrorPayload> {
    let state = services
        .store()
        .load_state(id)?
        .ok_or_else(|| not_found(id))?;
    let log = services.store().load_events(id)?.events;
    // Before the output exists: it may be in the workspace.
    let home = checkpoint_home(services, id);
    let mut recorded = None;
    if let Some(home) = home.as_ref().filter(|_| services.config().checkpoints) {
        let cid = services.next_id(IdKind::Checkpoint);
        let ws = Path::new(&state.workspace);
        match record_for_export(home, ws, id, &cid, &state) {
            Ok(true) => recorded = Some(cid),
            Ok(false) => {}
            Err(e) => {
                return Err(ErrorPayload::new(
                    ErrorCode::SessionPersistenceFailed,
                    format!("cannot record the workspace of session {id} as it is now: {e}"),
                ))
            }
        }
    }
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".keel-export-")
        .tempfile_in(&dir)
        .map_err(|e| write_err(file, e))?;
    let header = Header {
        format: archive::FORMAT.to_owned(),
        version: archive::VERSION,
        session_id: id.to_owned(),
        workspace: state.workspace.clone(),
        exported_at: services.now(),
        keel_version: env!("CARGO_PKG_VERSION").to_owned(),
    };
    let w = |e| write_err(file, e);
    let mut out = Writer::new(tmp.as_file(), &header).map_err(w)?;
    let mut bare = state.clone();
    let history = std::mem::take(&mut bare.history);
    out.entry(
        "session/state.json",
        &serde_json::to_vec_pretty(&bare).map_err(internal)?,
    )
    .map_err(w)?;
    let mut lines = Vec::new();
    for m in history.iter() {
        serde_json::to_writer(&mut lines, m).map_err(internal)?;
        lines.push(b'\n');
    }
    out.entry("session/history.jsonl", &lines).map_err(w)?;
    lines.clear();
    for e in &log {
        codec::encode_into(e, &mut lines);
    }
    out.entry("session/events.jsonl", &lines).map_err(w)?;
    drop(lines);
    let summary = match home {
        None => Default::default(),
        Some(home) => CheckpointHome::new(home)
            .export_session(Path::new(&state.workspace), id, &mut |item| match item {
                BundleItem::Object { hash, bytes } => out.entry(&format!("objects/{hash}"), bytes),
                BundleItem::Record { seq, body } => {
                    out.entry(&format!("checkpoints/{seq:08}.json"), body)
                }
            })
            .map_err(|e| {
                ErrorPayload::new(
                    ErrorCode::SessionPersistenceFailed,
                    format!("cannot export the checkpoints of session {id}: {e}"),
                )
            })?,
    };
    let f = out.finish().map_err(w)?;
    f.sync_all().map_err(w)?;
    let bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
    tmp.persist(file).map_err(|e| write_err(file, e.error))?;
    Ok(ExportReport {
        session_id: id.to_owned(),
        file: file.to_path_buf(),
        workspace: state.workspace,
        events: log.len(),
        messages: history.len(),
        checkpoints: summary.records,
        objects: summary.objects,
        bytes,
        recorded,
    })
}

/// A session id usable in every store: letters, digits, `_` and `-`, at most 128.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Every string equal to `old` in `v` becomes `new` (a session's id, in its state and
/// its events, when it is imported as new).
fn rename(v: &mut serde_json::Value, old: &str, new: &str) {
    match v {
        serde_json::Value::String(s) if s == old => *s = new.to_owned(),
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| rename(x, old, new)),
        serde_json::Value::Object(m) => m.values_mut().for_each(|x| rename(x, old, new)),
        _ => {}
    }
}

/// What reading an export gave.
struct Read {
    header: Header,
    id: String,
    workspace: String,
    /// The folder was made by this import (removed again if it fails).
    created: bool,
    /// The folder is new or empty: made from the newest checkpoint.
    empty: bool,
    state: Option<PersistedSession>,
    history: Vec<Message>,
    events: Vec<Envelope>,
    checkpoints: Option<Importer>,
}

fn damaged(what: impl std::fmt::Display) -> ErrorPayload {
    bad("damaged", format!("the export file is damaged: {what}"))
}

fn bundle_err(e: BundleError) -> ErrorPayload {
    match e {
        BundleError::Invalid(why) => damaged(why),
        BundleError::Store(e) => ErrorPayload::new(
            ErrorCode::SessionPersistenceFailed,
            format!("cannot store the session's checkpoints: {e}"),
        ),
    }
}

/// The folder named by `--workspace`: absolute, created when missing.
fn target_folder(dir: &Path) -> Result<(PathBuf, bool, bool), ErrorPayload> {
    let field = |e: ErrorPayload| e.with_detail("field", "workspace");
    let abs = std::path::absolute(dir).map_err(|e| {
        field(ErrorPayload::new(
            ErrorCode::RequestInvalid,
            format!("workspace {} cannot be used: {e}", dir.display()),
        ))
    })?;
    let created = !abs.exists();
    if created {
        std::fs::create_dir_all(&abs).map_err(|e| {
            field(ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("cannot create the workspace {}: {e}", abs.display()),
            ))
        })?;
    }
    let canon = std::fs::canonicalize(&abs).map_err(|e| {
        field(ErrorPayload::new(
            ErrorCode::RequestInvalid,
            format!("workspace {} cannot be used: {e}", abs.display()),
        ))
    })?;
    let empty = match std::fs::read_dir(&canon) {
        Ok(mut rd) => rd.next().is_none(),
        Err(e) => {
            return Err(field(ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("workspace {} is not a folder: {e}", abs.display()),
            )))
        }
    };
    Ok((canon, created, empty))
}

fn read_blocking(
    services: &Services,
    file: &Path,
    options: &ImportOptions,
    new_id: Option<String>,
) -> Result<Read, ErrorPayload> {
    let read: std::cell::RefCell<Option<Read>> = std::cell::RefCell::new(None);
    let store = services.store();
    let result = archive::read(
        file,
        &mut |h| {
            if !valid_id(&h.session_id) {
                return Err(damaged(format!("{:?} is not a session id", h.session_id)));
            }
            let stored = store.load_state(&h.session_id)?;
            if options.checkpoints_only && stored.is_none() {
                return Err(ErrorPayload::new(
                    ErrorCode::SessionNotFound,
                    format!(
                        "no session {} in this store to take the checkpoints of: import it whole (without --checkpoints-only)",
                        h.session_id
                    ),
                )
                .with_detail("sessionId", h.session_id.clone()));
            }
            if !options.checkpoints_only && new_id.is_none() && stored.is_some() {
                return Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!(
                        "session {} exists already in this store: import it with --as-new to give it a new id, or delete the one here first (keel sessions delete {})",
                        h.session_id, h.session_id
                    ),
                )
                .with_detail("reason", "session_exists")
                .with_detail("sessionId", h.session_id.clone()));
            }
            let id = new_id.clone().unwrap_or_else(|| h.session_id.clone());
            let (workspace, created, empty) = match (&options.workspace, stored) {
                (Some(dir), _) => {
                    let (p, created, empty) = target_folder(dir)?;
                    (p.display().to_string(), created, empty)
                }
                (None, Some(st)) if options.checkpoints_only => (st.workspace, false, false),
                (None, _) => (h.workspace.clone(), false, false),
            };
            let mut r = Read {
                header: h.clone(),
                id: id.clone(),
                workspace,
                created,
                empty,
                state: None,
                history: Vec::new(),
                events: Vec::new(),
                checkpoints: None,
            };
            if let Some(home) = checkpoint_home(services, &id) {
                let imp = CheckpointHome::new(home)
                    .importer(Path::new(&r.workspace), &id)
                    .map_err(|e| bundle_err(BundleError::Store(e)));
                match imp {
                    Ok(i) => r.checkpoints = Some(i),
                    Err(e) => {
                        *read.borrow_mut() = Some(r);
                        return Err(e);
                    }
                }
            }
            *read.borrow_mut() = Some(r);
            Ok(())
        },
        &mut |item| {
            let mut guard = read.borrow_mut();
            let Some(r) = guard.as_mut() else {
                return Err(internal("an entry before the header"));
            };
            match item {
                Item::State(bytes) => {
                    let s: PersistedSession = serde_json::from_slice(bytes)
                        .map_err(|e| damaged(format!("session/state.json: {e}")))?;
                    if s.session_id != r.header.session_id {
                        return Err(damaged("session/state.json is of another session"));
                    }
                    r.state = Some(s);
                }
                Item::History(bytes) => {
                    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
                        if line.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        let m: Message = serde_json::from_slice(line).map_err(|e| {
                            damaged(format!("session/history.jsonl line {}: {e}", n + 1))
                        })?;
                        r.history.push(m);
                    }
                }
                Item::Events(bytes) => {
                    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
                        if line.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        let env = codec::decode_envelope(line).map_err(|e| {
                            damaged(format!(
                                "session/events.jsonl line {}: {}",
                                n + 1,
                                e.message
                            ))
                        })?;
                        if env
                            .session_id
                            .as_deref()
                            .is_some_and(|s| s != r.header.session_id)
                        {
                            return Err(damaged(format!(
                                "session/events.jsonl line {} is of another session",
                                n + 1
                            )));
                        }
                        r.events.push(env);
                    }
                }
                Item::Object { hash, bytes } => {
                    if let Some(imp) = r.checkpoints.as_mut() {
                        imp.object(hash, bytes).map_err(bundle_err)?;
                    }
                }
                Item::Record { seq, bytes } => {
                    if let Some(imp) = r.checkpoints.as_mut() {
                        imp.record(seq, bytes).map_err(bundle_err)?;
                    }
                }
            }
            Ok(())
        },
    );
    match (result, read.into_inner()) {
        (Ok(()), Some(r)) if r.state.is_some() => Ok(r),
        (Ok(()), r) => {
            forget_folder(r.as_ref());
            Err(damaged("it holds no session/state.json"))
        }
        (Err(e), r) => {
            forget_folder(r.as_ref());
            Err(e)
        }
    }
}

/// Removes the workspace folder an import made, when it fails.
fn forget_folder(r: Option<&Read>) {
    if let Some(r) = r.filter(|r| r.created) {
        let _ = std::fs::remove_dir_all(&r.workspace);
    }
}

/// Takes the session exported in `file` into the kernel's store.
pub(crate) async fn import(
    inner: &Arc<KernelInner>,
    file: &Path,
    options: ImportOptions,
) -> Result<ImportReport, ErrorPayload> {
    let services = inner.services.clone();
    if options.checkpoints_only && (options.as_new || options.workspace.is_some()) {
        return Err(ErrorPayload::new(
            ErrorCode::RequestInvalid,
            "taking in the checkpoints only goes with neither a new id nor another workspace",
        )
        .with_detail("field", "checkpointsOnly"));
    }
    let new_id = options.as_new.then(|| services.next_id(IdKind::Session));
    let (s, f, o) = (services.clone(), file.to_path_buf(), options.clone());
    let mut r = tokio::task::spawn_blocking(move || read_blocking(&s, &f, &o, new_id))
        .await
        .map_err(internal)??;
    // Checkpoints first (objects durable, then records), so that a session in the
    // store always has what it rewinds to.
    let imp = r.checkpoints.take();
    let done = tokio::task::spawn_blocking(move || imp.map(Importer::finish).transpose())
        .await
        .map_err(internal)?;
    let checkpoints = match done {
        Ok(n) => n.unwrap_or(0),
        Err(e) => {
            forget_folder(Some(&r));
            return Err(bundle_err(e));
        }
    };
    let old = r.header.session_id.clone();
    if options.checkpoints_only {
        tracing::info!(session_id = %r.id, workspace = %r.workspace, checkpoints, "checkpoints of a session imported");
        return Ok(ImportReport {
            session_id: r.id.clone(),
            exported_session_id: old,
            workspace: r.workspace.clone(),
            events: 0,
            messages: 0,
            checkpoints,
            materialized: None,
            workspace_missing: !Path::new(&r.workspace).is_dir(),
        });
    }
    let mut state = r.state.take().ok_or_else(|| damaged("no session state"))?;
    let mut events = std::mem::take(&mut r.events);
    if r.id != old {
        let mut v = serde_json::to_value(&state).map_err(internal)?;
        rename(&mut v, &old, &r.id);
        state = serde_json::from_value(v).map_err(internal)?;
        for e in events.iter_mut() {
            let mut v: serde_json::Value =
                serde_json::from_slice(&codec::encode_line(e)).map_err(internal)?;
            rename(&mut v, &old, &r.id);
            let bytes = serde_json::to_vec(&v).map_err(internal)?;
            *e = codec::decode_envelope(&bytes)?;
        }
    }
    state.history = std::mem::take(&mut r.history).into();
    state.closed = true;
    if state.workspace != r.workspace || r.id != old {
        // A worktree belongs to the machine (and the session) that made it.
        materialize::moved(&mut state, &r.workspace);
    }
    let stored = (|| {
        let (_lease, _) = services.claim(&r.id)?;
        let saved = services
            .store()
            .save_state(&state)
            .and_then(|()| services.store().append_batch(&r.id, &events));
        let _ = services.store().unclaim(&r.id);
        saved
    })();
    if let Err(e) = stored {
        let _ = services.store().delete(&r.id);
        if let Some(home) = checkpoint_home(&services, &r.id) {
            let sid = r.id.clone();
            let _ = tokio::task::spawn_blocking(move || {
                CheckpointHome::new(home).delete_session(&sid, false)
            })
            .await;
        }
        forget_folder(Some(&r));
        return Err(e);
    }
    tracing::info!(session_id = %r.id, exported_as = %old, workspace = %r.workspace, events = events.len(), checkpoints, "session imported");
    let materialized = if options.workspace.is_some() && r.empty && checkpoints > 0 {
        let to = PathBuf::from(&r.workspace);
        let made = materialize::materialize(&services, &r.id, &r.workspace, to, false).await;
        Some(made.map_err(|mut e| {
            e.message = format!(
                "session {} was imported, but its workspace could not be made: {}",
                r.id, e.message
            );
            e
        })?)
    } else {
        None
    };
    Ok(ImportReport {
        session_id: r.id.clone(),
        exported_session_id: old,
        workspace: r.workspace.clone(),
        events: events.len(),
        messages: state.history.len(),
        checkpoints,
        materialized,
        workspace_missing: !Path::new(&r.workspace).is_dir(),
    })
}
