//! Delivering envelopes to subscribers.
//!
//! Two kinds of subscriber:
//! - a *follower* (`Kernel::subscribe`, `SessionHandle::subscribe`) gets every event,
//!   or every event of one session, through a bounded channel; sending waits when the
//!   channel is full, so a slow host slows the session down instead of growing memory;
//! - a *watcher* (`Kernel::watcher`, one per client connection of a daemon) gets the
//!   answers to its own commands and the events of the sessions it watches; delivery
//!   never waits, and a watcher whose queue holds `capacity` undelivered live events is
//!   cut off ([`WatchEnd::Overflow`]) so one slow client cannot stall a session.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use keel_envelope::{Envelope, Event};
use tokio::sync::mpsc;

/// How many of a watcher's own request ids are remembered (the oldest are forgotten).
pub(crate) const WATCH_REQUEST_MEMORY: usize = 4096;

/// Why a watcher's stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// `capacity` live events were waiting to be read: the reader is too slow, and
    /// was cut off instead of holding the session back.
    Overflow {
        /// The queue limit that was reached.
        capacity: usize,
    },
    /// The watcher was closed by its owner.
    Closed,
}

/// One item of a watcher's queue; `live` items count against its capacity (replayed
/// ones do not: their number is bounded by the session's log).
#[derive(Debug)]
pub(crate) struct WatchItem {
    pub(crate) env: Envelope,
    pub(crate) live: bool,
}

#[derive(Debug)]
struct WatchState {
    sessions: HashSet<String>,
    requests: HashSet<String>,
    order: VecDeque<String>,
    tx: Option<mpsc::UnboundedSender<WatchItem>>,
    end: Option<WatchEnd>,
    /// Whether a store's tail feeds this watcher (then live events are deduplicated
    /// by id against `recent`).
    tailed: bool,
    recent: HashSet<String>,
    recent_order: VecDeque<String>,
}

impl WatchState {
    fn owns(&self, request_id: &str) -> bool {
        self.requests.contains(request_id)
    }

    /// Remembers a live event id of a session watched through a store's tail;
    /// answers whether it was delivered already.
    fn seen_live(&mut self, event_id: &str) -> bool {
        if self.recent.contains(event_id) {
            return true;
        }
        self.recent.insert(event_id.to_owned());
        self.recent_order.push_back(event_id.to_owned());
        while self.recent_order.len() > WATCH_REQUEST_MEMORY {
            if let Some(old) = self.recent_order.pop_front() {
                self.recent.remove(&old);
            }
        }
        false
    }

    fn wants(&self, env: &Envelope) -> bool {
        if self.owns(&env.request_id) || env.reply_to().is_some_and(|r| self.owns(r)) {
            return true;
        }
        // Another client's watch answers are about its view, not the session.
        if matches!(
            env.event,
            Event::SessionWatched(_) | Event::SessionUnwatched(_)
        ) {
            return false;
        }
        env.session_id
            .as_ref()
            .is_some_and(|s| self.sessions.contains(s))
    }
}

/// The shared state of one watcher: what it follows and its queue.
#[derive(Debug)]
pub(crate) struct WatchShared {
    state: Mutex<WatchState>,
    /// Live events queued and not yet read.
    queued: AtomicUsize,
    capacity: usize,
    /// Cancelled when delivery stops (cut off, closed, reader gone).
    ended: tokio_util::sync::CancellationToken,
}

impl WatchShared {
    pub(crate) fn new(capacity: usize) -> (Arc<Self>, mpsc::UnboundedReceiver<WatchItem>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Self {
            state: Mutex::new(WatchState {
                sessions: HashSet::new(),
                requests: HashSet::new(),
                order: VecDeque::new(),
                tx: Some(tx),
                end: None,
                tailed: false,
                recent: HashSet::new(),
                recent_order: VecDeque::new(),
            }),
            queued: AtomicUsize::new(0),
            capacity: capacity.max(1),
            ended: tokio_util::sync::CancellationToken::new(),
        });
        (shared, rx)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, WatchState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers a request id of the owner's commands, so their answers reach it.
    pub(crate) fn track(&self, request_id: &str) {
        let mut st = self.state();
        if st.requests.insert(request_id.to_owned()) {
            st.order.push_back(request_id.to_owned());
            while st.order.len() > WATCH_REQUEST_MEMORY {
                if let Some(old) = st.order.pop_front() {
                    st.requests.remove(&old);
                }
            }
        }
    }

