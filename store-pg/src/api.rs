//! [`AsyncStore`]: the draft of the kernel's async, backend-neutral store interface.
//!
//! The kernel's `Store` trait today is synchronous and knows one node. This trait is
//! what a store shared by several nodes needs, written so that the file and memory
//! stores can implement it too (then the same conformance suite,
//! `crate::conformance`, runs against every backend). Until the kernel adopts it, it
//! lives here and [`crate::PgStore`] implements it.
//!
//! # The rules every backend keeps
//!
//! - **Durable before delivered.** When [`AsyncStore::append_batch`] returns `Ok`, the
//!   events are committed: a crash of the process (or, for PostgreSQL, of the database
//!   server) cannot lose them. The kernel delivers an event to a host only after that.
//!   A batch is all or nothing.
//! - **Append-only, one entry per envelope**, unique by (session, `requestId`,
//!   `sequence`); events are read back in the order they were appended.
//! - **Fencing.** Every write of a session's data (events, state, checkpoint objects
//!   and manifests) carries the [`Epoch`] of the writer's lease, and the store refuses
//!   it, in the same atomic step as the write, unless that epoch is the session's
//!   current one and the lease is live (not expired by the store's clock, not
//!   released). A refused write is an error of kind
//!   [`StoreErrorKind::Fenced`](crate::error::StoreErrorKind::Fenced) and changes
//!   nothing. A writer that was paused past its lease's end therefore writes nothing
//!   when it wakes, whatever it believes.
//! - **Leases.** [`AsyncStore::acquire_lease`] succeeds when the session has no live
//!   lease (none yet, released, expired) or its owner asks again, and always returns
//!   a higher epoch than any before it for that session.
//! - **Errors** are [`ErrorPayload`]s with stable codes and `details.reason`
//!   ([`crate::error`]); nothing panics on input from outside.

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use keel_envelope::{Envelope, ErrorPayload};
use serde::{Deserialize, Serialize};

pub use keel_envelope::types::Cursor;
pub use keel_kernel::store::{LoadedLog, PersistedSession};
pub use keel_kernel::summary::SessionSummary;

/// A lease's fencing epoch: 1 for a session's first lease, then higher at every
/// acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Epoch(pub u64);

impl std::fmt::Display for Epoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A lease this node holds on a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The session.
    pub session_id: String,
    /// Who holds it (a node id).
    pub owner: String,
    /// Its fencing epoch.
    pub epoch: Epoch,
    /// How long it lasts after each acquisition or renewal.
    pub ttl: Duration,
}

/// Who holds a session's lease, as the store sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The owner.
    pub owner: String,
    /// The epoch.
    pub epoch: Epoch,
    /// Whether the lease is live (not past its end by the store's clock).
    pub live: bool,
    /// How long it has left (zero when expired).
    pub remaining: Duration,
}

/// What [`AsyncStore::acquire_lease`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseOutcome {
    /// The lease is ours.
    Acquired(Lease),
    /// Another owner holds a live lease.
    Held(LeaseInfo),
}

/// One checkpoint object: file content, addressed by the hex SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointObject {
    /// Lowercase hex SHA-256 of `bytes` (64 characters).
    pub hash: String,
    /// The content.
    pub bytes: Vec<u8>,
}

impl CheckpointObject {
    /// An object of `bytes`, its hash computed.
    pub fn of(bytes: Vec<u8>) -> Self {
        Self {
            hash: crate::objects::hash(&bytes),
            bytes,
        }
    }
}

/// One checkpoint's record: what the checkpoint engine writes per checkpoint, and the
/// objects it needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// 1 for the baseline, then 2, 3, … (unique per session).
    pub seq: u64,
    /// The record, as the checkpoint engine wrote it.
    pub body: serde_json::Value,
    /// The hashes of the objects it refers to; each must be stored already.
    pub objects: Vec<String>,
}

/// Where a [`AsyncStore::tail`] starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailFrom {
    /// With the session's first event.
    Start,
    /// After this event (it must be in the log).
    After(Cursor),
    /// With the next event appended.
    Now,
}

/// A session's events, in log order, as they are committed: the stored ones first
/// (from the tail's start), then the live ones. It ends when the session is deleted.
pub type EventTail = BoxStream<'static, Result<Envelope, ErrorPayload>>;

