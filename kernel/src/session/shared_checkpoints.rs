//! A session's workspace checkpoints kept in a store several nodes share
//! ([`crate::store::Store::shared_checkpoints`], PostgreSQL), so that a node that
//! takes the session over can list them, rewind to them and make the workspace again
//! from them.
//!
//! **Carried as they are taken.** After each operation of the checkpoint book that
//! recorded a checkpoint (a request's, a tool call's, a rewind's undo point), the
//! records newer than the last one carried go to the store, each after the objects it
//! reaches that the session had not carried yet (`keel_tools::checkpoint::Mirror`):
//! their hashes are looked up first and only the contents the store lacks are sent
//! (each content is kept once in the whole store). The checkpoint stays on this
//! node's disk as before; a failure to carry it is a warning, and the next checkpoint
//! carries what is missing. Writes carry the epoch of the session's lease, so a node
//! whose lease ran out writes nothing.
//!
//! **Taken in when needed.** When a node opens a session's checkpoint book, or makes
//! its workspace again (`session.resume {materializeTo}`), and the store holds newer
//! checkpoints than the node's own store, they are taken in (records, and the objects
//! this node lacks) through the same checked importer as an export file.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::checkpoint::{BundleError, BundleItem, CheckpointError, CheckpointHome, Mirror};

use crate::base::store::{SharedCheckpoint, SharedCheckpoints, Store};

/// A batch of objects is looked up and sent once it holds this many bytes…
const BATCH_BYTES: usize = 4 << 20;
/// … or this many objects.
const BATCH_OBJECTS: usize = 512;
/// Objects read from the store per query when taking checkpoints in.
const FETCH_OBJECTS: usize = 256;

fn failed(what: &str, e: impl std::fmt::Display) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::SessionPersistenceFailed, format!("{what}: {e}"))
}

fn from_bundle(e: BundleError) -> ErrorPayload {
    let reason = match e {
        BundleError::Invalid(_) => "damaged",
        BundleError::Store(_) => "io",
    };
    failed("the shared store's checkpoints could not be taken in", e).with_detail("reason", reason)
}

fn from_checkpoint(e: CheckpointError) -> ErrorPayload {
    failed("the checkpoints could not be read", e)
}

/// Takes in the checkpoints of session `id` that `shared` holds into the store of
/// `workspace` under `home`, when the newest there is newer than this node's newest
/// (records, and the objects this node lacks). Answers how many records it wrote (0:
/// nothing newer). On the blocking pool.
pub fn pull_into(
    shared: &dyn SharedCheckpoints,
    home: &CheckpointHome,
    workspace: &Path,
    id: &str,
) -> Result<usize, ErrorPayload> {
    let theirs = shared.last_checkpoint(id)?;
    if theirs == 0 || theirs <= home.last_seq(workspace, id) {
        return Ok(0);
    }
    let checkpoints = shared.checkpoints(id)?;
    let mut imp = home
        .importer(workspace, id)
        .map_err(|e| from_bundle(e.into()))?;
    let mut wanted = Vec::new();
    let mut seen = HashSet::new();
    for c in &checkpoints {
        let body = serde_json::to_vec(&c.body).map_err(|e| failed("a checkpoint record", e))?;
        imp.record(c.seq, &body).map_err(from_bundle)?;
        for h in &c.objects {
            if seen.insert(h.as_str()) && !imp.present(h) {
                wanted.push(h.clone());
            }
        }
    }
    for chunk in wanted.chunks(FETCH_OBJECTS) {
        for (h, bytes) in shared.objects(chunk)? {
            imp.object(&h, &bytes).map_err(from_bundle)?;
        }
    }
    let n = imp.finish().map_err(from_bundle)?;
    tracing::info!(session_id = %id, records = n, objects = wanted.len(), "checkpoints taken in from the shared store");
    Ok(n)
}

/// Carries the records of session `id` of `workspace` (under `home`) that `mirror`
/// has not carried to `shared`: each after the objects it reaches that the mirror did
/// not carry yet, of which only those `shared` lacks are sent. Answers how many
/// records went. On the blocking pool.
pub fn carry(
    shared: &dyn SharedCheckpoints,
    home: &CheckpointHome,
    workspace: &Path,
    id: &str,
    mirror: &mut Mirror,
) -> Result<usize, ErrorPayload> {
    let mut batch = Batch::default();
    let mut refused: Option<ErrorPayload> = None;
    let carried = home.carry_new(workspace, id, mirror, &mut |item| {
        let sent = match item {
            BundleItem::Object { hash, bytes } => batch.object(shared, id, hash, bytes),
            BundleItem::Record { seq, body } => batch.record(shared, id, seq, body),
        };
        sent.map_err(|e| {
            let text = e.message.clone();
            refused = Some(e);
            std::io::Error::other(text)
        })
    });
    match (refused, carried) {
        (Some(e), _) => Err(e),
        (None, Err(e)) => Err(from_checkpoint(e)),
        (None, Ok(summary)) => Ok(summary.records),
    }
}

