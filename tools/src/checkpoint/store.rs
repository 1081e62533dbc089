//! The files of one workspace's store, `<home>/<key>/` where `key` is a hash of the
//! workspace's canonical path:
//!
//! - `workspace`: the workspace's path (for people and for `keel doctor`);
//! - `packs/`: the objects ([`super::objects`]): file contents and trees;
//! - `sessions/<sessionId>/NNNNNNNN.json`: one record per checkpoint (its id, the
//!   caller's data, the root tree, the paths changed since the session's previous
//!   one), written atomically once every object it names is on disk;
//! - `procs/<name>`: the mark of a process that has sessions of this store open,
//!   locked (`flock`) while it does; `sessions/<sessionId>/owner` names the mark of
//!   the process that opened the session, and `sessions/<sessionId>/open` is locked
//!   briefly while a process opens it ([`super::marks`]): one open file per process,
//!   not per session;
//! - `head`: the root of the newest checkpoint of any session, the known state a new
//!   session's baseline compares its stat scan with;
//! - `lock`: shared (`flock`) by every operation that writes objects or records or
//!   reads objects, exclusive for garbage collection. A lock held by a process that
//!   dies is released by the kernel: no stale lock survives a crash;
//! - `generation`: a number garbage collection raises before it removes anything, so
//!   that an open engine knows to reload what it had cached.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::objects::{hash, write_atomic};
use super::ChangeKind;

/// Version of the record format.
pub(crate) const RECORD_VERSION: u32 = 2;

/// One checkpoint on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    pub version: u32,
    pub id: String,
    pub seq: u64,
    #[serde(rename = "createdMs")]
    pub created_ms: u64,
    pub meta: serde_json::Value,
    pub baseline: bool,
    /// The root tree.
    pub root: String,
    /// Files and links changed since the session's previous checkpoint.
    pub changes: Vec<(String, ChangeKind)>,
}

/// The directory key of a workspace: 32 hex digits of the SHA-256 of its canonical path.
pub(crate) fn workspace_key(canonical: &Path) -> String {
    hash(canonical.as_os_str().as_encoded_bytes())[..32].to_string()
}

/// A session id usable as a directory name.
pub(crate) fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Paths inside one workspace's store.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub dir: PathBuf,
}

impl Layout {
    pub fn packs(&self) -> PathBuf {
        self.dir.join("packs")
    }
    pub fn sessions(&self) -> PathBuf {
        self.dir.join("sessions")
    }
    pub fn session(&self, id: &str) -> PathBuf {
        self.sessions().join(id)
    }

    /// Creates the directories and notes the workspace's path.
    pub fn create(&self, workspace: &Path) -> io::Result<()> {
        fs::create_dir_all(self.packs())?;
        fs::create_dir_all(self.sessions())?;
        let note = self.dir.join("workspace");
        if !note.exists() {
            write_atomic(&note, workspace.as_os_str().as_encoded_bytes())?;
        }
        Ok(())
    }

    /// The workspace this store is for, as noted.
    pub fn workspace(&self) -> Option<PathBuf> {
        let bytes = fs::read(self.dir.join("workspace")).ok()?;
        String::from_utf8(bytes).ok().map(PathBuf::from)
    }

    /// Takes the store's lock: shared for writers and readers, exclusive for garbage
    /// collection. Blocks until it is granted.
    pub fn lock(&self, exclusive: bool) -> io::Result<Flock<File>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join("lock"))?;
        let arg = if exclusive {
            FlockArg::LockExclusive
        } else {
            FlockArg::LockShared
        };
        loop {
            match Flock::lock(file.try_clone()?, arg) {
                Ok(l) => return Ok(l),
                Err((_, nix::errno::Errno::EINTR)) => continue,
                Err((_, e)) => return Err(e.into()),
            }
        }
    }

    pub fn generation(&self) -> u64 {
        fs::read_to_string(self.dir.join("generation"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    pub fn bump_generation(&self) -> io::Result<u64> {
        let next = self.generation() + 1;
        write_atomic(&self.dir.join("generation"), next.to_string().as_bytes())?;
        Ok(next)
    }

    pub fn head(&self) -> Option<String> {
        let s = fs::read_to_string(self.dir.join("head")).ok()?;
        let s = s.trim();
        (s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_string())
    }

    /// Written atomically but not synced: a head lost in a crash costs the next
    /// baseline some reading, nothing else.
    pub fn set_head(&self, root: &str) -> io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)?;
        std::io::Write::write_all(&mut tmp, root.as_bytes())?;
        tmp.persist(self.dir.join("head")).map_err(|e| e.error)?;
        Ok(())
    }

    /// Marks session `id` open for as long as the returned guard lives; `None` when
    /// this or another process has it open already ([`super::marks`]).
    pub fn open_session(&self, id: &str) -> io::Result<Option<super::marks::OpenSession>> {
        super::marks::open(&self.dir, &self.session(id), id)
    }

    /// Whether some process has session `id` open.
    pub fn session_is_open(&self, id: &str) -> bool {
        super::marks::is_open(&self.dir, &self.session(id), id)
    }

    /// The sessions that have a directory here.
    pub fn session_ids(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        match fs::read_dir(self.sessions()) {
            Ok(rd) => {
                for e in rd {
                    let name = e?.file_name();
                    if let Some(n) = name.to_str().filter(|n| valid_session_id(n)) {
                        out.push(n.to_string());
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        out.sort();
        Ok(out)
    }

    /// The record files of session `id`, oldest first.
    pub fn record_paths(&self, id: &str) -> io::Result<Vec<PathBuf>> {
        let dir = self.session(id);
        let mut out = Vec::new();
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for entry in rd {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(stem) = name.strip_suffix(".json") {
                if stem.len() == 8 && stem.parse::<u64>().is_ok() {
                    out.push(entry.path());
                }
            }
        }
        out.sort();
        Ok(out)
    }

    pub fn record_path(&self, id: &str, seq: u64) -> PathBuf {
        self.session(id).join(format!("{seq:08}.json"))
    }
}

/// Reads one record.
pub(crate) fn read_record(path: &Path) -> Result<Record, String> {
    let body = fs::read(path).map_err(|e| e.to_string())?;
    let r: Record = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    if r.version != RECORD_VERSION {
        return Err(format!("unknown record version {}", r.version));
    }
    Ok(r)
}
