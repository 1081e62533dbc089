//! Several stores on one database, as several nodes would have: fencing when a lease
//! changes hands in the middle of appends, tails of sessions another node writes,
//! many sessions written at once by three nodes under CPU load, and what the event
//! table itself guarantees (one row per envelope, unique by request and sequence).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use keel_envelope::Envelope;
use keel_store_pg::conformance::{event, lease, LONG, NODE_A, NODE_B, PATIENCE};
use keel_store_pg::testing::{CpuLoad, PgServer};
use keel_store_pg::{
    is_fenced, kind_of, AsyncStore, Cursor, LeaseOutcome, PgStore, StoreErrorKind, TailFrom,
};

async fn nodes(n: usize) -> Vec<PgStore> {
    let url = PgServer::shared().create_database();
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(PgStore::open(&url).await.expect("open"));
    }
    out
}

fn ids(events: &[Envelope]) -> Vec<String> {
    events.iter().map(|e| e.event_id.clone()).collect()
}

/// A owns a session on a short lease and appends without pause; B takes the session
/// over as soon as the lease runs out. Every event A was told is stored is in the
/// log, and all of them come before B's first: nothing A wrote landed after the
/// takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_fences_the_old_owner_mid_stream() {
    let _load = CpuLoad::start(2);
    let n = nodes(2).await;
    let (a, b) = (n[0].clone(), n[1].clone());
    for round in 0..5 {
        let sid = format!("sess_round{round}");
        let la = match a
            .acquire_lease(&sid, NODE_A, Duration::from_millis(150))
            .await
        {
            Ok(LeaseOutcome::Acquired(l)) => l,
            other => panic!("acquire: {other:?}"),
        };
        let writer = {
            let (a, sid) = (a.clone(), sid.clone());
            tokio::spawn(async move {
                let mut stored = Vec::new();
                for seq in 1.. {
                    let e = event(&sid, "req_a", seq, "from a");
                    match a.append(&sid, la.epoch, &e).await {
                        Ok(()) => stored.push(e),
                        Err(err) if is_fenced(&err) => return stored,
                        Err(err) => panic!("append: {err:?}"),
                    }
                }
                stored
            })
        };
        let start = Instant::now();
        let lb = loop {
            if let LeaseOutcome::Acquired(l) =
                b.acquire_lease(&sid, NODE_B, LONG).await.expect("acquire")
            {
                break l;
            }
            assert!(start.elapsed() < PATIENCE, "the lease never expired");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert!(lb.epoch > la.epoch);
        let first_b = event(&sid, "req_b", 1, "from b");
        b.append(&sid, lb.epoch, &first_b)
            .await
            .expect("the new owner appends");
        let from_a = writer.await.expect("writer");
        let log = b.load_events(&sid).await.expect("load").events;
        let at_b = log
            .iter()
            .position(|e| e.event_id == first_b.event_id)
            .expect("b's event");
        assert_eq!(
            ids(&log[..at_b]),
            ids(&from_a),
            "round {round}: exactly A's acknowledged events, before B's"
        );
        assert_eq!(log.len(), at_b + 1, "nothing after B's event");
    }
}

/// A tail on one node follows a session another node writes, from the start, from
/// now and from a cursor, in order, each event once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_follows_what_another_node_writes() {
    let n = nodes(3).await;
    let (writer, watcher, late) = (&n[0], &n[1], &n[2]);
    let l = lease(writer, "sess_w", NODE_A).await;
    let first = event("sess_w", "req_0", 1, "before any tail");
    writer
        .append("sess_w", l.epoch, &first)
        .await
        .expect("append");
    let mut from_start = watcher.tail("sess_w", TailFrom::Start).await.expect("tail");
    let mut from_now = late.tail("sess_w", TailFrom::Now).await.expect("tail");
    let mut expected = vec![first.clone()];
    for r in 1..=20 {
        let batch: Vec<Envelope> = (1..=10)
            .map(|s| event("sess_w", &format!("req_{r}"), s, "text"))
            .collect();
        writer
            .append_batch("sess_w", l.epoch, &batch)
            .await
            .expect("append");
        expected.extend(batch);
    }
    let got: Vec<Envelope> = tokio::time::timeout(
        PATIENCE,
        from_start
            .by_ref()
            .take(expected.len())
            .map(|r| r.expect("event"))
            .collect(),
    )
    .await
    .expect("all delivered");
    assert_eq!(got, expected);
    let got: Vec<Envelope> = tokio::time::timeout(
        PATIENCE,
        from_now
            .by_ref()
            .take(expected.len() - 1)
            .map(|r| r.expect("event"))
            .collect(),
    )
    .await
    .expect("all delivered");
    assert_eq!(ids(&got), ids(&expected[1..]));
    let cursor = Cursor::new("req_20", 5);
    let mut after = late
        .tail("sess_w", TailFrom::After(cursor))
        .await
        .expect("tail");
    let got: Vec<Envelope> = tokio::time::timeout(
        PATIENCE,
        after.by_ref().take(5).map(|r| r.expect("event")).collect(),
    )
    .await
    .expect("all delivered");
    assert_eq!(ids(&got), ids(&expected[expected.len() - 5..]));
    // Nothing more is waiting: the next event delivered is the next one appended.
    let next = event("sess_w", "req_21", 1, "last");
    writer
        .append("sess_w", l.epoch, &next)
        .await
        .expect("append");
    let got = tokio::time::timeout(PATIENCE, after.next())
        .await
        .expect("delivered");
    assert_eq!(
        got.map(|r| r.map(|e| e.event_id)),
        Some(Ok(next.event_id.clone()))
    );
}

