//! Persistence: each session is an append-only JSON-lines event log plus a snapshot
//! of the state needed to resume it.
//!
//! Layout of [`FileStore`]: `<root>/sessions/<sessionId>/events.jsonl`,
//! `<root>/sessions/<sessionId>/state.json` (written atomically: temp file, then the
//! two exchanged, or the temp file renamed over where exchanging is not supported),
//! with `summary.json` beside it (what `session.list` reads, see [`SessionSummary`],
//! written the same way) and `<root>/sessions/<sessionId>/history.jsonl` (the
//! conversation, one message per line, appended as it grows; `state.json` says how
//! many lines belong to it).
//! An event is appended before it is delivered to a host. A torn last line (a crash
//! in the middle of a write) is detected on load, dropped, and cut from the file;
//! nothing before it is lost.
//!
//! # Durability
//!
//! Each event is written to its log with one `write(2)` before it is delivered, so
//! once a host has seen an event, a crash of the process (a panic, `SIGKILL`, the
//! out-of-memory killer) cannot lose it: the bytes are in the operating system's
//! cache and reach the disk without the process. What a crash of the process can
//! leave is at most one torn line, for an event that was never delivered; it is
//! dropped on the next load.
//!
//! A power loss or a crash of the operating system is different: what the disk had
//! not received is lost. By default ([`FileStoreOptions::fsync_each_event`] off) a
//! log is synced (`fdatasync`) when its session is closed ([`Store::release`]) and
//! when the runtime shuts down ([`Store::flush`]), so a power loss can lose the
//! events written since the session was opened, including events a host has seen,
//! and leave a torn tail. With `fsync_each_event` on, every event is synced before it
//! is delivered (and the state file before it replaces the old one): nothing a host
//! has seen is lost to a power loss, at the price of one disk sync per event
//! (figures in docs/reliability.md).
//!
//! # Open files
//!
//! Logs are kept open between appends in a small cache of at most
//! [`FileStoreOptions::max_open_logs`] files, least recently used first out, so the
//! number of open files does not grow with the number of sessions a process touches.
//! A session's log is closed when the session closes.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_envelope::codec;
use keel_envelope::types::{ApprovalRules, PermissionMode, Plan, Usage};
use keel_envelope::{Envelope, ErrorCode, ErrorPayload};
use serde::{Deserialize, Serialize};

use crate::base::model::History;
pub use crate::base::ownership::{
    Claim, Owned, OwnerInfo, SharedCheckpoint, SharedCheckpoints, Tail,
};
use crate::base::summary::SessionSummary;
use std::time::Duration;

/// The state of a session that survives a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistedSession {
    /// The session id.
    pub session_id: String,
    /// The title.
    pub title: Option<String>,
    /// The workspace root.
    pub workspace: String,
    /// The model, `provider:model`.
    pub model: String,
    /// The permission mode.
    pub mode: PermissionMode,
    /// Always-allow rules synced by the host.
    pub rules: ApprovalRules,
    /// Canonical keys approved for the session.
    #[serde(default)]
    pub session_keys: Vec<String>,
    /// Deny rules for this session only (`session.set_rules` `deny`).
    #[serde(default)]
    pub session_deny: Vec<String>,
    /// Conversation history.
    pub history: History,
    /// The plan.
    pub plan: Option<Plan>,
    /// Total usage.
    pub usage: Usage,
    /// Created, ms since the epoch.
    pub created_at: u64,
    /// Last activity.
    pub updated_at: u64,
    /// Whether the session was closed.
    #[serde(default)]
    pub closed: bool,
    /// State of optional extensions, by extension name.
    #[serde(default)]
    pub extensions: serde_json::Map<String, serde_json::Value>,
    /// Where the history stood when each request started (rewind and fork cut there).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub request_marks: Vec<RequestMark>,
}

/// The length of the history when a request started, before its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestMark {
    /// The request.
    pub request_id: String,
    /// Messages in the history before it.
    pub history_len: usize,
}

/// What loading a session's log found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadedLog {
    /// The events, in log order.
    pub events: Vec<Envelope>,
    /// Whether a torn last line was dropped.
    pub torn_tail_dropped: bool,
}

