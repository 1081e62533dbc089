//! Change detection by the kernel's inotify: one watch per walked directory, read
//! without blocking when a checkpoint is taken. inotify queues an event when the
//! change is made (by any process, in or out of a sandbox), so every change made
//! before the checkpoint is in the queue when it is read: the checkpoint then looks at
//! the changed paths only. A full queue, a change to an ignore file or a lost watch
//! makes the next checkpoint scan the whole tree instead.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::Path;

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::manifest::join;

/// What happened since the last drain.
#[derive(Debug, Default)]
pub(crate) struct Drained {
    /// Paths (files or directories) that may have changed.
    pub paths: BTreeSet<String>,
    /// Events were lost or the rules of what to walk changed: scan everything.
    pub full: bool,
}

pub(crate) struct Watcher {
    _slot: Slot,
    ino: Inotify,
    /// At most this many watches (below the system's own limit, for tests and for
    /// users who cap it); past it the caller falls back to scanning.
    limit: usize,
    by_wd: HashMap<WatchDescriptor, String>,
    by_path: HashMap<String, WatchDescriptor>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("watches", &self.by_path.len())
            .finish_non_exhaustive()
    }
}

fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

/// The default [`CheckpointConfig::watch_min_paths`](super::CheckpointConfig): below
/// this many paths a stat scan (about 2.5 times a bare walk: a few milliseconds) is
/// cheaper than an inotify instance over the session's life, counting its close.
pub const WATCH_MIN_PATHS: usize = 5_000;

/// At most this many watchers (inotify instances) live in one process: the system
/// allows a user few of them (128 by default, `fs.inotify.max_user_instances`), and a
/// runtime with many open sessions must not take them all from the user's other
/// programs. A session past the limit detects changes by scanning.
pub const MAX_WATCHERS: usize = 32;

static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One of the process's [`MAX_WATCHERS`] places, given back when dropped.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        use std::sync::atomic::Ordering;
        LIVE.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_WATCHERS).then_some(n + 1)
        })
        .ok()
        .map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl Watcher {
    pub fn new(limit: usize) -> io::Result<Self> {
        let slot = Slot::take().ok_or_else(|| {
            io::Error::other(format!("{MAX_WATCHERS} watchers are live in this process"))
        })?;
        let ino = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        Ok(Watcher {
            _slot: slot,
            ino,
            limit,
            by_wd: HashMap::new(),
            by_path: HashMap::new(),
        })
    }

    /// Watches one directory (`rel` under `root`). Fails when the system's watch limit
    /// is reached; the caller then falls back to scanning.
    pub fn watch(&mut self, root: &Path, rel: &str) -> io::Result<()> {
        let abs = if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(rel)
        };
        if !self.by_path.contains_key(rel) && self.by_path.len() >= self.limit {
            // What the kernel answers when `max_user_watches` is reached.
            return Err(io::Error::from_raw_os_error(nix::libc::ENOSPC));
        }
        let wd = self.ino.add_watch(&abs, mask())?;
        if let Some(old) = self.by_wd.insert(wd, rel.to_string()) {
            if old != rel {
                self.by_path.remove(&old);
            }
        }
        self.by_path.insert(rel.to_string(), wd);
        Ok(())
    }

    /// Stops watching `rel` and every directory under it.
    pub fn unwatch_tree(&mut self, rel: &str) {
        let prefix = format!("{rel}/");
        let gone: Vec<String> = self
            .by_path
            .keys()
            .filter(|p| rel.is_empty() || p.as_str() == rel || p.starts_with(&prefix))
            .cloned()
            .collect();
        for p in gone {
            if let Some(wd) = self.by_path.remove(&p) {
                self.by_wd.remove(&wd);
                let _ = self.ino.rm_watch(wd);
            }
        }
    }

    /// Reads every queued event without blocking.
    pub fn drain(&mut self) -> io::Result<Drained> {
        let mut out = Drained::default();
        loop {
            let events = match self.ino.read_events() {
                Ok(ev) => ev,
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            };
            if events.is_empty() {
                break;
            }
            for ev in events {
                let m = ev.mask;
                if m.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    out.full = true;
                    continue;
                }
                let Some(dir) = self.by_wd.get(&ev.wd).cloned() else {
                    continue;
                };
                if m.contains(AddWatchFlags::IN_IGNORED) {
                    // The watch is gone (directory deleted or unmounted).
                    self.by_wd.remove(&ev.wd);
                    if self.by_path.get(&dir) == Some(&ev.wd) {
                        self.by_path.remove(&dir);
                    }
                    out.paths.insert(dir.clone());
                    if dir.is_empty() {
                        out.full = true;
                    }
                    continue;
                }
                if m.intersects(AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF) {
                    if dir.is_empty() {
                        out.full = true;
                    }
                    out.paths.insert(dir);
                    continue;
                }
                let Some(name) = ev.name.as_ref() else {
                    // An event on the directory itself (its mode).
                    out.paths.insert(dir);
                    continue;
                };
                let Some(name) = name.to_str() else {
                    continue;
                };
                if name == ".git" {
                    continue;
                }
                if name == ".gitignore" || name == ".ignore" {
                    out.full = true;
                }
                let path = join(&dir, name);
                if m.contains(AddWatchFlags::IN_ISDIR)
                    && m.intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM)
                {
                    self.unwatch_tree(&path);
                }
                out.paths.insert(path);
            }
        }
        Ok(out)
    }
}