/// 100 sessions × 10 requests of 5 events, written by three nodes at once under CPU
/// load: every log holds exactly its own events, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_write_a_hundred_sessions_at_once() {
    let _load = CpuLoad::start(2);
    let n = Arc::new(nodes(3).await);
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let n = n.clone();
            tokio::spawn(async move {
                let node = &n[i % 3];
                let sid = format!("sess_{i:03}");
                let l = lease(node, &sid, &format!("node-{}", i % 3)).await;
                let mut mine = Vec::new();
                for r in 0..10 {
                    let rid = format!("req_{i:03}_{r}");
                    let batch: Vec<Envelope> = (1..=5)
                        .map(|s| event(&sid, &rid, s, &format!("{sid} {rid}")))
                        .collect();
                    node.append_batch(&sid, l.epoch, &batch)
                        .await
                        .expect("append");
                    mine.extend(batch);
                }
                (sid, mine)
            })
        })
        .collect();
    let mut written = Vec::new();
    for t in tasks {
        written.push(t.await.expect("task"));
    }
    for (i, (sid, mine)) in written.iter().enumerate() {
        let log = n[(i + 1) % 3].load_events(sid).await.expect("load").events;
        assert_eq!(&log, mine, "{sid}");
        assert!(log
            .iter()
            .all(|e| e.session_id.as_deref() == Some(sid.as_str())));
    }
}

/// A batch stored again (an answer lost on the way) is not stored twice; another
/// event under a taken (requestId, sequence) is refused, and so is an event of
/// another session; neither changes the log.
#[tokio::test]
async fn events_are_unique_by_request_and_sequence() {
    let n = nodes(1).await;
    let store = &n[0];
    let l = lease(store, "sess_u", NODE_A).await;
    let batch: Vec<Envelope> = (1..=3).map(|s| event("sess_u", "req_1", s, "x")).collect();
    store
        .append_batch("sess_u", l.epoch, &batch)
        .await
        .expect("append");
    store
        .append_batch("sess_u", l.epoch, &batch)
        .await
        .expect("again: already stored");
    store
        .append("sess_u", l.epoch, &batch[1])
        .await
        .expect("one of them again");
    let mut other = batch[1].clone();
    other.event_id = "evt_other".into();
    let e = store.append("sess_u", l.epoch, &other).await.err();
    assert_eq!(
        e.as_ref().and_then(kind_of),
        Some(StoreErrorKind::InvalidInput),
        "{e:?}"
    );
    let mixed = vec![batch[2].clone(), event("sess_u", "req_1", 4, "new")];
    let e = store.append_batch("sess_u", l.epoch, &mixed).await.err();
    assert_eq!(
        e.as_ref().and_then(kind_of),
        Some(StoreErrorKind::InvalidInput),
        "{e:?}"
    );
    let foreign = event("sess_other", "req_1", 9, "elsewhere");
    let e = store.append("sess_u", l.epoch, &foreign).await.err();
    assert_eq!(
        e.as_ref().and_then(kind_of),
        Some(StoreErrorKind::InvalidInput),
        "{e:?}"
    );
    assert_eq!(
        store.load_events("sess_u").await.expect("load").events,
        batch
    );
    // The next event still goes at the end.
    let next = event("sess_u", "req_1", 4, "next");
    store
        .append("sess_u", l.epoch, &next)
        .await
        .expect("append");
    assert_eq!(
        store
            .load_events("sess_u")
            .await
            .expect("load")
            .events
            .len(),
        4
    );
}

