//! Ownership of sessions in a store that several nodes share: claims (leases with a
//! fencing epoch), what the kernel knows of the lease it holds on each open session,
//! and the errors that say a session is served elsewhere or that a write was fenced.
//!
//! A store that one process uses alone (the file store, the memory store) answers
//! every claim with [`Claim::Local`]: nothing to renew, nothing to lose. A shared store
//! (PostgreSQL) answers [`Claim::Owned`] with an epoch, remembers it for the session,
//! and refuses, in the same atomic step as the write, every append or save of a
//! session whose lease is not this node's live one (an error whose `details.reason`
//! is [`FENCED`]).
//!
//! The kernel renews the leases of its open sessions (`crate::kernel::leases`) and
//! keeps, per session, a [`LeaseCell`]: the local deadline (when the last successful
//! renewal was *sent*, plus the TTL, so it never ends after the store's own), and
//! whether the lease is lost. A lost lease stops the session's work: its emitter
//! logs nothing more, no tool call starts, the running request ends with
//! `session.interrupted {reason: "lease_lost"}` (delivered to this node's clients,
//! not logged: the store refuses it), and the session leaves memory.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use keel_envelope::{Envelope, ErrorCode, ErrorPayload};

use crate::base::time::now_ms;

/// The `details.reason` of a write refused because its lease epoch is stale.
pub const FENCED: &str = "fenced";

/// Default of [`crate::KernelConfig::lease_ttl`].
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// What a claim on a session got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The store keeps no leases: one process uses it, the session is ours.
    Local,
    /// The lease is ours.
    Owned(Owned),
    /// Another node holds a live lease.
    Elsewhere(OwnerInfo),
}

/// A lease this node now holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    /// Its fencing epoch (higher than every earlier one of the session).
    pub epoch: u64,
    /// The node whose lease ran out and that this claim took the session from
    /// (`None` when the session was free: new, released, or ours already).
    pub previous_owner: Option<String>,
}

/// Who holds a session's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerInfo {
    /// The owner (a node id).
    pub owner: String,
    /// The lease's epoch.
    pub epoch: u64,
    /// Whether the lease is live by the store's clock.
    pub live: bool,
    /// How long it has left, ms (0 when it ran out).
    pub remaining_ms: u64,
}

/// Live events of a session read from a shared store (written by any node), in log
/// order; ends when the session is deleted or the store gives up.
pub type Tail = tokio::sync::mpsc::Receiver<Result<Envelope, ErrorPayload>>;

/// Whether `e` is a write refused by its fence.
pub fn is_fenced(e: &ErrorPayload) -> bool {
    e.code == ErrorCode::SessionPersistenceFailed
        && e.details.get("reason").and_then(|r| r.as_str()) == Some(FENCED)
}

/// The refusal of a command that needs the session while `owner` serves it.
pub fn owned_elsewhere(session_id: &str, owner: &OwnerInfo) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::SessionOwnedElsewhere,
        format!(
            "session {session_id} is served by node {:?} (lease epoch {}, {} ms left): \
             send the command to that node, or try again here once its lease runs out",
            owner.owner, owner.epoch, owner.remaining_ms
        ),
    )
    .category(keel_envelope::error::ErrorCategory::Business)
    .retryable(true)
    .with_detail("sessionId", session_id)
    .with_detail("owner", owner.owner.clone())
    .with_detail("epoch", owner.epoch)
    .with_detail("remainingMs", owner.remaining_ms)
}

/// What the kernel knows of its lease on one open session.
#[derive(Debug)]
pub struct LeaseCell {
    /// `None`: a local store (never lost).
    epoch: Option<u64>,
    ttl: Duration,
    /// Ms of [`now_ms`] after which the lease counts as lost here.
    deadline: AtomicU64,
    lost: AtomicBool,
    notify: tokio::sync::Notify,
    /// Also woken on a loss (the kernel's lease keeper).
    wake: Option<std::sync::Arc<tokio::sync::Notify>>,
}

impl LeaseCell {
    /// The cell of a session in a store without leases.
    pub fn local() -> Self {
        Self {
            epoch: None,
            ttl: Duration::ZERO,
            deadline: AtomicU64::new(u64::MAX),
            lost: AtomicBool::new(false),
            notify: tokio::sync::Notify::new(),
            wake: None,
        }
    }

    /// The cell of a lease of `epoch` for `ttl`, claimed by a request sent at
    /// `sent_at` (ms of `now_ms`); a loss also wakes `wake`.
    pub fn owned(
        epoch: u64,
        ttl: Duration,
        sent_at: u64,
        wake: std::sync::Arc<tokio::sync::Notify>,
    ) -> Self {
        let cell = Self {
            epoch: Some(epoch),
            ttl,
            deadline: AtomicU64::new(0),
            lost: AtomicBool::new(false),
            notify: tokio::sync::Notify::new(),
            wake: Some(wake),
        };
        cell.renewed(sent_at);
        cell
    }

