//! Group commit through `GroupAppender`: events emitted without waiting are stored
//! once each, in order, and each answer comes after its event is committed; a fenced
//! batch fails its events and stores none of them.

use std::sync::Arc;

use keel_envelope::Envelope;
use keel_store_pg::conformance::{event, lease, NODE_A, NODE_B};
use keel_store_pg::testing::{CpuLoad, PgServer};
use keel_store_pg::{is_fenced, AsyncStore, GroupAppender, PgStore};

async fn store() -> PgStore {
    PgStore::open(&PgServer::shared().create_database())
        .await
        .expect("open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_emitted_without_waiting_are_stored_in_order() {
    let _load = CpuLoad::start(2);
    let pg = store().await;
    let l = lease(&pg, "sess_g", NODE_A).await;
    let appender = GroupAppender::new(Arc::new(pg.clone()), "sess_g", l.epoch);
    let events: Vec<Envelope> = (1..=2_000)
        .map(|s| event("sess_g", "req_1", s, "delta"))
        .collect();
    let pending: Vec<_> = events.iter().map(|e| appender.append(e.clone())).collect();
    for (i, p) in pending.into_iter().enumerate() {
        p.await.expect("committed");
        // Committed means readable by anyone: the event is in the log now.
        if i % 500 == 0 {
            let log = pg.load_events("sess_g").await.expect("load").events;
            assert!(log.len() > i, "event {i} answered before it was stored");
        }
    }
    assert_eq!(pg.load_events("sess_g").await.expect("load").events, events);
}

#[tokio::test]
async fn a_fenced_appender_stores_nothing_more() {
    let pg = store().await;
    let l = lease(&pg, "sess_f", NODE_A).await;
    let appender = GroupAppender::new(Arc::new(pg.clone()), "sess_f", l.epoch);
    let first = event("sess_f", "req_1", 1, "before");
    appender.append(first.clone()).await.expect("committed");
    pg.release_lease(&l).await.expect("release");
    let other = lease(&pg, "sess_f", NODE_B).await;
    let late: Vec<_> = (2..=50)
        .map(|s| appender.append(event("sess_f", "req_1", s, "after")))
        .collect();
    for p in late {
        let e = p.await.err();
        assert!(e.as_ref().is_some_and(is_fenced), "{e:?}");
    }
    assert!(other.epoch > l.epoch);
    assert_eq!(
        pg.load_events("sess_f").await.expect("load").events,
        [first]
    );
}
