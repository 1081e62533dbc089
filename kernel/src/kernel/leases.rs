//! The lease keeper: in a store several nodes share, this node renews the lease of
//! every open session it holds, every third of the TTL, and stops serving a session
//! whose lease it lost ([`crate::base::ownership`]).
//!
//! A lease counts as lost when a renewal is refused (another node took the session
//! over, or the lease ran out), when no renewal succeeded for a whole TTL (the
//! database is unreachable, or the process was paused: the deadline is measured from
//! when the last successful renewal was *sent*, so it never ends after the store's),
//! or when the store fenced one of the session's writes. Then the session's running
//! request ends with `session.interrupted {reason: "lease_lost"}`, its queued ones
//! with `request.cancelled`, and `session.closed {reason: "lease_lost"}` follows; all
//! three reach this node's clients only (the store refuses them), and the session
//! leaves memory. It is not marked closed in the store: another node goes on with it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use keel_envelope::events::SessionInterrupted;
use keel_envelope::ids::IdKind;
use keel_envelope::Event;

use crate::base::ownership::is_fenced;
use crate::base::time::now_ms;
use crate::commands::lifecycle::close_session;
use crate::kernel::KernelInner;
use crate::session::Session;

/// Starts the keeper (once; it ends with the kernel).
pub(crate) fn start(inner: &Arc<KernelInner>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let ttl = inner.services.config().lease_ttl;
    let period = (ttl / 3).clamp(Duration::from_millis(20), Duration::from_secs(60));
    let weak: Weak<KernelInner> = Arc::downgrade(inner);
    let cancel = inner.services.cancel().clone();
    let wake = inner.services.lease_wake().clone();
    rt.spawn(async move {
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
                _ = wake.notified() => {}
            }
            let Some(inner) = weak.upgrade() else { return };
            tick(&inner).await;
        }
    });
}

/// Renews every held lease at once; hands the lost ones to [`stop`].
async fn tick(inner: &Arc<KernelInner>) {
    let held: Vec<Arc<Session>> = inner
        .open
        .loaded()
        .into_iter()
        .filter(|s| s.lease.is_leased())
        .collect();
    let renewals = held.into_iter().map(|s| {
        let store = inner.services.store().clone();
        async move {
            if !s.lease.is_live() {
                return Some(s);
            }
            let sent = now_ms();
            let id = s.id.clone();
            match tokio::task::spawn_blocking(move || store.renew(&id)).await {
                Ok(Ok(())) => {
                    s.lease.renewed(sent);
                    None
                }
                Ok(Err(e)) if is_fenced(&e) => {
                    tracing::warn!(session_id = %s.id, message = %e.message, "the session's lease was taken");
                    s.lease.lose();
                    Some(s)
                }
                Ok(Err(e)) => {
                    tracing::warn!(session_id = %s.id, code = %e.code, message = %e.message, "renewing the session's lease failed");
                    (!s.lease.is_live()).then_some(s)
                }
                Err(_) => None,
            }
        }
    });
    for lost in futures::future::join_all(renewals)
        .await
        .into_iter()
        .flatten()
    {
        let inner = inner.clone();
        tokio::spawn(async move { stop(&inner, lost).await });
    }
}

/// Stops serving a session whose lease is lost.
async fn stop(inner: &Arc<KernelInner>, session: Arc<Session>) {
    if !inner.open.remove_exact(&session) {
        return;
    }
    tracing::warn!(session_id = %session.id, epoch = ?session.lease.epoch(), "lease lost: this node stops serving the session");
    let rid = inner.services.next_id(IdKind::Request);
    let running = session.data().active.as_ref().is_some_and(|a| !a.ended);
    if !running {
        // Nothing to interrupt: the clients are told all the same.
        session
            .emitter
            .emit(
                &rid,
                Event::SessionInterrupted(SessionInterrupted::new("lease_lost", false)),
            )
            .await;
    }
    close_session(&session, &rid, "lease_lost").await;
    session.checkpoints.release();
    let _ = inner.services.store().release(&session.id);
}
