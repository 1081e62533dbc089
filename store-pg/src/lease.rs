//! Leases: one owner per session at a time, with a fencing epoch, kept in the session's
//! row of `keel_sessions` (`lease_owner`, `lease_epoch`, `lease_expires_at`).
//!
//! Times are the database's (`clock_timestamp()`), never a node's, so nodes whose
//! clocks disagree still agree on whether a lease is live. Acquiring is one
//! `INSERT … ON CONFLICT DO UPDATE … WHERE` (free, expired, or ours) that raises the
//! epoch; every fenced write repeats the condition `lease_epoch = $epoch AND
//! lease_owner IS NOT NULL AND lease_expires_at > clock_timestamp()` in the statement
//! that writes, so a writer whose lease ended, by expiry or takeover, changes nothing.

use std::time::Duration;

use keel_envelope::ErrorPayload;

use crate::api::{Epoch, Lease, LeaseInfo, LeaseOutcome};
use crate::error::{check_session_id, store_error, StoreErrorKind};
use crate::store::{to_i64, to_u64, PgStore};

const ACQUIRE: &str = "\
INSERT INTO keel_sessions AS s (session_id, lease_owner, lease_epoch, lease_expires_at)
VALUES ($1, $2, 1, clock_timestamp() + $3::float8 * interval '1 millisecond')
ON CONFLICT (session_id) DO UPDATE
SET lease_owner = EXCLUDED.lease_owner, lease_epoch = s.lease_epoch + 1,
    lease_expires_at = EXCLUDED.lease_expires_at
WHERE s.lease_owner IS NULL OR s.lease_owner = EXCLUDED.lease_owner
   OR s.lease_expires_at <= clock_timestamp()
RETURNING lease_epoch";

const OWNER: &str = "\
SELECT lease_owner, lease_epoch, coalesce(lease_expires_at > clock_timestamp(), false),
       greatest(0, coalesce(extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000, 0))::int8
FROM keel_sessions WHERE session_id = $1";

const RENEW: &str = "\
UPDATE keel_sessions SET lease_expires_at = clock_timestamp() + $4::float8 * interval '1 millisecond'
WHERE session_id = $1 AND lease_epoch = $2 AND lease_owner = $3
  AND lease_expires_at > clock_timestamp()";

const RELEASE: &str = "\
UPDATE keel_sessions SET lease_owner = NULL, lease_expires_at = NULL
WHERE session_id = $1 AND lease_epoch = $2 AND lease_owner = $3";

/// The store's view of a session's lease row.
#[derive(Debug)]
struct Row {
    owner: Option<String>,
    epoch: u64,
    live: bool,
    remaining_ms: u64,
}

fn ttl_ms(ttl: Duration) -> Result<f64, ErrorPayload> {
    if ttl.is_zero() || ttl > Duration::from_secs(86_400 * 365) {
        return Err(store_error(
            StoreErrorKind::InvalidInput,
            format!("a lease lasts more than 0 and at most a year, not {ttl:?}"),
        ));
    }
    Ok(ttl.as_secs_f64() * 1000.0)
}

