//! Turning events into envelopes and delivering them: ids, timestamps, the sequence
//! rule, append-before-deliver, and bounded delivery to subscribers (backpressure).

use std::sync::{Arc, Mutex};

use keel_envelope::ids::{Clock, IdGen, IdKind};
use keel_envelope::{Envelope, Event, Meta, Sequencer, Source};
use tokio::sync::mpsc;

use crate::store::Store;

/// One subscriber: a bounded channel and the session it follows (`None` = all).
#[derive(Debug)]
struct Subscriber {
    session: Option<String>,
    tx: mpsc::Sender<Envelope>,
}

/// Delivers envelopes to subscribers. Sending waits when a subscriber's channel is
/// full, so a slow host slows the session down instead of growing memory.
#[derive(Debug, Default)]
pub(crate) struct Hub {
    subs: Mutex<Vec<Subscriber>>,
}

impl Hub {
    pub(crate) fn subscribe(
        &self,
        session: Option<String>,
        capacity: usize,
    ) -> mpsc::Receiver<Envelope> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        self.subs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Subscriber { session, tx });
        rx
    }

    pub(crate) async fn deliver(&self, env: &Envelope) {
        let targets: Vec<mpsc::Sender<Envelope>> = {
            let mut subs = self.subs.lock().unwrap_or_else(|p| p.into_inner());
            subs.retain(|s| !s.tx.is_closed());
            subs.iter()
                .filter(|s| {
                    s.session.is_none() || s.session.as_deref() == env.session_id.as_deref()
                })
                .map(|s| s.tx.clone())
                .collect()
        };
        for tx in targets {
            // A closed receiver just means that subscriber left.
            let _ = tx.send(env.clone()).await;
        }
    }
}

/// Shared services for emitting.
#[derive(Debug, Clone)]
pub(crate) struct EmitCtx {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) ids: Arc<dyn IdGen>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) store: Arc<dyn Store>,
}

/// Emits the events of one session (or of the kernel itself when `session_id` is
/// `None`). One emitter per session keeps the session's events in order.
#[derive(Debug)]
pub(crate) struct Emitter {
    ctx: EmitCtx,
    session_id: Option<String>,
    sequencer: tokio::sync::Mutex<Sequencer>,
    persist: bool,
}

impl Emitter {
    pub(crate) fn new(
        ctx: EmitCtx,
        session_id: Option<String>,
        persist: bool,
        sequencer: Sequencer,
    ) -> Self {
        Self {
            ctx,
            session_id,
            sequencer: tokio::sync::Mutex::new(sequencer),
            persist,
        }
    }

    /// Emits one event on `request_id`'s stream.
    pub(crate) async fn emit(&self, request_id: &str, event: Event) -> Envelope {
        self.emit_with(request_id, event, Source::Runtime, None)
            .await
    }

    /// Emits one event answering command `reply_to` on `request_id`'s stream.
    pub(crate) async fn emit_reply(
        &self,
        request_id: &str,
        reply_to: Option<&str>,
        event: Event,
    ) -> Envelope {
        let meta = reply_to.filter(|r| *r != request_id).map(|r| Meta {
            reply_to: Some(r.to_owned()),
            ..Meta::default()
        });
        self.emit_with(request_id, event, Source::Runtime, meta)
            .await
    }

    /// Emits on behalf of a session this emitter does not own (kernel-level answers
    /// about unknown sessions); never logged.
    pub(crate) async fn emit_as(
        &self,
        session_id: Option<String>,
        request_id: &str,
        event: Event,
    ) -> Envelope {
        let mut seq = self.sequencer.lock().await;
        let env = Envelope {
            version: keel_envelope::PROTOCOL_VERSION.to_owned(),
            session_id,
            request_id: request_id.to_owned(),
            event_id: self.ctx.ids.next_id(IdKind::Event),
            timestamp: self.ctx.clock.now_ms(),
            source: Source::Runtime,
            sequence: seq.next(request_id),
            event,
            meta: None,
        };
        self.ctx.hub.deliver(&env).await;
        env
    }

    /// Emits with an explicit source and meta.
    pub(crate) async fn emit_with(
        &self,
        request_id: &str,
        event: Event,
        source: Source,
        meta: Option<Meta>,
    ) -> Envelope {
        // The lock is held through append and delivery so the session's events reach
        // every subscriber in sequence order.
        let mut seq = self.sequencer.lock().await;
        let sequence = seq.next(request_id);
        let env = Envelope {
            version: keel_envelope::PROTOCOL_VERSION.to_owned(),
            session_id: self.session_id.clone(),
            request_id: request_id.to_owned(),
            event_id: self.ctx.ids.next_id(IdKind::Event),
            timestamp: self.ctx.clock.now_ms(),
            source,
            sequence,
            event,
            meta: meta.filter(|m| !m.is_empty()),
        };
        if self.persist {
            if let Some(sid) = &self.session_id {
                if let Err(e) = self.ctx.store.append(sid, &env) {
                    // The event is still delivered; the host learns that persistence failed.
                    let warn_seq = seq.next(request_id);
                    let warning = Envelope {
                        sequence: warn_seq,
                        event_id: self.ctx.ids.next_id(IdKind::Event),
                        event: Event::Warning(e),
                        meta: None,
                        ..env.clone()
                    };
                    self.ctx.hub.deliver(&env).await;
                    self.ctx.hub.deliver(&warning).await;
                    return env;
                }
            }
        }
        self.ctx.hub.deliver(&env).await;
        env
    }

    /// Delivers already-logged envelopes again (resume replay) without logging them.
    pub(crate) async fn replay(&self, events: &[Envelope]) {
        let _guard = self.sequencer.lock().await;
        for env in events {
            let mut env = env.clone();
            let mut meta = env.meta.take().unwrap_or_default();
            meta.replay = Some(true);
            env.meta = Some(meta);
            self.ctx.hub.deliver(&env).await;
        }
    }
}
