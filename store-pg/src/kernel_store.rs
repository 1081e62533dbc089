//! [`PgKernelStore`]: the kernel's store interface (`keel_kernel::store::Store`) over
//! [`PgStore`], what `--store postgres://…` gives a kernel.
//!
//! The kernel's interface is synchronous: an event is appended, under the session's
//! emitter, before it is delivered, and that call returns only once the row is
//! committed. The PostgreSQL client is asynchronous and its connections belong to
//! the runtime that made them, so this store keeps a runtime of its own (two worker
//! threads): every call runs there, and the caller waits for it (inside a
//! multi-threaded tokio runtime through `block_in_place`, so the caller's other
//! tasks move to other workers meanwhile).
//!
//! Leases: [`Store::claim`] takes the session's lease for this node and remembers
//! its epoch; every append and save of the session carries that epoch, and the
//! database refuses it, in the statement that writes, once the lease is not this
//! node's live one (an error whose `details.reason` is `fenced`). A claim that finds
//! the lease held elsewhere answers [`Claim::Elsewhere`]; one that finds it run out
//! names the node it takes the session from ([`Owned::previous_owner`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use keel_envelope::types::Cursor;
use keel_envelope::{Envelope, ErrorCode, ErrorPayload};
use keel_kernel::ownership::{Claim, Owned, OwnerInfo, Tail};
use keel_kernel::store::{LoadedLog, PersistedSession, SharedCheckpoint, SharedCheckpoints, Store};
use keel_kernel::summary::SessionSummary;

use crate::api::{
    AsyncStore, CheckpointObject, Lease, LeaseInfo, LeaseOutcome, Manifest, TailFrom,
};
use crate::error::{store_error, StoreErrorKind};
use crate::options::PgOptions;
use crate::store::PgStore;

/// Events a tail holds for a slow reader before it waits.
const TAIL_BUFFER: usize = 1024;

/// The kernel's store over PostgreSQL: each call runs on the store's own runtime and
/// the caller waits for it; leases fence every write of a session.
pub struct PgKernelStore {
    pg: PgStore,
    rt: Mutex<Option<tokio::runtime::Runtime>>,
    handle: tokio::runtime::Handle,
    /// The leases this node holds, by session.
    leases: Mutex<HashMap<String, Lease>>,
}

impl std::fmt::Debug for PgKernelStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgKernelStore")
            .field("url", &self.pg.options().describe())
            .finish_non_exhaustive()
    }
}

impl Drop for PgKernelStore {
    fn drop(&mut self) {
        // Never blocks: the runtime may be dropped from inside another one.
        if let Some(rt) = self.rt.lock().unwrap_or_else(|p| p.into_inner()).take() {
            rt.shutdown_background();
        }
    }
}

