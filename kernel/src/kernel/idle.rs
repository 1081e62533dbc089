//! Idle sessions leave memory: a session that has done nothing for
//! [`crate::KernelConfig::idle_unload_after`] (no request running or queued, no
//! approval or question pending, no background process, sub-agent or side question
//! in flight) is saved and dropped from the kernel's map; the next command that names
//! it reloads it from its state and log, with its sequences where they were, so a host
//! sees no difference. A sweep runs before each command and on a timer.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use keel_envelope::types::SessionState;
use keel_envelope::{ErrorPayload, Sequencer};

use crate::kernel::{Kernel, KernelInner};
use crate::session::Session;

/// Ids of the sessions dropped from memory while open.
#[derive(Debug, Default)]
pub(crate) struct Unloaded {
    ids: Mutex<HashSet<String>>,
    /// Whether the timer sweep runs.
    timer: std::sync::atomic::AtomicBool,
}

impl Unloaded {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets `id` (closed or deleted).
    pub(crate) fn forget(&self, id: &str) -> bool {
        self.ids().remove(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.ids().len()
    }

    pub(crate) fn list(&self) -> Vec<String> {
        self.ids().iter().cloned().collect()
    }
}

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
    session.info_state(&d) == SessionState::Idle
        && d.queue.is_empty()
        && d.runner.as_ref().is_none_or(|r| r.is_finished())
        && d.ext.processes.is_empty()
        && d.ext.sub_agents.active.is_empty()
        && !d
            .ext
            .background
            .tasks
            .iter()
            .any(|t| t.status == keel_envelope::ext::BackgroundStatus::Running)
}

/// Milliseconds of real time since the first call in this process (idle times are
/// real time, whatever clock stamps the events).
pub(crate) fn now_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let start = START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// When the session was last named by a command or last saved.
fn last_active(session: &Session) -> u64 {
    session.last_used.load(Ordering::Acquire)
}

impl Kernel {
    /// Drops from memory the open sessions idle for longer than
    /// [`crate::KernelConfig::idle_unload_after`] (nothing when it is `None`); returns
    /// their ids. They stay open: the next command naming one reloads it.
    pub fn unload_idle_sessions(&self) -> Vec<String> {
        sweep(&self.inner)
    }

    /// Ids of the sessions held in memory (open sessions not unloaded).
    pub fn loaded_sessions(&self) -> Vec<String> {
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Starts the timer sweep once (it ends with the kernel).
    pub(crate) fn start_idle_timer(&self) {
        let Some(after) = self.inner.config.idle_unload_after.filter(|d| !d.is_zero()) else {
            return;
        };
        if self.inner.unloaded.timer.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.inner.unloaded.timer.store(false, Ordering::Release);
            return;
        };
        let period = (after / 2).clamp(Duration::from_millis(100), Duration::from_secs(60));
        let weak: Weak<KernelInner> = Arc::downgrade(&self.inner);
        let cancel = self.inner.cancel.clone();
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

    /// Brings back an unloaded session from the store (`None` when `id` was not
    /// unloaded).
    pub(crate) fn reload(&self, id: &str) -> Result<Option<Arc<Session>>, ErrorPayload> {
        let inner = &self.inner;
        // Held while reloading, so two commands naming the session reload it once.
        let mut map = inner.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = map.get(id) {
            return Ok(Some(s.clone()));
        }
        if !inner.unloaded.ids().contains(id) {
            return Ok(None);
        }
        let Some(mut state) = inner.ctx.store.load_state(id)? else {
            inner.unloaded.forget(id);
            return Ok(None);
        };
        let log = inner.ctx.store.load_events(id)?;
        let mut seq = Sequencer::new();
        for env in &log.events {
            seq.restore(&env.request_id, env.sequence);
        }
        let model = match self.model_for(Some(&state.model)) {
            Ok(m) => m,
            Err(_) => self.model_for(None)?,
        };
        state.model = model.id();
        let session = Session::new(inner.clone(), state, model, seq);
        session.touch();
        map.insert(id.to_owned(), session.clone());
        inner.unloaded.forget(id);
        tracing::info!(session_id = %id, "idle session reloaded");
        Ok(Some(session))
    }
}

fn sweep(inner: &Arc<KernelInner>) -> Vec<String> {
    let Some(after) = inner.config.idle_unload_after else {
        return Vec::new();
    };
    let now = now_ms();
    let limit = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
    let candidates: Vec<Arc<Session>> = inner
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .filter(|s| now.saturating_sub(last_active(s)) >= limit && is_idle(s))
        .cloned()
        .collect();
    let mut out = Vec::new();
    for session in candidates {
        // Saved first (so the reload finds everything), then dropped if still idle.
        let saved = {
            let mut d = session.data();
            let crate::session::Data { state, ext, .. } = &mut *d;
            ext.save(&mut state.extensions);
            inner.ctx.store.save_state(state)
        };
        if let Err(e) = saved {
            tracing::warn!(session_id = %session.id, code = %e.code, "an idle session was kept in memory: saving it failed");
            continue;
        }
        let mut map = inner.sessions.lock().unwrap_or_else(|p| p.into_inner());
        // Looked at again under the map's lock: a command that took the session from
        // the map since touched it, and is not idle any more.
        let still = now.saturating_sub(last_active(&session)) >= limit && is_idle(&session);
        if !still
            || !map
                .get(&session.id)
                .is_some_and(|s| Arc::ptr_eq(s, &session))
        {
            continue;
        }
        map.remove(&session.id);
        inner.unloaded.ids().insert(session.id.clone());
        drop(map);
        // Its checkpoint engine (and watcher) goes with it, and the store lets go of
        // its log; the reload reopens both.
        session.checkpoints.release();
        if let Err(e) = inner.ctx.store.release(&session.id) {
            tracing::warn!(session_id = %session.id, code = %e.code, "releasing an idle session's log failed");
        }
        tracing::info!(session_id = %session.id, "idle session unloaded");
        out.push(session.id.clone());
    }
    out
}
