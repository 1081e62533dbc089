//! `session.watch` of a session this node does not serve, in a store several nodes
//! share: the answer and the replay come from the stored log (the same cursor rules
//! as a local watch), then the store's tail streams the events as the owner, on any
//! node, commits them. The tail starts right after the last event read, so nothing
//! is missed or sent twice; should this node take the session over meanwhile, the
//! events its own emitter delivers are not queued twice (the watcher remembers the
//! ids of the events it had). The watch ends when the watcher leaves or unwatches
//! the session, or when the session is closed or deleted.

use std::time::Duration;

use keel_envelope::commands::SessionWatch;
use keel_envelope::events::SessionWatched;
use keel_envelope::types::SessionState;
use keel_envelope::{ErrorCode, ErrorPayload, Event};

use super::Cx;
use crate::base::replay::{after_cursor, last_cursor, pending_prompts, unfinished_requests};
use crate::base::summary::SessionSummary;

/// How often a quiet tail checks that its watcher still wants it.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Watches stored session `p.sessionId` through the store's tail; a store without
/// one answers as for a session that is not open.
pub(crate) async fn watch(cx: &Cx<'_>, p: &SessionWatch) -> Result<(), ErrorPayload> {
    let id = p.session_id.as_str();
    let store = cx.services.store();
    let not_open = || {
        cx.open.require(id).err().unwrap_or_else(|| {
            ErrorPayload::new(ErrorCode::SessionNotFound, format!("no session {id:?}"))
        })
    };
    if !store.is_shared() {
        return Err(not_open());
    }
    let Some(state) = store.load_state(id)? else {
        return Err(not_open());
    };
    let log = store.load_events(id)?.events;
    let replay = after_cursor(&log, p.after_sequence.as_ref())?;
    let last = last_cursor(&log);
    let Some(mut tail) = store.tail(id, last.as_ref())? else {
        return Err(not_open());
    };
    let active = unfinished_requests(&log).pop();
    let mut info = SessionSummary::of(&state).info();
    if active.is_some() && info.state != SessionState::Closed {
        info.state = SessionState::Running;
    }
    let pending = match &active {
        Some(a) => pending_prompts(&log, a, replay),
        None => Vec::new(),
    };
    let answer = SessionWatched::new(info, (replay.len() + pending.len()) as u32)
        .active_request_id(active)
        .last_cursor(last);
    let hub = cx.services.ctx().hub.clone();
    {
        // Under the kernel emitter, so the answer and its replay go out together.
        let emitter = cx.services.emitter();
        let mut g = emitter.lock().await;
        g.emit_as(Some(id.to_owned()), cx.rid, Event::SessionWatched(answer))
            .await;
        hub.mark_tailed(cx.rid);
        g.replay(cx.rid, replay).await;
        g.replay(cx.rid, &pending).await;
    }
    let rid = cx.rid.to_owned();
    let sid = id.to_owned();
    tokio::spawn(async move {
        loop {
            match tokio::time::timeout(CHECK_EVERY, tail.recv()).await {
                Ok(Some(Ok(env))) => {
                    if !hub.deliver_tailed(&env, &rid) {
                        break;
                    }
                }
                Ok(Some(Err(e))) => {
                    tracing::warn!(session_id = %sid, code = %e.code, message = %e.message, "the store's tail of a watched session failed");
                    break;
                }
                Ok(None) => break,
                Err(_) => {
                    if !hub.is_watching(&rid, &sid) {
                        break;
                    }
                }
            }
        }
        tracing::debug!(session_id = %sid, "remote watch ended");
    });
    Ok(())
}
