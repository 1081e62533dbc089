//! One refresh: the workspace read against the last known manifest. A full refresh
//! walks the whole tree and stats every path; otherwise only the paths the watcher
//! named are looked at. Only files whose stamp changed are read. In a git work tree a
//! full refresh first collects the files it would read, then asks git which of them
//! equal their index blob: those are recorded by blob id, unread.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::io;
use std::path::PathBuf;

use super::git::Repo;
use super::manifest::{self, descendants, parent_of, Entry, Kind, Manifest};
use super::objects::Objects;
use super::scan::{inspect, read_file, ScanCtx, Walker};
use super::watch::Watcher;
use super::{io_err, CheckpointError, ScanStats};

/// Fewer files to read than this in a git work tree: read them, git is not asked.
const GIT_MIN_FILES: usize = 32;

/// A file whose read waits for git's answer.
struct Deferred {
    rel: String,
    meta: fs::Metadata,
    appeared_if_new: bool,
}

/// One refresh: reads the workspace against `current` and collects the changes.
pub(crate) struct Run<'a> {
    pub walker: &'a Walker,
    pub current: &'a Manifest,
    pub objects: &'a mut Objects,
    pub watcher: Option<&'a mut Watcher>,
    pub git: Option<&'a Repo>,
    pub ctx: ScanCtx,
    /// Paths older than this (ns) that show up were not created: they appeared.
    pub old_before: Option<i64>,
    pub max_files: usize,
    pub changes: Vec<(String, Option<Entry>)>,
    /// Directories first seen in this run: what is inside them is new too.
    pub new_dirs: HashSet<String>,
    pub recheck: BTreeSet<String>,
    pub lost_watch: bool,
    pub stats: ScanStats,
    deferred: Vec<Deferred>,
}

impl<'a> Run<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        walker: &'a Walker,
        current: &'a Manifest,
        objects: &'a mut Objects,
        watcher: Option<&'a mut Watcher>,
        git: Option<&'a Repo>,
        ctx: ScanCtx,
        old_before: Option<i64>,
        max_files: usize,
        full: bool,
    ) -> Self {
        Run {
            walker,
            current,
            objects,
            watcher,
            git,
            ctx,
            old_before,
            max_files,
            changes: Vec::new(),
            new_dirs: HashSet::new(),
            recheck: BTreeSet::new(),
            lost_watch: false,
            stats: ScanStats {
                full,
                ..ScanStats::default()
            },
            deferred: Vec::new(),
        }
    }

    /// Reads the files whose reading was put off for git's answer.
    pub fn finish(&mut self) -> Result<(), CheckpointError> {
        let deferred = std::mem::take(&mut self.deferred);
        if deferred.is_empty() {
            return Ok(());
        }
        let clean = self
            .git
            .filter(|_| deferred.len() >= GIT_MIN_FILES)
            .and_then(|g| g.clean());
        for d in deferred {
            let prev = self.current.get(&d.rel);
            if let Some(oid) = clean.as_ref().and_then(|c| c.get(&d.rel)) {
                let entry = Entry {
                    kind: Kind::Git { oid: oid.clone() },
                    mode: std::os::unix::fs::PermissionsExt::mode(&d.meta.permissions()) & 0o7777,
                    stamp: manifest::Stamp::of(&d.meta),
                    appeared: match prev {
                        Some(p) if p.type_tag() == 2 => p.appeared,
                        _ => d.appeared_if_new,
                    },
                    racy: manifest::Stamp::of(&d.meta).mtime >= self.ctx.racy_after,
                };
                self.stats.git += 1;
                if prev != Some(&entry) {
                    self.changes.push((d.rel, Some(entry)));
                }
                continue;
            }
            let abs = self.walker.abs(&d.rel);
            match read_file(
                &abs,
                &d.meta,
                prev,
                d.appeared_if_new,
                self.ctx,
                self.objects,
            ) {
                Ok(entry) => {
                    if prev != Some(&entry) {
                        self.changes.push((d.rel, Some(entry)));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if prev.is_some() {
                        self.changes.push((d.rel, None));
                    }
                }
                Err(e) => return Err(save_err(&abs, e)),
            }
        }
        Ok(())
    }

    /// Walks `start` (the root, or a directory already known not to be ignored) and
    /// everything under it.
    pub fn tree(&mut self, start: &str) -> Result<(), CheckpointError> {
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
    pub fn paths(
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
        let appeared_if_new = matches!(self.old_before, Some(t) if ctime < t && !parent_new);
        let abs = self.walker.abs(rel);
        let entry = match inspect(&abs, meta, prev, appeared_if_new, self.ctx) {
            Ok(Some(e)) => e,
            Ok(None) if self.git.is_some() && self.stats.full => {
                self.deferred.push(Deferred {
                    rel: rel.to_string(),
                    meta: meta.clone(),
                    appeared_if_new,
                });
                return Ok(true);
            }
            Ok(None) => {
                match read_file(&abs, meta, prev, appeared_if_new, self.ctx, self.objects) {
                    Ok(e) => e,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                    Err(e) => return Err(save_err(&abs, e)),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(save_err(&abs, e)),
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

/// An error saving a path's content; a full disk is told apart.
fn save_err(abs: &std::path::Path, e: io::Error) -> CheckpointError {
    io_err("cannot save", abs)(e)
}
