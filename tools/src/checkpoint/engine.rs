//! The checkpoints of one session of a workspace ([`Checkpoints`]): taking them,
//! listing them, restoring one, and what other sessions of the same workspace do.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::git::Repo;
use super::manifest::{Entry, Kind, Manifest, Stamp};
use super::objects::{write_atomic, Objects};
use super::refresh::Run;
use super::restore::{self, Contents};
use super::scan::{ScanCtx, Walker};
use super::store::{read_record, valid_session_id, workspace_key, Layout, Record, RECORD_VERSION};
use super::tree::{self, Trees};
use super::watch::Watcher;
use super::{
    io_err, ChangeKind, CheckpointConfig, CheckpointError, CheckpointInfo, Detection, FileChange,
    RestoreAction, RestoreReport, ScanStats,
};

/// A file another session of the same workspace changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForeignChange {
    /// The other session.
    pub session_id: String,
    /// Its checkpoint that recorded the change.
    pub checkpoint_id: String,
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    /// How it changed.
    pub change: ChangeKind,
}

/// Where the state a restore replaced was kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UndoPoint {
    /// The checkpoint to restore to undo the restore.
    pub checkpoint_id: String,
    /// The checkpoint was taken for the restore (something had changed since the last
    /// one); otherwise it is the last checkpoint, which held that state already.
    pub recorded: bool,
}

/// The checkpoints of one session of a workspace, in the workspace's shared store.
#[derive(Debug)]
pub struct Checkpoints {
    walker: Walker,
    layout: Layout,
    session: String,
    config: CheckpointConfig,
    /// The workspace as last looked at.
    current: Manifest,
    /// Paths changed since the last record: (entry at that record, entry now).
    pending: BTreeMap<String, (Option<Entry>, Option<Entry>)>,
    infos: Vec<CheckpointInfo>,
    /// The root tree of each checkpoint in `infos`.
    roots: Vec<String>,
    /// The trees of the last recorded state (or of the store's head before the first).
    recorded: Trees,
    objects: Objects,
    git: Option<Repo>,
    watcher: Option<Watcher>,
    /// A watcher was started (or could not be): none is started again.
    watch_tried: bool,
    /// The next refresh walks the whole tree.
    need_full: bool,
    /// Directories the next refresh lists again (changed while being watched).
    recheck: BTreeSet<String>,
    /// Files the next refresh reads again (their content left the store).
    reread: BTreeSet<String>,
    /// When the last record's refresh started (ns since the epoch).
    last_record_ns: Option<i64>,
    stats: ScanStats,
    /// The store's garbage-collection generation last seen.
    generation: u64,
    /// Marks the session open for other processes.
    _open: Option<super::marks::OpenSession>,
}

