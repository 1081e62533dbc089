//! Session state: `keel_states.state` holds the state without its history,
//! `keel_states.summary` what `session.list` shows, and `keel_history` the
//! conversation, one row per message (the first `history_len` count). The session's
//! row of `keel_sessions` (its lease) is the fence, locked `FOR SHARE` until the save
//! commits.
//!
//! Saving after a turn appends only the new messages, when this process knows what
//! it stored last under the same epoch and the history only grew: one statement that
//! writes the state where the fence holds and `history_len` is still what this
//! process stored, and inserts the new rows. Otherwise (a compacted or edited
//! history, another process wrote last, an earlier save's outcome is unknown) the
//! history is written whole in one transaction. Either way a reader sees the old state
//! and history or the new ones, never a mix.

use keel_envelope::ErrorPayload;
use keel_kernel::history::History;
use keel_kernel::model::Message;

use crate::api::{Epoch, PersistedSession, SessionSummary};
use crate::error::{check_session_id, store_error, StoreErrorKind};
use crate::store::{to_i64, PgStore, Written};

/// The fence of a state save: the session row, locked against a takeover until the
/// save commits.
const FENCE: &str = "\
SELECT 1 FROM keel_sessions WHERE session_id = $1 AND lease_epoch = $2
  AND lease_owner IS NOT NULL AND lease_expires_at > clock_timestamp() FOR SHARE";

const SAVE_GROWN: &str = "\
WITH f AS (
    SELECT 1 FROM keel_sessions WHERE session_id = $1 AND lease_epoch = $2
      AND lease_owner IS NOT NULL AND lease_expires_at > clock_timestamp() FOR SHARE
), s AS (
    UPDATE keel_states SET state = $3::text::json, summary = $4::text::json, history_len = $5,
        updated_at = $6
    WHERE session_id = $1 AND history_len = $7 AND EXISTS (SELECT 1 FROM f)
    RETURNING 1
), ins AS (
    INSERT INTO keel_history (session_id, position, message)
    SELECT $1, $7 + t.ord - 1, t.m::json FROM s, unnest($8::text[]) WITH ORDINALITY AS t(m, ord)
)
SELECT count(*) FROM s";

const SAVE_STATE: &str = "\
INSERT INTO keel_states (session_id, state, summary, history_len, updated_at)
VALUES ($1, $2::text::json, $3::text::json, $4, $5)
ON CONFLICT (session_id) DO UPDATE SET state = EXCLUDED.state, summary = EXCLUDED.summary,
    history_len = EXCLUDED.history_len, updated_at = EXCLUDED.updated_at";

const INSERT_HISTORY: &str = "\
INSERT INTO keel_history (session_id, position, message)
SELECT $1, t.ord - 1, t.m::json FROM unnest($2::text[]) WITH ORDINALITY AS t(m, ord)";

const LOAD: &str = "\
SELECT s.state::text, s.history_len,
       ARRAY(SELECT h.message::text FROM keel_history h
             WHERE h.session_id = s.session_id AND h.position < s.history_len
             ORDER BY h.position)
FROM keel_states s WHERE s.session_id = $1";

const SUMMARIES: &str = "\
SELECT session_id, summary::text FROM keel_states ORDER BY updated_at DESC, session_id";

fn encode_err(e: serde_json::Error) -> ErrorPayload {
    store_error(
        StoreErrorKind::InvalidInput,
        format!("cannot encode the state: {e}"),
    )
}

fn messages(history: &[Message]) -> Result<Vec<String>, ErrorPayload> {
    history
        .iter()
        .map(|m| serde_json::to_string(m).map_err(encode_err))
        .collect()
}

/// The state without its history, as stored.
fn bare(state: &PersistedSession) -> Result<String, ErrorPayload> {
    let bare = PersistedSession {
        history: History::new(),
        ..state.clone()
    };
    let mut value = serde_json::to_value(&bare).map_err(encode_err)?;
    if let Some(obj) = value.as_object_mut() {
        obj.remove("history");
    }
    serde_json::to_string(&value).map_err(encode_err)
}

fn corrupt(session_id: &str, what: &str, e: impl std::fmt::Display) -> ErrorPayload {
    store_error(
        StoreErrorKind::Corrupt,
        format!("the stored {what} of session {session_id} cannot be read: {e}"),
    )
}

