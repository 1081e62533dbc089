//! Turning events into envelopes and delivering them: ids, timestamps, the sequence
//! rule, append-before-deliver; the subscribers are the [`Hub`]'s.
//!
//! Append-before-deliver holds for every event. On a store several nodes share (a
//! database, where each commit costs a disk sync and a round trip) the streamed events
//! of a turn (text and thought deltas, progress) are not waited for one by one: the
//! emitter hands them to the session's writer task and goes on, the writer appends
//! what has arrived as one batch (one commit) and then delivers it, and every other
//! event, and anything that reads the log under the emitter, first waits until what was
//! handed over is committed and delivered ([`EmitGuard::settle`]). So the order of a
//! session's events is the same on every path, a client never sees an event before its
//! commit, and a request's stream costs one commit per batch instead of one per event.

use futures::future::BoxFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use keel_envelope::ids::{Clock, IdGen, IdKind};
use keel_envelope::{Envelope, ErrorCode, ErrorPayload, Event, Meta, Sequencer, Source};
use tokio::sync::{mpsc, watch};

use crate::base::hub::Hub;
use crate::base::ownership::{is_fenced, LeaseCell};
use crate::base::store::Store;

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
    /// The session's lease: once it is lost nothing more is logged, and only the
    /// events that tell this node's clients the session stopped are delivered.
    lease: Option<Arc<LeaseCell>>,
    /// The OpenTelemetry trace id of each running request whose spans are exported:
    /// its events carry it as `meta.traceId`.
    traces: Mutex<Vec<(String, String)>>,
    /// The writer of streamed events, for a session on a shared store (see the
    /// module documentation).
    pipe: Option<Pipe>,
}

/// At most this many streamed events in one commit.
pub(crate) const MAX_BATCH: usize = 256;

/// How many streamed events may wait for the writer before the emitter waits too.
const PIPE_CAPACITY: usize = 1024;

/// Whether `event` is one of a turn's streamed events, which a pipelined emitter
/// hands to its writer without waiting for their commit. None of them ends anything.
fn streams(event: &Event) -> bool {
    matches!(
        event,
        Event::AssistantDelta(_)
            | Event::AssistantThoughtSummary(_)
            | Event::ToolCallProgress(_)
            | Event::SubAgentProgress(_)
    )
}

/// A session's writer of streamed events: a task that appends what has arrived as
/// one batch, then delivers it.
#[derive(Debug, Default)]
struct Pipe {
    /// Started with the first streamed event.
    tx: OnceLock<mpsc::Sender<Envelope>>,
    /// Events handed over (changed only under the emitter's lock).
    queued: AtomicU64,
    /// Events the writer is done with (committed and delivered, or dropped).
    done: Arc<watch::Sender<u64>>,
    /// A batch the store could not append (its events were delivered all the same):
    /// the request it was on and the error, told by the next settle.
    failed: Arc<Mutex<Option<(String, ErrorPayload)>>>,
}

impl Pipe {
    fn sender(&self, em: &Emitter, session_id: &str) -> &mpsc::Sender<Envelope> {
        self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::channel(PIPE_CAPACITY);
            tokio::spawn(write(
                em.ctx.clone(),
                session_id.to_owned(),
                em.lease.clone(),
                rx,
                self.done.clone(),
                self.failed.clone(),
            ));
            tx
        })
    }
}

