//! The database goes away: restarted in the middle of appends (`pg_ctl restart -m
//! immediate`), stopped past a lease's end, down when a node starts. Each test has a
//! server of its own.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use keel_envelope::Envelope;
use keel_store_pg::conformance::{event, lease, NODE_A, PATIENCE};
use keel_store_pg::testing::PgServer;
use keel_store_pg::{
    is_fenced, kind_of, AsyncStore, LeaseOutcome, PgOptions, PgStore, StoreErrorKind, TailFrom,
};

fn server() -> PgServer {
    match PgServer::start() {
        Ok(s) => s,
        Err(e) => panic!("cannot start PostgreSQL: {e}"),
    }
}

async fn open(url: &str, retry: Duration) -> PgStore {
    let mut options = PgOptions::from_url(url).expect("url");
    options.retry_window = retry;
    options.poll_interval = Duration::from_millis(200);
    PgStore::connect(options).await.expect("open")
}

/// Waits until `f` holds (bounded).
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < PATIENCE, "{what} did not happen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Appends go on through three restarts: every event the writer was told is stored
/// survives, nothing is stored twice or out of order, appends succeed after each
/// restart, and a tail on another node delivers the whole log once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_and_tails_ride_through_restarts() {
    let server = server();
    let url = server.create_database();
    let writer = open(&url, Duration::from_secs(20)).await;
    let watcher = open(&url, Duration::from_secs(20)).await;
    let l = lease(&writer, "sess_r", NODE_A).await;
    let mut tail = watcher.tail("sess_r", TailFrom::Start).await.expect("tail");

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let record: Arc<Mutex<(Vec<Envelope>, Vec<Envelope>)>> = Arc::default();
    let task = {
        let (writer, stop, acked, record) =
            (writer.clone(), stop.clone(), acked.clone(), record.clone());
        tokio::spawn(async move {
            let mut seq = 0;
            while !stop.load(Ordering::SeqCst) {
                seq += 1;
                let e = event("sess_r", "req_1", seq, "through restarts");
                let got = writer.append("sess_r", l.epoch, &e).await;
                let mut r = record.lock().unwrap_or_else(|p| p.into_inner());
                r.0.push(e.clone());
                match got {
                    Ok(()) => {
                        r.1.push(e);
                        acked.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(err) => assert!(
                        kind_of(&err) == Some(StoreErrorKind::Unavailable) && err.retryable,
                        "an append failed otherwise than unavailable: {err:?}"
                    ),
                }
            }
        })
    };
    for _ in 0..3 {
        let before = acked.load(Ordering::SeqCst);
        until("appends", || acked.load(Ordering::SeqCst) > before + 20).await;
        server.restart().expect("restart");
    }
    let before = acked.load(Ordering::SeqCst);
    until("appends after the last restart", || {
        acked.load(Ordering::SeqCst) > before + 20
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    task.await.expect("writer");

    let (attempted, stored) = record.lock().map(|r| r.clone()).unwrap_or_default();
    let log = writer.load_events("sess_r").await.expect("load").events;
    let in_log: HashSet<&str> = log.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(in_log.len(), log.len(), "no event stored twice");
    for e in &stored {
        assert!(
            in_log.contains(e.event_id.as_str()),
            "acknowledged {} was lost",
            e.event_id
        );
    }
    let order: Vec<&str> = attempted
        .iter()
        .map(|e| e.event_id.as_str())
        .filter(|id| in_log.contains(id))
        .collect();
    assert_eq!(
        order,
        log.iter().map(|e| e.event_id.as_str()).collect::<Vec<_>>()
    );
    let seen: Vec<Envelope> = tokio::time::timeout(
        PATIENCE,
        tail.by_ref()
            .take(log.len())
            .map(|r| r.expect("event"))
            .collect(),
    )
    .await
    .expect("the tail delivered the whole log");
    assert_eq!(seen, log);
}

/// A database down for longer than a lease: when it is back the lease is over, the
/// owner's writes are refused, and a new lease has a higher epoch.
#[tokio::test]
async fn an_outage_past_the_ttl_ends_the_lease() {
    let server = server();
    let url = server.create_database();
    let store = open(&url, Duration::from_millis(300)).await;
    let ttl = Duration::from_millis(500);
    let l = match store.acquire_lease("sess_o", NODE_A, ttl).await {
        Ok(LeaseOutcome::Acquired(l)) => l,
        other => panic!("acquire: {other:?}"),
    };
    server.stop().expect("stop");
    let down = store
        .append("sess_o", l.epoch, &event("sess_o", "req_1", 1, "x"))
        .await;
    let e = down.err();
    assert_eq!(
        e.as_ref().and_then(kind_of),
        Some(StoreErrorKind::Unavailable),
        "{e:?}"
    );
    assert!(e.is_some_and(|e| e.retryable));
    tokio::time::sleep(ttl * 2).await;
    server.resume().expect("resume");
    let late = store
        .append("sess_o", l.epoch, &event("sess_o", "req_1", 1, "x"))
        .await;
    assert!(late.as_ref().is_err_and(is_fenced), "{late:?}");
    let renew = store.renew_lease(&l).await;
    assert!(renew.as_ref().is_err_and(is_fenced), "{renew:?}");
    let again = lease(&store, "sess_o", NODE_A).await;
    assert!(again.epoch > l.epoch);
    store
        .append("sess_o", again.epoch, &event("sess_o", "req_2", 1, "y"))
        .await
        .expect("append");
    assert_eq!(
        store
            .load_events("sess_o")
            .await
            .expect("load")
            .events
            .len(),
        1
    );
}

/// A node that starts while the database is down is told it is unreachable, at once;
/// once the database is back it starts.
#[tokio::test]
async fn starting_while_the_database_is_down() {
    let server = server();
    let url = server.create_database();
    server.stop().expect("stop");
    let e = PgStore::open(&url).await.err();
    assert_eq!(
        e.as_ref().and_then(kind_of),
        Some(StoreErrorKind::Unreachable),
        "{e:?}"
    );
    assert!(e.is_some_and(|e| e.retryable && e.message.contains("server runs")));
    server.resume().expect("resume");
    assert!(PgStore::open(&url).await.is_ok());
}
