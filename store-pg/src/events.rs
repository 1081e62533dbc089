//! The event log, `keel_events`: one row per envelope, `position` 1, 2, 3, … per
//! session, unique by (session, `requestId`, `sequence`).
//!
//! A batch is appended by one statement (so one round trip and one commit): it raises
//! the session's `event_count` where the lease is live and the epoch is the writer's
//! (the fence, which also locks the row so a session's appends are serialised) and
//! inserts the rows at the positions that frees. No row back means fenced. Positions
//! are given under the row lock, so the rows a reader sees are always a prefix of the
//! log. Once committed, the batch's last position goes to the store's notifier (see
//! `tail`), which wakes this node's tails and the other nodes'.
//!
//! Envelopes are stored as the codec's exact JSON text (`json`, not `jsonb`) and read
//! back through the codec.

use std::collections::HashMap;

use keel_envelope::codec;
use keel_envelope::{Envelope, ErrorCode, ErrorPayload};
use tokio_postgres::error::SqlState;

use crate::api::{Cursor, Epoch, LoadedLog};
use crate::error::{check_session_id, store_error, StoreErrorKind};
use crate::store::{to_i64, PgStore};

const APPEND: &str = "\
WITH s AS (
    UPDATE keel_sessions SET event_count = event_count + cardinality($3::text[])
    WHERE session_id = $1 AND lease_epoch = $2 AND lease_owner IS NOT NULL
      AND lease_expires_at > clock_timestamp()
    RETURNING event_count
), ins AS (
    INSERT INTO keel_events (session_id, position, request_id, sequence, event_type, envelope)
    SELECT $1, s.event_count - cardinality($3::text[]) + t.ord, t.rid, t.seq, t.typ, t.env::json
    FROM s, unnest($3::text[], $4::int8[], $5::text[], $6::text[]) WITH ORDINALITY
        AS t(rid, seq, typ, env, ord)
)
SELECT s.event_count FROM s";

const STORED_IDS: &str = "\
SELECT e.request_id, e.sequence, e.envelope->>'eventId'
FROM keel_events e JOIN unnest($2::text[], $3::int8[]) AS t(rid, seq)
  ON e.request_id = t.rid AND e.sequence = t.seq
WHERE e.session_id = $1";

const LOAD: &str =
    "SELECT position, envelope::text FROM keel_events WHERE session_id = $1 ORDER BY position";

const AFTER: &str = "\
SELECT position, envelope::text FROM keel_events
WHERE session_id = $1 AND position > $2 ORDER BY position LIMIT $3";

const CURSOR: &str =
    "SELECT position FROM keel_events WHERE session_id = $1 AND request_id = $2 AND sequence = $3";

/// One batch, as the statement takes it.
struct Columns {
    request_ids: Vec<String>,
    sequences: Vec<i64>,
    types: Vec<String>,
    lines: Vec<String>,
    event_ids: Vec<String>,
}

fn columns(session_id: &str, events: &[Envelope]) -> Result<Columns, ErrorPayload> {
    let mut c = Columns {
        request_ids: Vec::with_capacity(events.len()),
        sequences: Vec::with_capacity(events.len()),
        types: Vec::with_capacity(events.len()),
        lines: Vec::with_capacity(events.len()),
        event_ids: Vec::with_capacity(events.len()),
    };
    for e in events {
        if e.session_id.as_deref() != Some(session_id) {
            return Err(store_error(
                StoreErrorKind::InvalidInput,
                format!(
                    "event {} belongs to session {:?}, not to {session_id}",
                    e.event_id, e.session_id
                ),
            ));
        }
        let sequence = to_i64(e.sequence).ok_or_else(|| {
            store_error(
                StoreErrorKind::InvalidInput,
                format!(
                    "event {} has sequence {} (past 2^63)",
                    e.event_id, e.sequence
                ),
            )
        })?;
        let mut line = codec::encode_line(e);
        line.pop();
        let line = String::from_utf8(line).map_err(|_| {
            store_error(
                StoreErrorKind::InvalidInput,
                "an encoded event is not UTF-8",
            )
        })?;
        c.request_ids.push(e.request_id.clone());
        c.sequences.push(sequence);
        c.types.push(e.type_name().to_owned());
        c.lines.push(line);
        c.event_ids.push(e.event_id.clone());
    }
    Ok(c)
}

fn decode(session_id: &str, position: i64, text: &str) -> Result<Envelope, ErrorPayload> {
    codec::decode_envelope(text.as_bytes()).map_err(|e| {
        store_error(
            StoreErrorKind::Corrupt,
            format!(
                "event {position} of session {session_id} cannot be read: {}",
                e.message
            ),
        )
    })
}

