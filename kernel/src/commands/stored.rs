//! Sessions as stored: `session.list` (stored and open sessions), `session.delete`
//! and `session.set_title`.

use std::collections::HashMap;
use std::sync::Arc;

use keel_envelope::commands::{SessionDelete, SessionListCmd, SetTitle};
use keel_envelope::events::{SessionDeleted, SessionList};
use keel_envelope::ids::IdKind;
use keel_envelope::types::SessionInfo;
use keel_envelope::{ErrorCode, ErrorPayload, Event};

use super::lifecycle::close_session;
use super::Cx;
use crate::session::open::Sessions;
use crate::session::services::Services;
use crate::session::Session;

/// `session.list`.
pub(crate) async fn list(cx: &Cx<'_>, _: &SessionListCmd) -> Result<(), ErrorPayload> {
    let sessions = infos(cx.services, cx.open)?;
    cx.services
        .emitter()
        .emit(cx.rid, Event::SessionList(SessionList { sessions }))
        .await;
    Ok(())
}

/// Stored and open sessions, most recently updated first.
pub(crate) fn infos(
    services: &Services,
    open: &Sessions,
) -> Result<Vec<SessionInfo>, ErrorPayload> {
    let live: HashMap<String, Arc<Session>> = open.loaded_by_id();
    let mut out: Vec<SessionInfo> = Vec::new();
    for stored in services.store().list_summaries()? {
        match live.get(&stored.session_id) {
            Some(s) => out.push(s.info()),
            None => out.push(stored.info()),
        }
    }
    for (id, s) in &live {
        if !out.iter().any(|i| &i.session_id == id) {
            out.push(s.info());
        }
    }
    out.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| a.session_id.cmp(&b.session_id))
    });
    Ok(out)
}

/// `session.delete`: closes the session if it is open (on a request id of its own,
/// as a shutdown does), removes its stored files, then answers `session.deleted`
/// on the command's stream (not logged: the log is gone).
pub(crate) async fn delete(cx: &Cx<'_>, p: &SessionDelete) -> Result<(), ErrorPayload> {
    let id = p.session_id.as_str();
    let open = cx.open.remove(id);
    if let Some(session) = &open {
        let rid = cx.services.next_id(IdKind::Request);
        close_session(session, &rid, "deleted").await;
    }
    cx.open.forget(id);
    let stored = cx.services.store().delete(id)?;
    if open.is_none() && !stored {
        return Err(ErrorPayload::new(
            ErrorCode::SessionNotFound,
            format!("no session {id:?} in the store"),
        )
        .with_detail("sessionId", id));
    }
    cx.services
        .emitter()
        .emit_as(
            Some(id.to_owned()),
            cx.rid,
            Event::SessionDeleted(SessionDeleted {
                session_id: id.to_owned(),
            }),
        )
        .await;
    Ok(())
}

/// `session.set_title`.
pub(crate) async fn set_title(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &SetTitle,
) -> Result<(), ErrorPayload> {
    let title = crate::base::title::validate(&p.title)?;
    session.set_title(cx.rid, title, "host").await;
    Ok(())
}
