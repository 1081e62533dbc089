//! Keel's PostgreSQL session store: sessions that any node sharing the database can
//! list, watch, resume and take over.
//!
//! - [`api`]: [`AsyncStore`], the draft of the kernel's async, backend-neutral store
//!   interface (events, state, summaries, checkpoint objects, leases with fencing,
//!   tails), which [`PgStore`] implements.
//! - [`PgStore::open`] connects (tokio-postgres through a deadpool-postgres pool; no
//!   database is needed to build), runs the versioned migrations ([`migrate`]) and
//!   refuses a database that is newer or not Keel's.
//! - [`error`]: every failure is an `ErrorPayload` with a stable `details.reason`.
//! - [`PgKernelStore`]: the kernel's store interface (`keel_kernel::store::Store`)
//!   over [`PgStore`], with the leases the kernel claims and renews; what
//!   `--store postgres://…` gives a kernel.
//! - [`group::GroupAppender`]: group commit of one session's events over any
//!   [`AsyncStore`] (each batch is what arrived during the previous commit).
//! - Feature `testing`: `testing` starts a real PostgreSQL server for tests (initdb
//!   in a temporary directory, `pg_ctl`, a Unix socket) and `conformance` holds the
//!   store conformance suite, generic over [`AsyncStore`].
//!
//! The layout of the tables and the reasons for it are in each module's
//! documentation; docs/deployment.md says how to run it.

pub mod api;
mod connect;
pub mod error;
mod events;
pub mod group;
mod kernel_store;
mod lease;
pub mod migrate;
pub mod objects;
pub mod options;
mod state;
mod store;
pub mod tail;

#[cfg(feature = "testing")]
pub mod chatty;
#[cfg(feature = "testing")]
pub mod conformance;
#[cfg(feature = "testing")]
pub mod kernel_conformance;
#[cfg(feature = "testing")]
pub mod testing;

pub use api::{
    AsyncStore, CheckpointObject, Cursor, Epoch, EventTail, Lease, LeaseInfo, LeaseOutcome,
    Manifest, TailFrom,
};
pub use error::{is_fenced, kind_of, StoreErrorKind};
pub use group::{Committed, GroupAppender};
pub use kernel_store::PgKernelStore;
pub use options::{is_postgres_url, PgOptions};
pub use store::PgStore;
