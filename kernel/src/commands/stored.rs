//! Sessions as stored: `session.list` (stored and open sessions), `session.delete`
//! (with the session's worktree, unless it has uncommitted changes) and
//! `session.set_title`.

use std::collections::HashMap;
use std::sync::Arc;

use keel_envelope::commands::{SessionDelete, SessionListCmd, SetTitle};
use keel_envelope::events::{SessionDeleted, SessionList, WorktreeRemoved};
use keel_envelope::ids::IdKind;
use keel_envelope::types::SessionInfo;
use keel_envelope::{ErrorCode, ErrorPayload, Event};

use super::lifecycle::close_session;
use super::Cx;
use crate::session::open::Sessions;
use crate::session::services::Services;
use crate::session::worktree;
use crate::session::Session;

/// `session.list`.
pub(crate) async fn list(cx: &Cx<'_>, _: &SessionListCmd) -> Result<(), ErrorPayload> {
    let sessions = infos(cx.services, cx.open)?;
    cx.services
        .emitter()
        .emit(cx.rid, Event::SessionList(SessionList::new(sessions)))
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
    if cx.open.get(id).is_none() {
        // Another node serves it: deleting under it would cut its work short.
        if let Some(owner) = cx.services.store().owner_of(id)? {
            if owner.live && owner.owner != cx.services.node() {
                return Err(crate::base::ownership::owned_elsewhere(id, &owner));
            }
        }
    }
    let open = cx.open.remove(id);
    // Its worktree, read before the state goes.
    let tree = match &open {
        Some(s) => worktree::of_state(&s.data().state),
        None => cx
            .services
            .store()
            .load_state(id)
            .ok()
            .flatten()
            .and_then(|st| worktree::of_state(&st)),
    };
    if let Some(session) = &open {
        let rid = cx.services.next_id(IdKind::Request);
        close_session(session, &rid, "deleted").await;
    }
    cx.open.forget(id);
    let stored = cx.services.store().delete(id)?;
    // What only this session's checkpoints used is freed too.
    crate::session::checkpoints::forget_session(cx.services, id).await;
    if let Some(name) = tree.as_ref().and_then(worktree::name_of) {
        remove_worktree(cx, id, &name).await;
    }
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
            Event::SessionDeleted(SessionDeleted::new(id.to_owned())),
        )
        .await;
    Ok(())
}

/// Removes a deleted session's worktree, answering `worktree.removed`; one with
/// uncommitted changes is kept (a `warning` says so; `worktree.remove {force}`
/// takes it away).
async fn remove_worktree(cx: &Cx<'_>, id: &str, name: &str) {
    let emitter = cx.services.emitter();
    let ev = match worktree::remove(cx.services, name, false).await {
        Ok(r) => Event::WorktreeRemoved(WorktreeRemoved::new(r.info, r.branch_kept)),
        Err(e) if e.code == ErrorCode::WorktreeNotFound => return,
        Err(mut e) => {
            e.message = format!("{}; the worktree is kept", e.message);
            Event::Warning(e.severity(keel_envelope::error::Severity::Warning))
        }
    };
    emitter.emit_as(Some(id.to_owned()), cx.rid, ev).await;
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