/// The writer task of a [`Pipe`]: ends when the emitter is gone and its queue is empty.
async fn write(
    ctx: EmitCtx,
    session_id: String,
    lease: Option<Arc<LeaseCell>>,
    mut rx: mpsc::Receiver<Envelope>,
    done: Arc<watch::Sender<u64>>,
    failed: Arc<Mutex<Option<(String, ErrorPayload)>>>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(env) => batch.push(env),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        if lease.as_ref().is_none_or(|l| l.is_live()) {
            let (store, sid) = (ctx.store.clone(), session_id.clone());
            let appended = tokio::task::spawn_blocking(move || {
                let r = store.append_batch(&sid, &batch);
                (batch, r)
            })
            .await;
            match appended {
                Ok((batch, Ok(()))) => {
                    for env in &batch {
                        ctx.hub.deliver(env).await;
                    }
                }
                Ok((_, Err(e))) if is_fenced(&e) => {
                    if let Some(lease) = &lease {
                        lease.lose();
                    }
                    // Streamed events end nothing: none of them is owed to a client.
                    tracing::warn!(session_id = %session_id, message = %e.message, "the store fenced this node's write: the lease is lost");
                }
                Ok((batch, Err(e))) => {
                    // Delivered all the same; the next settle tells the host.
                    for env in &batch {
                        ctx.hub.deliver(env).await;
                    }
                    let rid = batch
                        .last()
                        .map(|e| e.request_id.clone())
                        .unwrap_or_default();
                    lock(&failed).get_or_insert((rid, e));
                }
                Err(join) => {
                    let e = ErrorPayload::new(
                        ErrorCode::SessionPersistenceFailed,
                        format!("appending the session's streamed events failed: {join}"),
                    );
                    lock(&failed).get_or_insert((String::new(), e));
                }
            }
        }
        done.send_modify(|d| *d += n);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An emitter held exclusively: nothing else of its session is emitted (appended or
/// delivered) until it is dropped, so reading the log and emitting under one guard is
/// atomic with respect to the session's event stream.
#[derive(Debug)]
pub(crate) struct EmitGuard<'a> {
    em: &'a Emitter,
    seq: tokio::sync::MutexGuard<'a, Sequencer>,
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
            lease: None,
            traces: Mutex::new(Vec::new()),
            pipe: None,
        }
    }

    /// The emitter of a session held under `lease`. On a store other nodes share, its
    /// streamed events are committed in batches (see the module documentation).
    pub(crate) fn with_lease(mut self, lease: Arc<LeaseCell>) -> Self {
        self.lease = Some(lease);
        if self.persist && self.session_id.is_some() && self.ctx.store.is_shared() {
            self.pipe = Some(Pipe::default());
        }
        self
    }

    /// From now on the events of `request_id` carry `trace_id` as `meta.traceId`
    /// (`None`: no longer).
    pub(crate) fn set_trace(&self, request_id: &str, trace_id: Option<String>) {
        let mut t = self.traces.lock().unwrap_or_else(|p| p.into_inner());
        t.retain(|(r, _)| r != request_id);
        if let Some(id) = trace_id {
            t.push((request_id.to_owned(), id));
        }
    }

    fn trace_of(&self, request_id: &str) -> Option<String> {
        let t = self.traces.lock().unwrap_or_else(|p| p.into_inner());
        t.iter()
            .find(|(r, _)| r == request_id)
            .map(|(_, id)| id.clone())
    }

    /// Takes the emitter exclusively, once every event emitted before is committed and
    /// delivered (so the log read under the guard holds every event sent so far).
    pub(crate) async fn lock(&self) -> EmitGuard<'_> {
        let mut g = self.take().await;
        Box::pin(g.settle()).await;
        g
    }

    /// Takes the emitter exclusively; streamed events may still be on their way.
    async fn take(&self) -> EmitGuard<'_> {
        EmitGuard {
            em: self,
            seq: self.sequencer.lock().await,
        }
    }

    /// Emits one event on `request_id`'s stream.
    ///
    /// The emitting futures are boxed: an event is emitted from most steps of a
    /// request, and unboxed, every `async fn` that awaits one would carry the emitter's
    /// whole state (several KB) in its own, so each running request's future with it.
    pub(crate) fn emit<'a>(&'a self, request_id: &'a str, event: Event) -> BoxFuture<'a, Envelope> {
        Box::pin(async move { self.take().await.emit(request_id, event).await })
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
    pub(crate) fn emit_as<'a>(
        &'a self,
        session_id: Option<String>,
        request_id: &'a str,
        event: Event,
    ) -> BoxFuture<'a, Envelope> {
        Box::pin(async move {
            let mut g = self.take().await;
            g.emit_as(session_id, request_id, event).await
        })
    }

    /// Emits with an explicit source and meta.
    pub(crate) fn emit_with<'a>(
        &'a self,
        request_id: &'a str,
        event: Event,
        source: Source,
        meta: Option<Meta>,
    ) -> BoxFuture<'a, Envelope> {
        Box::pin(async move {
            self.take()
                .await
                .emit_with(request_id, event, source, meta)
                .await
        })
    }
}

