//! A session's checkpoints carried out of one store and into another: on another
//! machine (an export file), or on this one when a session's workspace moves
//! (materialising it somewhere else).
//!
//! Carried are the session's records and every object they reach, each once (file
//! contents and trees, by SHA-256). A file recorded by its git blob id is carried by
//! its content (read from the repository where it was recorded, and its trees
//! rewritten to name the content), since the other end has no such repository; a
//! blob that cannot be read any more stays a git entry, which a restore reports as
//! not restorable.
//!
//! Taking them in ([`Importer`]) checks each object against its hash and every record,
//! stores the objects in a pack of its own, and writes the records only once every
//! tree and content they reach is there: a bundle cut short or damaged adds no
//! record (its pack, never indexed, is removed).

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use nix::fcntl::Flock;
use serde::Serialize;

use super::git::Repo;
use super::manifest::Kind;
use super::objects::{hash, write_atomic, Objects};
use super::restore::RestoreReport;
use super::store::{read_record, valid_session_id, workspace_key, Layout, Record, RECORD_VERSION};
use super::tree::{decode, encode};
use super::{io_err, CheckpointConfig, CheckpointError, CheckpointHome};

/// One item of a session's checkpoints as carried.
#[derive(Debug, Clone, Copy)]
pub enum BundleItem<'a> {
    /// An object: a file's content or a tree, named by its SHA-256 (hex).
    Object {
        /// The SHA-256 of `bytes`, 64 lower-case hex digits.
        hash: &'a str,
        /// The object.
        bytes: &'a [u8],
    },
    /// One checkpoint record, in the store's own format (JSON).
    Record {
        /// Its number in the session (1 for the baseline, then 2, 3, …).
        seq: u64,
        /// The record.
        body: &'a [u8],
    },
}

/// What was carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BundleSummary {
    /// Checkpoint records.
    pub records: usize,
    /// Objects (each once).
    pub objects: usize,
    /// Bytes of the objects.
    pub bytes: u64,
}

/// Why a bundle could not be taken in.
#[derive(Debug)]
pub enum BundleError {
    /// The bundle is damaged: an object that does not match its name, a record that
    /// cannot be read, a tree or content a record needs that is not there.
    Invalid(String),
    /// The store could not be written.
    Store(CheckpointError),
}

impl std::fmt::Display for BundleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BundleError::Invalid(why) => write!(f, "damaged checkpoints: {why}"),
            BundleError::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BundleError {}

impl From<CheckpointError> for BundleError {
    fn from(e: CheckpointError) -> Self {
        BundleError::Store(e)
    }
}

/// A workspace restored from a session's newest checkpoint.
#[derive(Debug, Clone)]
pub struct Materialized {
    /// The checkpoint it was made from.
    pub checkpoint_id: String,
    /// The caller's data stored with that checkpoint.
    pub meta: serde_json::Value,
    /// What was written, and the paths that could not be (not saved in checkpoints:
    /// binary, too large, unreadable; or content no longer available).
    pub report: RestoreReport,
}

/// 64 lower-case hex digits.
pub(crate) fn is_hash(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The store of `workspace` under `home`: keyed by its canonical path, or by the path
/// as given when it does not exist here (a workspace of another machine, or gone).
pub(super) fn layout_of(home: &Path, workspace: &Path) -> Layout {
    let key = fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    Layout {
        dir: home.join(workspace_key(&key)),
    }
}

pub(super) struct Exporter<'a> {
    objects: Objects,
    pub(super) repo: Option<Repo>,
    /// Tree → the tree carried for it (its git entries replaced by contents).
    pub(super) memo: HashMap<String, String>,
    pub(super) sent: HashSet<String>,
    pub(super) summary: BundleSummary,
    pub(super) sink: &'a mut dyn FnMut(BundleItem<'_>) -> io::Result<()>,
}