/// Where sessions are kept. A host app may supply its own.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Appends one event to the session's log.
    fn append(&self, session_id: &str, event: &Envelope) -> Result<(), ErrorPayload>;
    /// Appends events to the session's log in order, as one commit where the store
    /// can (all of them or none); the default appends them one by one.
    fn append_batch(&self, session_id: &str, events: &[Envelope]) -> Result<(), ErrorPayload> {
        events.iter().try_for_each(|e| self.append(session_id, e))
    }
    /// Saves the session's state snapshot.
    fn save_state(&self, state: &PersistedSession) -> Result<(), ErrorPayload>;
    /// Loads the state snapshot, or `None` if the session is unknown.
    fn load_state(&self, session_id: &str) -> Result<Option<PersistedSession>, ErrorPayload>;
    /// Loads the event log.
    fn load_events(&self, session_id: &str) -> Result<LoadedLog, ErrorPayload>;
    /// Every stored session's state.
    fn list(&self) -> Result<Vec<PersistedSession>, ErrorPayload>;
    /// Every stored session's summary (what `session.list` shows). A store that keeps
    /// summaries apart reads only them; the default derives them from [`Store::list`].
    fn list_summaries(&self) -> Result<Vec<SessionSummary>, ErrorPayload> {
        Ok(self.list()?.iter().map(SessionSummary::of).collect())
    }
    /// Removes a session's state and log; `Ok(false)` when nothing was stored under
    /// that id. A store that cannot delete answers an error (the default).
    fn delete(&self, session_id: &str) -> Result<bool, ErrorPayload> {
        Err(ErrorPayload::new(
            ErrorCode::SessionPersistenceFailed,
            format!("this store cannot delete session {session_id:?}"),
        ))
    }
    /// Makes sure everything written so far reached the storage.
    fn flush(&self) -> Result<(), ErrorPayload> {
        Ok(())
    }
    /// A directory of the session's own where the kernel may keep files (workspace
    /// checkpoints); `None` for a store that keeps no files.
    fn session_dir(&self, _session_id: &str) -> Option<PathBuf> {
        None
    }
    /// The session was closed: make its log durable and let go of what is held open
    /// for it (a later append opens it again).
    fn release(&self, _session_id: &str) -> Result<(), ErrorPayload> {
        Ok(())
    }
    /// The events logged after `after` (the whole log without a cursor); a cursor that
    /// is not in the log is `REQUEST_INVALID`. The default reads the whole log.
    fn events_after(
        &self,
        session_id: &str,
        after: Option<&keel_envelope::types::Cursor>,
    ) -> Result<Vec<Envelope>, ErrorPayload> {
        let log = self.load_events(session_id)?.events;
        match after {
            None => Ok(log),
            Some(_) => Ok(crate::base::replay::after_cursor(&log, after)?.to_vec()),
        }
    }
    /// Whether other processes (nodes) share this store: then sessions have leases,
    /// and one not open here can be watched through [`Store::tail`]. Default false.
    fn is_shared(&self) -> bool {
        false
    }
    /// Claims session `session_id` for node `owner` for `ttl` (see
    /// [`crate::base::ownership`]). A store one process uses alone answers
    /// [`Claim::Local`] (the default). A shared store takes the lease when it is free,
    /// ran out, or is `owner`'s already, and from then on fences the session's writes
    /// with its epoch.
    fn claim(
        &self,
        _session_id: &str,
        _owner: &str,
        _ttl: Duration,
    ) -> Result<Claim, ErrorPayload> {
        Ok(Claim::Local)
    }
    /// Extends the lease this node holds on the session by its TTL from now; an
    /// error whose reason is `fenced` when the lease is not ours any more.
    fn renew(&self, _session_id: &str) -> Result<(), ErrorPayload> {
        Ok(())
    }
    /// Gives up the lease this node holds on the session (closed, unloaded).
    fn unclaim(&self, _session_id: &str) -> Result<(), ErrorPayload> {
        Ok(())
    }
    /// Who holds the session's lease (`None`: nobody, or the store keeps no leases).
    fn owner_of(&self, _session_id: &str) -> Result<Option<OwnerInfo>, ErrorPayload> {
        Ok(None)
    }
    /// The session's events after `after` (from its first without a cursor), then live
    /// as any node commits them; `None` for a store no other process writes (the
    /// default), where the kernel's own delivery is the only source.
    fn tail(
        &self,
        _session_id: &str,
        _after: Option<&keel_envelope::types::Cursor>,
    ) -> Result<Option<Tail>, ErrorPayload> {
        Ok(None)
    }
    /// Where a store several nodes share keeps workspace checkpoints for all of them
    /// (`None`, the default: checkpoints stay on the machine that took them).
    fn shared_checkpoints(&self) -> Option<&dyn SharedCheckpoints> {
        None
    }
}