impl PgStore {
    pub(crate) async fn save(
        &self,
        epoch: Epoch,
        state: &PersistedSession,
    ) -> Result<(), ErrorPayload> {
        let session_id = state.session_id.as_str();
        check_session_id(session_id)?;
        let state_text = bare(state)?;
        let summary = serde_json::to_string(&SessionSummary::of(state)).map_err(encode_err)?;
        let len = i32::try_from(state.history.len()).map_err(|_| {
            store_error(
                StoreErrorKind::InvalidInput,
                "a history of over 2^31 messages",
            )
        })?;
        let updated = to_i64(state.updated_at).unwrap_or(i64::MAX);
        let epoch_col = to_i64(epoch.0).unwrap_or(-1);
        let ids = state.history.ids();
        // Forgotten until this save succeeds: a save whose outcome is unknown leaves
        // the stored history unknown too.
        let known = self
            .written()
            .remove(session_id)
            .filter(|w| w.epoch == epoch && ids.starts_with(&w.ids))
            .map(|w| w.ids.len());
        let saved = self
            .retry("save a session's state", || async {
                let mut client = self.client().await?;
                if let Some(n) = known {
                    let n = i32::try_from(n).unwrap_or(i32::MAX);
                    let new = messages(&state.history[n as usize..])?;
                    let stmt = client
                        .prepare_cached(SAVE_GROWN)
                        .await
                        .map_err(|e| self.err(e))?;
                    let row = client
                        .query_one(
                            &stmt,
                            &[
                                &session_id,
                                &epoch_col,
                                &state_text,
                                &summary,
                                &len,
                                &updated,
                                &n,
                                &new,
                            ],
                        )
                        .await
                        .map_err(|e| self.err(e))?;
                    if row.get::<_, i64>(0) == 1 {
                        return Ok(true);
                    }
                }
                let all = messages(&state.history)?;
                let tx = client.transaction().await.map_err(|e| self.err(e))?;
                let stmt = tx.prepare_cached(FENCE).await.map_err(|e| self.err(e))?;
                let fence = tx
                    .query_opt(&stmt, &[&session_id, &epoch_col])
                    .await
                    .map_err(|e| self.err(e))?;
                if fence.is_none() {
                    return Ok(false);
                }
                let stmt = tx
                    .prepare_cached(SAVE_STATE)
                    .await
                    .map_err(|e| self.err(e))?;
                tx.execute(&stmt, &[&session_id, &state_text, &summary, &len, &updated])
                    .await
                    .map_err(|e| self.err(e))?;
                tx.execute(
                    "DELETE FROM keel_history WHERE session_id = $1",
                    &[&session_id],
                )
                .await
                .map_err(|e| self.err(e))?;
                let stmt = tx
                    .prepare_cached(INSERT_HISTORY)
                    .await
                    .map_err(|e| self.err(e))?;
                tx.execute(&stmt, &[&session_id, &all])
                    .await
                    .map_err(|e| self.err(e))?;
                tx.commit().await.map_err(|e| self.err(e))?;
                Ok(true)
            })
            .await?;
        if !saved {
            return Err(self.fenced(session_id, epoch, "save its state").await);
        }
        self.written().insert(
            session_id.to_owned(),
            Written {
                epoch,
                ids: ids.to_vec(),
            },
        );
        Ok(())
    }

    pub(crate) async fn load(
        &self,
        session_id: &str,
    ) -> Result<Option<PersistedSession>, ErrorPayload> {
        check_session_id(session_id)?;
        let row = self
            .retry("load a session's state", || async {
                let client = self.client().await?;
                let stmt = client.prepare_cached(LOAD).await.map_err(|e| self.err(e))?;
                client
                    .query_opt(&stmt, &[&session_id])
                    .await
                    .map_err(|e| self.err(e))
            })
            .await?;
        let Some(row) = row else { return Ok(None) };
        let Some(text) = row.get::<_, Option<String>>(0) else {
            return Ok(None);
        };
        let len: i32 = row.get(1);
        let lines: Vec<String> = row.get(2);
        let mut value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| corrupt(session_id, "state", e))?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("history".to_owned(), serde_json::Value::Array(Vec::new()));
        }
        let mut state: PersistedSession =
            serde_json::from_value(value).map_err(|e| corrupt(session_id, "state", e))?;
        if usize::try_from(len).ok() != Some(lines.len()) {
            return Err(corrupt(
                session_id,
                "history",
                format!("{} of its {len} messages are stored", lines.len()),
            ));
        }
        let messages = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str::<Message>(l)
                    .map_err(|e| corrupt(session_id, "history", format!("message {i}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        state.history = History::from(messages);
        Ok(Some(state))
    }

    pub(crate) async fn summaries(&self) -> Result<Vec<SessionSummary>, ErrorPayload> {
        let rows = self
            .retry("list sessions", || async {
                let client = self.client().await?;
                let stmt = client
                    .prepare_cached(SUMMARIES)
                    .await
                    .map_err(|e| self.err(e))?;
                client.query(&stmt, &[]).await.map_err(|e| self.err(e))
            })
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let id: &str = r.get(0);
            match serde_json::from_str::<SessionSummary>(r.get(1)) {
                Ok(s) => out.push(s),
                // One damaged row does not hide the others.
                Err(e) => tracing::warn!(target: "keel_store_pg", session_id = id, error = %e,
                    "a stored summary cannot be read"),
            }
        }
        Ok(out)
    }
}