impl<'a> Exporter<'a> {
    /// An exporter of the objects of `layout`'s store, reading files recorded by git
    /// blob id from `workspace`'s repository (when it exists here); `memo` and `sent`
    /// say what was handed out already.
    pub(super) fn open(
        layout: &Layout,
        workspace: &Path,
        memo: HashMap<String, String>,
        sent: HashSet<String>,
        sink: &'a mut dyn FnMut(BundleItem<'_>) -> io::Result<()>,
    ) -> Result<Self, CheckpointError> {
        let objects = Objects::open(&layout.packs())
            .map_err(io_err("cannot open object store", &layout.dir))?;
        let repo = if workspace.is_dir() {
            Repo::discover(workspace)
        } else {
            None
        };
        Ok(Exporter {
            objects,
            repo,
            memo,
            sent,
            summary: BundleSummary::default(),
            sink,
        })
    }

    fn send(&mut self, h: &str, bytes: &[u8]) -> io::Result<()> {
        if self.sent.insert(h.to_owned()) {
            (self.sink)(BundleItem::Object { hash: h, bytes })?;
            self.summary.objects += 1;
            self.summary.bytes += bytes.len() as u64;
        }
        Ok(())
    }

    /// Hands out tree `h` and everything it reaches that was not handed out yet;
    /// answers the name of the tree as carried.
    pub(super) fn tree(&mut self, h: &str) -> io::Result<String> {
        if let Some(done) = self.memo.get(h) {
            return Ok(done.clone());
        }
        let bytes = self.objects.get(h)?;
        let mut nodes = decode(&bytes)?;
        let mut changed = false;
        for n in &mut nodes {
            match &n.entry.kind {
                Kind::Dir => {
                    if let Some(sub) = n.subtree.clone() {
                        let carried = self.tree(&sub)?;
                        if carried != sub {
                            n.subtree = Some(carried);
                            changed = true;
                        }
                    }
                }
                Kind::File { hash: h } => {
                    if !self.sent.contains(h) {
                        let h = h.clone();
                        let content = self.objects.get(&h)?;
                        self.send(&h, &content)?;
                    }
                }
                Kind::Git { oid } => {
                    let content = self.repo.as_mut().and_then(|r| r.read_blob(oid).ok());
                    if let Some(content) = content {
                        let h = hash(&content);
                        self.send(&h, &content)?;
                        n.entry.kind = Kind::File { hash: h };
                        changed = true;
                    }
                }
                Kind::Unsaved { .. } | Kind::Symlink { .. } => {}
            }
        }
        let (carried, body) = if changed {
            let body = encode(&nodes)?;
            (hash(&body), body)
        } else {
            (h.to_owned(), bytes)
        };
        self.send(&carried, &body)?;
        self.memo.insert(h.to_owned(), carried.clone());
        Ok(carried)
    }
}

/// The error a failing sink becomes.
pub(super) fn sink_err(source: io::Error) -> CheckpointError {
    CheckpointError::Io {
        what: "cannot write the checkpoints out".into(),
        path: PathBuf::new(),
        source,
    }
}