fn persist_err(what: &str, path: &Path, e: impl std::fmt::Display) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::SessionPersistenceFailed,
        format!("{what} {}: {e}", path.display()),
    )
    .with_detail("path", path.display().to_string())
}

/// Options of a [`FileStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStoreOptions {
    /// Sync every event to the disk before it is delivered (and the state file before
    /// it replaces the old one). Off: logs are synced when their session closes and at
    /// shutdown. See the module documentation for what each choice can lose.
    pub fsync_each_event: bool,
    /// How many session logs stay open between appends (at least 1).
    pub max_open_logs: usize,
}

/// Default of [`FileStoreOptions::max_open_logs`].
pub const DEFAULT_MAX_OPEN_LOGS: usize = 64;

impl Default for FileStoreOptions {
    fn default() -> Self {
        Self {
            fsync_each_event: false,
            max_open_logs: DEFAULT_MAX_OPEN_LOGS,
        }
    }
}

/// One open log and when it was last used.
#[derive(Debug)]
struct OpenLog {
    file: Arc<File>,
    last_used: u64,
}

/// The open logs (bounded, least recently used out) and the logs written since
/// they were last synced.
#[derive(Debug, Default)]
struct Logs {
    open: HashMap<String, OpenLog>,
    tick: u64,
    unsynced: HashSet<String>,
}

/// Numbers the directories of sessions being deleted.
static TOMBSTONES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The default store: files under a root directory.
#[derive(Debug)]
pub struct FileStore {
    root: PathBuf,
    options: FileStoreOptions,
    logs: Mutex<Logs>,
    /// What this process wrote of each session's history (held while saving a state).
    written: Mutex<crate::base::store_history::Written>,
    /// The summary last written for each session in this process (see
    /// [`FileStore::summary_is_current`]).
    summaries: Mutex<HashMap<String, SessionSummary>>,
    /// The sessions whose directory this process made or found (not made again on
    /// every save; forgotten when the session is deleted).
    dirs: Mutex<HashSet<String>>,
}

/// A summary that differs from the one on disk only by a later `updatedAt`, by less
/// than this, is not written again.
const SUMMARY_STALE_MS: u64 = 2_000;