impl PgStore {
    async fn lease_row(&self, session_id: &str) -> Result<Option<Row>, ErrorPayload> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(OWNER)
            .await
            .map_err(|e| self.err(e))?;
        let row = client
            .query_opt(&stmt, &[&session_id])
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.map(|r| Row {
            owner: r.get(0),
            epoch: to_u64(r.get(1)),
            live: r.get(2),
            remaining_ms: to_u64(r.get(3)),
        }))
    }

    pub(crate) async fn acquire(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseOutcome, ErrorPayload> {
        check_session_id(session_id)?;
        let ms = ttl_ms(ttl)?;
        if owner.is_empty() {
            return Err(store_error(
                StoreErrorKind::InvalidInput,
                "a lease owner has a name",
            ));
        }
        // The holder may release between our attempt and our look at who holds it.
        for _ in 0..5 {
            let got = self
                .retry("acquire a lease", || async {
                    let client = self.client().await?;
                    let stmt = client
                        .prepare_cached(ACQUIRE)
                        .await
                        .map_err(|e| self.err(e))?;
                    client
                        .query_opt(&stmt, &[&session_id, &owner, &ms])
                        .await
                        .map_err(|e| self.err(e))
                })
                .await?;
            if let Some(row) = got {
                return Ok(LeaseOutcome::Acquired(Lease {
                    session_id: session_id.to_owned(),
                    owner: owner.to_owned(),
                    epoch: Epoch(to_u64(row.get(0))),
                    ttl,
                }));
            }
            let row = self
                .retry("read a lease", || self.lease_row(session_id))
                .await?;
            if let Some(Row {
                owner: Some(holder),
                epoch,
                live: true,
                remaining_ms,
            }) = row
            {
                return Ok(LeaseOutcome::Held(LeaseInfo {
                    owner: holder,
                    epoch: Epoch(epoch),
                    live: true,
                    remaining: Duration::from_millis(remaining_ms),
                }));
            }
        }
        Err(store_error(
            StoreErrorKind::Database,
            format!(
                "the lease of session {session_id} changed hands five times while acquiring it"
            ),
        ))
    }

    pub(crate) async fn renew(&self, lease: &Lease) -> Result<(), ErrorPayload> {
        check_session_id(&lease.session_id)?;
        let ms = ttl_ms(lease.ttl)?;
        let epoch = to_i64(lease.epoch.0).unwrap_or(-1);
        let n = self
            .retry("renew a lease", || async {
                let client = self.client().await?;
                let stmt = client
                    .prepare_cached(RENEW)
                    .await
                    .map_err(|e| self.err(e))?;
                client
                    .execute(&stmt, &[&lease.session_id, &epoch, &lease.owner, &ms])
                    .await
                    .map_err(|e| self.err(e))
            })
            .await?;
        if n == 1 {
            Ok(())
        } else {
            Err(self
                .fenced(&lease.session_id, lease.epoch, "renew its lease")
                .await)
        }
    }

    pub(crate) async fn release(&self, lease: &Lease) -> Result<bool, ErrorPayload> {
        check_session_id(&lease.session_id)?;
        let epoch = to_i64(lease.epoch.0).unwrap_or(-1);
        let n = self
            .retry("release a lease", || async {
                let client = self.client().await?;
                let stmt = client
                    .prepare_cached(RELEASE)
                    .await
                    .map_err(|e| self.err(e))?;
                client
                    .execute(&stmt, &[&lease.session_id, &epoch, &lease.owner])
                    .await
                    .map_err(|e| self.err(e))
            })
            .await?;
        self.written().remove(&lease.session_id);
        Ok(n == 1)
    }

    pub(crate) async fn owner(&self, session_id: &str) -> Result<Option<LeaseInfo>, ErrorPayload> {
        check_session_id(session_id)?;
        let row = self
            .retry("read a lease", || self.lease_row(session_id))
            .await?;
        Ok(row.and_then(|r| {
            Some(LeaseInfo {
                owner: r.owner?,
                epoch: Epoch(r.epoch),
                live: r.live,
                remaining: Duration::from_millis(r.remaining_ms),
            })
        }))
    }

    /// The error of a write (`what`) refused by its fence, saying why.
    pub(crate) async fn fenced(&self, session_id: &str, epoch: Epoch, what: &str) -> ErrorPayload {
        let why = match self.lease_row(session_id).await {
            Ok(None) => {
                "the session has no entry in the store (never leased, or deleted)".to_owned()
            }
            Ok(Some(Row {
                owner: None,
                epoch: now,
                ..
            })) if now == epoch.0 => "the lease was released".to_owned(),
            Ok(Some(Row {
                owner: Some(o),
                epoch: now,
                live,
                ..
            })) if now == epoch.0 => {
                if live {
                    format!("the lease is held by {o:?}")
                } else {
                    "the lease expired".to_owned()
                }
            }
            Ok(Some(Row {
                owner,
                epoch: now,
                live,
                ..
            })) => match owner {
                Some(o) if live => format!("the session's lease is now epoch {now}, held by {o:?}"),
                _ => format!("the session's lease is now epoch {now}"),
            },
            Err(e) => format!("the lease could not be read ({})", e.message),
        };
        store_error(
            StoreErrorKind::Fenced,
            format!(
                "session {session_id}: refused to {what} with lease epoch {epoch}: {why}; this node \
                 no longer owns the session"
            ),
        )
        .with_detail("sessionId", session_id)
        .with_detail("epoch", epoch.0)
    }
}
