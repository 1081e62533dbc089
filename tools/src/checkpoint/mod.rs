//! Checkpoints of a workspace, and restoring one.
//!
//! A checkpoint records the state of every file the workspace tracks: every path a
//! walk sees (`.gitignore`, `.ignore` and git's exclude rules apply, in a git
//! repository or not; hidden files are included; `.git` and the checkpoint store are
//! never read or written; links are recorded, never followed). A file's content is
//! saved in a content-addressed object store (`objects`: SHA-256, each content once,
//! appended to pack files) unless it is larger than the size limit or binary: such a
//! file is noted as not restorable.
//!
//! The first checkpoint is the baseline and saves the whole tree. Each later one saves
//! only what changed since the one before, found by
//!
//! - the watcher (Linux inotify, `watch`): the changed paths are read from the queue
//!   when the checkpoint is taken, so its cost depends on what changed, not on the size
//!   of the tree (changes by any process count: shell commands, builds, editors);
//! - else a scan: every path's stat compared with the last one; only changed files are
//!   read. A file modified within [`CheckpointConfig::racy_window`] of being read is
//!   read again by the next scan, so a change that keeps the same timestamp is not
//!   missed.
//!
//! A checkpoint is a record `checkpoints/NNNNNNNN.json` (the paths that changed and
//! their new entries), written atomically after the objects it needs are on disk.
//! [`Checkpoints::restore`] rebuilds the manifest of the chosen checkpoint and puts
//! the workspace back: created paths removed, deleted ones recreated, modified files
//! rewritten, modes and links restored, and reports what it could not restore.

mod manifest;
mod objects;
mod restore;
mod scan;
mod watch;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use manifest::{descendants, parent_of, Entry, Manifest};
use objects::{write_atomic, Objects};
use scan::{inspect, ScanCtx, Walker};
use watch::Watcher;

pub use manifest::Unsaved;
pub use restore::{NotRestorable, RestoreAction, RestoreReport, RestoredPath};

/// Limits and choices of a checkpoint store.
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// Files larger than this are not saved (noted as not restorable). Default 4 MiB.
    pub max_file_bytes: u64,
    /// A full scan that meets more paths than this fails with
    /// [`CheckpointError::TooManyFiles`]. Default 200,000.
    pub max_files: usize,
    /// Use the inotify watcher when the system offers it. Default true.
    pub watch: bool,
    /// A file modified this close to a scan is read again by the next one. Default 1 s.
    pub racy_window: Duration,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            max_file_bytes: 4 * 1024 * 1024,
            max_files: 200_000,
            watch: true,
            racy_window: Duration::from_secs(1),
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

fn io_err(what: &str, path: &Path) -> impl FnOnce(io::Error) -> CheckpointError {
    let what = what.to_string();
    let path = path.to_path_buf();
    move |source| CheckpointError::Io { what, path, source }
}

#[derive(Serialize, Deserialize)]
struct Record {
    version: u32,
    id: String,
    seq: u64,
    #[serde(rename = "createdMs")]
    created_ms: u64,
    meta: serde_json::Value,
    baseline: bool,
    changes: Vec<(String, Option<Entry>)>,
}

/// The checkpoints of one workspace, stored in one directory.
#[derive(Debug)]
pub struct Checkpoints {
    walker: Walker,
    dir: PathBuf,
    config: CheckpointConfig,
    /// The workspace as last looked at.
    current: Manifest,
    /// Paths changed since the last record: (entry at that record, entry now).
    pending: BTreeMap<String, (Option<Entry>, Option<Entry>)>,
    infos: Vec<CheckpointInfo>,
    objects: Objects,
    watcher: Option<Watcher>,
    /// The next refresh walks the whole tree.
    need_full: bool,
    /// Directories the next refresh lists again (changed while being watched).
    recheck: BTreeSet<String>,
    /// When the last record's refresh started (ns since the epoch).
    last_record_ns: Option<i64>,
    stats: ScanStats,
}