    pub(crate) fn sessions(&self) -> Vec<String> {
        let mut v: Vec<String> = self.state().sessions.iter().cloned().collect();
        v.sort();
        v
    }

    pub(crate) fn end(&self) -> Option<WatchEnd> {
        self.state().end
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state().tx.is_none()
    }

    pub(crate) fn ended(&self) -> tokio_util::sync::CancellationToken {
        self.ended.clone()
    }

    /// Stops delivery; what is queued can still be read.
    pub(crate) fn close(&self, why: WatchEnd) {
        let mut st = self.state();
        if st.tx.take().is_some() {
            st.end = Some(why);
        }
        self.ended.cancel();
    }

    pub(crate) fn read_one(&self, item: &WatchItem) {
        if item.live {
            self.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn push(&self, st: &mut WatchState, env: &Envelope, live: bool) {
        let Some(tx) = &st.tx else { return };
        if live {
            if self.queued.load(Ordering::Acquire) >= self.capacity {
                st.tx = None;
                st.end = Some(WatchEnd::Overflow {
                    capacity: self.capacity,
                });
                self.ended.cancel();
                return;
            }
            self.queued.fetch_add(1, Ordering::AcqRel);
        }
        if tx
            .send(WatchItem {
                env: env.clone(),
                live,
            })
            .is_err()
        {
            // The reader is gone.
            st.tx = None;
            self.ended.cancel();
            if live {
                self.queued.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Offers a live event: queued when wanted. The answer to the owner's
    /// `session.start`, `session.resume`, `session.watch` or `session.fork` makes it
    /// watch that session (the fork's, for `session.forked`) from this very event on; `session.unwatched` (its own) and
    /// `session.closed` stop the watch after this event.
    fn offer(&self, env: &Envelope) {
        let mut st = self.state();
        if st.tx.is_none() {
            return;
        }
        if let Some(sid) = &env.session_id {
            if st.owns(&env.request_id)
                && matches!(
                    env.event,
                    Event::SessionStarted(_)
                        | Event::SessionResumed(_)
                        | Event::SessionWatched(_)
                        | Event::SessionForked(_)
                )
            {
                st.sessions.insert(sid.clone());
            }
        }
        if !st.wants(env) {
            return;
        }
        if st.tailed && env.session_id.is_some() && st.seen_live(&env.event_id) {
            return;
        }
        self.push(&mut st, env, true);
        match &env.event {
            Event::SessionUnwatched(p) if st.owns(&env.request_id) => {
                st.sessions.remove(&p.session_id);
            }
            Event::SessionClosed(_) => {
                if let Some(sid) = &env.session_id {
                    st.sessions.remove(sid);
                }
            }
            _ => {}
        }
    }

    /// Offers a live event read from a shared store's tail for the watch that
    /// `for_request` began: queued when that watcher still watches the event's
    /// session and has not had it (the same event delivered by this node's own
    /// emitter, after a takeover, is not queued twice). Answers whether the watch
    /// goes on.
    fn offer_tailed(&self, env: &Envelope, for_request: &str) -> bool {
        let mut st = self.state();
        if st.tx.is_none() || !st.owns(for_request) {
            return false;
        }
        let Some(sid) = &env.session_id else {
            return false;
        };
        if !st.sessions.contains(sid) {
            return false;
        }
        if !st.seen_live(&env.event_id) {
            self.push(&mut st, env, true);
        }
        if matches!(env.event, Event::SessionClosed(_)) {
            st.sessions.remove(sid);
            return false;
        }
        st.tx.is_some()
    }

    /// Offers a replayed event meant for the command `for_request`.
    fn offer_replay(&self, env: &Envelope, for_request: &str) {
        let mut st = self.state();
        if st.owns(for_request) {
            self.push(&mut st, env, false);
        }
    }

    /// Queues an envelope for this watcher alone (a transport's own answer).
    pub(crate) fn publish(&self, env: &Envelope) {
        let mut st = self.state();
        self.push(&mut st, env, true);
    }
}

#[derive(Debug)]
enum Subscriber {
    /// Every event (`session: None`) or one session's, with backpressure.
    Follow {
        session: Option<String>,
        tx: mpsc::Sender<Envelope>,
    },
    /// A client connection's filter, without backpressure.
    Watch(Arc<WatchShared>),
}

impl Subscriber {
    fn is_closed(&self) -> bool {
        match self {
            Subscriber::Follow { tx, .. } => tx.is_closed(),
            Subscriber::Watch(w) => w.is_closed(),
        }
    }
}

/// Delivers envelopes to subscribers.
#[derive(Debug, Default)]
pub(crate) struct Hub {
    subs: Mutex<Vec<Subscriber>>,
}

impl Hub {
    fn subs(&self) -> std::sync::MutexGuard<'_, Vec<Subscriber>> {
        self.subs.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn subscribe(
        &self,
        session: Option<String>,
        capacity: usize,
    ) -> mpsc::Receiver<Envelope> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        self.subs().push(Subscriber::Follow { session, tx });
        rx
    }

    pub(crate) fn watch(
        &self,
        capacity: usize,
    ) -> (Arc<WatchShared>, mpsc::UnboundedReceiver<WatchItem>) {
        let (shared, rx) = WatchShared::new(capacity);
        self.subs().push(Subscriber::Watch(shared.clone()));
        (shared, rx)
    }

    /// Delivers an envelope read from a shared store's tail to the watcher whose
    /// command `for_request` began the watch; answers whether that watch goes on
    /// (false: the watcher is gone, unwatched the session, or saw it closed).
    pub(crate) fn deliver_tailed(&self, env: &Envelope, for_request: &str) -> bool {
        let subs = self.subs();
        for s in subs.iter() {
            if let Subscriber::Watch(w) = s {
                if w.state().owns(for_request) {
                    return w.offer_tailed(env, for_request);
                }
            }
        }
        false
    }

    /// Whether the watcher whose command is `for_request` still watches `session`.
    pub(crate) fn is_watching(&self, for_request: &str, session: &str) -> bool {
        let subs = self.subs();
        subs.iter().any(|s| match s {
            Subscriber::Watch(w) => {
                let st = w.state();
                st.tx.is_some() && st.owns(for_request) && st.sessions.contains(session)
            }
            Subscriber::Follow { .. } => false,
        })
    }

    /// Marks the watcher whose command is `for_request` as fed by a store's tail.
    pub(crate) fn mark_tailed(&self, for_request: &str) {
        let subs = self.subs();
        for s in subs.iter() {
            if let Subscriber::Watch(w) = s {
                let mut st = w.state();
                if st.owns(for_request) {
                    st.tailed = true;
                }
            }
        }
    }

    /// Delivers a live envelope to every subscriber that wants it.
    pub(crate) async fn deliver(&self, env: &Envelope) {
        self.deliver_inner(env, None).await;
    }

    /// Delivers a replayed envelope: to followers as any other, to watchers only when
    /// they sent `for_request` (the command that asked for the replay).
    pub(crate) async fn deliver_replay(&self, env: &Envelope, for_request: &str) {
        self.deliver_inner(env, Some(for_request)).await;
    }

    async fn deliver_inner(&self, env: &Envelope, replay_for: Option<&str>) {
        let targets: Vec<mpsc::Sender<Envelope>> = {
            let mut subs = self.subs();
            subs.retain(|s| !s.is_closed());
            let mut targets = Vec::new();
            for s in subs.iter() {
                match s {
                    Subscriber::Follow { session, tx } => {
                        if session.is_none() || session.as_deref() == env.session_id.as_deref() {
                            targets.push(tx.clone());
                        }
                    }
                    Subscriber::Watch(w) => match replay_for {
                        None => w.offer(env),
                        Some(r) => w.offer_replay(env, r),
                    },
                }
            }
            targets
        };
        for tx in targets {
            // A closed receiver just means that subscriber left.
            let _ = tx.send(env.clone()).await;
        }
    }
}
