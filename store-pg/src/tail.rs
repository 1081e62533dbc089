//! Tails: a session's events as they are committed, by this node or any other.
//!
//! After each append commits, the store's notifier wakes this node's tails of the
//! session and sends `NOTIFY keel_events, '<session> <position>'`, coalescing what
//! piled up while it was sending (one statement for many sessions). The notification
//! is sent after the commit, not inside the appending transaction: a transaction that
//! notifies takes a database-wide lock until its commit is on disk, which would let
//! only one append commit at a time (PostgreSQL's group commit of concurrent appends
//! would be lost). A notification therefore always comes after its rows are visible.
//!
//! Notifications carry no events: a tail keeps its own position and, woken, reads the
//! rows after it. One connection per store (started with the first tail) listens and
//! wakes the tails of the session named; when it drops it reconnects and wakes every
//! tail. A tail that hears nothing reads the log anyway every
//! [`PgOptions::poll_interval`], so a notification lost (the listener down, a node
//! that died between a commit and its notification) costs at most that much latency,
//! never an event.
//!
//! [`PgOptions::poll_interval`]: crate::options::PgOptions::poll_interval

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::Pool;
use futures::StreamExt;
use keel_envelope::{Envelope, ErrorCode, ErrorPayload};
use tokio::sync::{mpsc, watch};
use tokio_postgres::{AsyncMessage, NoTls};
use tokio_util::sync::CancellationToken;

use crate::api::{EventTail, TailFrom};
use crate::connect::is_transient;
use crate::error::check_session_id;
use crate::options::PgOptions;
use crate::store::PgStore;

/// The channel appends notify.
pub const CHANNEL: &str = "keel_events";

/// The `application_name` of the listening connection (as `pg_stat_activity` shows
/// it).
pub const LISTENER_NAME: &str = "keel listener";

/// Rows a tail reads at a time.
const PAGE: i64 = 1000;

/// The tails' wake-up calls, by session.
#[derive(Debug)]
pub(crate) struct Hub {
    senders: Mutex<HashMap<String, watch::Sender<u64>>>,
    started: AtomicBool,
    stop: CancellationToken,
}

impl Hub {
    pub(crate) fn new(stop: CancellationToken) -> Self {
        Self {
            senders: Mutex::new(HashMap::new()),
            started: AtomicBool::new(false),
            stop,
        }
    }

    fn senders(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        self.senders.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn subscribe(&self, session_id: &str) -> watch::Receiver<u64> {
        self.senders()
            .entry(session_id.to_owned())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Forgets the session once no tail of it is left.
    fn unsubscribe(&self, session_id: &str) {
        let mut senders = self.senders();
        if senders
            .get(session_id)
            .is_some_and(|s| s.receiver_count() == 0)
        {
            senders.remove(session_id);
        }
    }

    fn notify(&self, session_id: &str, position: u64) {
        if let Some(s) = self.senders().get(session_id) {
            s.send_modify(|p| *p = (*p).max(position));
        }
    }

    fn wake_all(&self) {
        for s in self.senders().values() {
            s.send_modify(|_| {});
        }
    }

    /// Starts the listener, once.
    fn start(self: &Arc<Self>, options: &PgOptions) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        tokio::spawn(listen(self.clone(), options.clone()));
    }
}

/// What the notifier sends: every session woken, with its last position.
const NOTIFY: &str = "\
SELECT pg_notify('keel_events', t.s || ' ' || t.p) FROM unnest($1::text[], $2::int8[]) AS t(s, p)";

/// Starts the notifier of a store: it ends when the sender is dropped.
pub(crate) fn notifier(pool: Pool, hub: Arc<Hub>) -> mpsc::UnboundedSender<(String, i64)> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(notify(pool, hub, rx));
    tx
}

async fn notify(pool: Pool, hub: Arc<Hub>, mut rx: mpsc::UnboundedReceiver<(String, i64)>) {
    while let Some((session, position)) = rx.recv().await {
        let mut pending = HashMap::new();
        pending.insert(session, position);
        while let Ok((session, position)) = rx.try_recv() {
            let p = pending.entry(session).or_insert(position);
            *p = (*p).max(position);
        }
        for (session, position) in &pending {
            hub.notify(session, u64::try_from(*position).unwrap_or(0));
        }
        let (sessions, positions): (Vec<String>, Vec<i64>) = pending.into_iter().unzip();
        // Lost here, the other nodes' tails find the events at their next poll.
        match pool.get().await {
            Ok(client) => {
                if let Err(e) = client.execute(NOTIFY, &[&sessions, &positions]).await {
                    tracing::debug!(target: "keel_store_pg", error = %e, "notify failed");
                }
            }
            Err(e) => tracing::debug!(target: "keel_store_pg", error = %e, "notify failed"),
        }
    }
}

