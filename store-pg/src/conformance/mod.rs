//! The store conformance suite: one set of tests, written once against
//! [`AsyncStore`], that every backend runs. Each case takes an empty store.
//! [`conformance_tests!`](crate::conformance_tests) turns a factory into one
//! `#[tokio::test]` per case:
//!
//! ```ignore
//! async fn fresh() -> keel_store_pg::PgStore { /* an empty database */ }
//! keel_store_pg::conformance_tests!(fresh());
//! ```
//!
//! The cases: append and replay from a cursor; state, history and summaries; listing
//! 10,000 sessions; delete; checkpoint objects; leases (acquire, renew, release,
//! expiry → a new owner with a higher epoch, a stale epoch refused); fencing of every
//! write; tails. No case depends on timing: the lease expiry case waits, bounded, for
//! the expiry to happen.

use std::time::{Duration, Instant};

use futures::StreamExt;
use keel_envelope::events::AssistantDelta;
use keel_envelope::types::{ApprovalRules, PermissionMode, Usage};
use keel_envelope::{Envelope, ErrorCode, ErrorPayload, Event, Source};
use keel_kernel::model::Message;

use crate::api::{
    AsyncStore, CheckpointObject, Cursor, Epoch, EventTail, Lease, LeaseOutcome, Manifest,
    PersistedSession, TailFrom,
};
use crate::error::{kind_of, StoreErrorKind};

mod leases;
mod log;
mod objects;
mod state;

pub use leases::{fencing, lease_expiry, leases};
pub use log::{append_and_replay, tail};
pub use objects::{checkpoint_objects, delete};
pub use state::{state_history_and_summaries, ten_thousand_sessions};

/// One `#[tokio::test]` per conformance case; `$make` is an expression whose value is
/// a future of a fresh, empty store (evaluated once per test).
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr) => {
        $crate::conformance_tests!(@case $make;
            append_and_replay, state_history_and_summaries, ten_thousand_sessions, delete,
            checkpoint_objects, leases, lease_expiry, fencing, tail);
    };
    (@case $make:expr; $($case:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store = $make.await;
                $crate::conformance::$case(&store).await;
            }
        )*
    };
}

/// How long a case waits for something that must happen (a lease to expire, a tail
/// to deliver) before it fails.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The owner names the cases use.
pub const NODE_A: &str = "node-a";
/// A second owner.
pub const NODE_B: &str = "node-b";

/// A long lease (it never expires during a case).
pub const LONG: Duration = Duration::from_secs(600);

/// An `assistant.delta` event of `session`, request `request`, at `sequence`.
pub fn event(session: &str, request: &str, sequence: u64, text: &str) -> Envelope {
    Envelope::new(
        Some(session.to_owned()),
        request.to_owned(),
        format!("evt_{request}_{sequence}"),
        1_775_600_000_000 + sequence,
        Source::Runtime,
        sequence,
        Event::AssistantDelta(AssistantDelta::new(text)),
    )
}

/// A user message.
pub fn user(text: &str) -> Message {
    Message::User {
        text: text.into(),
        images: vec![],
    }
}

/// An assistant message.
pub fn assistant(text: &str) -> Message {
    Message::Assistant {
        text: text.into(),
        tool_calls: vec![],
    }
}

/// A state of `session` with `history`.
pub fn state(session: &str, history: Vec<Message>) -> PersistedSession {
    PersistedSession {
        session_id: session.into(),
        title: Some(format!("title of {session}")),
        workspace: "/home/dev/project".into(),
        model: "scripted:demo".into(),
        mode: PermissionMode::Ask,
        rules: ApprovalRules::default(),
        session_keys: vec![],
        session_deny: vec![],
        history: history.into(),
        plan: None,
        usage: Usage::default(),
        created_at: 1_775_600_000_000,
        updated_at: 1_775_600_000_000,
        closed: false,
        extensions: serde_json::Map::new(),
        request_marks: vec![],
    }
}

/// Takes a long lease for `owner`, which must be free.
pub async fn lease(store: &dyn AsyncStore, session: &str, owner: &str) -> Lease {
    match store.acquire_lease(session, owner, LONG).await {
        Ok(LeaseOutcome::Acquired(l)) => l,
        other => panic!("acquire {session} for {owner}: {other:?}"),
    }
}

pub(crate) fn assert_kind<T: std::fmt::Debug>(
    got: Result<T, ErrorPayload>,
    kind: StoreErrorKind,
    what: &str,
) {
    match got {
        Err(e) => assert_eq!(kind_of(&e), Some(kind), "{what}: {e:?}"),
        Ok(v) => panic!("{what}: expected {kind}, got Ok({v:?})"),
    }
}

pub(crate) fn ids(events: &[Envelope]) -> Vec<String> {
    events.iter().map(|e| e.event_id.clone()).collect()
}
