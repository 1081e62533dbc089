//! Every workspace's store under one directory ([`CheckpointHome`]), their size, and
//! pruning: dropping checkpoints by age and by size, deleting sessions, and removing
//! the objects no checkpoint reaches any more.
//!
//! Garbage collection is a mark and sweep from the live records, not reference counts
//! kept on disk: a count is one more thing a crash can leave wrong (an object freed
//! while still used, or never freed), while the records are the truth that every
//! writer already makes durable before it counts. It runs under the store's exclusive
//! lock, so no writer is between writing objects and writing the record that names
//! them. Step by step, each safe to be cut short by a crash:
//!
//! 1. the generation is raised, so open engines reload what they cached;
//! 2. the dropped records are removed (their objects are garbage from then on);
//! 3. the objects every remaining record (and the store's head) reaches are marked;
//!    in memory, counts of references between trees tell what dropping one more
//!    checkpoint would free, to meet the size limit without marking again;
//! 4. packs holding dead objects, and small packs, are rewritten: the live objects
//!    are copied (each checked against its hash) into a new pack, which reaches the
//!    disk with its index before the old packs' indexes, then the old packs, go.
//!
//! A crash leaves at worst an object in two packs or a pack without an index: both
//! are harmless and the next collection removes them.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::engine::{store_dir_of, Checkpoints};
use super::objects::{hash, indexed_packs, read_at, read_index, sync_dir, write_pack, Objects};
use super::store::{read_record, Layout};
use super::tree::decode;
use super::{io_err, CheckpointConfig, CheckpointError};

/// Objects of one pack kept by a collection: (hash, offset, length).
type Keep = Vec<(String, u64, u64)>;

/// Packs smaller than this are merged into one when a collection runs.
const SMALL_PACK: u64 = 1 << 20;

/// What pruning may drop.
#[derive(Debug, Clone, Default)]
pub struct PruneRules {
    /// Drop the oldest checkpoints until all stores together hold at most this much.
    pub max_bytes: Option<u64>,
    /// Drop checkpoints older than this.
    pub max_age: Option<Duration>,
    /// Sessions none of whose checkpoints may be dropped (a request is running).
    pub pinned: HashSet<String>,
    /// Sessions open now: their checkpoints go only after every closed session's
    /// (a session some process holds open counts as open too).
    pub open: HashSet<String>,
    /// Sessions deleted: all their checkpoints go.
    pub delete_sessions: HashSet<String>,
    /// The time to judge ages by (ms since the epoch); default: now.
    pub now_ms: Option<u64>,
}

/// One dropped checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DroppedCheckpoint {
    /// The workspace it was of.
    pub workspace: Option<PathBuf>,
    /// Its session.
    pub session_id: String,
    /// Its id.
    pub checkpoint_id: String,
    /// When it was taken (ms since the epoch).
    pub created_ms: u64,
}

/// What pruning did, or would do (a dry run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PruneReport {
    /// Nothing was changed.
    pub dry_run: bool,
    /// Checkpoints dropped, oldest first.
    pub dropped: Vec<DroppedCheckpoint>,
    /// Bytes the stores held before.
    pub bytes_before: u64,
    /// Bytes they hold after (a dry run: an estimate).
    pub bytes_after: u64,
    /// Sessions left with no checkpoint, whose directories went.
    pub sessions_removed: Vec<String>,
    /// Objects or records found damaged (they are left out).
    pub damaged: Vec<String>,
}

impl PruneReport {
    /// Bytes freed (or that would be).
    pub fn bytes_freed(&self) -> u64 {
        self.bytes_before.saturating_sub(self.bytes_after)
    }
}

/// One workspace's store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreUsage {
    /// The workspace, as noted in the store.
    pub workspace: Option<PathBuf>,
    /// The store's directory.
    pub dir: PathBuf,
    /// Bytes of its files.
    pub bytes: u64,
    /// Sessions with checkpoints.
    pub sessions: usize,
    /// Checkpoints.
    pub checkpoints: usize,
}

/// The directory holding one store per workspace (`KEEL_HOME/checkpoints`).
#[derive(Debug, Clone)]
pub struct CheckpointHome {
    root: PathBuf,
}

impl CheckpointHome {
    /// The stores under `root` (nothing is created yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        CheckpointHome { root: root.into() }
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the store of `workspace` is (or would be).
    pub fn store_dir(&self, workspace: &Path) -> Result<PathBuf, CheckpointError> {
        store_dir_of(&self.root, workspace).map_err(io_err("cannot open workspace", workspace))
    }

    /// Opens the checkpoints of session `session_id` of `workspace`.
    pub fn open(
        &self,
        workspace: &Path,
        session_id: &str,
        config: CheckpointConfig,
    ) -> Result<Checkpoints, CheckpointError> {
        Checkpoints::open(workspace, &self.root, session_id, config)
    }

