//! Persistence: each session is an append-only JSON-lines event log plus a snapshot
//! of the state needed to resume it.
//!
//! Layout of [`FileStore`]: `<root>/sessions/<sessionId>/events.jsonl`,
//! `<root>/sessions/<sessionId>/state.json` (written atomically: temp file, then the
//! two exchanged, or the temp file renamed over where exchanging is not supported)
//! and `<root>/sessions/<sessionId>/history.jsonl` (the conversation, one message per
//! line, appended as it grows; `state.json` says how many lines belong to it).
//! An event is appended before it is delivered to a host. A torn last line (a crash
//! in the middle of a write) is detected on load, dropped, and cut from the file;
//! nothing before it is lost.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use keel_envelope::codec;
use keel_envelope::types::{ApprovalRules, PermissionMode, Plan, Usage};
use keel_envelope::{Envelope, ErrorCode, ErrorPayload};
use serde::{Deserialize, Serialize};

use crate::model::History;

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
    /// Saves the session's state snapshot.
    fn save_state(&self, state: &PersistedSession) -> Result<(), ErrorPayload>;
    /// Loads the state snapshot, or `None` if the session is unknown.
    fn load_state(&self, session_id: &str) -> Result<Option<PersistedSession>, ErrorPayload>;
    /// Loads the event log.
    fn load_events(&self, session_id: &str) -> Result<LoadedLog, ErrorPayload>;
    /// Every stored session's state.
    fn list(&self) -> Result<Vec<PersistedSession>, ErrorPayload>;
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
}

fn persist_err(what: &str, path: &Path, e: impl std::fmt::Display) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::SessionPersistenceFailed,
        format!("{what} {}: {e}", path.display()),
    )
    .with_detail("path", path.display().to_string())
}

/// Numbers the directories of sessions being deleted.
static TOMBSTONES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The default store: files under a root directory.
#[derive(Debug)]
pub struct FileStore {
    root: PathBuf,
    logs: Mutex<HashMap<String, File>>,
    /// What this process wrote of each session's history (held while saving a state).
    written: Mutex<crate::store_history::Written>,
}

impl FileStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            logs: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dir(&self, session_id: &str) -> Result<PathBuf, ErrorPayload> {
        // Session ids come from outside (resume); never let one name another path.
        if session_id.is_empty()
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

    /// The path of a session's event log.
    pub fn log_path(&self, session_id: &str) -> Result<PathBuf, ErrorPayload> {
        Ok(self.dir(session_id)?.join("events.jsonl"))
    }
}

impl Store for FileStore {
    fn append(&self, session_id: &str, event: &Envelope) -> Result<(), ErrorPayload> {
        let line = codec::encode_line(event);
        let mut logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        if !logs.contains_key(session_id) {
            let dir = self.dir(session_id)?;
            fs::create_dir_all(&dir).map_err(|e| persist_err("cannot create", &dir, e))?;
            let path = dir.join("events.jsonl");
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| persist_err("cannot open", &path, e))?;
            logs.insert(session_id.to_owned(), file);
        }
        if let Some(file) = logs.get_mut(session_id) {
            file.write_all(&line).map_err(|e| {
                persist_err("cannot append to the log of", Path::new(session_id), e)
            })?;
        }
        Ok(())
    }

    fn save_state(&self, state: &PersistedSession) -> Result<(), ErrorPayload> {
        let dir = self.dir(&state.session_id)?;
        fs::create_dir_all(&dir).map_err(|e| persist_err("cannot create", &dir, e))?;
        let path = dir.join("state.json");
        let tmp = dir.join("state.json.tmp");
        // The history's new messages are appended first; the state that counts them
        // replaces the old one after.
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        crate::store_history::save(&dir, &state.session_id, &state.history, &mut written)?;
        let bytes = crate::store_history::state_bytes(state)
            .map_err(|e| persist_err("cannot encode", &path, e))?;
        fs::write(&tmp, bytes).map_err(|e| persist_err("cannot write", &tmp, e))?;
        crate::store_history::replace(&tmp, &path)
            .map_err(|e| persist_err("cannot replace", &path, e))?;
        Ok(())
    }

    fn load_state(&self, session_id: &str) -> Result<Option<PersistedSession>, ErrorPayload> {
        let dir = self.dir(session_id)?;
        let path = dir.join("state.json");
        match fs::read(&path) {
            Ok(bytes) => crate::store_history::load(&dir, &bytes).map(Some),
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
            self.logs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(session_id);
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

    fn delete(&self, session_id: &str) -> Result<bool, ErrorPayload> {
        let dir = self.dir(session_id)?;
        // Held while the directory goes, so no append of this session runs meanwhile;
        // dropping the open log closes it.
        let mut logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        logs.remove(session_id);
        self.written
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(session_id);
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
        let logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        for file in logs.values() {
            file.sync_data()
                .map_err(|e| persist_err("cannot sync", &self.root, e))?;
        }
        Ok(())
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