/// Renewing keeps a short lease alive past its first end while another node keeps
/// trying to take it; once renewals stop, the other node gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_keep_a_lease() {
    let n = nodes(2).await;
    let (a, b) = (n[0].clone(), n[1].clone());
    let la = match a
        .acquire_lease("sess_r", NODE_A, Duration::from_secs(5))
        .await
    {
        Ok(LeaseOutcome::Acquired(l)) => l,
        other => panic!("acquire: {other:?}"),
    };
    let renewing = Arc::new(AtomicBool::new(true));
    let renewer = {
        let (a, la, renewing) = (a.clone(), la.clone(), renewing.clone());
        tokio::spawn(async move {
            while renewing.load(Ordering::SeqCst) {
                a.renew_lease(&la).await.expect("renew");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    // However long the test runs, a lease renewed every 100 ms of a 5 s ttl holds
    // (a renewal that came too late fails the renewer above, not this loop).
    for _ in 0..30 {
        match b
            .acquire_lease("sess_r", NODE_B, LONG)
            .await
            .expect("acquire")
        {
            LeaseOutcome::Held(info) => assert_eq!(info.owner, NODE_A),
            LeaseOutcome::Acquired(l) => panic!("taken while renewed: {l:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    renewing.store(false, Ordering::SeqCst);
    renewer.await.expect("renewer");
    let start = Instant::now();
    loop {
        if let LeaseOutcome::Acquired(l) = b
            .acquire_lease("sess_r", NODE_B, LONG)
            .await
            .expect("acquire")
        {
            assert!(l.epoch > la.epoch);
            break;
        }
        assert!(start.elapsed() < PATIENCE);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A store whose tails never poll (an hour between reads): only notifications wake
/// them.
async fn deaf_to_polls(url: &str) -> PgStore {
    let mut options = keel_store_pg::PgOptions::from_url(url).expect("url");
    options.poll_interval = Duration::from_secs(3600);
    PgStore::connect(options).await.expect("open")
}

async fn next_id(tail: &mut keel_store_pg::EventTail) -> String {
    match tokio::time::timeout(PATIENCE, tail.next()).await {
        Ok(Some(Ok(e))) => e.event_id,
        other => panic!("no event: {other:?}"),
    }
}

/// Notifications alone carry appends to another node's tails, and still do after the
/// listening connection is cut (it reconnects).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_wake_another_nodes_tails() {
    let server = PgServer::shared();
    let url = server.create_database();
    let db = url.rsplit('/').next().unwrap_or_default().to_owned();
    let writer = PgStore::open(&url).await.expect("open");
    let watcher = deaf_to_polls(&url).await;
    let l = lease(&writer, "sess_n", NODE_A).await;
    let mut tail = watcher.tail("sess_n", TailFrom::Now).await.expect("tail");
    // The listener is up once one notification got through.
    let first = event("sess_n", "req_1", 1, "x");
    writer
        .append("sess_n", l.epoch, &first)
        .await
        .expect("append");
    assert_eq!(next_id(&mut tail).await, first.event_id);
    for s in 2..=5 {
        let e = event("sess_n", "req_1", s, "x");
        writer.append("sess_n", l.epoch, &e).await.expect("append");
        assert_eq!(next_id(&mut tail).await, e.event_id);
    }
    let cut = server
        .psql(
            &db,
            &format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = '{}'",
                keel_store_pg::tail::LISTENER_NAME
            ),
        )
        .expect("terminate");
    assert_eq!(cut.trim(), "1", "one listening connection");
    // Appended while the listener may be down: its reconnection wakes the tail.
    let e = event("sess_n", "req_2", 1, "after the cut");
    writer.append("sess_n", l.epoch, &e).await.expect("append");
    assert_eq!(next_id(&mut tail).await, e.event_id);
    let start = Instant::now();
    loop {
        let back = server
            .psql(
                &db,
                &format!(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{}'",
                    keel_store_pg::tail::LISTENER_NAME
                ),
            )
            .expect("count");
        if back.trim() == "1" {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "the listener never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e = event("sess_n", "req_2", 2, "listening again");
    writer.append("sess_n", l.epoch, &e).await.expect("append");
    assert_eq!(next_id(&mut tail).await, e.event_id);
}

/// Rows committed with no notification at all (a node that died between its commit
/// and its notification) reach tails at their next poll.
#[tokio::test]
async fn polling_finds_rows_nobody_announced() {
    let server = PgServer::shared();
    let url = server.create_database();
    let db = url.rsplit('/').next().unwrap_or_default().to_owned();
    let mut options = keel_store_pg::PgOptions::from_url(&url).expect("url");
    options.poll_interval = Duration::from_millis(100);
    let watcher = PgStore::connect(options).await.expect("open");
    let l = lease(&watcher, "sess_p", NODE_A).await;
    let mut tail = watcher.tail("sess_p", TailFrom::Start).await.expect("tail");
    let e = event("sess_p", "req_sql", 1, "written behind the store's back");
    let mut line = keel_envelope::codec::encode_line(&e);
    line.pop();
    let json = String::from_utf8(line).expect("utf-8").replace('\'', "''");
    server
        .psql(
            &db,
            &format!(
                "BEGIN; UPDATE keel_sessions SET event_count = 1 WHERE session_id = 'sess_p'; \
                 INSERT INTO keel_events VALUES ('sess_p', 1, 'req_sql', 1, 'assistant.delta', \
                 '{json}'); COMMIT"
            ),
        )
        .expect("insert");
    assert_eq!(next_id(&mut tail).await, e.event_id);
    let next = event("sess_p", "req_2", 1, "and then through the store");
    watcher
        .append("sess_p", l.epoch, &next)
        .await
        .expect("append");
    assert_eq!(next_id(&mut tail).await, next.event_id);
}