/// Where sessions are kept, by one node or by several sharing it. See the [module
/// documentation](self) for the rules every implementation keeps.
#[async_trait]
pub trait AsyncStore: Send + Sync + std::fmt::Debug {
    /// Appends one event to the session's log, fenced by `epoch`.
    async fn append(
        &self,
        session_id: &str,
        epoch: Epoch,
        event: &Envelope,
    ) -> Result<(), ErrorPayload> {
        self.append_batch(session_id, epoch, std::slice::from_ref(event))
            .await
    }

    /// Appends events in one atomic step (a group commit: a request's events that no
    /// host has seen yet), fenced by `epoch`. Appending a batch again after an error
    /// whose outcome was unknown is safe: events already stored with the same
    /// `eventId`s are not stored twice.
    async fn append_batch(
        &self,
        session_id: &str,
        epoch: Epoch,
        events: &[Envelope],
    ) -> Result<(), ErrorPayload>;

    /// The whole log, in append order (empty for an unknown session).
    async fn load_events(&self, session_id: &str) -> Result<LoadedLog, ErrorPayload>;

    /// The events logged after `after`; a cursor that is not in the log is
    /// `REQUEST_INVALID`.
    async fn events_after(
        &self,
        session_id: &str,
        after: &Cursor,
    ) -> Result<Vec<Envelope>, ErrorPayload>;

    /// Saves the session's state (its history included), fenced by `epoch`.
    async fn save_state(&self, epoch: Epoch, state: &PersistedSession) -> Result<(), ErrorPayload>;

    /// The saved state, or `None` when none was saved.
    async fn load_state(&self, session_id: &str) -> Result<Option<PersistedSession>, ErrorPayload>;

    /// Every saved session's summary, most recently updated first.
    async fn list_summaries(&self) -> Result<Vec<SessionSummary>, ErrorPayload>;

    /// Removes everything of a session (state, log, lease, manifests; objects no
    /// other session refers to); `Ok(false)` when nothing was stored under that id.
    async fn delete(&self, session_id: &str) -> Result<bool, ErrorPayload>;

    /// Stores checkpoint objects for the session (each content once in the whole
    /// store), fenced by `epoch`; answers how many were new. An object whose bytes do
    /// not match its hash is refused.
    async fn put_objects(
        &self,
        session_id: &str,
        epoch: Epoch,
        objects: &[CheckpointObject],
    ) -> Result<usize, ErrorPayload>;

    /// Whether each object is stored, in the order asked.
    async fn has_objects(&self, hashes: &[String]) -> Result<Vec<bool>, ErrorPayload>;

    /// An object's bytes, or `None`.
    async fn get_object(&self, hash: &str) -> Result<Option<Vec<u8>>, ErrorPayload>;

    /// Records a checkpoint of the session, fenced by `epoch`. Every object it names
    /// must be stored (else `object_missing`, `details.missing`). Recording the same
    /// manifest again is a no-op; another one under a taken `seq` is refused.
    async fn put_manifest(
        &self,
        session_id: &str,
        epoch: Epoch,
        manifest: &Manifest,
    ) -> Result<(), ErrorPayload>;

    /// The session's manifests, by `seq`.
    async fn manifests(&self, session_id: &str) -> Result<Vec<Manifest>, ErrorPayload>;

    /// Takes the session's lease for `owner` for `ttl`, creating the session's entry
    /// when there is none. See the module documentation.
    async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseOutcome, ErrorPayload>;

    /// Extends a live lease by its ttl from now; fenced when it is no longer live or
    /// no longer ours.
    async fn renew_lease(&self, lease: &Lease) -> Result<(), ErrorPayload>;

    /// Gives the lease up (the epoch stays; the next acquisition is higher);
    /// `Ok(false)` when it was not ours any more.
    async fn release_lease(&self, lease: &Lease) -> Result<bool, ErrorPayload>;

    /// Who holds the session's lease (live or expired), or `None` when nobody does.
    async fn lease_owner(&self, session_id: &str) -> Result<Option<LeaseInfo>, ErrorPayload>;

    /// The session's events from `from` on, then live as they are committed (by this
    /// node or any other). A session with no entry is `SESSION_NOT_FOUND`.
    async fn tail(&self, session_id: &str, from: TailFrom) -> Result<EventTail, ErrorPayload>;

    /// Makes sure everything written so far reached the storage.
    async fn flush(&self) -> Result<(), ErrorPayload> {
        Ok(())
    }
}