impl FileStore {
    /// A store rooted at `root` (created on first write), with default options.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self::with_options(root, FileStoreOptions::default())
    }

    /// A store rooted at `root` with `options`.
    pub fn with_options(root: impl Into<PathBuf>, options: FileStoreOptions) -> Self {
        Self {
            root: root.into(),
            options: FileStoreOptions {
                max_open_logs: options.max_open_logs.max(1),
                ..options
            },
            logs: Mutex::new(Logs::default()),
            written: Mutex::new(HashMap::new()),
            summaries: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashSet::new()),
        }
    }

    /// Whether `summary.json` can stay as it is: it was written by this process and
    /// says the same but for an `updatedAt` less than [`SUMMARY_STALE_MS`] older. A
    /// request's turns change no field of a listing but that time (a tool call's turn
    /// has no text for `lastMessage`), so the summary is written once a request (at
    /// its last answer) rather than once a turn; a listing shows a running session's
    /// last activity at most two seconds late.
    fn summary_is_current(&self, summary: &SessionSummary) -> bool {
        let known = self.summaries.lock().unwrap_or_else(|p| p.into_inner());
        known.get(&summary.session_id).is_some_and(|old| {
            old.updated_at.saturating_add(SUMMARY_STALE_MS) > summary.updated_at
                && SessionSummary {
                    updated_at: summary.updated_at,
                    ..old.clone()
                } == *summary
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The options.
    pub fn options(&self) -> FileStoreOptions {
        self.options
    }

    /// How many session logs are open now (at most `max_open_logs`, plus any being
    /// written at this instant).
    pub fn open_logs(&self) -> usize {
        self.logs().open.len()
    }

    fn logs(&self) -> std::sync::MutexGuard<'_, Logs> {
        self.logs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn dir(&self, session_id: &str) -> Result<PathBuf, ErrorPayload> {
        // Session ids come from outside (resume); never let one name another path.
        if session_id.is_empty()
            || session_id.len() > 128
            || !session_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(ErrorPayload::new(
                ErrorCode::SessionNotFound,
                format!("{session_id:?} is not a valid session id"),
            ));
        }
        Ok(self.root.join("sessions").join(session_id))
    }

    /// The session's directory, made when this process has not made or found it yet.
    fn made_dir(&self, session_id: &str) -> Result<PathBuf, ErrorPayload> {
        let dir = self.dir(session_id)?;
        let mut dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
        if !dirs.contains(session_id) {
            fs::create_dir_all(&dir).map_err(|e| persist_err("cannot create", &dir, e))?;
            dirs.insert(session_id.to_owned());
        }
        Ok(dir)
    }

    fn forget_dir(&self, session_id: &str) {
        self.dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id);
    }

    /// The path of a session's event log.
    pub fn log_path(&self, session_id: &str) -> Result<PathBuf, ErrorPayload> {
        Ok(self.dir(session_id)?.join("events.jsonl"))
    }

    /// The session's open log, opened (and the least recently used one closed) when
    /// it is not open.
    fn open_log(&self, session_id: &str) -> Result<Arc<File>, ErrorPayload> {
        let mut logs = self.logs();
        logs.tick += 1;
        let tick = logs.tick;
        if let Some(open) = logs.open.get_mut(session_id) {
            open.last_used = tick;
            return Ok(open.file.clone());
        }
        let mut dir = self.made_dir(session_id)?;
        let open = |dir: &Path| {
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("events.jsonl"))
        };
        let file = match open(&dir) {
            // The directory went (removed from outside): made again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.forget_dir(session_id);
                dir = self.made_dir(session_id)?;
                open(&dir)
            }
            opened => opened,
        }
        .map_err(|e| persist_err("cannot open", &dir.join("events.jsonl"), e))?;
        if self.options.fsync_each_event {
            // The new file's directory entry must survive a power loss too.
            sync_dir(&dir)?;
        }
        while logs.open.len() >= self.options.max_open_logs {
            let oldest = logs
                .open
                .iter()
                .min_by_key(|(_, l)| l.last_used)
                .map(|(id, _)| id.clone());
            match oldest {
                // Dropping the handle closes the file (once a writer holding it is done).
                Some(id) => drop(logs.open.remove(&id)),
                None => break,
            }
        }
        let file = Arc::new(file);
        logs.open.insert(
            session_id.to_owned(),
            OpenLog {
                file: file.clone(),
                last_used: tick,
            },
        );
        Ok(file)
    }

    /// [`Store::save_state`] in the session's directory `dir`, which exists.
    fn save_state_in(&self, dir: &Path, state: &PersistedSession) -> Result<(), ErrorPayload> {
        let path = dir.join("state.json");
        let tmp = dir.join("state.json.tmp");
        let sync = self.options.fsync_each_event;
        // The history's new messages are appended first; the state that counts them
        // replaces the old one after.
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        crate::base::store_history::save(
            dir,
            &state.session_id,
            &state.history,
            &mut written,
            sync,
        )?;
        let bytes = crate::base::store_history::state_bytes(state)
            .map_err(|e| persist_err("cannot encode", &path, e))?;
        crate::base::store_history::overwrite(&tmp, &bytes, sync)
            .map_err(|e| persist_err("cannot write", &tmp, e))?;
        crate::base::store_history::replace(&tmp, &path)
            .map_err(|e| persist_err("cannot replace", &path, e))?;
        // The summary follows the state; a crash between the two leaves an older
        // summary, which the next save replaces (a listing is never wrong for long).
        let summary = SessionSummary::of(state);
        if !self.summary_is_current(&summary) {
            let path = dir.join("summary.json");
            let tmp = dir.join("summary.json.tmp");
            // Forgotten until written: a failed write leaves the file unknown.
            self.summaries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&summary.session_id);
            let bytes =
                serde_json::to_vec(&summary).map_err(|e| persist_err("cannot encode", &path, e))?;
            crate::base::store_history::overwrite(&tmp, &bytes, false)
                .map_err(|e| persist_err("cannot write", &tmp, e))?;
            crate::base::store_history::replace(&tmp, &path)
                .map_err(|e| persist_err("cannot replace", &path, e))?;
            self.summaries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(summary.session_id.clone(), summary);
        }
        if sync {
            sync_dir(dir)?;
        }
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> Result<(), ErrorPayload> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| persist_err("cannot sync", dir, e))
}

