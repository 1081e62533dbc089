//! [`GroupAppender`]: group commit for one session's log over any [`AsyncStore`].
//!
//! The durability rule says an event is committed before anyone sees it; it does not
//! say each event needs a commit of its own. A session's events go to one task that
//! appends, as one batch, every event that arrived while the previous batch was being
//! committed. [`GroupAppender::append`] answers at once with a [`Committed`] future
//! that resolves when the event's batch is committed, so the emitter keeps producing
//! while a commit is in flight and delivers each event when its future resolves, in
//! order. When commits are fast, batches hold one event; when they are slow (a
//! database over the network, `fsync`), batches grow by themselves, and the events per
//! second follow the commits per second times the batch size instead of the commits
//! alone.
//!
//! Batches keep the order events were given in; a batch that fails fails every event
//! in it with the same error (a fenced batch: every later one is fenced too).

use std::sync::Arc;

use keel_envelope::{Envelope, ErrorCode, ErrorPayload};
use tokio::sync::{mpsc, oneshot};

use crate::api::{AsyncStore, Epoch};

/// At most this many events in one batch.
pub const MAX_BATCH: usize = 500;

type Waiter = oneshot::Sender<Result<(), ErrorPayload>>;

/// Appends one session's events in batches; see the [module documentation](self).
#[derive(Debug)]
pub struct GroupAppender {
    tx: mpsc::UnboundedSender<(Envelope, Waiter)>,
}

/// Resolves when the event is committed (or its batch failed).
#[derive(Debug)]
pub struct Committed(oneshot::Receiver<Result<(), ErrorPayload>>);

impl std::future::Future for Committed {
    type Output = Result<(), ErrorPayload>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx).map(|r| {
            r.unwrap_or_else(|_| {
                Err(ErrorPayload::new(
                    ErrorCode::SessionPersistenceFailed,
                    "the session's appender stopped before the event was committed",
                ))
            })
        })
    }
}

impl GroupAppender {
    /// An appender of `session_id`'s events, fenced by `epoch` (starts a task on the
    /// current tokio runtime; it ends when the appender is dropped and its queue is
    /// empty).
    pub fn new(store: Arc<dyn AsyncStore>, session_id: impl Into<String>, epoch: Epoch) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(store, session_id.into(), epoch, rx));
        Self { tx }
    }

    /// Queues `event`; the answer resolves once it is committed.
    pub fn append(&self, event: Envelope) -> Committed {
        let (done, wait) = oneshot::channel();
        // A send fails only when the task is gone; the receiver then reports it.
        let _ = self.tx.send((event, done));
        Committed(wait)
    }
}

async fn run(
    store: Arc<dyn AsyncStore>,
    session_id: String,
    epoch: Epoch,
    mut rx: mpsc::UnboundedReceiver<(Envelope, Waiter)>,
) {
    let mut events = Vec::new();
    let mut waiters = Vec::new();
    while let Some((e, w)) = rx.recv().await {
        events.push(e);
        waiters.push(w);
        while events.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok((e, w)) => {
                    events.push(e);
                    waiters.push(w);
                }
                Err(_) => break,
            }
        }
        let result = store.append_batch(&session_id, epoch, &events).await;
        events.clear();
        for w in waiters.drain(..) {
            let _ = w.send(result.clone());
        }
    }
}