    /// The epoch, `None` for a local store.
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// Whether there is a lease to renew.
    pub fn is_leased(&self) -> bool {
        self.epoch.is_some()
    }

    /// The lease's TTL.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A renewal sent at `sent_at` succeeded.
    pub fn renewed(&self, sent_at: u64) {
        let ttl = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        self.deadline
            .fetch_max(sent_at.saturating_add(ttl), Ordering::AcqRel);
    }

    /// Whether the lease still holds by this node's clock (and was not lost).
    pub fn is_live(&self) -> bool {
        if self.lost.load(Ordering::Acquire) {
            return false;
        }
        if self.epoch.is_none() {
            return true;
        }
        if now_ms() >= self.deadline.load(Ordering::Acquire) {
            self.lose();
            return false;
        }
        true
    }

    /// Whether the lease was lost.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Marks the lease lost (a fenced write, a failed renewal, the deadline passed);
    /// answers whether this call was the first to.
    pub fn lose(&self) -> bool {
        if self.epoch.is_none() {
            return false;
        }
        let first = !self.lost.swap(true, Ordering::AcqRel);
        if first {
            self.notify.notify_waiters();
            if let Some(w) = &self.wake {
                w.notify_one();
            }
        }
        first
    }

    /// Waits until the lease is lost.
    pub async fn lost(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_lost() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_cell_never_loses() {
        let c = LeaseCell::local();
        assert!(c.is_live());
        assert!(!c.lose());
        assert!(c.is_live());
    }

    #[test]
    fn an_owned_cell_is_lost_past_its_deadline_or_when_told() {
        let wake = std::sync::Arc::new(tokio::sync::Notify::new());
        let c = LeaseCell::owned(3, Duration::from_secs(60), now_ms(), wake.clone());
        assert!(c.is_live());
        assert!(c.lose());
        assert!(!c.lose());
        assert!(!c.is_live());
        let c = LeaseCell::owned(3, Duration::from_millis(1), now_ms(), wake);
        std::thread::sleep(Duration::from_millis(5));
        assert!(!c.is_live(), "a deadline in the past is a lost lease");
        assert!(c.is_lost());
    }

    #[test]
    fn the_refusal_names_the_owner() {
        let e = owned_elsewhere(
            "sess_1",
            &OwnerInfo {
                owner: "node-b".into(),
                epoch: 7,
                live: true,
                remaining_ms: 900,
            },
        );
        assert_eq!(e.code, ErrorCode::SessionOwnedElsewhere);
        assert!(e.retryable);
        assert_eq!(e.details["owner"], "node-b");
        assert_eq!(e.details["epoch"], 7);
    }
}

/// One workspace checkpoint of a session as a shared store keeps it: the record the
/// checkpoint engine wrote (its trees rewritten so that files recorded by git blob id
/// name their content) and the objects it names that the session had not named in an
/// earlier record.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedCheckpoint {
    /// 1 for the session's first checkpoint, then 2, 3, …
    pub seq: u64,
    /// The record (JSON).
    pub body: serde_json::Value,
    /// Lowercase hex SHA-256 of each object it names (each stored already).
    pub objects: Vec<String>,
}

/// What a store several nodes share keeps of workspace checkpoints, so that a node
/// that takes a session over can rewind it and make its workspace again: objects
/// (file contents and trees, by SHA-256, each content once in the store) and each
/// session's records. Writes are fenced like the session's events: they carry the
/// epoch of the lease this node holds on the session. Every call waits for the store.
pub trait SharedCheckpoints: Send + Sync {
    /// Which of `hashes` the store does not hold.
    fn missing_objects(&self, hashes: &[String]) -> Result<Vec<String>, ErrorPayload>;
    /// Stores objects (hash, bytes) for session `session_id`; an object whose bytes
    /// do not have its hash is refused.
    fn put_objects(
        &self,
        session_id: &str,
        objects: &[(String, Vec<u8>)],
    ) -> Result<(), ErrorPayload>;
    /// Records one checkpoint of session `session_id`; every object it names must be
    /// stored. Recording the same checkpoint again is a no-op.
    fn put_checkpoint(
        &self,
        session_id: &str,
        checkpoint: &SharedCheckpoint,
    ) -> Result<(), ErrorPayload>;
    /// The number of the session's newest checkpoint in the store (0: none).
    fn last_checkpoint(&self, session_id: &str) -> Result<u64, ErrorPayload>;
    /// The session's checkpoints, oldest first.
    fn checkpoints(&self, session_id: &str) -> Result<Vec<SharedCheckpoint>, ErrorPayload>;
    /// The objects of `hashes` that the store holds, (hash, bytes).
    fn objects(&self, hashes: &[String]) -> Result<Vec<(String, Vec<u8>)>, ErrorPayload>;
}
