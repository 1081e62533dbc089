//! The checkpoints of a session's `write` extra roots: one engine per root
//! (`keel_tools::checkpoint`, in that root's own store under the same checkpoint
//! directory), taking every checkpoint the workspace's engine takes, with the same id
//! and the same record. A rewind restores each root to the same id, after making
//! sure each holds the rewind's undo point, so undoing it puts the roots back too.
//! Paths in these roots are reported absolute (as the tools name them).
//!
//! A root added later (`session.resume {additionalRoots}`) has no checkpoint from
//! before: a rewind to such a point leaves it as it is and says so (one
//! `notRestorable` entry naming the root). `read` roots are never recorded: the
//! session does not change them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use keel_tools::checkpoint::{
    CheckpointConfig, CheckpointError, Checkpoints, FileChange, ForeignChange, NotRestorable,
    RestoreReport,
};

/// One `write` root's engine.
#[derive(Debug)]
struct Extra {
    root: PathBuf,
    engine: Option<Checkpoints>,
    /// Why there is no engine.
    why: Option<String>,
    /// Opening failed and no checkpoint has told it yet: (why, the disk is full).
    untold: Option<(String, bool)>,
}

/// The engines of a session's `write` roots.
#[derive(Debug, Default)]
pub(crate) struct Extras {
    list: Vec<Extra>,
}

fn abs(root: &Path, rel: &str) -> String {
    root.join(rel).display().to_string()
}

fn named(root: &Path, e: &CheckpointError) -> String {
    format!("extra root {}: {e}", root.display())
}

impl Extras {
    /// Opens an engine for each root of `roots` not open yet, in the store directory
    /// `dir` (none: no engines), and closes those of roots that are gone.
    pub(crate) fn sync(&mut self, roots: &[PathBuf], session_id: &str, dir: Option<&Path>) {
        if self.list.len() == roots.len() && self.list.iter().zip(roots).all(|(e, r)| e.root == *r)
        {
            return;
        }
        let mut old = std::mem::take(&mut self.list);
        for root in roots {
            if let Some(i) = old.iter().position(|e| e.root == *root) {
                self.list.push(old.swap_remove(i));
                continue;
            }
            let mut extra = Extra {
                root: root.clone(),
                engine: None,
                why: None,
                untold: None,
            };
            match dir {
                None => {
                    extra.why = Some("the session store keeps no files".into());
                }
                Some(dir) => {
                    match Checkpoints::open(root, dir, session_id, CheckpointConfig::default()) {
                        Ok(e) => extra.engine = Some(e),
                        Err(e) => {
                            let why = named(root, &e);
                            extra.untold = Some((why.clone(), e.is_disk_full()));
                            extra.why = Some(why);
                        }
                    }
                }
            }
            self.list.push(extra);
        }
    }

    /// Records checkpoint `id` with `meta` in every root; what failed (why, the disk
    /// is full), each told once. A root over the file limit takes no more.
    pub(crate) fn record(&mut self, id: &str, meta: &serde_json::Value) -> Vec<(String, bool)> {
        let mut failed = Vec::new();
        for x in &mut self.list {
            let Some(engine) = x.engine.as_mut() else {
                if let Some(u) = x.untold.take() {
                    failed.push(u);
                }
                continue;
            };
            match engine.checkpoint(id, meta.clone()) {
                Ok(_) | Err(CheckpointError::DuplicateId(_)) => {}
                Err(e @ CheckpointError::TooManyFiles { .. }) => {
                    let why = named(&x.root, &e);
                    x.engine = None;
                    x.why = Some(why.clone());
                    failed.push((why, false));
                }
                Err(e) => failed.push((named(&x.root, &e), e.is_disk_full())),
            }
        }
        failed
    }

    /// For each checkpoint id, what changed in the roots after it (until the next
    /// checkpoint, or until now for the last one), with absolute paths.
    pub(crate) fn changes_after(&mut self) -> HashMap<String, Vec<FileChange>> {
        let mut out: HashMap<String, Vec<FileChange>> = HashMap::new();
        for x in &mut self.list {
            let Some(engine) = x.engine.as_mut() else {
                continue;
            };
            let pending = if engine.list().is_empty() {
                Vec::new()
            } else {
                engine.pending_changes().unwrap_or_default()
            };
            let infos = engine.list();
            for (i, info) in infos.iter().enumerate() {
                let after = infos.get(i + 1).map_or(&pending[..], |n| &n.changed[..]);
                out.entry(info.id.clone())
                    .or_default()
                    .extend(after.iter().map(|c| FileChange {
                        path: abs(&x.root, &c.path),
                        change: c.change,
                    }));
            }
        }
        out
    }

    /// Before a rewind to `target`: every root holding `target` records its files as
    /// they are now as checkpoint `undo` (the rewind's undo point), unless it holds
    /// that id already. A failure stops the rewind before anything is restored.
    pub(crate) fn record_undo(
        &mut self,
        target: &str,
        undo: &str,
        meta: &serde_json::Value,
    ) -> Result<(), CheckpointError> {
        for x in &mut self.list {
            let Some(engine) = x.engine.as_mut() else {
                continue;
            };
            let has = |id: &str| engine.list().iter().any(|i| i.id == id);
            if has(target) && !has(undo) {
                match engine.checkpoint(undo, meta.clone()) {
                    Ok(_) | Err(CheckpointError::DuplicateId(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Restores every root to `target`, adding what was done to `report` (absolute
    /// paths); a root without that checkpoint (added later, or not recorded) is left
    /// as it is, named in `notRestorable`.
    pub(crate) fn restore(&mut self, target: &str, report: &mut RestoreReport) {
        for x in &mut self.list {
            let reason = match x.engine.as_mut() {
                Some(engine) if engine.list().iter().any(|i| i.id == target) => {
                    match engine.restore(target) {
                        Ok(r) => {
                            report.files.extend(r.files.into_iter().map(|mut f| {
                                f.path = abs(&x.root, &f.path);
                                f
                            }));
                            report
                                .not_restorable
                                .extend(r.not_restorable.into_iter().map(|mut n| {
                                    n.path = abs(&x.root, &n.path);
                                    n
                                }));
                            continue;
                        }
                        Err(e) => format!("the extra root was not rewound: {e}"),
                    }
                }
                Some(_) => "the extra root has no checkpoint from that point (it was added later); it was left as it is".to_owned(),
                None => format!(
                    "the extra root has no checkpoints ({}); it was left as it is",
                    x.why.as_deref().unwrap_or("not recorded")
                ),
            };
            report.not_restorable.push(NotRestorable {
                path: x.root.display().to_string(),
                reason,
            });
        }
    }

    /// What other sessions' checkpoints of the roots recorded as changed after
    /// `target` (absolute paths).
    pub(crate) fn changed_by_others_since(&self, target: &str) -> Vec<ForeignChange> {
        let mut out = Vec::new();
        for x in &self.list {
            let Some(engine) = x.engine.as_ref() else {
                continue;
            };
            if !engine.list().iter().any(|i| i.id == target) {
                continue;
            }
            for mut c in engine.changed_by_others_since(target).unwrap_or_default() {
                c.path = abs(&x.root, &c.path);
                out.push(c);
            }
        }
        out
    }
}
