//! Idle sessions leave memory: a session that has done nothing for
//! [`crate::KernelConfig::idle_unload_after`] (no request running or queued, no
//! approval or question pending, no background process, sub-agent or side question
//! in flight) is saved and dropped from the kernel's map; the next command that names
//! it reloads it from its state and log, with its sequences where they were, so a host
//! sees no difference. A sweep runs before each command and on a timer.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use keel_envelope::types::SessionState;

use crate::base::time::now_ms;
use crate::kernel::KernelInner;
use crate::session::Session;

/// Whether the session does nothing that lives only in memory. A session with host
/// tools or MCP servers stays: those tools (and the servers' processes) are not in
/// its stored state.
fn is_idle(session: &Session) -> bool {
    if session.sides.load(Ordering::Acquire) > 0
        || !session.tools.host_names().is_empty()
        || !session.mcp.list().is_empty()
    {
        return false;
    }
    let d = session.data();
    d.session_state() == SessionState::Idle
        && d.queue.is_empty()
        && d.runner.as_ref().is_none_or(|r| r.is_finished())
        && d.ext.processes.is_empty()
        && d.ext.sub_agents.active.is_empty()
        && !d.ext.background.has_running()
}

/// When the session was last named by a command or last saved.
fn last_active(session: &Session) -> u64 {
    session.last_used.load(Ordering::Acquire)
}

/// Starts the timer sweep once (it ends with the kernel).
pub(crate) fn start_timer(inner: &Arc<KernelInner>) {
    let Some(after) = inner
        .services
        .config()
        .idle_unload_after
        .filter(|d| !d.is_zero())
    else {
        return;
    };
    if inner.idle_timer.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        inner.idle_timer.store(false, Ordering::Release);
        return;
    };
    let period = (after / 2).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let weak: Weak<KernelInner> = Arc::downgrade(inner);
    let cancel = inner.services.cancel().clone();
    rt.spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            let Some(inner) = weak.upgrade() else { return };
            sweep(&inner);
        }
    });
}

/// Drops from memory the sessions idle for longer than the limit; returns their ids.
pub(crate) fn sweep(inner: &Arc<KernelInner>) -> Vec<String> {
    let Some(after) = inner.services.config().idle_unload_after else {
        return Vec::new();
    };
    let now = now_ms();
    let limit = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
    let candidates: Vec<Arc<Session>> = inner
        .open
        .loaded()
        .into_iter()
        .filter(|s| now.saturating_sub(last_active(s)) >= limit && is_idle(s))
        .collect();
    let mut out = Vec::new();
    for session in candidates {
        // Saved first (so the reload finds everything), then dropped if still idle.
        let saved = {
            let mut d = session.data();
            let crate::session::Data { state, ext, .. } = &mut *d;
            ext.save(&mut state.extensions);
            inner.services.store().save_state(state)
        };
        if let Err(e) = saved {
            tracing::warn!(session_id = %session.id, code = %e.code, "an idle session was kept in memory: saving it failed");
            continue;
        }
        // Looked at again under the map's lock: a command that took the session from
        // the map since touched it, and is not idle any more.
        let unloaded = inner.open.unload(&session, |s| {
            now.saturating_sub(last_active(s)) >= limit && is_idle(s)
        });
        if !unloaded {
            continue;
        }
        // Its checkpoint engine (and watcher) goes with it, and the store lets go of
        // its log; the reload reopens both.
        session.checkpoints.release();
        if let Err(e) = inner.services.store().release(&session.id) {
            tracing::warn!(session_id = %session.id, code = %e.code, "releasing an idle session's log failed");
        }
        tracing::info!(session_id = %session.id, "idle session unloaded");
        out.push(session.id.clone());
    }
    out
}