fn now_ns() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Created, modified or deleted — or `None` for a directory or a change of stamp only.
pub(crate) fn classify(old: Option<&Entry>, new: Option<&Entry>) -> Option<ChangeKind> {
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

fn corrupt(path: &Path, reason: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::Corrupt {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

impl Checkpoints {
    /// Opens the checkpoints of session `session_id` of `workspace`, in the
    /// workspace's store under `home` (created if missing), reading the session's
    /// records already there. Before the session's first checkpoint, the workspace's
    /// last known state (from any session) is loaded, so the baseline reads only what
    /// changed since. The next checkpoint walks the whole tree (a stat of each path).
    pub fn open(
        workspace: &Path,
        home: &Path,
        session_id: &str,
        config: CheckpointConfig,
    ) -> Result<Self, CheckpointError> {
        if !valid_session_id(session_id) {
            return Err(CheckpointError::InvalidSessionId(session_id.to_string()));
        }
        let root =
            fs::canonicalize(workspace).map_err(io_err("cannot open workspace", workspace))?;
        fs::create_dir_all(home).map_err(io_err("cannot create checkpoint store", home))?;
        let home = fs::canonicalize(home).map_err(io_err("cannot open checkpoint store", home))?;
        let layout = Layout {
            dir: home.join(workspace_key(&root)),
        };
        layout
            .create(&root)
            .map_err(io_err("cannot create checkpoint store", &layout.dir))?;
        let exclude = home.starts_with(&root).then(|| home.clone());
        let objects = Objects::open(&layout.packs())
            .map_err(io_err("cannot open object store", &layout.dir))?;
        let open = layout
            .open_session(session_id)
            .map_err(io_err("cannot open checkpoint session", &layout.dir))?;
        let lock = layout
            .lock(false)
            .map_err(io_err("cannot lock checkpoint store", &layout.dir))?;
        let git = if config.git {
            Repo::discover(&root)
        } else {
            None
        };
        let mut this = Checkpoints {
            walker: Walker { root, exclude },
            generation: layout.generation(),
            layout,
            session: session_id.to_string(),
            config,
            current: Manifest::new(),
            pending: BTreeMap::new(),
            infos: Vec::new(),
            roots: Vec::new(),
            recorded: Trees::default(),
            objects,
            git,
            watcher: None,
            watch_tried: false,
            need_full: true,
            recheck: BTreeSet::new(),
            reread: BTreeSet::new(),
            last_record_ns: None,
            stats: ScanStats::default(),
            _open: open,
        };
        this.load_records()?;
        match this.roots.last().cloned() {
            Some(last) => {
                let (m, t) = Trees::load(&mut this.objects, &last)
                    .map_err(|e| corrupt(&this.layout.session(session_id), e))?;
                this.current = m;
                this.recorded = t;
            }
            None => {
                if let Some(head) = this.layout.head() {
                    // Only a hint: a head that cannot be read means a full read.
                    if let Ok((m, t)) = Trees::load(&mut this.objects, &head) {
                        this.current = m;
                        this.recorded = t;
                    }
                }
            }
        }
        drop(lock);
        // A tree known to be large (from this session's records or the store's head)
        // is watched from the first walk on.
        this.start_watching_if_large();
        Ok(this)
    }

    /// Starts the watcher once the tree is known to hold `watch_min_paths` paths. The
    /// next refresh walks the whole tree, watching each directory it lists.
    fn start_watching_if_large(&mut self) {
        if !self.config.watch
            || self.watch_tried
            || self.current.len() < self.config.watch_min_paths
        {
            return;
        }
        self.watch_tried = true;
        self.watcher = Watcher::new(self.config.max_watches).ok();
        if self.watcher.is_some() {
            self.need_full = true;
        }
    }

    fn load_records(&mut self) -> Result<(), CheckpointError> {
        let dir = self.layout.session(&self.session);
        let paths = self
            .layout
            .record_paths(&self.session)
            .map_err(io_err("cannot list checkpoints", &dir))?;
        self.infos.clear();
        self.roots.clear();
        for path in paths {
            let record = match read_record(&path) {
                Ok(r) => r,
                // Dropped by a garbage collection meanwhile.
                Err(_) if !path.exists() => continue,
                Err(reason) => return Err(corrupt(&path, reason)),
            };
            self.infos.push(CheckpointInfo {
                id: record.id,
                seq: record.seq,
                created_ms: record.created_ms,
                meta: record.meta,
                baseline: record.baseline,
                changed: record
                    .changes
                    .into_iter()
                    .map(|(path, change)| FileChange { path, change })
                    .collect(),
            });
            self.roots.push(record.root);
        }
        Ok(())
    }

    /// The workspace root (canonical).
    pub fn workspace(&self) -> &Path {
        &self.walker.root
    }

    /// The workspace's store (shared with its other sessions).
    pub fn store_dir(&self) -> &Path {
        &self.layout.dir
    }

    /// The session these checkpoints belong to.
    pub fn session_id(&self) -> &str {
        &self.session
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

    /// Whether files equal to their git index blob are recorded by blob id.
    pub fn git_aware(&self) -> bool {
        self.git.is_some()
    }

    /// What the last checkpoint or restore looked at.
    pub fn last_stats(&self) -> ScanStats {
        self.stats
    }

    /// The other sessions of this workspace that some process has open now (they
    /// share its files).
    pub fn shared_with(&self) -> Vec<String> {
        self.layout
            .session_ids()
            .unwrap_or_default()
            .into_iter()
            .filter(|s| *s != self.session && self.layout.session_is_open(s))
            .collect()
    }

    /// The files other sessions of this workspace changed in checkpoints recorded
    /// after checkpoint `id` of this session was taken.
    pub fn changed_by_others_since(&self, id: &str) -> Result<Vec<ForeignChange>, CheckpointError> {
        let info = self
            .infos
            .iter()
            .find(|i| i.id == id)
            .ok_or_else(|| CheckpointError::UnknownCheckpoint(id.to_string()))?;
        let mut out = Vec::new();
        let sessions = self
            .layout
            .session_ids()
            .map_err(io_err("cannot list sessions", &self.layout.dir))?;
        for s in sessions.into_iter().filter(|s| *s != self.session) {
            for path in self.layout.record_paths(&s).unwrap_or_default() {
                let Ok(r) = read_record(&path) else { continue };
                if r.created_ms < info.created_ms || r.baseline {
                    continue;
                }
                out.extend(r.changes.into_iter().map(|(path, change)| ForeignChange {
                    session_id: s.clone(),
                    checkpoint_id: r.id.clone(),
                    path,
                    change,
                }));
            }
        }
        Ok(out)
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
        let _lock = self
            .layout
            .lock(false)
            .map_err(io_err("cannot lock checkpoint store", &self.layout.dir))?;
        self.sync()?;
        let started = self.refresh(false)?;
        let seq = self.infos.last().map_or(1, |i| i.seq + 1);
        let baseline = self.infos.is_empty();
        let mut changed = Vec::new();
        for (path, (old, new)) in &self.pending {
            if let Some(c) = classify(old.as_ref(), new.as_ref()) {
                if !baseline {
                    changed.push(FileChange {
                        path: path.clone(),
                        change: c,
                    });
                }
            }
        }
        let saved = self.recorded.clone();
        let root = match self.recorded.root() {
            Some(r) if self.pending.is_empty() => Ok(r.to_string()),
            _ => self
                .recorded
                .update(&mut self.objects, &self.current, self.pending.keys()),
        };
        let root = root.and_then(|r| self.objects.commit().map(|()| r));
        let root = match root {
            Ok(r) => r,
            Err(e) => {
                self.recorded = saved;
                self.objects.abort();
                self.recover_missing();
                return Err(io_err("cannot save file contents", &self.layout.dir)(e));
            }
        };
        let created_ms = u64::try_from(started / 1_000_000).unwrap_or(0);
        let record = Record {
            version: RECORD_VERSION,
            id: id.to_string(),
            seq,
            created_ms,
            meta: meta.clone(),
            baseline,
            root: root.clone(),
            changes: changed.iter().map(|c| (c.path.clone(), c.change)).collect(),
        };
        let path = self.layout.record_path(&self.session, seq);
        let body = serde_json::to_vec(&record).map_err(|e| corrupt(&path, e))?;
        if let Err(e) = write_atomic(&path, &body) {
            // The changes stay pending for the next attempt; the objects written are
            // collected unless a later checkpoint uses them.
            self.recorded = saved;
            return Err(io_err("cannot write checkpoint", &path)(e));
        }
        // Only a hint for the next session's baseline: a failure costs it a read.
        let _ = self.layout.set_head(&root);
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
        self.roots.push(root);
        Ok(info)
    }

    /// Files and links changed since the last checkpoint (the workspace is looked at
    /// now; nothing is recorded).
    pub fn pending_changes(&mut self) -> Result<Vec<FileChange>, CheckpointError> {
        let _lock = self
            .layout
            .lock(false)
            .map_err(io_err("cannot lock checkpoint store", &self.layout.dir))?;
        self.sync()?;
        self.refresh(true)?;
        Ok(self.pending_list())
    }

    fn pending_list(&self) -> Vec<FileChange> {
        self.pending
            .iter()
            .filter_map(|(path, (old, new))| {
                classify(old.as_ref(), new.as_ref()).map(|change| FileChange {
                    path: path.clone(),
                    change,
                })
            })
            .collect()
    }

    /// Puts the workspace back in the state of checkpoint `id`, touching only the
    /// paths that differ from it. What changed since the last checkpoint is not
    /// recorded (see [`Checkpoints::restore_undoable`]).
    pub fn restore(&mut self, id: &str) -> Result<RestoreReport, CheckpointError> {
        let _lock = self
            .layout
            .lock(false)
            .map_err(io_err("cannot lock checkpoint store", &self.layout.dir))?;
        self.sync()?;
        let idx = self
            .infos
            .iter()
            .position(|i| i.id == id)
            .ok_or_else(|| CheckpointError::UnknownCheckpoint(id.to_string()))?;
        self.refresh(true)?;
        let target_root = self.roots[idx].clone();
        let last_root = self.recorded_root()?;
        let store = self.layout.dir.clone();
        let diff = tree::diff(&mut self.objects, &target_root, &last_root)
            .map_err(|e| corrupt(&store, e))?;
        let mut targets: BTreeMap<String, Option<Entry>> =
            diff.into_iter().map(|(p, (t, _))| (p, t)).collect();
        for (p, (old, _)) in &self.pending {
            targets.entry(p.clone()).or_insert_with(|| old.clone());
        }
        let report = restore::apply(
            &self.walker,
            &targets,
            &self.current,
            &mut Contents {
                objects: &mut self.objects,
                git: self.git.as_mut(),
            },
        );
        if let Some(g) = self.git.as_mut() {
            g.close();
        }
        // What was put back is known now: the next refresh need not read it unless it
        // changes again (it is racy: looked at once more).
        for f in &report.files {
            let new = match (f.action, targets.get(&f.path).cloned().flatten()) {
                (RestoreAction::Removed, _) => None,
                (_, Some(t)) => match fs::symlink_metadata(self.walker.abs(&f.path)) {
                    Ok(m) => Some(Entry {
                        stamp: Stamp::of(&m),
                        racy: true,
                        ..t
                    }),
                    Err(_) => continue,
                },
                (_, None) => continue,
            };
            self.set_current(f.path.clone(), new);
        }
        for p in report.not_restorable.iter().map(|n| &n.path) {
            self.recheck.insert(p.clone());
            self.reread.insert(p.clone());
        }
        Ok(report)
    }

    /// [`Checkpoints::restore`], after recording the workspace as it is now (as
    /// checkpoint `undo_id` with `undo_meta`) when it changed since the last
    /// checkpoint: restoring the returned point undoes the restore.
    pub fn restore_undoable(
        &mut self,
        id: &str,
        undo_id: &str,
        undo_meta: serde_json::Value,
    ) -> Result<(RestoreReport, UndoPoint), CheckpointError> {
        if !self.infos.iter().any(|i| i.id == id) {
            return Err(CheckpointError::UnknownCheckpoint(id.to_string()));
        }
        let changed = !self.pending_changes()?.is_empty();
        let undo = match self.infos.last() {
            Some(last) if !changed => UndoPoint {
                checkpoint_id: last.id.clone(),
                recorded: false,
            },
            _ => {
                let info = self.checkpoint(undo_id, undo_meta)?;
                UndoPoint {
                    checkpoint_id: info.id,
                    recorded: true,
                }
            }
        };
        let report = self.restore(id)?;
        Ok((report, undo))
    }

    /// The root of the last recorded state, rebuilt when a garbage collection took
    /// its trees (it dropped the session's last checkpoint).
    fn recorded_root(&mut self) -> Result<String, CheckpointError> {
        if let Some(r) = self.recorded.root() {
            return Ok(r.to_string());
        }
        let mut m = self.current.clone();
        for (p, (old, _)) in &self.pending {
            match old {
                Some(e) => m.insert(p.clone(), e.clone()),
                None => m.remove(p),
            };
        }
        let keys: Vec<String> = m.keys().cloned().collect();
        let built = self.recorded.update(&mut self.objects, &m, keys.iter());
        let root = built.and_then(|r| self.objects.commit().map(|()| r));
        root.map_err(|e| {
            self.objects.abort();
            self.recorded = Trees::default();
            io_err("cannot save file contents", &self.layout.dir)(e)
        })
    }

    fn set_current(&mut self, path: String, new: Option<Entry>) {
        let old = match &new {
            Some(e) => self.current.insert(path.clone(), e.clone()),
            None => self.current.remove(&path),
        };
        self.pending
            .entry(path)
            .and_modify(|(_, now)| *now = new.clone())
            .or_insert((old, new));
    }

    /// After a garbage collection (the store's generation moved): reload the indexes
    /// and records, and read again whatever cached content left the store.
    fn sync(&mut self) -> Result<(), CheckpointError> {
        let g = self.layout.generation();
        if g == self.generation {
            return Ok(());
        }
        self.generation = g;
        self.objects
            .reload()
            .map_err(io_err("cannot open object store", &self.layout.dir))?;
        self.load_records()?;
        self.recover_missing();
        Ok(())
    }

    /// Entries whose content is no longer stored are read again by the next refresh;
    /// trees no longer stored are rebuilt.
    fn recover_missing(&mut self) {
        let objects = &self.objects;
        if !self.recorded.all_present(objects) {
            self.recorded = Trees::default();
        }
        for (p, e) in self.current.iter_mut() {
            if let Kind::File { hash } = &e.kind {
                if !objects.contains(hash) {
                    e.racy = true;
                    self.reread.insert(p.clone());
                }
            }
        }
    }

    /// Brings `current` up to date with the workspace, saving changed contents (the
    /// pack is committed when `commit`; else the caller commits it). Returns when it
    /// started (ns since the epoch).
    fn refresh(&mut self, commit: bool) -> Result<i64, CheckpointError> {
        let started = now_ns();
        let racy = i64::try_from(self.config.racy_window.as_nanos()).unwrap_or(i64::MAX);
        let ctx = ScanCtx {
            max_file_bytes: self.config.max_file_bytes,
            racy_after: started.saturating_sub(racy),
            git: self.git.as_ref().map(Repo::sha256),
        };
        let mut full = self.need_full;
        let relist = std::mem::take(&mut self.recheck);
        let mut dirty: BTreeSet<String> = std::mem::take(&mut self.reread);
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
        let mut run = Run::new(
            &self.walker,
            &self.current,
            &mut self.objects,
            self.watcher.as_mut(),
            self.git.as_ref().filter(|_| full),
            ctx,
            // File times come from a coarse clock (the kernel's tick, whole seconds on
            // some filesystems): a path created just after the last record can carry a
            // time a little before it. Only a path older than the last record by more
            // than the racy window counts as one that became visible without being
            // created (kept by a restore to an earlier checkpoint).
            self.last_record_ns.map(|t| t.saturating_sub(racy)),
            if full {
                self.config.max_files
            } else {
                usize::MAX
            },
            full,
        );
        let result = if full {
            run.tree("")
        } else {
            run.paths(dirty.clone(), relist)
        };
        let result = result.and_then(|()| run.finish());
        let result = result.and_then(|()| {
            if commit {
                run.objects
                    .commit()
                    .map_err(io_err("cannot save file contents", &self.layout.dir))
            } else {
                Ok(())
            }
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
            self.reread = dirty;
            self.recover_missing();
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
            self.set_current(path, new);
        }
        if full {
            self.start_watching_if_large();
        }
        Ok(started)
    }
}

/// Where the checkpoints of `workspace` are stored under `home` (the directory need not
/// exist).
pub(crate) fn store_dir_of(home: &Path, workspace: &Path) -> std::io::Result<PathBuf> {
    Ok(home.join(workspace_key(&fs::canonicalize(workspace)?)))
}
