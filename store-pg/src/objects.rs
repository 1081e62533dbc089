//! Checkpoint objects and manifests, and deleting a session.
//!
//! `keel_objects` holds each content once for the whole database, by SHA-256 (a node
//! that takes a session over can rewind it from there); `keel_object_refs` says which
//! sessions refer to each object; `keel_checkpoints` holds each session's records.
//! Deleting a session removes its rows (the foreign keys cascade) and the objects no
//! other session refers to. Writers of objects and references hold a shared advisory
//! lock and the deleter an exclusive one, so an object cannot be removed between a
//! writer's check that it is stored and its reference to it.

use std::collections::HashSet;

use keel_envelope::ErrorPayload;
use sha2::{Digest, Sha256};

use crate::api::{CheckpointObject, Epoch, Manifest};
use crate::error::{check_session_id, store_error, StoreErrorKind};
use crate::store::{to_i64, to_u64, PgStore};

/// The advisory lock between object writers (shared) and deleters (exclusive)
/// ("keel_gc" in ASCII).
const GC_LOCK: i64 = 0x006b_6565_6c5f_6763;

/// At most this many bytes of objects per transaction.
const CHUNK_BYTES: usize = 8 << 20;

const FENCE: &str = "\
SELECT 1 FROM keel_sessions WHERE session_id = $1 AND lease_epoch = $2
  AND lease_owner IS NOT NULL AND lease_expires_at > clock_timestamp() FOR SHARE";

const INSERT_OBJECTS: &str = "\
INSERT INTO keel_objects (hash, size, bytes)
SELECT * FROM unnest($1::text[], $2::int8[], $3::bytea[]) ON CONFLICT (hash) DO NOTHING";

const INSERT_REFS: &str = "\
INSERT INTO keel_object_refs (session_id, hash)
SELECT $1, h FROM unnest($2::text[]) AS h ON CONFLICT DO NOTHING";

const MISSING: &str = "\
SELECT h FROM unnest($1::text[]) AS h
WHERE NOT EXISTS (SELECT 1 FROM keel_objects o WHERE o.hash = h)";

const DELETE_OBJECTS: &str = "\
WITH gone AS (DELETE FROM keel_object_refs WHERE session_id = $1 RETURNING hash)
DELETE FROM keel_objects o WHERE o.hash IN (SELECT hash FROM gone)
  AND NOT EXISTS (SELECT 1 FROM keel_object_refs r WHERE r.hash = o.hash AND r.session_id <> $1)";

/// The lowercase hex SHA-256 of `bytes`.
pub fn hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn check_hash(h: &str) -> Result<(), ErrorPayload> {
    if h.len() == 64
        && h.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(store_error(
            StoreErrorKind::InvalidInput,
            format!("{h:?} is not a lowercase hex SHA-256"),
        ))
    }
}

