//! Which sessions of a store are open, and by which process, with one open file per
//! process and store rather than one per session (a runtime with thousands of open
//! sessions stays far below its limit of open files).
//!
//! A process that opens a session of a store takes its *mark* there: the file
//! `procs/<name>` (its pid and a number of its own), locked exclusively (`flock`) for
//! as long as the process has any session of that store open. Each session it opens
//! names the mark in `sessions/<id>/owner`. A session is open elsewhere when its
//! owner's mark is locked: a lock of a process that died is released by the kernel, so
//! a crash leaves no session that looks open. The check and the write of `owner` run
//! under a short lock of `sessions/<id>/open`, so two processes opening one session at
//! once do not both win. Inside the process, a table of the open sessions refuses a
//! second open of the same session.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use nix::fcntl::{Flock, FlockArg};

use super::objects::write_atomic;

/// This process's name in every store: its pid and the time it first took a mark.
fn own_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        format!("{}-{nanos}", std::process::id())
    })
}

struct Mark {
    /// Held for as long as `sessions` is not empty.
    _lock: Flock<File>,
    sessions: HashSet<String>,
}

/// The marks this process holds, by store directory.
fn marks() -> &'static Mutex<HashMap<PathBuf, Mark>> {
    static MARKS: OnceLock<Mutex<HashMap<PathBuf, Mark>>> = OnceLock::new();
    MARKS.get_or_init(Default::default)
}

fn table() -> std::sync::MutexGuard<'static, HashMap<PathBuf, Mark>> {
    marks().lock().unwrap_or_else(|p| p.into_inner())
}

fn flock(file: File, arg: FlockArg) -> io::Result<Option<Flock<File>>> {
    loop {
        match Flock::lock(file.try_clone()?, arg) {
            Ok(l) => return Ok(Some(l)),
            Err((_, nix::errno::Errno::EINTR)) => continue,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => return Ok(None),
            Err((_, e)) => return Err(e.into()),
        }
    }
}

/// Whether the mark `name` of store `dir` is held by a live process.
fn held(dir: &Path, name: &str) -> bool {
    if name == own_name() {
        return false; // asked only for sessions this process does not have open
    }
    let Ok(file) = File::open(dir.join("procs").join(name)) else {
        return false;
    };
    matches!(flock(file, FlockArg::LockExclusiveNonblock), Ok(None))
}

/// Removes the marks of processes that are gone (best effort).
fn sweep(dir: &Path) {
    let Ok(rd) = fs::read_dir(dir.join("procs")) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if name != own_name() && !held(dir, name) {
            let _ = fs::remove_file(e.path());
        }
    }
}

/// Session `id` of store `dir`, open in this process until dropped.
#[derive(Debug)]
pub(crate) struct OpenSession {
    dir: PathBuf,
    id: String,
}

impl Drop for OpenSession {
    fn drop(&mut self) {
        let mut t = table();
        let empty = match t.get_mut(&self.dir) {
            Some(m) => {
                m.sessions.remove(&self.id);
                m.sessions.is_empty()
            }
            None => false,
        };
        if empty {
            t.remove(&self.dir);
            let _ = fs::remove_file(self.dir.join("procs").join(own_name()));
        }
    }
}

/// Marks session `id` (whose directory is `session_dir`) of store `dir` open in this
/// process; `None` when this or another live process has it open already.
pub(crate) fn open(dir: &Path, session_dir: &Path, id: &str) -> io::Result<Option<OpenSession>> {
    let mut t = table();
    if t.get(dir).is_some_and(|m| m.sessions.contains(id)) {
        return Ok(None);
    }
    fs::create_dir_all(session_dir)?;
    // Serialises the owner check against other processes opening the same session.
    let gate = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(session_dir.join("open"))?;
    let _gate = flock(gate, FlockArg::LockExclusive)?;
    let owner = session_dir.join("owner");
    if let Ok(name) = fs::read_to_string(&owner) {
        if held(dir, name.trim()) {
            return Ok(None);
        }
    }
    if !t.contains_key(dir) {
        let procs = dir.join("procs");
        fs::create_dir_all(&procs)?;
        sweep(dir);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(procs.join(own_name()))?;
        let Some(lock) = flock(file, FlockArg::LockExclusiveNonblock)? else {
            return Err(io::Error::other("this process's mark is locked elsewhere"));
        };
        t.insert(
            dir.to_path_buf(),
            Mark {
                _lock: lock,
                sessions: HashSet::new(),
            },
        );
    }
    write_atomic(&owner, own_name().as_bytes())?;
    if let Some(m) = t.get_mut(dir) {
        m.sessions.insert(id.to_owned());
    }
    Ok(Some(OpenSession {
        dir: dir.to_path_buf(),
        id: id.to_owned(),
    }))
}

/// Whether some process (this one included) has session `id` of store `dir` open.
pub(crate) fn is_open(dir: &Path, session_dir: &Path, id: &str) -> bool {
    if table().get(dir).is_some_and(|m| m.sessions.contains(id)) {
        return true;
    }
    match fs::read_to_string(session_dir.join("owner")) {
        Ok(name) => held(dir, name.trim()),
        Err(_) => false,
    }
}