    fn stores(&self) -> Result<Vec<Layout>, CheckpointError> {
        let mut out = Vec::new();
        let rd = match fs::read_dir(&self.root) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io_err("cannot list checkpoint stores", &self.root)(e)),
        };
        for e in rd {
            let e = e.map_err(io_err("cannot list checkpoint stores", &self.root))?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                out.push(Layout { dir: e.path() });
            }
        }
        out.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(out)
    }

    /// Each store's size and contents.
    pub fn usage(&self) -> Result<Vec<StoreUsage>, CheckpointError> {
        let mut out = Vec::new();
        for l in self.stores()? {
            let mut sessions = 0;
            let mut checkpoints = 0;
            for s in l.session_ids().unwrap_or_default() {
                let n = l.record_paths(&s).map(|p| p.len()).unwrap_or(0);
                sessions += usize::from(n > 0);
                checkpoints += n;
            }
            out.push(StoreUsage {
                workspace: l.workspace(),
                bytes: dir_bytes(&l.dir),
                dir: l.dir,
                sessions,
                checkpoints,
            });
        }
        Ok(out)
    }

    /// The bytes every store holds.
    pub fn total_bytes(&self) -> u64 {
        dir_bytes(&self.root)
    }

    /// Reads every object each checkpoint (and each store's head) reaches, checking
    /// it against its hash; returns what is missing or damaged (empty: all sound).
    /// Files recorded by git blob id are not read.
    pub fn verify(&self) -> Result<Vec<String>, CheckpointError> {
        let mut damaged = Vec::new();
        for l in self.stores()? {
            let plan = Plan::build(&l)?;
            let mut objects =
                Objects::open(&l.packs()).map_err(io_err("cannot open object store", &l.dir))?;
            for h in plan.refs.keys().filter(|h| !plan.edges.contains_key(*h)) {
                if let Err(e) = objects.get(h) {
                    damaged.push(format!("{}: object {h}: {e}", l.dir.display()));
                }
            }
            damaged.extend(plan.damaged);
        }
        Ok(damaged)
    }

    /// Drops checkpoints by `rules` in every store, then removes what no checkpoint
    /// reaches. A dry run changes nothing and says what would go.
    pub fn prune(&self, rules: &PruneRules, dry_run: bool) -> Result<PruneReport, CheckpointError> {
        let layouts = self.stores()?;
        prune_layouts(&layouts, rules, dry_run, &mut |_| {})
    }

    /// Deletes every checkpoint of `session_id` and what only it used.
    pub fn delete_session(
        &self,
        session_id: &str,
        dry_run: bool,
    ) -> Result<PruneReport, CheckpointError> {
        let rules = PruneRules {
            delete_sessions: HashSet::from([session_id.to_string()]),
            ..PruneRules::default()
        };
        self.prune(&rules, dry_run)
    }
}

/// [`CheckpointHome::prune`] on the one store in `dir`, calling `hook` with the name
/// of each step of the sweep as it starts (tests stop the process there).
pub fn prune_store_with_hook(
    dir: &Path,
    rules: &PruneRules,
    dry_run: bool,
    hook: &mut dyn FnMut(&str),
) -> Result<PruneReport, CheckpointError> {
    prune_layouts(
        &[Layout {
            dir: dir.to_path_buf(),
        }],
        rules,
        dry_run,
        hook,
    )
}

/// The bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

struct Rec {
    session: String,
    path: PathBuf,
    id: String,
    created_ms: u64,
    root: String,
    bytes: u64,
    dropped: bool,
}

/// One store, locked, with its objects' reference graph.
struct Plan {
    layout: Layout,
    _lock: nix::fcntl::Flock<fs::File>,
    records: Vec<Rec>,
    refs: HashMap<String, u32>,
    edges: HashMap<String, Vec<String>>,
    size: HashMap<String, u64>,
    live: u64,
    before: u64,
    damaged: Vec<String>,
}

