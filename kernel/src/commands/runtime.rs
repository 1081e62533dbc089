//! The runtime: `runtime.shutdown` (every session closed, the store flushed) and
//! `harness.status` (open sessions, running background tasks and sub-agents).

use keel_envelope::commands::{HarnessStatusCmd, RuntimeShutdown};
use keel_envelope::events::HarnessStatus;
use keel_envelope::{ErrorPayload, Event};

use super::lifecycle::close_all;
use super::Cx;
use crate::base::summary::SessionSummary;

/// `runtime.shutdown`.
pub(crate) async fn shutdown(cx: &Cx<'_>, _: &RuntimeShutdown) -> Result<(), ErrorPayload> {
    close_all(cx.services, cx.open, "shutdown").await;
    Ok(())
}

/// `harness.status`.
pub(crate) async fn status(cx: &Cx<'_>, _: &HarnessStatusCmd) -> Result<(), ErrorPayload> {
    let mut status = HarnessStatus::new(Vec::new(), Vec::new(), Vec::new());
    for s in cx.open.loaded() {
        status.sessions.push(s.info());
        let d = s.data();
        status
            .background_tasks
            .extend(d.ext.background.running().cloned());
        status
            .sub_agents
            .extend(d.ext.sub_agents.active.iter().cloned());
    }
    for id in cx.open.unloaded_ids() {
        if let Ok(Some(state)) = cx.services.store().load_state(&id) {
            status.sessions.push(SessionSummary::of(&state).info());
        }
    }
    status
        .sessions
        .sort_by(|a, b| a.session_id.cmp(&b.session_id));
    cx.services
        .emitter()
        .emit(cx.rid, Event::HarnessStatus(status))
        .await;
    Ok(())
}