impl PgStore {
    /// In `tx`: the writers' lock, then the fence (the session row locked against a
    /// takeover until commit).
    async fn fence_in(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        session_id: &str,
        epoch: i64,
    ) -> Result<bool, ErrorPayload> {
        tx.execute("SELECT pg_advisory_xact_lock_shared($1)", &[&GC_LOCK])
            .await
            .map_err(|e| self.err(e))?;
        let stmt = tx.prepare_cached(FENCE).await.map_err(|e| self.err(e))?;
        let row = tx
            .query_opt(&stmt, &[&session_id, &epoch])
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.is_some())
    }

    pub(crate) async fn store_objects(
        &self,
        session_id: &str,
        epoch: Epoch,
        objects: &[CheckpointObject],
    ) -> Result<usize, ErrorPayload> {
        check_session_id(session_id)?;
        let mut seen = HashSet::new();
        let mut unique = Vec::new();
        for o in objects {
            check_hash(&o.hash)?;
            if hash(&o.bytes) != o.hash {
                return Err(store_error(
                    StoreErrorKind::InvalidInput,
                    format!(
                        "the bytes of checkpoint object {} do not have that hash",
                        o.hash
                    ),
                ));
            }
            if seen.insert(o.hash.as_str()) {
                unique.push(o);
            }
        }
        let epoch_col = to_i64(epoch.0).unwrap_or(-1);
        let mut new = 0;
        let mut start = 0;
        while start < unique.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < unique.len()
                && (end == start || bytes + unique[end].bytes.len() <= CHUNK_BYTES)
            {
                bytes += unique[end].bytes.len();
                end += 1;
            }
            let chunk = &unique[start..end];
            let hashes: Vec<&str> = chunk.iter().map(|o| o.hash.as_str()).collect();
            let sizes: Vec<i64> = chunk
                .iter()
                .map(|o| to_i64(o.bytes.len() as u64).unwrap_or(0))
                .collect();
            let blobs: Vec<&[u8]> = chunk.iter().map(|o| o.bytes.as_slice()).collect();
            let got = self
                .retry("store checkpoint objects", || async {
                    let mut client = self.client().await?;
                    let tx = client.transaction().await.map_err(|e| self.err(e))?;
                    if !self.fence_in(&tx, session_id, epoch_col).await? {
                        return Ok(None);
                    }
                    let stmt = tx
                        .prepare_cached(INSERT_OBJECTS)
                        .await
                        .map_err(|e| self.err(e))?;
                    let n = tx
                        .execute(&stmt, &[&hashes, &sizes, &blobs])
                        .await
                        .map_err(|e| self.err(e))?;
                    let stmt = tx
                        .prepare_cached(INSERT_REFS)
                        .await
                        .map_err(|e| self.err(e))?;
                    tx.execute(&stmt, &[&session_id, &hashes])
                        .await
                        .map_err(|e| self.err(e))?;
                    tx.commit().await.map_err(|e| self.err(e))?;
                    Ok(Some(n))
                })
                .await?;
            match got {
                Some(n) => new += usize::try_from(n).unwrap_or(0),
                None => {
                    return Err(self
                        .fenced(session_id, epoch, "store checkpoint objects")
                        .await)
                }
            }
            start = end;
        }
        Ok(new)
    }

    pub(crate) async fn stored_objects(
        &self,
        hashes: &[String],
    ) -> Result<Vec<bool>, ErrorPayload> {
        for h in hashes {
            check_hash(h)?;
        }
        let missing: HashSet<String> = self
            .retry("look checkpoint objects up", || async {
                let client = self.client().await?;
                let stmt = client
                    .prepare_cached(MISSING)
                    .await
                    .map_err(|e| self.err(e))?;
                let rows = client
                    .query(&stmt, &[&hashes])
                    .await
                    .map_err(|e| self.err(e))?;
                Ok(rows.iter().map(|r| r.get(0)).collect())
            })
            .await?;
        Ok(hashes.iter().map(|h| !missing.contains(h)).collect())
    }

    pub(crate) async fn object(&self, hash: &str) -> Result<Option<Vec<u8>>, ErrorPayload> {
        check_hash(hash)?;
        let row = self
            .retry("read a checkpoint object", || async {
                let client = self.client().await?;
                let stmt = client
                    .prepare_cached("SELECT bytes FROM keel_objects WHERE hash = $1")
                    .await
                    .map_err(|e| self.err(e))?;
                client
                    .query_opt(&stmt, &[&hash])
                    .await
                    .map_err(|e| self.err(e))
            })
            .await?;
        Ok(row.map(|r| r.get(0)))
    }

    pub(crate) async fn record_manifest(
        &self,
        session_id: &str,
        epoch: Epoch,
        manifest: &Manifest,
    ) -> Result<(), ErrorPayload> {
        check_session_id(session_id)?;
        for h in &manifest.objects {
            check_hash(h)?;
        }
        let seq = to_i64(manifest.seq).ok_or_else(|| {
            store_error(StoreErrorKind::InvalidInput, "a checkpoint seq past 2^63")
        })?;
        let body = serde_json::to_string(&manifest.body).map_err(|e| {
            store_error(
                StoreErrorKind::InvalidInput,
                format!("cannot encode a checkpoint record: {e}"),
            )
        })?;
        let epoch_col = to_i64(epoch.0).unwrap_or(-1);
        enum Outcome {
            Fenced,
            Missing(Vec<String>),
            Recorded,
            Taken(String, Vec<String>),
        }
        let outcome = self
            .retry("record a checkpoint", || async {
                let mut client = self.client().await?;
                let tx = client.transaction().await.map_err(|e| self.err(e))?;
                if !self.fence_in(&tx, session_id, epoch_col).await? {
                    return Ok(Outcome::Fenced);
                }
                let stmt = tx.prepare_cached(MISSING).await.map_err(|e| self.err(e))?;
                let missing: Vec<String> = tx
                    .query(&stmt, &[&manifest.objects])
                    .await
                    .map_err(|e| self.err(e))?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                if !missing.is_empty() {
                    return Ok(Outcome::Missing(missing));
                }
                let stmt = tx
                    .prepare_cached(INSERT_REFS)
                    .await
                    .map_err(|e| self.err(e))?;
                tx.execute(&stmt, &[&session_id, &manifest.objects])
                    .await
                    .map_err(|e| self.err(e))?;
                let inserted = tx
                    .execute(
                        "INSERT INTO keel_checkpoints (session_id, seq, manifest, objects) \
                         VALUES ($1, $2, $3::text::json, $4) ON CONFLICT DO NOTHING",
                        &[&session_id, &seq, &body, &manifest.objects],
                    )
                    .await
                    .map_err(|e| self.err(e))?;
                if inserted == 0 {
                    let row = tx
                        .query_one(
                            "SELECT manifest::text, objects FROM keel_checkpoints \
                             WHERE session_id = $1 AND seq = $2",
                            &[&session_id, &seq],
                        )
                        .await
                        .map_err(|e| self.err(e))?;
                    return Ok(Outcome::Taken(row.get(0), row.get(1)));
                }
                tx.commit().await.map_err(|e| self.err(e))?;
                Ok(Outcome::Recorded)
            })
            .await?;
        match outcome {
            Outcome::Recorded => Ok(()),
            Outcome::Fenced => Err(self.fenced(session_id, epoch, "record a checkpoint").await),
            Outcome::Missing(missing) => Err(store_error(
                StoreErrorKind::ObjectMissing,
                format!(
                    "checkpoint {} of session {session_id} names {} object(s) the store does not \
                     hold: put them first",
                    manifest.seq,
                    missing.len()
                ),
            )
            .with_detail("missing", missing)),
            Outcome::Taken(text, objects) => {
                let same = serde_json::from_str::<serde_json::Value>(&text)
                    .is_ok_and(|v| v == manifest.body)
                    && objects == manifest.objects;
                if same {
                    Ok(())
                } else {
                    Err(store_error(
                        StoreErrorKind::InvalidInput,
                        format!(
                            "session {session_id} already has another checkpoint {}",
                            manifest.seq
                        ),
                    ))
                }
            }
        }
    }

    pub(crate) async fn session_manifests(
        &self,
        session_id: &str,
    ) -> Result<Vec<Manifest>, ErrorPayload> {
        check_session_id(session_id)?;
        let rows = self
            .retry("list checkpoints", || async {
                let client = self.client().await?;
                let stmt = client
                    .prepare_cached(
                        "SELECT seq, manifest::text, objects FROM keel_checkpoints \
                         WHERE session_id = $1 ORDER BY seq",
                    )
                    .await
                    .map_err(|e| self.err(e))?;
                client
                    .query(&stmt, &[&session_id])
                    .await
                    .map_err(|e| self.err(e))
            })
            .await?;
        rows.iter()
            .map(|r| {
                let seq: i64 = r.get(0);
                let body = serde_json::from_str(r.get(1)).map_err(|e| {
                    store_error(
                        StoreErrorKind::Corrupt,
                        format!("checkpoint {seq} of session {session_id} cannot be read: {e}"),
                    )
                })?;
                Ok(Manifest {
                    seq: to_u64(seq),
                    body,
                    objects: r.get(2),
                })
            })
            .collect()
    }

    /// The number of the session's newest checkpoint (0: none).
    pub(crate) async fn last_manifest(&self, session_id: &str) -> Result<u64, ErrorPayload> {
        check_session_id(session_id)?;
        let seq: Option<i64> = self
            .retry("look the newest checkpoint up", || async {
                let client = self.client().await?;
                let stmt = client
                    .prepare_cached("SELECT max(seq) FROM keel_checkpoints WHERE session_id = $1")
                    .await
                    .map_err(|e| self.err(e))?;
                let row = client
                    .query_one(&stmt, &[&session_id])
                    .await
                    .map_err(|e| self.err(e))?;
                Ok(row.get(0))
            })
            .await?;
        Ok(seq.map_or(0, to_u64))
    }

    /// The objects of `hashes` the store holds, (hash, bytes), in one query.
    pub(crate) async fn objects_of(
        &self,
        hashes: &[String],
    ) -> Result<Vec<(String, Vec<u8>)>, ErrorPayload> {
        for h in hashes {
            check_hash(h)?;
        }
        let rows = self
            .retry("read checkpoint objects", || async {
                let client = self.client().await?;
                let stmt = client
                    .prepare_cached("SELECT hash, bytes FROM keel_objects WHERE hash = ANY($1)")
                    .await
                    .map_err(|e| self.err(e))?;
                client
                    .query(&stmt, &[&hashes])
                    .await
                    .map_err(|e| self.err(e))
            })
            .await?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    pub(crate) async fn delete_session(&self, session_id: &str) -> Result<bool, ErrorPayload> {
        check_session_id(session_id)?;
        let deleted = self
            .retry("delete a session", || async {
                let mut client = self.client().await?;
                let tx = client.transaction().await.map_err(|e| self.err(e))?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&GC_LOCK])
                    .await
                    .map_err(|e| self.err(e))?;
                let stmt = tx
                    .prepare_cached(DELETE_OBJECTS)
                    .await
                    .map_err(|e| self.err(e))?;
                tx.execute(&stmt, &[&session_id])
                    .await
                    .map_err(|e| self.err(e))?;
                let n = tx
                    .execute(
                        "DELETE FROM keel_sessions WHERE session_id = $1",
                        &[&session_id],
                    )
                    .await
                    .map_err(|e| self.err(e))?;
                tx.commit().await.map_err(|e| self.err(e))?;
                Ok(n == 1)
            })
            .await?;
        self.written().remove(session_id);
        // Wakes the session's tails, which end.
        self.committed(session_id, 0);
        Ok(deleted)
    }
}
