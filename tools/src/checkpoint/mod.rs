//! Checkpoints of a workspace, and restoring one.
//!
//! A checkpoint records the state of every file the workspace tracks: every path a
//! walk sees (`.gitignore`, `.ignore` and git's exclude rules apply, in a git
//! repository or not; hidden files are included; `.git` and the checkpoint store are
//! never read or written; links are recorded, never followed). Large and binary files
//! are noted as not restorable.
//!
//! **One store per workspace** ([`CheckpointHome`]: `<home>/<hash of the workspace
//! path>/`, see `store`), shared by every session and fork of that workspace and by
//! every process (a bridge and the daemon): file contents and directory trees are
//! content-addressed objects (SHA-256, `objects`, `tree`), each stored once. A
//! checkpoint is a small record naming its root tree. In a git work tree, a file
//! equal to its index blob is recorded by the blob's id and read back from git when
//! restored (`git`): the baseline of a clean checkout copies nothing.
//!
//! **The baseline is a stat scan** against the workspace's last known state (the
//! store's `head`, written by the newest checkpoint of any session): only files whose
//! path, size, times or inode changed are read, so the baseline of an unchanged tree
//! stores nothing new. Each later checkpoint looks only at what changed, found by
//!
//! - the watcher (Linux inotify, `watch`): the changed paths are read from the queue
//!   when the checkpoint is taken, so its cost depends on what changed, not on the size
//!   of the tree (changes by any process count: shell commands, builds, editors);
//! - else a scan: every path's stat compared with the last one; only changed files are
//!   read. A file modified within [`CheckpointConfig::racy_window`] of being read is
//!   read again by the next scan, so a change that keeps the same timestamp is not
//!   missed.
//!
//! [`Checkpoints::restore`] compares the target's tree with the last recorded one
//! (descending only into directories whose trees differ) and with the changes seen
//! since, and touches only the paths that differ: created paths removed, deleted ones
//! recreated, modified files rewritten, modes and links restored; it reports what it
//! could not restore. [`Checkpoints::restore_undoable`] first records the state it is
//! about to replace, so the restore itself can be undone.
//!
//! **A session's checkpoints travel** (`bundle`): [`CheckpointHome::export_session`]
//! hands its records and every object they reach, each once, to a sink (an export
//! file); an [`Importer`] takes them into another store, checked; and
//! [`CheckpointHome::materialize`] moves them to the store of a new workspace folder
//! and restores the newest checkpoint there. [`CheckpointHome::carry_new`] hands out
//! the records taken since the last call, with only the objects not carried yet
//! (`mirror`), for a store several machines share.
//!
//! **Disk is bounded** by [`CheckpointHome::prune`]: checkpoints older than the age
//! limit, then the oldest beyond the size limit (closed sessions' before open ones'),
//! are dropped, never those of a pinned session; objects no checkpoint reaches are
//! then removed (`gc`, mark and sweep under the store's exclusive lock).

mod bundle;
mod engine;
mod gc;
mod git;
mod manifest;
mod marks;
mod mirror;
mod objects;
mod refresh;
mod restore;
mod scan;
mod store;
mod tree;
mod watch;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use bundle::{BundleError, BundleItem, BundleSummary, Importer, Materialized};
pub use engine::{Checkpoints, ForeignChange, UndoPoint};
pub use gc::{CheckpointHome, DroppedCheckpoint, PruneReport, PruneRules, StoreUsage};
pub use manifest::Unsaved;
pub use mirror::Mirror;
pub use restore::{NotRestorable, RestoreAction, RestoreReport, RestoredPath};
pub use watch::{MAX_WATCHERS, WATCH_MIN_PATHS};

/// Test seam: garbage collection calls this between its steps (crash tests).
#[doc(hidden)]
pub use gc::prune_store_with_hook;