impl CheckpointHome {
    /// Hands every checkpoint of session `session_id` of `workspace` to `sink`: every
    /// object the records reach, each once, then the records, oldest first (see the
    /// module documentation for files recorded by git blob id). The workspace need not
    /// exist here: its store is then the one of the path as given. A session with no
    /// checkpoint there hands nothing.
    pub fn export_session(
        &self,
        workspace: &Path,
        session_id: &str,
        sink: &mut dyn FnMut(BundleItem<'_>) -> io::Result<()>,
    ) -> Result<BundleSummary, CheckpointError> {
        if !valid_session_id(session_id) {
            return Err(CheckpointError::InvalidSessionId(session_id.to_owned()));
        }
        let layout = layout_of(&self.root_dir(), workspace);
        let listed = layout
            .record_paths(session_id)
            .map_err(io_err("cannot list checkpoints", &layout.dir))?;
        if listed.is_empty() {
            return Ok(BundleSummary::default());
        }
        let _lock = layout
            .lock(false)
            .map_err(io_err("cannot lock checkpoint store", &layout.dir))?;
        // Listed again under the lock: a garbage collection may have dropped some.
        let paths = layout
            .record_paths(session_id)
            .map_err(io_err("cannot list checkpoints", &layout.dir))?;
        let mut ex = Exporter::open(&layout, workspace, HashMap::new(), HashSet::new(), sink)?;
        let mut records = Vec::new();
        for path in paths {
            let record = match read_record(&path) {
                Ok(r) => r,
                Err(_) if !path.exists() => continue,
                Err(reason) => return Err(CheckpointError::Corrupt { path, reason }),
            };
            let root = ex.tree(&record.root).map_err(|e| match e.kind() {
                io::ErrorKind::NotFound | io::ErrorKind::InvalidData => CheckpointError::Corrupt {
                    path: path.clone(),
                    reason: e.to_string(),
                },
                _ => sink_err(e),
            })?;
            records.push(Record { root, ..record });
        }
        for r in &records {
            let body = serde_json::to_vec(r).map_err(|e| sink_err(io::Error::other(e)))?;
            (ex.sink)(BundleItem::Record {
                seq: r.seq,
                body: &body,
            })
            .map_err(sink_err)?;
        }
        if let Some(r) = ex.repo.as_mut() {
            r.close();
        }
        Ok(BundleSummary {
            records: records.len(),
            ..ex.summary
        })
    }

    /// Starts taking in the checkpoints of session `session_id` into the store of
    /// `workspace` (which need not exist: then the store of the path as given).
    pub fn importer(
        &self,
        workspace: &Path,
        session_id: &str,
    ) -> Result<Importer, CheckpointError> {
        if !valid_session_id(session_id) {
            return Err(CheckpointError::InvalidSessionId(session_id.to_owned()));
        }
        let root = self.root_dir();
        fs::create_dir_all(&root).map_err(io_err("cannot create checkpoint store", &root))?;
        let key = fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let layout = layout_of(&root, workspace);
        layout
            .create(&key)
            .map_err(io_err("cannot create checkpoint store", &layout.dir))?;
        let lock = layout
            .lock(false)
            .map_err(io_err("cannot lock checkpoint store", &layout.dir))?;
        let objects = Objects::open(&layout.packs())
            .map_err(io_err("cannot open object store", &layout.dir))?;
        Ok(Importer {
            layout,
            session: session_id.to_owned(),
            objects,
            _lock: lock,
            records: Vec::new(),
            received: HashSet::new(),
            finished: false,
        })
    }

    /// Moves the checkpoints of session `session_id` from the store of workspace
    /// `from` to the store of `to` (both under this directory); the number of
    /// records moved (0: none was in `from`'s store, or both paths share a store).
    pub fn move_session(
        &self,
        from: &Path,
        to: &Path,
        session_id: &str,
    ) -> Result<usize, BundleError> {
        let root = self.root_dir();
        let (source, target) = (layout_of(&root, from), layout_of(&root, to));
        if source.dir == target.dir {
            return Ok(0);
        }
        let mut imp = self.importer(to, session_id)?;
        let mut bad: Option<BundleError> = None;
        let summary = self.export_session(from, session_id, &mut |item| {
            let r = match item {
                BundleItem::Object { hash, bytes } => imp.object(hash, bytes),
                BundleItem::Record { seq, body } => imp.record(seq, body),
            };
            r.map_err(|e| {
                let text = e.to_string();
                bad = Some(e);
                io::Error::other(text)
            })
        });
        if let Some(e) = bad {
            return Err(e);
        }
        let summary = summary?;
        if summary.records == 0 {
            return Ok(0);
        }
        let moved = imp.finish()?;
        // The old copy goes; what only it used is collected by the next pruning.
        let _ = fs::remove_dir_all(source.session(session_id));
        Ok(moved)
    }

    /// Makes the empty directory `to` the workspace of session `session_id` from its
    /// newest checkpoint: its checkpoints move from the store of its old workspace
    /// `from` (gone from this machine, or moved) to the store of `to`, then the
    /// newest is restored into `to`. `Ok(None)`: the session has no checkpoint in
    /// either store.
    pub fn materialize(
        &self,
        from: &Path,
        to: &Path,
        session_id: &str,
    ) -> Result<Option<Materialized>, BundleError> {
        self.move_session(from, to, session_id)?;
        let config = CheckpointConfig {
            watch: false,
            git: false,
            ..CheckpointConfig::default()
        };
        let mut engine = self.open(to, session_id, config)?;
        let Some(last) = engine.list().last().cloned() else {
            return Ok(None);
        };
        let report = engine.restore(&last.id)?;
        Ok(Some(Materialized {
            checkpoint_id: last.id,
            meta: last.meta,
            report,
        }))
    }

    /// How many checkpoint records session `session_id` has in the store of
    /// `workspace` (the store of the path as given when it does not exist here).
    pub fn count_records(&self, workspace: &Path, session_id: &str) -> usize {
        if !valid_session_id(session_id) {
            return 0;
        }
        layout_of(&self.root_dir(), workspace)
            .record_paths(session_id)
            .map(|p| p.len())
            .unwrap_or(0)
    }

    /// The directory, as given (not created).
    pub(super) fn root_dir(&self) -> PathBuf {
        self.root().to_path_buf()
    }
}

/// Takes in one session's checkpoints ([`CheckpointHome::importer`]): objects and
/// records in any order, then [`Importer::finish`]. Dropped unfinished, it leaves
/// nothing behind but a pack without an index, which is never read.
pub struct Importer {
    layout: Layout,
    session: String,
    objects: Objects,
    _lock: Flock<File>,
    records: Vec<Record>,
    received: HashSet<String>,
    finished: bool,
}

impl std::fmt::Debug for Importer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Importer")
            .field("store", &self.layout.dir)
            .field("session", &self.session)
            .field("records", &self.records.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Importer {
    fn drop(&mut self) {
        if !self.finished {
            self.objects.abort();
        }
    }
}

fn invalid(why: impl Into<String>) -> BundleError {
    BundleError::Invalid(why.into())
}

impl Importer {
    /// One object, checked against its name.
    pub fn object(&mut self, name: &str, bytes: &[u8]) -> Result<(), BundleError> {
        if !is_hash(name) {
            return Err(invalid(format!("{name:?} is not an object name")));
        }
        if hash(bytes) != name {
            return Err(invalid(format!(
                "object {name} does not match its hash (damaged)"
            )));
        }
        self.objects
            .put(name, bytes)
            .map_err(io_err("cannot store checkpoint objects", &self.layout.dir))?;
        self.received.insert(name.to_owned());
        Ok(())
    }

    /// One record (the store's format), number `seq`.
    pub fn record(&mut self, seq: u64, body: &[u8]) -> Result<(), BundleError> {
        let r: Record = serde_json::from_slice(body)
            .map_err(|e| invalid(format!("checkpoint record {seq} cannot be read: {e}")))?;
        if r.version != RECORD_VERSION {
            return Err(invalid(format!(
                "checkpoint record {seq} has version {} (this keel reads {RECORD_VERSION})",
                r.version
            )));
        }
        if r.seq != seq || seq == 0 {
            return Err(invalid(format!(
                "checkpoint record {seq} says it is number {}",
                r.seq
            )));
        }
        if !is_hash(&r.root) {
            return Err(invalid(format!("checkpoint record {seq} names no tree")));
        }
        if self.records.iter().any(|o| o.seq == r.seq || o.id == r.id) {
            return Err(invalid(format!(
                "checkpoint record {seq} ({}) is there twice",
                r.id
            )));
        }
        self.records.push(r);
        Ok(())
    }

    /// Whether object `h` is in the store already or was taken in.
    pub fn present(&self, h: &str) -> bool {
        self.received.contains(h) || self.objects.contains(h)
    }

    /// Checks that every tree and content the records reach is there, makes the
    /// objects durable, then writes the records (replacing any the session had in
    /// this store). Returns how many records it wrote.
    pub fn finish(mut self) -> Result<usize, BundleError> {
        self.records.sort_by_key(|r| r.seq);
        self.objects
            .rescan()
            .map_err(io_err("cannot open object store", &self.layout.dir))?;
        let mut seen: HashSet<String> = HashSet::new();
        let mut stack: Vec<String> = self.records.iter().map(|r| r.root.clone()).collect();
        while let Some(t) = stack.pop() {
            if !seen.insert(t.clone()) {
                continue;
            }
            if !self.present(&t) {
                return Err(invalid(format!("tree {t} is missing")));
            }
            let bytes = self
                .objects
                .get(&t)
                .map_err(|e| invalid(format!("tree {t}: {e}")))?;
            let nodes = decode(&bytes).map_err(|e| invalid(format!("tree {t}: {e}")))?;
            for n in nodes {
                match (&n.entry.kind, n.subtree) {
                    (Kind::Dir, Some(sub)) => stack.push(sub),
                    (Kind::File { hash }, _) if !self.present(hash) => {
                        return Err(invalid(format!(
                            "the content of {:?} ({hash}) is missing",
                            n.name
                        )));
                    }
                    _ => {}
                }
            }
        }
        let dir = self.layout.dir.clone();
        self.objects
            .commit()
            .map_err(io_err("cannot store checkpoint objects", &dir))?;
        let session_dir = self.layout.session(&self.session);
        for old in self.layout.record_paths(&self.session).unwrap_or_default() {
            let _ = fs::remove_file(old);
        }
        fs::create_dir_all(&session_dir)
            .map_err(io_err("cannot create checkpoint session", &session_dir))?;
        for r in &self.records {
            let path = self.layout.record_path(&self.session, r.seq);
            let body = serde_json::to_vec(r).map_err(|e| invalid(e.to_string()))?;
            write_atomic(&path, &body).map_err(io_err("cannot write checkpoint", &path))?;
        }
        self.finished = true;
        Ok(self.records.len())
    }
}