impl EmitGuard<'_> {
    /// Waits until every streamed event handed to the writer is committed and
    /// delivered; a batch the store could not append is told now, as a `warning`.
    pub(crate) async fn settle(&mut self) {
        let Some(pipe) = &self.em.pipe else {
            return;
        };
        let target = pipe.queued.load(Ordering::Acquire);
        let mut done = pipe.done.subscribe();
        // The sender lives as long as the emitter, so this ends when the writer has.
        let _ = done.wait_for(|d| *d >= target).await;
        let failed = lock(&pipe.failed).take();
        if let Some((rid, e)) = failed {
            let env = self.envelope(
                self.em.session_id.clone(),
                &rid,
                Event::Warning(e),
                Source::Runtime,
                None,
            );
            self.em.ctx.hub.deliver(&env).await;
        }
    }

    fn envelope(
        &mut self,
        session_id: Option<String>,
        request_id: &str,
        event: Event,
        source: Source,
        meta: Option<Meta>,
    ) -> Envelope {
        let meta = match self.em.trace_of(request_id) {
            Some(trace_id) => {
                let mut m = meta.unwrap_or_default();
                m.trace_id.get_or_insert(trace_id);
                Some(m)
            }
            None => meta,
        };
        Envelope {
            version: keel_envelope::PROTOCOL_VERSION.to_owned(),
            session_id,
            request_id: request_id.to_owned(),
            event_id: self.em.ctx.ids.next_id(IdKind::Event),
            timestamp: self.em.ctx.clock.now_ms(),
            source,
            sequence: self.seq.next(request_id),
            event,
            meta: meta.filter(|m| !m.is_empty()),
        }
    }

    /// Emits one event on `request_id`'s stream.
    pub(crate) async fn emit(&mut self, request_id: &str, event: Event) -> Envelope {
        self.emit_with(request_id, event, Source::Runtime, None)
            .await
    }

    /// [`Emitter::emit_as`] under the guard: never logged.
    pub(crate) async fn emit_as(
        &mut self,
        session_id: Option<String>,
        request_id: &str,
        event: Event,
    ) -> Envelope {
        self.settle().await;
        let env = self.envelope(session_id, request_id, event, Source::Runtime, None);
        self.em.ctx.hub.deliver(&env).await;
        env
    }

    /// Emits an event that is about a client's view of the session rather than the
    /// session itself (`session.watched`, `session.unwatched`): delivered in order with
    /// the session's events, never logged.
    pub(crate) async fn emit_unlogged(&mut self, request_id: &str, event: Event) -> Envelope {
        self.settle().await;
        let sid = self.em.session_id.clone();
        let env = self.envelope(sid, request_id, event, Source::Runtime, None);
        self.em.ctx.hub.deliver(&env).await;
        env
    }

    /// Emits with an explicit source and meta. The event is appended to the session's
    /// log before it is delivered.
    pub(crate) async fn emit_with(
        &mut self,
        request_id: &str,
        event: Event,
        source: Source,
        meta: Option<Meta>,
    ) -> Envelope {
        let streamed = streams(&event);
        if !streamed {
            self.settle().await;
        }
        let sid = self.em.session_id.clone();
        let env = self.envelope(sid, request_id, event, source, meta);
        if let (true, Some(pipe), Some(sid)) = (streamed, &self.em.pipe, &self.em.session_id) {
            pipe.queued.fetch_add(1, Ordering::AcqRel);
            if pipe.sender(self.em, sid).send(env.clone()).await.is_err() {
                // The writer is gone (the runtime is shutting down): not delivered.
                pipe.done.send_modify(|d| *d += 1);
            }
            return env;
        }
        if self.em.persist {
            if let Some(sid) = &self.em.session_id {
                if let Some(lease) = &self.em.lease {
                    if !lease.is_live() {
                        self.fenced_out(&env).await;
                        return env;
                    }
                }
                if let Err(e) = self.em.ctx.store.append(sid, &env) {
                    if is_fenced(&e) {
                        if let Some(lease) = &self.em.lease {
                            lease.lose();
                        }
                        tracing::warn!(session_id = %sid, message = %e.message, "the store fenced this node's write: the lease is lost");
                        self.fenced_out(&env).await;
                        return env;
                    }
                    // The event is still delivered; the host learns that persistence failed.
                    let warning = Envelope {
                        sequence: self.seq.next(request_id),
                        event_id: self.em.ctx.ids.next_id(IdKind::Event),
                        event: Event::Warning(e),
                        meta: None,
                        ..env.clone()
                    };
                    self.em.ctx.hub.deliver(&env).await;
                    self.em.ctx.hub.deliver(&warning).await;
                    return env;
                }
            }
        }
        self.em.ctx.hub.deliver(&env).await;
        env
    }

    /// An event of a session whose lease is lost: it cannot be logged. The events
    /// that end the session's work on this node (`session.interrupted`,
    /// `request.cancelled`, `session.closed`) still reach this node's clients, so they
    /// are told; every other one is dropped (it was never committed, so no client
    /// may see it).
    async fn fenced_out(&self, env: &Envelope) {
        if matches!(
            env.event,
            Event::SessionInterrupted(_) | Event::RequestCancelled(_) | Event::SessionClosed(_)
        ) {
            self.em.ctx.hub.deliver(env).await;
        } else {
            tracing::debug!(event = %env.event.type_name(), "not delivered: the session's lease is lost");
        }
    }

    /// Delivers already-logged envelopes again, marked `meta.replay`, without logging
    /// them: to followers, and to the watcher that sent `for_request`.
    pub(crate) async fn replay(&mut self, for_request: &str, events: &[Envelope]) {
        self.settle().await;
        for env in events {
            let mut env = env.clone();
            let mut meta = env.meta.take().unwrap_or_default();
            meta.replay = Some(true);
            env.meta = Some(meta);
            self.em.ctx.hub.deliver_replay(&env, for_request).await;
        }
    }
}