/// Keeps one connection listening on [`CHANNEL`] until the store is dropped.
async fn listen(hub: Arc<Hub>, options: PgOptions) {
    let mut backoff = Duration::from_millis(50);
    while !hub.stop.is_cancelled() {
        let mut config = options.config().clone();
        config.connect_timeout(options.connect_timeout);
        config.application_name(LISTENER_NAME);
        let connected = tokio::select! {
            () = hub.stop.cancelled() => return,
            c = tokio::time::timeout(options.connect_timeout, config.connect(NoTls)) => c,
        };
        let (client, mut connection) = match connected {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => {
                tracing::debug!(target: "keel_store_pg", error = %e, "listener cannot connect");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
            Err(_) => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let driver = tokio::spawn(async move {
            while let Some(m) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                match m {
                    Ok(m) => {
                        if tx.send(m).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        if client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .is_err()
        {
            driver.abort();
            tokio::time::sleep(backoff).await;
            continue;
        }
        backoff = Duration::from_millis(50);
        // Whatever was committed while nobody listened is read now.
        hub.wake_all();
        let mut health = tokio::time::interval(Duration::from_secs(15));
        health.tick().await;
        loop {
            tokio::select! {
                () = hub.stop.cancelled() => {
                    driver.abort();
                    return;
                }
                m = rx.recv() => match m {
                    Some(AsyncMessage::Notification(n)) => {
                        let mut parts = n.payload().rsplitn(2, ' ');
                        let position = parts.next().and_then(|p| p.parse::<u64>().ok());
                        if let (Some(position), Some(session)) = (position, parts.next()) {
                            hub.notify(session, position);
                        }
                    }
                    Some(_) => {}
                    None => break,
                },
                _ = health.tick() => {
                    // A connection cut without a word (a network partition) shows here.
                    let alive = tokio::time::timeout(options.connect_timeout, client.simple_query("")).await;
                    if !matches!(alive, Ok(Ok(_))) {
                        break;
                    }
                }
            }
        }
        driver.abort();
        tracing::debug!(target: "keel_store_pg", "listener lost its connection; reconnecting");
    }
}

/// What a tail carries between reads. `rx` is declared before `_sub` so it is dropped
/// first and the hub sees no receiver left.
struct State {
    store: PgStore,
    session_id: String,
    position: i64,
    buf: VecDeque<Envelope>,
    done: bool,
    rx: watch::Receiver<u64>,
    _sub: Subscription,
}

struct Subscription {
    hub: Arc<Hub>,
    session_id: String,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.unsubscribe(&self.session_id);
    }
}

impl PgStore {
    /// Events of `session_id` up to `position` are committed: wake the tails.
    pub(crate) fn committed(&self, session_id: &str, position: i64) {
        let _ = self.inner.notifier.send((session_id.to_owned(), position));
    }

    pub(crate) async fn open_tail(
        &self,
        session_id: &str,
        from: TailFrom,
    ) -> Result<EventTail, ErrorPayload> {
        check_session_id(session_id)?;
        let hub = self.inner.hub.clone();
        hub.start(&self.inner.options);
        let rx = hub.subscribe(session_id);
        let sub = Subscription {
            hub,
            session_id: session_id.to_owned(),
        };
        let Some(count) = self.event_count(session_id).await? else {
            return Err(ErrorPayload::new(
                ErrorCode::SessionNotFound,
                format!("session {session_id} is not in the store"),
            ));
        };
        let position = match from {
            TailFrom::Start => 0,
            TailFrom::Now => count,
            TailFrom::After(cursor) => self.cursor_position(session_id, &cursor).await?,
        };
        let state = State {
            store: self.clone(),
            session_id: session_id.to_owned(),
            position,
            buf: VecDeque::new(),
            done: false,
            rx,
            _sub: sub,
        };
        Ok(futures::stream::unfold(state, next).boxed())
    }

    /// How many events the session's log holds, or `None` when it has no entry.
    async fn event_count(&self, session_id: &str) -> Result<Option<i64>, ErrorPayload> {
        self.retry("read a session", || async {
            let client = self.client().await?;
            let stmt = client
                .prepare_cached("SELECT event_count FROM keel_sessions WHERE session_id = $1")
                .await
                .map_err(|e| self.err(e))?;
            let row = client
                .query_opt(&stmt, &[&session_id])
                .await
                .map_err(|e| self.err(e))?;
            Ok(row.map(|r| r.get(0)))
        })
        .await
    }
}

async fn next(mut st: State) -> Option<(Result<Envelope, ErrorPayload>, State)> {
    loop {
        if let Some(e) = st.buf.pop_front() {
            return Some((Ok(e), st));
        }
        if st.done {
            return None;
        }
        // Seen before reading: a notification from now on wakes the wait below.
        st.rx.borrow_and_update();
        let poll = st.store.poll_interval();
        match st.store.read_after(&st.session_id, st.position, PAGE).await {
            Ok(rows) if !rows.is_empty() => {
                for (p, e) in rows {
                    st.position = p;
                    st.buf.push_back(e);
                }
                continue;
            }
            Ok(_) => match st.store.event_count(&st.session_id).await {
                Ok(None) => return None,
                Ok(Some(_)) => {}
                Err(e) if is_transient(&e) => {}
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            },
            Err(e) if is_transient(&e) => {}
            Err(e) => {
                st.done = true;
                return Some((Err(e), st));
            }
        }
        tokio::select! {
            changed = st.rx.changed() => {
                if changed.is_err() {
                    tokio::time::sleep(poll).await;
                }
            }
            () = tokio::time::sleep(poll) => {}
        }
    }
}
