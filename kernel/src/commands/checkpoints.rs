//! Checkpoints and rewind: `checkpoint.list` and `session.rewind` (files and/or the
//! conversation, cut at the request marks kept in the persisted state). A rewind of
//! files first records the state it replaces, names that checkpoint in its answer,
//! and says which other open sessions share the workspace and which files their
//! checkpoints recorded as changed since the target. The checkpoints themselves are
//! the session's book ([`crate::session::checkpoints`]).

use std::sync::Arc;

use keel_envelope::commands::{CheckpointListCmd, SessionRewind};
use keel_envelope::events::SessionRewound;
use keel_envelope::{ErrorPayload, Event};

use super::{invalid, refuse_while_running, Cx};
use crate::session::checkpoints::{
    self, history_len_of, marks, not_found, restore_files, wire_report,
};
use crate::session::Session;

/// `checkpoint.list`.
pub(crate) async fn list(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &CheckpointListCmd,
) -> Result<(), ErrorPayload> {
    let list = checkpoints::list(session).await?;
    session
        .emitter
        .emit(cx.rid, Event::CheckpointList(list))
        .await;
    Ok(())
}

/// `session.rewind`.
pub(crate) async fn rewind(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &SessionRewind,
) -> Result<(), ErrorPayload> {
    let rid = cx.rid;
    let id = match (&p.to_request_id, &p.to_tool_call_id) {
        (Some(r), None) => r.clone(),
        (None, Some(c)) => c.clone(),
        _ => {
            return Err(invalid(
                "give exactly one of `toRequestId` and `toToolCallId`",
                "payload.toRequestId",
            ))
        }
    };
    let files = p.files.unwrap_or(true);
    let conversation = p.conversation.unwrap_or(true);
    if !files && !conversation {
        return Err(invalid(
            "nothing to rewind: `files` and `conversation` are both false",
            "payload.files",
        ));
    }
    // Held to the end: no request starts while files are put back.
    let _turnover = session.turnover.lock().await;
    if let Some(e) = refuse_while_running(session, "a rewind") {
        return Err(e);
    }
    let (restored, history_len) = if files {
        let r = restore_files(session, id.clone(), rid).await?;
        let len = r.history_len;
        (Some(r), Some(len))
    } else {
        let len = match history_len_of(session, id.clone()).await? {
            Some(len) => Some(len),
            None => marks(session)
                .iter()
                .find(|m| m.request_id == id)
                .map(|m| m.history_len),
        };
        (None, len)
    };
    let mut conversation_cut = false;
    if conversation {
        let Some(len) = history_len else {
            return Err(not_found(&id));
        };
        let mut d = session.data();
        if len < d.state.history.len() {
            d.state.history.truncate(len);
            conversation_cut = true;
        }
        d.state
            .request_marks
            .retain(|m| m.history_len < len || (m.history_len == len && m.request_id != id));
    }
    let shared = checkpoints::shared_with(session, cx.open.loaded(), None).await;
    let (undo, others, report) = match restored {
        Some(r) => (Some(r.undo), r.changed_by_others, Some(r.report)),
        None => (None, Vec::new(), None),
    };
    let (files, not_restorable) = report.map(wire_report).unwrap_or_default();
    session
        .emitter
        .emit(
            rid,
            Event::SessionRewound(
                SessionRewound::new(files, not_restorable, conversation_cut)
                    .undo_checkpoint_id(undo)
                    .shared_with(Some(shared).filter(|s| !s.is_empty()))
                    .changed_by_others(Some(others).filter(|o| !o.is_empty())),
            ),
        )
        .await;
    session.persist(rid).await;
    Ok(())
}
