//! A session's checkpoints carried, as they are taken, to a store that keeps them for
//! other machines (a database several nodes share), so that a node taking the
//! session over can rewind it and make its workspace again.
//!
//! [`CheckpointHome::carry_new`] hands out the records newer than the last one
//! carried, each after the objects it reaches that were not carried yet, in the same
//! form as an export ([`BundleItem`]): files recorded by git blob id go by content.
//! A [`Mirror`] remembers, for one session, what went already, so a checkpoint that
//! changed one file carries that file and the trees above it, not the tree again.
//! Taking them back is an [`Importer`](super::Importer), as for an export file.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::Path;

use super::bundle::{layout_of, sink_err, Exporter};
use super::store::{read_record, valid_session_id, Record};
use super::{io_err, BundleItem, BundleSummary, CheckpointError, CheckpointHome};

/// What of one session's checkpoints was carried: the newest record, and the trees
/// and objects that went with the records so far.
#[derive(Debug, Default)]
pub struct Mirror {
    carried: u64,
    /// Tree → the tree carried for it.
    memo: HashMap<String, String>,
    sent: HashSet<String>,
}

impl Mirror {
    /// A mirror of a session whose records up to `carried` are kept already (0: none).
    /// What they reached is not known: the next record carried lists every object it
    /// reaches.
    pub fn after(carried: u64) -> Self {
        Self {
            carried,
            ..Self::default()
        }
    }

    /// The newest record carried.
    pub fn carried(&self) -> u64 {
        self.carried
    }
}

/// The number in a record file's name (`00000012.json`).
fn seq_of(path: &Path) -> Option<u64> {
    path.file_stem()?.to_str()?.parse().ok()
}

impl CheckpointHome {
    /// Hands `sink` the records of session `session_id` of `workspace` newer than
    /// what `mirror` carried, oldest first, each after the objects it reaches that
    /// `mirror` did not carry yet. The mirror moves past each record the sink takes;
    /// when the sink or a read fails, it forgets what it carried (the next record
    /// then lists everything it reaches) and the error is returned.
    pub fn carry_new(
        &self,
        workspace: &Path,
        session_id: &str,
        mirror: &mut Mirror,
        sink: &mut dyn FnMut(BundleItem<'_>) -> io::Result<()>,
    ) -> Result<BundleSummary, CheckpointError> {
        if !valid_session_id(session_id) {
            return Err(CheckpointError::InvalidSessionId(session_id.to_owned()));
        }
        let layout = layout_of(&self.root_dir(), workspace);
        let newer = |paths: Vec<std::path::PathBuf>| -> Vec<std::path::PathBuf> {
            paths
                .into_iter()
                .filter(|p| seq_of(p).is_some_and(|s| s > mirror.carried))
                .collect()
        };
        let listed = newer(
            layout
                .record_paths(session_id)
                .map_err(io_err("cannot list checkpoints", &layout.dir))?,
        );
        if listed.is_empty() {
            return Ok(BundleSummary::default());
        }
        let _lock = layout
            .lock(false)
            .map_err(io_err("cannot lock checkpoint store", &layout.dir))?;
        let mut ex = Exporter::open(
            &layout,
            workspace,
            std::mem::take(&mut mirror.memo),
            std::mem::take(&mut mirror.sent),
            sink,
        )?;
        let mut records = 0;
        let mut outcome = Ok(());
        for path in listed {
            let record = match read_record(&path) {
                Ok(r) => r,
                // Dropped by a pruning since it was listed.
                Err(_) if !path.exists() => continue,
                Err(reason) => {
                    outcome = Err(CheckpointError::Corrupt { path, reason });
                    break;
                }
            };
            let seq = record.seq;
            let carried = ex.tree(&record.root).and_then(|root| {
                let body =
                    serde_json::to_vec(&Record { root, ..record }).map_err(io::Error::other)?;
                (ex.sink)(BundleItem::Record { seq, body: &body })
            });
            if let Err(e) = carried {
                outcome = Err(match e.kind() {
                    io::ErrorKind::NotFound | io::ErrorKind::InvalidData => {
                        CheckpointError::Corrupt {
                            path,
                            reason: e.to_string(),
                        }
                    }
                    _ => sink_err(e),
                });
                break;
            }
            mirror.carried = seq;
            records += 1;
        }
        if let Some(r) = ex.repo.as_mut() {
            r.close();
        }
        outcome?;
        mirror.memo = ex.memo;
        mirror.sent = ex.sent;
        Ok(BundleSummary {
            records,
            ..ex.summary
        })
    }

    /// The number of the newest checkpoint record session `session_id` has in the
    /// store of `workspace` (0: none).
    pub fn last_seq(&self, workspace: &Path, session_id: &str) -> u64 {
        if !valid_session_id(session_id) {
            return 0;
        }
        layout_of(&self.root_dir(), workspace)
            .record_paths(session_id)
            .ok()
            .and_then(|p| p.last().and_then(|p| seq_of(p)))
            .unwrap_or(0)
    }
}