/// Syncs a log that may not be open any more (it was written, then closed by the
/// cache without a sync).
fn sync_path(path: &Path) -> Result<(), ErrorPayload> {
    match File::open(path) {
        Ok(f) => f
            .sync_data()
            .map_err(|e| persist_err("cannot sync", path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(persist_err("cannot sync", path, e)),
    }
}

impl Store for FileStore {
    fn append(&self, session_id: &str, event: &Envelope) -> Result<(), ErrorPayload> {
        let line = codec::encode_line(event);
        let file = self.open_log(session_id)?;
        // One write per event: a crash of the process leaves whole lines, or a torn
        // last line for an event that was never delivered. The cache lock is not held
        // here, so sessions append (and sync) in parallel; a session's own appends
        // are ordered by its emitter.
        let fail = |e| persist_err("cannot append to the log of", Path::new(session_id), e);
        (&*file).write_all(&line).map_err(fail)?;
        if self.options.fsync_each_event {
            file.sync_data().map_err(fail)?;
        } else {
            let mut logs = self.logs();
            if !logs.unsynced.contains(session_id) {
                logs.unsynced.insert(session_id.to_owned());
            }
        }
        Ok(())
    }

    fn save_state(&self, state: &PersistedSession) -> Result<(), ErrorPayload> {
        let id = &state.session_id;
        let dir = self.made_dir(id)?;
        match self.save_state_in(&dir, state) {
            // The directory went (removed from outside): made again.
            Err(_) if !dir.is_dir() => {
                self.forget_dir(id);
                let dir = self.made_dir(id)?;
                self.save_state_in(&dir, state)
            }
            saved => saved,
        }
    }

    fn load_state(&self, session_id: &str) -> Result<Option<PersistedSession>, ErrorPayload> {
        let dir = self.dir(session_id)?;
        let path = dir.join("state.json");
        match fs::read(&path) {
            Ok(bytes) => crate::base::store_history::load(&dir, &bytes).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(persist_err("cannot read", &path, e)),
        }
    }

    fn load_events(&self, session_id: &str) -> Result<LoadedLog, ErrorPayload> {
        let path = self.log_path(session_id)?;
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LoadedLog::default()),
            Err(e) => return Err(persist_err("cannot read", &path, e)),
        };
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut out = LoadedLog::default();
        let mut line = Vec::with_capacity(512);
        let mut good_len: u64 = 0;
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|e| persist_err("cannot read", &path, e))?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') {
                // A torn tail: the process died in the middle of this write. The event
                // was never delivered (append happens before delivery), so drop it.
                out.torn_tail_dropped = true;
                break;
            }
            match codec::decode_envelope(&line) {
                Ok(env) => {
                    out.events.push(env);
                    good_len += n as u64;
                }
                Err(e) => return Err(persist_err("corrupt event log", &path, e.message)),
            }
        }
        if out.torn_tail_dropped {
            // Cut the torn bytes so the next append starts on a fresh line.
            if let Ok(f) = OpenOptions::new().write(true).open(&path) {
                let _ = f.set_len(good_len);
            }
            self.logs().open.remove(session_id);
        }
        Ok(out)
    }

    fn list(&self) -> Result<Vec<PersistedSession>, ErrorPayload> {
        let dir = self.root.join("sessions");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(persist_err("cannot list", &dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            if let Some(id) = entry.file_name().to_str() {
                if let Ok(Some(state)) = self.load_state(id) {
                    out.push(state);
                }
            }
        }
        Ok(out)
    }

    fn list_summaries(&self) -> Result<Vec<SessionSummary>, ErrorPayload> {
        let dir = self.root.join("sessions");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(persist_err("cannot list", &dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let Some(id) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let Ok(sdir) = self.dir(&id) else { continue };
            let summary = fs::read(sdir.join("summary.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<SessionSummary>(&b).ok());
            match summary {
                Some(s) if s.session_id == id => out.push(s),
                // Written before summaries existed, or damaged: the state says it all.
                _ => {
                    if let Ok(Some(state)) = self.load_state(&id) {
                        out.push(SessionSummary::of(&state));
                    }
                }
            }
        }
        Ok(out)
    }

    fn session_dir(&self, session_id: &str) -> Option<PathBuf> {
        self.dir(session_id).ok()
    }

    fn delete(&self, session_id: &str) -> Result<bool, ErrorPayload> {
        let dir = self.dir(session_id)?;
        // Held while the directory goes, so no append of this session runs meanwhile;
        // dropping the open log closes it.
        let mut logs = self.logs();
        logs.open.remove(session_id);
        logs.unsynced.remove(session_id);
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id);
        self.summaries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id);
        self.forget_dir(session_id);
        // Renamed first (one atomic step: a crash never leaves half a session that
        // `list` would show), then removed. The tombstone's name is not a session id.
        let tomb = self.root.join("sessions").join(format!(
            ".deleted.{session_id}.{}.{}",
            std::process::id(),
            TOMBSTONES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        match fs::rename(&dir, &tomb) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(persist_err("cannot delete", &dir, e)),
        }
        drop(logs);
        fs::remove_dir_all(&tomb).map_err(|e| persist_err("cannot delete", &tomb, e))?;
        Ok(true)
    }

    fn flush(&self) -> Result<(), ErrorPayload> {
        let (open, unsynced) = {
            let mut logs = self.logs();
            let open: Vec<(String, Arc<File>)> = logs
                .open
                .iter()
                .map(|(id, l)| (id.clone(), l.file.clone()))
                .collect();
            (open, std::mem::take(&mut logs.unsynced))
        };
        let mut first_error = None;
        for id in &unsynced {
            let result = match open.iter().find(|(o, _)| o == id) {
                Some((_, file)) => file
                    .sync_data()
                    .map_err(|e| persist_err("cannot sync", &self.root, e)),
                None => self.log_path(id).and_then(|p| sync_path(&p)),
            };
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn release(&self, session_id: &str) -> Result<(), ErrorPayload> {
        self.summaries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id);
        let (open, unsynced) = {
            let mut logs = self.logs();
            (
                logs.open.remove(session_id),
                logs.unsynced.remove(session_id),
            )
        };
        if !unsynced {
            return Ok(());
        }
        match open {
            Some(l) => l
                .file
                .sync_data()
                .map_err(|e| persist_err("cannot sync", &self.root, e)),
            None => sync_path(&self.log_path(session_id)?),
        }
    }
}

type MemoryEntry = (Option<PersistedSession>, Vec<Envelope>);

/// A store that keeps everything in memory (tests, benchmarks, hosts that persist
/// elsewhere).
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<HashMap<String, MemoryEntry>>,
}

impl Store for MemoryStore {
    fn append(&self, session_id: &str, event: &Envelope) -> Result<(), ErrorPayload> {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(session_id.to_owned())
            .or_default()
            .1
            .push(event.clone());
        Ok(())
    }

    fn save_state(&self, state: &PersistedSession) -> Result<(), ErrorPayload> {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(state.session_id.clone()).or_default().0 = Some(state.clone());
        Ok(())
    }

    fn load_state(&self, session_id: &str) -> Result<Option<PersistedSession>, ErrorPayload> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.get(session_id).and_then(|(s, _)| s.clone()))
    }

    fn load_events(&self, session_id: &str) -> Result<LoadedLog, ErrorPayload> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(LoadedLog {
            events: map
                .get(session_id)
                .map(|(_, e)| e.clone())
                .unwrap_or_default(),
            torn_tail_dropped: false,
        })
    }

    fn list(&self) -> Result<Vec<PersistedSession>, ErrorPayload> {
        let map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.values().filter_map(|(s, _)| s.clone()).collect())
    }

    fn delete(&self, session_id: &str) -> Result<bool, ErrorPayload> {
        let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.remove(session_id).is_some())
    }
}