impl PgStore {
    pub(crate) async fn append_events(
        &self,
        session_id: &str,
        epoch: Epoch,
        events: &[Envelope],
    ) -> Result<(), ErrorPayload> {
        check_session_id(session_id)?;
        if events.is_empty() {
            return Ok(());
        }
        let c = columns(session_id, events)?;
        let epoch_col = to_i64(epoch.0).unwrap_or(-1);
        let c = &c;
        let mut tries = 0;
        let appended = self
            .retry("append events", || {
                tries += 1;
                let retried = tries > 1;
                async move {
                    let client = self.client().await?;
                    let stmt = client
                        .prepare_cached(APPEND)
                        .await
                        .map_err(|e| self.err(e))?;
                    let got = client
                        .query(
                            &stmt,
                            &[
                                &session_id,
                                &epoch_col,
                                &c.request_ids,
                                &c.sequences,
                                &c.types,
                                &c.lines,
                            ],
                        )
                        .await;
                    match got {
                        Ok(rows) if !rows.is_empty() => Ok(Some(rows[0].get::<_, i64>(0))),
                        // Refused now, but an earlier try whose answer was lost may
                        // have stored the batch before the lease ended.
                        Ok(_) if retried => Ok(self
                            .check_stored(&client, session_id, c)
                            .await
                            .ok()
                            .map(|()| 0)),
                        Ok(_) => Ok(None),
                        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                            // Stored already: by an earlier try whose answer was lost,
                            // or not the same events at all.
                            self.check_stored(&client, session_id, c)
                                .await
                                .map(|()| Some(0))
                        }
                        Err(e) => Err(self.err(e)),
                    }
                }
            })
            .await?;
        match appended {
            Some(position) => {
                self.committed(session_id, position);
                Ok(())
            }
            None => Err(self.fenced(session_id, epoch, "append events").await),
        }
    }

    /// `Ok` when every event of the batch is stored with its own `eventId`.
    async fn check_stored(
        &self,
        client: &deadpool_postgres::Object,
        session_id: &str,
        c: &Columns,
    ) -> Result<(), ErrorPayload> {
        let stmt = client
            .prepare_cached(STORED_IDS)
            .await
            .map_err(|e| self.err(e))?;
        let rows = client
            .query(&stmt, &[&session_id, &c.request_ids, &c.sequences])
            .await
            .map_err(|e| self.err(e))?;
        let stored: HashMap<(String, i64), Option<String>> = rows
            .iter()
            .map(|r| ((r.get(0), r.get(1)), r.get(2)))
            .collect();
        for i in 0..c.lines.len() {
            let key = (c.request_ids[i].clone(), c.sequences[i]);
            match stored.get(&key) {
                Some(Some(id)) if *id == c.event_ids[i] => {}
                Some(_) => {
                    return Err(store_error(
                        StoreErrorKind::InvalidInput,
                        format!(
                            "session {session_id} already has an event {}#{} (another eventId)",
                            key.0, key.1
                        ),
                    ))
                }
                None => {
                    return Err(store_error(
                        StoreErrorKind::InvalidInput,
                        format!(
                        "a batch for session {session_id} repeats events of its log with new ones \
                             ({}#{} is new)",
                        key.0, key.1
                    ),
                    ))
                }
            }
        }
        Ok(())
    }

    pub(crate) async fn load_log(&self, session_id: &str) -> Result<LoadedLog, ErrorPayload> {
        check_session_id(session_id)?;
        let rows = self
            .retry("load events", || async {
                let client = self.client().await?;
                let stmt = client.prepare_cached(LOAD).await.map_err(|e| self.err(e))?;
                client
                    .query(&stmt, &[&session_id])
                    .await
                    .map_err(|e| self.err(e))
            })
            .await?;
        let events = rows
            .iter()
            .map(|r| decode(session_id, r.get(0), r.get(1)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LoadedLog {
            events,
            torn_tail_dropped: false,
        })
    }

    /// The position of the event at `cursor`, or `REQUEST_INVALID`.
    pub(crate) async fn cursor_position(
        &self,
        session_id: &str,
        cursor: &Cursor,
    ) -> Result<i64, ErrorPayload> {
        let sequence = to_i64(cursor.sequence).unwrap_or(-1);
        let row = self
            .retry("find a cursor", || async {
                let client = self.client().await?;
                let stmt = client
                    .prepare_cached(CURSOR)
                    .await
                    .map_err(|e| self.err(e))?;
                client
                    .query_opt(&stmt, &[&session_id, &cursor.request_id, &sequence])
                    .await
                    .map_err(|e| self.err(e))
            })
            .await?;
        row.map(|r| r.get(0)).ok_or_else(|| {
            ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!(
                    "cursor {}#{} is not in the session's log",
                    cursor.request_id, cursor.sequence
                ),
            )
            .with_detail("field", "payload.afterSequence")
        })
    }

    /// Up to `limit` events after `position`, with their positions.
    pub(crate) async fn read_after(
        &self,
        session_id: &str,
        position: i64,
        limit: i64,
    ) -> Result<Vec<(i64, Envelope)>, ErrorPayload> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(AFTER)
            .await
            .map_err(|e| self.err(e))?;
        let rows = client
            .query(&stmt, &[&session_id, &position, &limit])
            .await
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| {
                let p: i64 = r.get(0);
                decode(session_id, p, r.get(1)).map(|e| (p, e))
            })
            .collect()
    }

    pub(crate) async fn log_after(
        &self,
        session_id: &str,
        cursor: &Cursor,
    ) -> Result<Vec<Envelope>, ErrorPayload> {
        check_session_id(session_id)?;
        let mut position = self.cursor_position(session_id, cursor).await?;
        let mut out = Vec::new();
        loop {
            let page = self
                .retry("load events", || {
                    self.read_after(session_id, position, 10_000)
                })
                .await?;
            let Some(&(last, _)) = page.last() else {
                return Ok(out);
            };
            position = last;
            out.extend(page.into_iter().map(|(_, e)| e));
        }
    }
}