/// Waits for `fut`, run on `handle`'s runtime, from any thread.
fn wait_on<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    fut: impl Future<Output = Result<T, ErrorPayload>> + Send + 'static,
) -> Result<T, ErrorPayload> {
    let task = handle.spawn(fut);
    let wait = move || {
        futures::executor::block_on(task).unwrap_or_else(|e| {
            Err(ErrorPayload::new(
                ErrorCode::RuntimeInternalError,
                format!("a PostgreSQL store operation failed inside the runtime: {e}"),
            ))
        })
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

impl PgKernelStore {
    /// Parses `url`, connects, runs the migrations (see [`PgStore::connect`]); waits
    /// for it from any thread.
    pub fn open(url: &str) -> Result<Self, ErrorPayload> {
        Self::connect(PgOptions::from_url(url)?)
    }

    /// Connects with `options`.
    pub fn connect(options: PgOptions) -> Result<Self, ErrorPayload> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("keel-store-pg")
            .enable_all()
            .build()
            .map_err(|e| {
                ErrorPayload::new(
                    ErrorCode::SessionPersistenceFailed,
                    format!("cannot start the PostgreSQL store's runtime: {e}"),
                )
            })?;
        let handle = rt.handle().clone();
        let pg = wait_on(&handle, PgStore::connect(options));
        let pg = match pg {
            Ok(pg) => pg,
            Err(e) => {
                rt.shutdown_background();
                return Err(e);
            }
        };
        Ok(Self {
            pg,
            rt: Mutex::new(Some(rt)),
            handle,
            leases: Mutex::new(HashMap::new()),
        })
    }

    /// The async store underneath.
    pub fn pg(&self) -> &PgStore {
        &self.pg
    }

    fn run<T: Send + 'static, F>(&self, op: impl FnOnce(PgStore) -> F) -> Result<T, ErrorPayload>
    where
        F: Future<Output = Result<T, ErrorPayload>> + Send + 'static,
    {
        wait_on(&self.handle, op(self.pg.clone()))
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lease>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lease this node holds on `session_id`, or the fenced error of a write
    /// without one.
    fn lease(&self, session_id: &str, what: &str) -> Result<Lease, ErrorPayload> {
        self.leases().get(session_id).cloned().ok_or_else(|| {
            store_error(
                StoreErrorKind::Fenced,
                format!(
                    "session {session_id}: refused to {what}: this node holds no lease on it \
                     (claim the session first)"
                ),
            )
            .with_detail("sessionId", session_id)
        })
    }

    /// Forgets the lease after a write it fenced.
    fn fenced<T>(&self, session_id: &str, r: Result<T, ErrorPayload>) -> Result<T, ErrorPayload> {
        if let Err(e) = &r {
            if crate::error::is_fenced(e) {
                self.leases().remove(session_id);
            }
        }
        r
    }
}

fn owner_info(l: LeaseInfo) -> OwnerInfo {
    OwnerInfo {
        owner: l.owner,
        epoch: l.epoch.0,
        live: l.live,
        remaining_ms: u64::try_from(l.remaining.as_millis()).unwrap_or(u64::MAX),
    }
}

impl Store for PgKernelStore {
    fn append(&self, session_id: &str, event: &Envelope) -> Result<(), ErrorPayload> {
        let lease = self.lease(session_id, "append an event")?;
        let (sid, event) = (session_id.to_owned(), event.clone());
        let r = self.run(move |pg| async move {
            pg.append_batch(&sid, lease.epoch, std::slice::from_ref(&event))
                .await
        });
        self.fenced(session_id, r)
    }

    fn append_batch(&self, session_id: &str, events: &[Envelope]) -> Result<(), ErrorPayload> {
        if events.is_empty() {
            return Ok(());
        }
        let lease = self.lease(session_id, "append events")?;
        let (sid, events) = (session_id.to_owned(), events.to_vec());
        let r =
            self.run(move |pg| async move { pg.append_batch(&sid, lease.epoch, &events).await });
        self.fenced(session_id, r)
    }

    fn save_state(&self, state: &PersistedSession) -> Result<(), ErrorPayload> {
        let lease = self.lease(&state.session_id, "save its state")?;
        let owned = state.clone();
        let r = self.run(move |pg| async move { pg.save_state(lease.epoch, &owned).await });
        self.fenced(&state.session_id, r)
    }

    fn load_state(&self, session_id: &str) -> Result<Option<PersistedSession>, ErrorPayload> {
        let sid = session_id.to_owned();
        self.run(move |pg| async move { pg.load_state(&sid).await })
    }

    fn load_events(&self, session_id: &str) -> Result<LoadedLog, ErrorPayload> {
        let sid = session_id.to_owned();
        self.run(move |pg| async move { pg.load_events(&sid).await })
    }

    fn list(&self) -> Result<Vec<PersistedSession>, ErrorPayload> {
        let mut out = Vec::new();
        for s in self.list_summaries()? {
            if let Some(state) = self.load_state(&s.session_id)? {
                out.push(state);
            }
        }
        Ok(out)
    }

    fn list_summaries(&self) -> Result<Vec<SessionSummary>, ErrorPayload> {
        self.run(|pg| async move { pg.list_summaries().await })
    }

    fn delete(&self, session_id: &str) -> Result<bool, ErrorPayload> {
        self.leases().remove(session_id);
        let sid = session_id.to_owned();
        self.run(move |pg| async move { AsyncStore::delete(&pg, &sid).await })
    }

    fn events_after(
        &self,
        session_id: &str,
        after: Option<&Cursor>,
    ) -> Result<Vec<Envelope>, ErrorPayload> {
        let sid = session_id.to_owned();
        match after.cloned() {
            None => Ok(self.load_events(session_id)?.events),
            Some(c) => self.run(move |pg| async move { pg.events_after(&sid, &c).await }),
        }
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn claim(&self, session_id: &str, owner: &str, ttl: Duration) -> Result<Claim, ErrorPayload> {
        let (sid, me) = (session_id.to_owned(), owner.to_owned());
        let (before, got) = self.run(move |pg| async move {
            // Who held it before, to name the node a takeover takes it from (the
            // epoch itself is decided by the acquisition alone).
            let before = pg.lease_owner(&sid).await?;
            let got = pg.acquire_lease(&sid, &me, ttl).await?;
            Ok((before, got))
        })?;
        match got {
            LeaseOutcome::Acquired(lease) => {
                let epoch = lease.epoch.0;
                self.leases().insert(session_id.to_owned(), lease);
                Ok(Claim::Owned(Owned {
                    epoch,
                    previous_owner: before.map(|b| b.owner).filter(|b| b != owner),
                }))
            }
            LeaseOutcome::Held(info) => Ok(Claim::Elsewhere(owner_info(info))),
        }
    }

    fn renew(&self, session_id: &str) -> Result<(), ErrorPayload> {
        let lease = self.lease(session_id, "renew its lease")?;
        let r = self.run(move |pg| async move { pg.renew_lease(&lease).await });
        self.fenced(session_id, r)
    }

    fn unclaim(&self, session_id: &str) -> Result<(), ErrorPayload> {
        let Some(lease) = self.leases().remove(session_id) else {
            return Ok(());
        };
        self.run(move |pg| async move { pg.release_lease(&lease).await.map(|_| ()) })
    }

    fn owner_of(&self, session_id: &str) -> Result<Option<OwnerInfo>, ErrorPayload> {
        let sid = session_id.to_owned();
        let info = self.run(move |pg| async move { pg.lease_owner(&sid).await })?;
        Ok(info.map(owner_info))
    }

    fn shared_checkpoints(&self) -> Option<&dyn SharedCheckpoints> {
        Some(self)
    }

    fn tail(&self, session_id: &str, after: Option<&Cursor>) -> Result<Option<Tail>, ErrorPayload> {
        let sid = session_id.to_owned();
        let from = after.cloned().map_or(TailFrom::Start, TailFrom::After);
        let mut stream = self.run(move |pg| async move { pg.tail(&sid, from).await })?;
        let (tx, rx) = tokio::sync::mpsc::channel(TAIL_BUFFER);
        self.handle.spawn(async move {
            loop {
                // Stops reading the database as soon as the reader is gone.
                let item = tokio::select! {
                    _ = tx.closed() => return,
                    item = stream.next() => item,
                };
                let Some(item) = item else { return };
                let failed = item.is_err();
                if tx.send(item).await.is_err() || failed {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }
}

/// Workspace checkpoints in the database (`keel_objects`, `keel_object_refs`,
/// `keel_checkpoints`), written under the lease this node holds on the session.
impl SharedCheckpoints for PgKernelStore {
    fn missing_objects(&self, hashes: &[String]) -> Result<Vec<String>, ErrorPayload> {
        let asked = hashes.to_vec();
        let held = self.run(move |pg| async move { pg.stored_objects(&asked).await })?;
        Ok(hashes
            .iter()
            .zip(held)
            .filter(|(_, held)| !held)
            .map(|(h, _)| h.clone())
            .collect())
    }

    fn put_objects(
        &self,
        session_id: &str,
        objects: &[(String, Vec<u8>)],
    ) -> Result<(), ErrorPayload> {
        let lease = self.lease(session_id, "store checkpoint objects")?;
        let sid = session_id.to_owned();
        let objects: Vec<CheckpointObject> = objects
            .iter()
            .map(|(hash, bytes)| CheckpointObject {
                hash: hash.clone(),
                bytes: bytes.clone(),
            })
            .collect();
        let r = self.run(move |pg| async move {
            pg.store_objects(&sid, lease.epoch, &objects)
                .await
                .map(drop)
        });
        self.fenced(session_id, r)
    }

    fn put_checkpoint(
        &self,
        session_id: &str,
        checkpoint: &SharedCheckpoint,
    ) -> Result<(), ErrorPayload> {
        let lease = self.lease(session_id, "record a checkpoint")?;
        let sid = session_id.to_owned();
        let manifest = Manifest {
            seq: checkpoint.seq,
            body: checkpoint.body.clone(),
            objects: checkpoint.objects.clone(),
        };
        let r = self
            .run(move |pg| async move { pg.record_manifest(&sid, lease.epoch, &manifest).await });
        self.fenced(session_id, r)
    }

    fn last_checkpoint(&self, session_id: &str) -> Result<u64, ErrorPayload> {
        let sid = session_id.to_owned();
        self.run(move |pg| async move { pg.last_manifest(&sid).await })
    }

    fn checkpoints(&self, session_id: &str) -> Result<Vec<SharedCheckpoint>, ErrorPayload> {
        let sid = session_id.to_owned();
        let manifests = self.run(move |pg| async move { pg.session_manifests(&sid).await })?;
        Ok(manifests
            .into_iter()
            .map(|m| SharedCheckpoint {
                seq: m.seq,
                body: m.body,
                objects: m.objects,
            })
            .collect())
    }

    fn objects(&self, hashes: &[String]) -> Result<Vec<(String, Vec<u8>)>, ErrorPayload> {
        let asked = hashes.to_vec();
        self.run(move |pg| async move { pg.objects_of(&asked).await })
    }
}