impl Plan {
    fn build(layout: &Layout) -> Result<Plan, CheckpointError> {
        let dir = &layout.dir;
        let lock = layout
            .lock(true)
            .map_err(io_err("cannot lock checkpoint store", dir))?;
        let mut objects =
            Objects::open(&layout.packs()).map_err(io_err("cannot open object store", dir))?;
        let mut size = HashMap::new();
        for stem in indexed_packs(&layout.packs()).map_err(io_err("cannot list packs", dir))? {
            if let Ok(idx) = read_index(&layout.packs(), &stem) {
                for (h, _, len) in idx.objects {
                    size.entry(h).or_insert(len);
                }
            }
        }
        let mut plan = Plan {
            layout: layout.clone(),
            _lock: lock,
            records: Vec::new(),
            refs: HashMap::new(),
            edges: HashMap::new(),
            size,
            live: 0,
            before: dir_bytes(dir),
            damaged: Vec::new(),
        };
        let sessions = layout
            .session_ids()
            .map_err(io_err("cannot list sessions", dir))?;
        let mut roots = Vec::new();
        for s in sessions {
            for path in layout.record_paths(&s).unwrap_or_default() {
                match read_record(&path) {
                    Ok(r) => {
                        roots.push(r.root.clone());
                        plan.records.push(Rec {
                            session: s.clone(),
                            bytes: fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
                            path,
                            id: r.id,
                            created_ms: r.created_ms,
                            root: r.root,
                            dropped: false,
                        });
                    }
                    Err(reason) => plan.damaged.push(format!("{}: {reason}", path.display())),
                }
            }
        }
        roots.extend(layout.head());
        // Mark: every tree once; references counted per edge.
        let mut stack = Vec::new();
        for r in &roots {
            *plan.refs.entry(r.clone()).or_default() += 1;
            stack.push(r.clone());
        }
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(h) = stack.pop() {
            if !seen.insert(h.clone()) {
                continue;
            }
            let nodes = match objects.get(&h) {
                Ok(bytes) => match decode(&bytes) {
                    Ok(n) => n,
                    Err(e) => {
                        plan.damaged.push(format!("tree {h}: {e}"));
                        continue;
                    }
                },
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        || e.kind() == io::ErrorKind::InvalidData =>
                {
                    plan.damaged.push(format!("tree {h}: {e}"));
                    continue;
                }
                Err(e) => return Err(io_err("cannot read a tree", dir)(e)),
            };
            let mut kids = Vec::new();
            for n in nodes {
                let child = match (&n.entry.kind, n.subtree) {
                    (_, Some(sub)) => {
                        stack.push(sub.clone());
                        sub
                    }
                    (super::manifest::Kind::File { hash }, None) => hash.clone(),
                    _ => continue,
                };
                *plan.refs.entry(child.clone()).or_default() += 1;
                kids.push(child);
            }
            plan.edges.insert(h, kids);
        }
        plan.live = plan
            .refs
            .keys()
            .filter_map(|h| plan.size.get(h))
            .sum::<u64>()
            + plan.records.iter().map(|r| r.bytes).sum::<u64>();
        Ok(plan)
    }

    /// Drops record `i` from the plan; the live size falls by what only it reached.
    fn drop_record(&mut self, i: usize) {
        if self.records[i].dropped {
            return;
        }
        self.records[i].dropped = true;
        self.live = self.live.saturating_sub(self.records[i].bytes);
        let mut stack = vec![self.records[i].root.clone()];
        while let Some(h) = stack.pop() {
            let Some(n) = self.refs.get_mut(&h) else {
                continue;
            };
            *n = n.saturating_sub(1);
            if *n > 0 {
                continue;
            }
            self.refs.remove(&h);
            self.live = self
                .live
                .saturating_sub(self.size.get(&h).copied().unwrap_or(0));
            if let Some(kids) = self.edges.get(&h) {
                stack.extend(kids.iter().cloned());
            }
        }
    }

