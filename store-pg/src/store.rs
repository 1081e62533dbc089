//! [`PgStore`]: the PostgreSQL implementation of [`AsyncStore`]. The operations live
//! in one module each (`events`, `state`, `objects`, `lease`, `tail`); this one
//! connects, migrates and hands out connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use keel_envelope::{Envelope, ErrorPayload};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::api::{
    AsyncStore, CheckpointObject, Cursor, Epoch, EventTail, Lease, LeaseInfo, LeaseOutcome,
    LoadedLog, Manifest, PersistedSession, SessionSummary, TailFrom,
};
use crate::connect::{db_error, pool, pool_error, retrying, Phase};
use crate::migrate::{migrate, Migrated};
use crate::options::PgOptions;
use crate::tail::{notifier, Hub};

/// What this process wrote of a session's history, under which epoch: the ids of the
/// messages stored, in order (see `state`).
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub epoch: Epoch,
    pub ids: Vec<u64>,
}

/// Sessions, events, checkpoints and leases in a PostgreSQL database that several
/// nodes may share. Cloning is cheap (one pool).
#[derive(Debug, Clone)]
pub struct PgStore {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub pool: Pool,
    pub options: PgOptions,
    pub migrated: Migrated,
    pub written: Mutex<HashMap<String, Written>>,
    pub hub: Arc<Hub>,
    /// Wakes tails, here and on other nodes, after commits.
    pub notifier: tokio::sync::mpsc::UnboundedSender<(String, i64)>,
    /// Stops the notification listener when the last handle goes.
    _stop: DropGuard,
}

impl PgStore {
    /// Parses `url` and connects ([`PgStore::connect`]).
    pub async fn open(url: &str) -> Result<Self, ErrorPayload> {
        Self::connect(PgOptions::from_url(url)?).await
    }

    /// Connects, checks the database and runs the migrations it lacks. Every failure
    /// is a clear error: `unreachable` (within the connect timeout), `auth_failed`,
    /// `database_missing`, `foreign_database`, `database_newer`.
    pub async fn connect(options: PgOptions) -> Result<Self, ErrorPayload> {
        let pool = pool(&options)?;
        let mut client = pool
            .get()
            .await
            .map_err(|e| pool_error(e, &options, Phase::Connect))?;
        let migrated = migrate(&mut client, &options).await?;
        drop(client);
        let stop = CancellationToken::new();
        let hub = Arc::new(Hub::new(stop.clone()));
        let notifier = notifier(pool.clone(), hub.clone());
        Ok(Self {
            inner: Arc::new(Inner {
                notifier,
                pool,
                options,
                migrated,
                written: Mutex::new(HashMap::new()),
                hub,
                _stop: stop.drop_guard(),
            }),
        })
    }

    /// The options it was opened with.
    pub fn options(&self) -> &PgOptions {
        &self.inner.options
    }

    /// What the migrations found and did at start.
    pub fn migrated(&self) -> Migrated {
        self.inner.migrated
    }

    /// A connection from the pool.
    pub(crate) async fn client(&self) -> Result<Object, ErrorPayload> {
        self.inner
            .pool
            .get()
            .await
            .map_err(|e| pool_error(e, &self.inner.options, Phase::Operate))
    }

    /// A database error of an operation, explained.
    pub(crate) fn err(&self, e: tokio_postgres::Error) -> ErrorPayload {
        db_error(&e, &self.inner.options, Phase::Operate)
    }

    /// Runs `op`, again while the database is away (within the retry window).
    pub(crate) async fn retry<T, F, Fut>(&self, what: &str, op: F) -> Result<T, ErrorPayload>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ErrorPayload>>,
    {
        retrying(&self.inner.options, what, op).await
    }

    pub(crate) fn written(&self) -> std::sync::MutexGuard<'_, HashMap<String, Written>> {
        self.inner.written.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long a tail waits for a notification before it reads the log anyway.
    pub(crate) fn poll_interval(&self) -> Duration {
        self.inner
            .options
            .poll_interval
            .max(Duration::from_millis(10))
    }
}

/// An `i64` for a column from a `u64` the store was given; `None` past `i64::MAX`.
pub(crate) fn to_i64(n: u64) -> Option<i64> {
    i64::try_from(n).ok()
}

/// A `u64` from a column that holds no negative numbers.
pub(crate) fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

#[async_trait]
impl AsyncStore for PgStore {
    async fn append_batch(
        &self,
        session_id: &str,
        epoch: Epoch,
        events: &[Envelope],
    ) -> Result<(), ErrorPayload> {
        self.append_events(session_id, epoch, events).await
    }

    async fn load_events(&self, session_id: &str) -> Result<LoadedLog, ErrorPayload> {
        self.load_log(session_id).await
    }

    async fn events_after(
        &self,
        session_id: &str,
        after: &Cursor,
    ) -> Result<Vec<Envelope>, ErrorPayload> {
        self.log_after(session_id, after).await
    }

    async fn save_state(&self, epoch: Epoch, state: &PersistedSession) -> Result<(), ErrorPayload> {
        self.save(epoch, state).await
    }

    async fn load_state(&self, session_id: &str) -> Result<Option<PersistedSession>, ErrorPayload> {
        self.load(session_id).await
    }

    async fn list_summaries(&self) -> Result<Vec<SessionSummary>, ErrorPayload> {
        self.summaries().await
    }

    async fn delete(&self, session_id: &str) -> Result<bool, ErrorPayload> {
        self.delete_session(session_id).await
    }

    async fn put_objects(
        &self,
        session_id: &str,
        epoch: Epoch,
        objects: &[CheckpointObject],
    ) -> Result<usize, ErrorPayload> {
        self.store_objects(session_id, epoch, objects).await
    }

    async fn has_objects(&self, hashes: &[String]) -> Result<Vec<bool>, ErrorPayload> {
        self.stored_objects(hashes).await
    }

    async fn get_object(&self, hash: &str) -> Result<Option<Vec<u8>>, ErrorPayload> {
        self.object(hash).await
    }

    async fn put_manifest(
        &self,
        session_id: &str,
        epoch: Epoch,
        manifest: &Manifest,
    ) -> Result<(), ErrorPayload> {
        self.record_manifest(session_id, epoch, manifest).await
    }

    async fn manifests(&self, session_id: &str) -> Result<Vec<Manifest>, ErrorPayload> {
        self.session_manifests(session_id).await
    }

    async fn acquire_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseOutcome, ErrorPayload> {
        self.acquire(session_id, owner, ttl).await
    }

    async fn renew_lease(&self, lease: &Lease) -> Result<(), ErrorPayload> {
        self.renew(lease).await
    }

    async fn release_lease(&self, lease: &Lease) -> Result<bool, ErrorPayload> {
        self.release(lease).await
    }

    async fn lease_owner(&self, session_id: &str) -> Result<Option<LeaseInfo>, ErrorPayload> {
        self.owner(session_id).await
    }

    async fn tail(&self, session_id: &str, from: TailFrom) -> Result<EventTail, ErrorPayload> {
        self.open_tail(session_id, from).await
    }
}