fn now_ns() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl Checkpoints {
    /// Opens the checkpoints of `workspace` stored under `dir` (created if missing),
    /// reading the records already there. The next checkpoint scans the whole tree.
    pub fn open(
        workspace: &Path,
        dir: &Path,
        config: CheckpointConfig,
    ) -> Result<Self, CheckpointError> {
        let root =
            fs::canonicalize(workspace).map_err(io_err("cannot open workspace", workspace))?;
        fs::create_dir_all(dir.join("checkpoints"))
            .map_err(io_err("cannot create checkpoint store", dir))?;
        let dir = fs::canonicalize(dir).map_err(io_err("cannot open checkpoint store", dir))?;
        let exclude = dir.starts_with(&root).then(|| dir.clone());
        let objects = Objects::open(&dir).map_err(io_err("cannot open object store", &dir))?;
        let mut this = Checkpoints {
            walker: Walker { root, exclude },
            dir,
            config,
            current: Manifest::new(),
            pending: BTreeMap::new(),
            infos: Vec::new(),
            objects,
            watcher: None,
            need_full: true,
            recheck: BTreeSet::new(),
            last_record_ns: None,
            stats: ScanStats::default(),
        };
        for path in this.record_paths()? {
            let record = read_record(&path)?;
            let mut changed = Vec::new();
            for (p, new) in record.changes {
                let old = match &new {
                    Some(e) => this.current.insert(p.clone(), e.clone()),
                    None => this.current.remove(&p),
                };
                if let Some(c) = classify(old.as_ref(), new.as_ref()) {
                    if !record.baseline {
                        changed.push(FileChange { path: p, change: c });
                    }
                }
            }
            this.infos.push(CheckpointInfo {
                id: record.id,
                seq: record.seq,
                created_ms: record.created_ms,
                meta: record.meta,
                baseline: record.baseline,
                changed,
            });
        }
        if this.config.watch {
            this.watcher = Watcher::new().ok();
        }
        Ok(this)
    }

    /// The workspace root (canonical).
    pub fn workspace(&self) -> &Path {
        &self.walker.root
    }

    /// The recorded checkpoints, oldest first.
    pub fn list(&self) -> &[CheckpointInfo] {
        &self.infos
    }

    /// How changes are found now.
    pub fn detection(&self) -> Detection {
        if self.watcher.is_some() {
            Detection::Watch
        } else {
            Detection::Scan
        }
    }

    /// What the last checkpoint or restore looked at.
    pub fn last_stats(&self) -> ScanStats {
        self.stats
    }

    /// Records a checkpoint of the workspace as it is now.
    pub fn checkpoint(
        &mut self,
        id: &str,
        meta: serde_json::Value,
    ) -> Result<CheckpointInfo, CheckpointError> {
        if self.infos.iter().any(|i| i.id == id) {
            return Err(CheckpointError::DuplicateId(id.to_string()));
        }
        let started = self.refresh()?;
        let seq = self.next_seq();
        let baseline = self.infos.is_empty();
        let mut changes = Vec::new();
        let mut changed = Vec::new();
        for (path, (old, new)) in &self.pending {
            if old.is_none() && new.is_none() {
                continue;
            }
            if let Some(c) = classify(old.as_ref(), new.as_ref()) {
                if !baseline {
                    changed.push(FileChange {
                        path: path.clone(),
                        change: c,
                    });
                }
            }
            changes.push((path.clone(), new.clone()));
        }
        let created_ms = u64::try_from(started / 1_000_000).unwrap_or(0);
        let record = Record {
            version: 1,
            id: id.to_string(),
            seq,
            created_ms,
            meta: meta.clone(),
            baseline,
            changes,
        };
        let path = self.dir.join("checkpoints").join(format!("{seq:08}.json"));
        let body = serde_json::to_vec(&record).map_err(|e| CheckpointError::Io {
            what: "cannot encode checkpoint".into(),
            path: path.clone(),
            source: io::Error::other(e),
        })?;
        if let Err(e) = write_atomic(&path, &body) {
            // The changes stay pending for the next attempt.
            return Err(CheckpointError::Io {
                what: "cannot write checkpoint".into(),
                path,
                source: e,
            });
        }
        self.pending.clear();
        self.last_record_ns = Some(started);
        let info = CheckpointInfo {
            id: id.to_string(),
            seq,
            created_ms,
            meta,
            baseline,
            changed,
        };
        self.infos.push(info.clone());
        Ok(info)
    }

    /// Files and links changed since the last checkpoint (the workspace is looked at
    /// now; nothing is recorded).
    pub fn pending_changes(&mut self) -> Result<Vec<FileChange>, CheckpointError> {
        self.refresh()?;
        Ok(self
            .pending
            .iter()
            .filter_map(|(path, (old, new))| {
                classify(old.as_ref(), new.as_ref()).map(|change| FileChange {
                    path: path.clone(),
                    change,
                })
            })
            .collect())
    }

    /// Puts the workspace back in the state of checkpoint `id`. Changes made since the
    /// last checkpoint are saved first (the next checkpoint records them), so a restore
    /// can itself be undone by restoring a later checkpoint.
    pub fn restore(&mut self, id: &str) -> Result<RestoreReport, CheckpointError> {
        let idx = self
            .infos
            .iter()
            .position(|i| i.id == id)
            .ok_or_else(|| CheckpointError::UnknownCheckpoint(id.to_string()))?;
        let target = self.manifest_at(idx)?;
        self.refresh()?;
        let report = restore::apply(
            &self.walker,
            &target,
            self.infos[idx].seq,
            &self.current,
            &self.objects,
        );
        // The watcher sees the restore's own writes; a scan finds them anyway. Paths
        // that failed are looked at again too.
        for p in report.not_restorable.iter().map(|n| &n.path) {
            self.recheck.insert(p.clone());
        }
        Ok(report)
    }

    /// The manifest of checkpoint number `idx` (in [`Checkpoints::list`]).
    fn manifest_at(&self, idx: usize) -> Result<Manifest, CheckpointError> {
        let mut m = Manifest::new();
        for path in self.record_paths()?.into_iter().take(idx + 1) {
            for (p, e) in read_record(&path)?.changes {
                match e {
                    Some(e) => m.insert(p, e),
                    None => m.remove(&p),
                };
            }
        }
        Ok(m)
    }

    fn record_paths(&self) -> Result<Vec<PathBuf>, CheckpointError> {
        let dir = self.dir.join("checkpoints");
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io_err("cannot list checkpoints", &dir))? {
            let entry = entry.map_err(io_err("cannot list checkpoints", &dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.ends_with(".json") && name[..name.len() - 5].parse::<u64>().is_ok() {
                out.push(entry.path());
            }
        }
        out.sort();
        Ok(out)
    }

    fn next_seq(&self) -> u64 {
        self.infos.last().map_or(1, |i| i.seq + 1)
    }

    /// Brings `current` up to date with the workspace, saving changed contents.
    /// Returns when it started (ns since the epoch).
    fn refresh(&mut self) -> Result<i64, CheckpointError> {
        let started = now_ns();
        let racy = i64::try_from(self.config.racy_window.as_nanos()).unwrap_or(i64::MAX);
        let ctx = ScanCtx {
            max_file_bytes: self.config.max_file_bytes,
            racy_after: started.saturating_sub(racy),
            seq: self.next_seq(),
        };
        let mut full = self.need_full;
        let relist = std::mem::take(&mut self.recheck);
        let mut dirty = BTreeSet::new();
        match self.watcher.as_mut().map(|w| w.drain()) {
            Some(Ok(d)) => {
                full |= d.full;
                dirty.extend(d.paths);
            }
            Some(Err(_)) => {
                self.watcher = None;
                full = true;
            }
            None => full = true,
        }
        let mut run = Run {
            walker: &self.walker,
            current: &self.current,
            objects: &mut self.objects,
            watcher: self.watcher.as_mut(),
            ctx,
            // File times come from a coarse clock (the kernel's tick, whole seconds on
            // some filesystems): a path created just after the last record can carry a
            // time a little before it. Only a path older than the last record by more
            // than the racy window counts as one that became visible without being
            // created (kept by a restore to an earlier checkpoint).
            old_before: self.last_record_ns.map(|t| t.saturating_sub(racy)),
            max_files: if full {
                self.config.max_files
            } else {
                usize::MAX
            },
            changes: Vec::new(),
            new_dirs: HashSet::new(),
            recheck: BTreeSet::new(),
            lost_watch: false,
            stats: ScanStats {
                full,
                ..ScanStats::default()
            },
        };
        let result = if full {
            run.tree("")
        } else {
            run.paths(dirty, relist)
        };
        let result = result.and_then(|()| {
            run.objects
                .commit()
                .map_err(io_err("cannot save file contents", &self.dir))
        });
        let Run {
            changes,
            recheck,
            lost_watch,
            mut stats,
            ..
        } = run;
        if let Err(e) = result {
            self.objects.abort();
            self.need_full = true;
            return Err(e);
        }
        if lost_watch {
            self.watcher = None;
        }
        self.need_full = false;
        self.recheck = recheck;
        stats.changed = changes.len() as u64;
        self.stats = stats;
        for (path, new) in changes {
            let old = match &new {
                Some(e) => self.current.insert(path.clone(), e.clone()),
                None => self.current.remove(&path),
            };
            self.pending
                .entry(path)
                .and_modify(|(_, now)| *now = new.clone())
                .or_insert((old, new));
        }
        Ok(started)
    }
}

fn read_record(path: &Path) -> Result<Record, CheckpointError> {
    let body = fs::read(path).map_err(io_err("cannot read checkpoint", path))?;
    serde_json::from_slice(&body).map_err(|e| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Created, modified or deleted — or `None` for a directory or a change of stamp only.
fn classify(old: Option<&Entry>, new: Option<&Entry>) -> Option<ChangeKind> {
    match (old, new) {
        (None, Some(n)) if !n.is_dir() => Some(ChangeKind::Created),
        (Some(o), None) if !o.is_dir() => Some(ChangeKind::Deleted),
        (Some(o), Some(n)) if o.is_dir() && n.is_dir() => None,
        (Some(o), Some(n)) if o.is_dir() => Some(ChangeKind::Created).filter(|_| !n.is_dir()),
        (Some(_), Some(n)) if n.is_dir() => Some(ChangeKind::Deleted),
        (Some(o), Some(n)) => (!o.same_content(n)).then_some(ChangeKind::Modified),
        _ => None,
    }
}

/// One refresh: reads the workspace against `current` and collects the changes.
struct Run<'a> {
    walker: &'a Walker,
    current: &'a Manifest,
    objects: &'a mut Objects,
    watcher: Option<&'a mut Watcher>,
    ctx: ScanCtx,
    old_before: Option<i64>,
    max_files: usize,
    changes: Vec<(String, Option<Entry>)>,
    /// Directories first seen in this run: what is inside them is new too.
    new_dirs: HashSet<String>,
    recheck: BTreeSet<String>,
    lost_watch: bool,
    stats: ScanStats,
}

impl Run<'_> {
    /// Walks `start` (the root, or a directory already known not to be ignored) and
    /// everything under it.
    fn tree(&mut self, start: &str) -> Result<(), CheckpointError> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut unreadable: Vec<String> = Vec::new();
        let abs = self.walker.abs(start);
        // A directory that became a link (or lies under one) is gone, with everything
        // under it: never walked through.
        let real = self.walker.is_real_dir(start);
        let walk = real.then(|| self.walker.walk(&abs, None));
        for item in walk.into_iter().flatten() {
            let dent = match item {
                Ok(d) => d,
                Err(e) => {
                    if let Some(rel) = error_path(&e).and_then(|p| self.walker.rel(&p)) {
                        unreadable.push(rel);
                    }
                    continue;
                }
            };
            let Some(rel) = self.walker.rel(dent.path()) else {
                continue;
            };
            let Ok(meta) = dent.metadata() else { continue };
            if meta.is_dir() {
                self.watch(&rel, &meta);
            }
            if rel.is_empty() {
                continue;
            }
            self.stats.examined += 1;
            if self.stats.examined as usize > self.max_files {
                return Err(CheckpointError::TooManyFiles {
                    limit: self.max_files,
                });
            }
            match self.look(&rel, &meta)? {
                true => {
                    seen.insert(rel);
                }
                false => continue,
            }
        }
        let under = |p: &str| {
            unreadable
                .iter()
                .any(|u| p == u || p.starts_with(&format!("{u}/")))
        };
        let mut gone = Vec::new();
        if !start.is_empty() && !seen.contains(start) {
            gone.push(start.to_string());
        }
        for (p, _) in descendants(self.current, start) {
            if !seen.contains(p) && !under(p) {
                gone.push(p.clone());
            }
        }
        for p in gone {
            if self.current.contains_key(&p) {
                self.changes.push((p, None));
            }
        }
        Ok(())
    }

    /// Looks at the changed paths only (the watcher's list), and lists again the
    /// directories in `relist`.
    fn paths(
        &mut self,
        mut dirty: BTreeSet<String>,
        relist: BTreeSet<String>,
    ) -> Result<(), CheckpointError> {
        let mut listings: HashMap<String, HashSet<String>> = HashMap::new();
        for dir in relist {
            if !dir.is_empty() && !self.current.get(&dir).is_some_and(|e| e.is_dir()) {
                dirty.insert(dir);
                continue;
            }
            let list = self.list_dir(&dir);
            let known = descendants(self.current, &dir)
                .map(|(p, _)| p)
                .filter(|p| parent_of(p) == dir);
            dirty.extend(known.filter(|p| !list.contains(*p)).cloned());
            dirty.extend(
                list.iter()
                    .filter(|p| !self.current.contains_key(*p))
                    .cloned(),
            );
            listings.insert(dir, list);
        }
        let mut done_trees: Vec<String> = Vec::new();
        for path in dirty {
            if path.is_empty()
                || done_trees
                    .iter()
                    .any(|t| path.starts_with(&format!("{t}/")))
            {
                continue;
            }
            let parent = parent_of(&path).to_string();
            if !listings.contains_key(&parent) {
                let list = self.list_dir(&parent);
                listings.insert(parent.clone(), list);
            }
            let listed = listings.get(&parent).is_some_and(|l| l.contains(&path));
            let meta = if listed {
                fs::symlink_metadata(self.walker.abs(&path)).ok()
            } else {
                None
            };
            self.stats.examined += 1;
            match meta {
                None => self.remove_tree(&path),
                Some(m) if m.is_dir() => {
                    done_trees.push(path.clone());
                    self.tree(&path)?;
                }
                Some(m) => {
                    if self.look(&path, &m)? && self.current.get(&path).is_some_and(|e| e.is_dir())
                    {
                        let under: Vec<String> = descendants(self.current, &path)
                            .map(|(p, _)| p.clone())
                            .collect();
                        self.changes.extend(under.into_iter().map(|p| (p, None)));
                    }
                }
            }
        }
        Ok(())
    }

    /// The tracked children of a directory (ignore rules applied).
    fn list_dir(&self, rel: &str) -> HashSet<String> {
        let mut out = HashSet::new();
        if !self.walker.is_real_dir(rel) {
            return out;
        }
        for dent in self.walker.walk(&self.walker.abs(rel), Some(1)).flatten() {
            if dent.depth() == 1 {
                if let Some(r) = self.walker.rel(dent.path()) {
                    out.insert(r);
                }
            }
        }
        out
    }

    fn remove_tree(&mut self, path: &str) {
        if self.current.contains_key(path) {
            self.changes.push((path.to_string(), None));
        }
        let under: Vec<String> = descendants(self.current, path)
            .map(|(p, _)| p.clone())
            .collect();
        self.changes.extend(under.into_iter().map(|p| (p, None)));
    }

    /// Records one path's entry if it changed; false when it vanished meanwhile.
    fn look(&mut self, rel: &str, meta: &fs::Metadata) -> Result<bool, CheckpointError> {
        let prev = self.current.get(rel);
        let ctime = manifest::Stamp::of(meta).ctime;
        let parent_new = self.new_dirs.contains(parent_of(rel));
        let born_if_new = match self.old_before {
            Some(t) if ctime < t && !parent_new => 0,
            _ => self.ctx.seq,
        };
        let abs = self.walker.abs(rel);
        let entry = match inspect(&abs, meta, prev, born_if_new, self.ctx, self.objects) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_err("cannot save", &abs)(e)),
        };
        if entry.is_dir() && prev.is_none_or(|p| !p.is_dir()) {
            self.new_dirs.insert(rel.to_string());
        }
        if prev != Some(&entry) {
            self.changes.push((rel.to_string(), Some(entry)));
        }
        Ok(true)
    }

    fn watch(&mut self, rel: &str, meta: &fs::Metadata) {
        let Some(w) = self.watcher.as_deref_mut() else {
            return;
        };
        if w.watch(&self.walker.root, rel).is_err() {
            self.lost_watch = true;
            self.watcher = None;
            return;
        }
        // Entries created between reading this directory and watching it changed its
        // mtime: list it again next time.
        if manifest::Stamp::of(meta).mtime >= self.ctx.racy_after {
            self.recheck.insert(rel.to_string());
        }
    }
}

/// The path an `ignore` walk error is about.
fn error_path(e: &ignore::Error) -> Option<PathBuf> {
    match e {
        ignore::Error::WithPath { path, .. } => Some(path.clone()),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        ignore::Error::Partial(errs) => errs.first().and_then(error_path),
        _ => None,
    }
}