/// Limits and choices of a checkpoint store.
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// Files larger than this are not saved (noted as not restorable). Default 4 MiB.
    pub max_file_bytes: u64,
    /// A full scan that meets more paths than this fails with
    /// [`CheckpointError::TooManyFiles`]. Default 500,000.
    pub max_files: usize,
    /// Use the inotify watcher when the system offers it. Default true.
    pub watch: bool,
    /// The watcher starts only once the workspace is known to hold at least this many
    /// paths (files and directories); a smaller tree is scanned. Scanning a small tree
    /// costs a few milliseconds, while an inotify instance costs a watch per directory
    /// and its closing waits for the kernel's grace period (5 to 25 ms), which would
    /// hold up the end of a short-lived process. Default [`WATCH_MIN_PATHS`].
    pub watch_min_paths: usize,
    /// A file modified this close to a scan is read again by the next one. Default 1 s.
    pub racy_window: Duration,
    /// At most this many inotify watches (one per directory); past it, scanning.
    /// Default: no limit but the system's.
    pub max_watches: usize,
    /// In a git work tree, record files equal to their index blob by blob id.
    /// Default true.
    pub git: bool,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            max_file_bytes: 4 * 1024 * 1024,
            max_files: 500_000,
            watch: true,
            watch_min_paths: WATCH_MIN_PATHS,
            racy_window: Duration::from_secs(1),
            max_watches: usize::MAX,
            git: true,
        }
    }
}

/// How changes are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Detection {
    /// inotify watches on every tracked directory.
    Watch,
    /// A stat of every tracked path.
    Scan,
}

/// How one path changed between two checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ChangeKind {
    /// Did not exist before.
    Created,
    /// Content, mode or link target changed.
    Modified,
    /// No longer exists.
    Deleted,
}

/// One changed file or link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    /// How it changed.
    pub change: ChangeKind,
}

/// A recorded checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointInfo {
    /// The caller's id.
    pub id: String,
    /// 1 for the baseline, then 2, 3, …
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The caller's data, stored with the checkpoint.
    pub meta: serde_json::Value,
    /// The first checkpoint: it saved the whole tree.
    pub baseline: bool,
    /// Files and links changed since the previous checkpoint (empty for the baseline).
    pub changed: Vec<FileChange>,
}

/// What the last checkpoint or restore had to look at (for benchmarks and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// The whole tree was walked.
    pub full: bool,
    /// Paths examined (stat, and reading those that changed).
    pub examined: u64,
    /// Paths whose entry changed.
    pub changed: u64,
    /// Files recorded by their git blob id without being read.
    pub git: u64,
}

/// Why a checkpoint operation failed.
#[derive(Debug)]
pub enum CheckpointError {
    /// Reading or writing the store or the workspace failed.
    Io {
        /// What was being done.
        what: String,
        /// The path involved.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// No checkpoint has this id.
    UnknownCheckpoint(String),
    /// A checkpoint with this id exists already.
    DuplicateId(String),
    /// The workspace has more paths than [`CheckpointConfig::max_files`].
    TooManyFiles {
        /// The limit.
        limit: usize,
    },
    /// The disk holding the store is full: nothing was recorded, nothing already
    /// stored was damaged; the caller warns and goes on.
    DiskFull {
        /// What was being written.
        path: PathBuf,
    },
    /// The session id cannot name a directory (letters, digits, `_` and `-`, at most
    /// 128 characters).
    InvalidSessionId(String),
    /// A stored record could not be read.
    Corrupt {
        /// The record.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckpointError::Io { what, path, source } => {
                write!(f, "{what} `{}`: {source}", path.display())
            }
            CheckpointError::UnknownCheckpoint(id) => write!(f, "no checkpoint `{id}`"),
            CheckpointError::DuplicateId(id) => write!(f, "checkpoint `{id}` exists already"),
            CheckpointError::TooManyFiles { limit } => write!(
                f,
                "the workspace has more than {limit} files and directories; checkpoints are off"
            ),
            CheckpointError::DiskFull { path } => write!(
                f,
                "no space left on the disk holding the checkpoint store (`{}`); no checkpoint was recorded",
                path.display()
            ),
            CheckpointError::InvalidSessionId(id) => {
                write!(f, "{id:?} cannot name a checkpoint session")
            }
            CheckpointError::Corrupt { path, reason } => {
                write!(
                    f,
                    "checkpoint record `{}` is damaged: {reason}",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for CheckpointError {}

impl CheckpointError {
    /// The store's disk is full (a warning: the workspace is untouched).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, CheckpointError::DiskFull { .. })
    }
}

/// Whether an I/O error says the disk (or the quota) is full.
pub(crate) fn disk_full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::StorageFull
        || e.kind() == io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(c) if c == nix::libc::ENOSPC || c == nix::libc::EDQUOT)
}

fn io_err(what: &str, path: &Path) -> impl FnOnce(io::Error) -> CheckpointError {
    let what = what.to_string();
    let path = path.to_path_buf();
    move |source| {
        if disk_full(&source) {
            CheckpointError::DiskFull { path }
        } else {
            CheckpointError::Io { what, path, source }
        }
    }
}