/// Objects on their way to the store, and the hashes the record being carried names.
#[derive(Default)]
struct Batch {
    objects: Vec<(String, Vec<u8>)>,
    bytes: usize,
    named: Vec<String>,
}

impl Batch {
    fn object(
        &mut self,
        shared: &dyn SharedCheckpoints,
        id: &str,
        hash: &str,
        bytes: &[u8],
    ) -> Result<(), ErrorPayload> {
        self.named.push(hash.to_owned());
        self.objects.push((hash.to_owned(), bytes.to_vec()));
        self.bytes += bytes.len();
        if self.bytes >= BATCH_BYTES || self.objects.len() >= BATCH_OBJECTS {
            self.flush(shared, id)?;
        }
        Ok(())
    }

    /// Sends the objects of the batch the store does not hold.
    fn flush(&mut self, shared: &dyn SharedCheckpoints, id: &str) -> Result<(), ErrorPayload> {
        if self.objects.is_empty() {
            return Ok(());
        }
        let hashes: Vec<String> = self.objects.iter().map(|(h, _)| h.clone()).collect();
        let missing: HashSet<String> = shared.missing_objects(&hashes)?.into_iter().collect();
        let send: Vec<(String, Vec<u8>)> = std::mem::take(&mut self.objects)
            .into_iter()
            .filter(|(h, _)| missing.contains(h))
            .collect();
        self.bytes = 0;
        if send.is_empty() {
            return Ok(());
        }
        shared.put_objects(id, &send)
    }

    fn record(
        &mut self,
        shared: &dyn SharedCheckpoints,
        id: &str,
        seq: u64,
        body: &[u8],
    ) -> Result<(), ErrorPayload> {
        self.flush(shared, id)?;
        let body = serde_json::from_slice(body).map_err(|e| failed("a checkpoint record", e))?;
        shared.put_checkpoint(
            id,
            &SharedCheckpoint {
                seq,
                body,
                objects: std::mem::take(&mut self.named),
            },
        )
    }
}

/// The carrying of one session's checkpoints to a shared store (held in the session's
/// checkpoint book beside its engine).
pub(crate) struct Sharing {
    store: Arc<dyn Store>,
    home: CheckpointHome,
    workspace: PathBuf,
    session: String,
    /// What was carried; `None` until the store was asked for its newest record (and
    /// after a failure).
    mirror: Option<Mirror>,
}

impl std::fmt::Debug for Sharing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharing")
            .field("session", &self.session)
            .field("carried", &self.mirror.as_ref().map(Mirror::carried))
            .finish_non_exhaustive()
    }
}

impl Sharing {
    /// For a store that keeps checkpoints for other nodes; `None` otherwise.
    pub(crate) fn new(
        store: &Arc<dyn Store>,
        home: &Path,
        workspace: &Path,
        session: &str,
    ) -> Option<Self> {
        store.shared_checkpoints()?;
        Some(Self {
            store: store.clone(),
            home: CheckpointHome::new(home),
            workspace: workspace.to_path_buf(),
            session: session.to_owned(),
            mirror: None,
        })
    }

    /// Takes in what the store holds newer than this node's checkpoints (see
    /// [`pull_into`]).
    pub(crate) fn pull(&self) -> Result<usize, ErrorPayload> {
        match self.store.shared_checkpoints() {
            Some(shared) => pull_into(shared, &self.home, &self.workspace, &self.session),
            None => Ok(0),
        }
    }

    /// Carries the records up to `newest` (the engine's newest) not carried yet.
    pub(crate) fn push(&mut self, newest: u64) -> Result<usize, ErrorPayload> {
        let Some(shared) = self.store.shared_checkpoints() else {
            return Ok(0);
        };
        let mirror = match &mut self.mirror {
            Some(m) => m,
            None => self
                .mirror
                .insert(Mirror::after(shared.last_checkpoint(&self.session)?)),
        };
        if newest <= mirror.carried() {
            return Ok(0);
        }
        let outcome = carry(shared, &self.home, &self.workspace, &self.session, mirror);
        if outcome.is_err() {
            // Asked again next time: the store says what it has.
            self.mirror = None;
        }
        outcome
    }
}