    /// Carries out the plan.
    fn sweep(&mut self, hook: &mut dyn FnMut(&str)) -> Result<Vec<String>, CheckpointError> {
        let dir = self.layout.dir.clone();
        let err = |what: &'static str| io_err(what, &dir);
        hook("generation");
        self.layout
            .bump_generation()
            .map_err(err("cannot write the store's generation"))?;
        hook("records");
        let mut touched = HashSet::new();
        for r in self.records.iter().filter(|r| r.dropped) {
            match fs::remove_file(&r.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(err("cannot remove a checkpoint")(e)),
            }
            touched.insert(r.session.clone());
        }
        let mut removed = Vec::new();
        for s in touched {
            let sdir = self.layout.session(&s);
            sync_dir(&sdir);
            let empty = self
                .layout
                .record_paths(&s)
                .map(|p| p.is_empty())
                .unwrap_or(false);
            if empty && !self.layout.session_is_open(&s) && fs::remove_dir_all(&sdir).is_ok() {
                removed.push(s);
            }
        }
        sync_dir(&self.layout.sessions());
        hook("packs");
        let packs_dir = self.layout.packs();
        let stems = indexed_packs(&packs_dir).map_err(err("cannot list packs"))?;
        // Each live object is kept once: in a large pack that holds only live objects,
        // or copied into the new pack.
        let mut chosen: HashSet<String> = HashSet::new();
        let mut partial = Vec::new();
        let mut small = Vec::new();
        for stem in &stems {
            let Ok(idx) = read_index(&packs_dir, stem) else {
                partial.push((stem.clone(), Vec::new()));
                continue;
            };
            let keep: Vec<(String, u64, u64)> = idx
                .objects
                .iter()
                .filter(|(h, _, _)| self.refs.contains_key(h) && !chosen.contains(h))
                .cloned()
                .collect();
            chosen.extend(keep.iter().map(|k| k.0.clone()));
            if keep.len() < idx.objects.len() {
                partial.push((stem.clone(), keep));
            } else if idx.pack_len < SMALL_PACK {
                small.push((stem.clone(), keep));
            }
        }
        if partial.is_empty() && small.len() <= 1 {
            small.clear();
        }
        let rewrite: Vec<(String, Keep)> = partial.into_iter().chain(small).collect();
        let mut items = Vec::new();
        for (stem, keep) in &rewrite {
            for (h, off, len) in keep {
                match read_at(&packs_dir.join(format!("{stem}.pack")), *off, *len) {
                    Ok(bytes) if hash(&bytes) == *h => items.push((h.clone(), bytes)),
                    Ok(_) => self
                        .damaged
                        .push(format!("object {h}: does not match its hash")),
                    Err(e) => self.damaged.push(format!("object {h}: {e}")),
                }
            }
        }
        if !items.is_empty() {
            hook("write");
            write_pack(&packs_dir, &items).map_err(err("cannot write a pack"))?;
        }
        for (stem, _) in &rewrite {
            hook("remove");
            let _ = fs::remove_file(packs_dir.join(format!("{stem}.idx")));
            let _ = fs::remove_file(packs_dir.join(format!("{stem}.pack")));
        }
        hook("leftovers");
        // Packs without an index (a writer or a collection that died) and temporary
        // files: no writer runs while the exclusive lock is held.
        let indexed: HashSet<String> = indexed_packs(&packs_dir)
            .map_err(err("cannot list packs"))?
            .into_iter()
            .collect();
        if let Ok(rd) = fs::read_dir(&packs_dir) {
            for e in rd.flatten() {
                let name = e.file_name();
                let Some(name) = name.to_str() else { continue };
                let orphan = name
                    .strip_suffix(".pack")
                    .is_some_and(|stem| !indexed.contains(stem));
                if orphan || name.starts_with(".tmp-") {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        sync_dir(&packs_dir);
        hook("done");
        Ok(removed)
    }
}

fn prune_layouts(
    layouts: &[Layout],
    rules: &PruneRules,
    dry_run: bool,
    hook: &mut dyn FnMut(&str),
) -> Result<PruneReport, CheckpointError> {
    let mut plans = Vec::new();
    for l in layouts {
        plans.push(Plan::build(l)?);
    }
    let now = rules.now_ms.unwrap_or_else(now_ms);
    let age_limit = rules
        .max_age
        .map(|a| now.saturating_sub(u64::try_from(a.as_millis()).unwrap_or(u64::MAX)));
    // (plan, record, open?, created) of every record that may go.
    let mut candidates = Vec::new();
    for (pi, plan) in plans.iter_mut().enumerate() {
        for i in 0..plan.records.len() {
            let s = plan.records[i].session.clone();
            if rules.delete_sessions.contains(&s) {
                plan.drop_record(i);
                continue;
            }
            if rules.pinned.contains(&s) {
                continue;
            }
            if age_limit.is_some_and(|limit| plan.records[i].created_ms < limit) {
                plan.drop_record(i);
                continue;
            }
            let open = rules.open.contains(&s) || plan.layout.session_is_open(&s);
            candidates.push((open, plan.records[i].created_ms, pi, i));
        }
    }
    if let Some(max) = rules.max_bytes {
        candidates.sort();
        let mut next = candidates.into_iter();
        while plans.iter().map(|p| p.live).sum::<u64>() > max {
            let Some((_, _, pi, i)) = next.next() else {
                break;
            };
            plans[pi].drop_record(i);
        }
    }
    let mut report = PruneReport {
        dry_run,
        bytes_before: plans.iter().map(|p| p.before).sum(),
        ..PruneReport::default()
    };
    for plan in &plans {
        let workspace = plan.layout.workspace();
        for r in plan.records.iter().filter(|r| r.dropped) {
            report.dropped.push(DroppedCheckpoint {
                workspace: workspace.clone(),
                session_id: r.session.clone(),
                checkpoint_id: r.id.clone(),
                created_ms: r.created_ms,
            });
        }
    }
    report.dropped.sort_by_key(|d| d.created_ms);
    if dry_run {
        report.bytes_after = plans.iter().map(|p| p.live.min(p.before)).sum();
    } else {
        for plan in &mut plans {
            report.sessions_removed.extend(plan.sweep(hook)?);
        }
        report.bytes_after = plans.iter().map(|p| dir_bytes(&p.layout.dir)).sum();
    }
    for plan in plans {
        report.damaged.extend(plan.damaged);
    }
    Ok(report)
}
