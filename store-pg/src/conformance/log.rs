//! Cases of the event log: append and replay from a cursor, tails.

use super::*;

/// Append one event and batches, read them back whole and after cursors.
pub async fn append_and_replay(store: &dyn AsyncStore) {
    let l = lease(store, "sess_a", NODE_A).await;
    let other = lease(store, "sess_b", NODE_A).await;
    let mut all = Vec::new();
    for seq in 1..=3 {
        let e = event("sess_a", "req_1", seq, &format!("one {seq}"));
        store.append("sess_a", l.epoch, &e).await.expect("append");
        all.push(e);
    }
    store
        .append(
            "sess_b",
            other.epoch,
            &event("sess_b", "req_9", 1, "elsewhere"),
        )
        .await
        .expect("append to another session");
    let batch: Vec<Envelope> = (1..=4)
        .map(|seq| {
            event(
                "sess_a",
                "req_2",
                seq,
                "text with \u{0} NUL, \"quotes\", é and 🦀",
            )
        })
        .collect();
    store
        .append_batch("sess_a", l.epoch, &batch)
        .await
        .expect("append a batch");
    store
        .append_batch("sess_a", l.epoch, &[])
        .await
        .expect("an empty batch");
    all.extend(batch);

    let log = store.load_events("sess_a").await.expect("load");
    assert_eq!(
        log.events, all,
        "the log reads back whole, in order, byte for byte"
    );
    assert!(!log.torn_tail_dropped);
    let cursor = |r: &str, s| Cursor::new(r, s);
    let after = store
        .events_after("sess_a", &cursor("req_1", 2))
        .await
        .expect("after");
    assert_eq!(ids(&after), ids(&all[2..]));
    let after = store
        .events_after("sess_a", &cursor("req_2", 4))
        .await
        .expect("after the last");
    assert!(after.is_empty());
    let unknown = store.events_after("sess_a", &cursor("req_1", 9)).await;
    assert_eq!(
        unknown.map_err(|e| e.code).err(),
        Some(ErrorCode::RequestInvalid)
    );
    let unknown = store.events_after("sess_a", &cursor("req_9", 1)).await;
    assert_eq!(
        unknown.map_err(|e| e.code).err(),
        Some(ErrorCode::RequestInvalid),
        "a cursor of another session's log is not in this one"
    );
    assert_eq!(
        store
            .load_events("sess_b")
            .await
            .expect("load")
            .events
            .len(),
        1
    );
    assert!(store
        .load_events("sess_none")
        .await
        .expect("unknown")
        .events
        .is_empty());
    let bad = store.load_events("../etc").await;
    assert_eq!(
        bad.map_err(|e| e.code).err(),
        Some(ErrorCode::SessionNotFound)
    );
}

async fn take(tail: &mut EventTail, n: usize) -> Vec<Envelope> {
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(PATIENCE, tail.next()).await {
            Ok(Some(Ok(e))) => out.push(e),
            Ok(Some(Err(e))) => panic!("tail failed: {e:?}"),
            Ok(None) => panic!("tail ended after {} of {n} events", out.len()),
            Err(_) => panic!("tail delivered {} of {n} events in {PATIENCE:?}", out.len()),
        }
    }
    out
}

/// Tails replay from their start, then follow appends live, with no gap and no
/// repeat; they end when the session is deleted.
pub async fn tail(store: &dyn AsyncStore) {
    let missing = store.tail("sess_a", TailFrom::Start).await.err();
    assert_eq!(missing.map(|e| e.code), Some(ErrorCode::SessionNotFound));
    let l = lease(store, "sess_a", NODE_A).await;
    let first: Vec<Envelope> = (1..=3)
        .map(|s| event("sess_a", "req_1", s, "old"))
        .collect();
    store
        .append_batch("sess_a", l.epoch, &first)
        .await
        .expect("append");
    let mut from_start = store.tail("sess_a", TailFrom::Start).await.expect("tail");
    let mut from_now = store.tail("sess_a", TailFrom::Now).await.expect("tail");
    let cursor = Cursor::new("req_1", 2);
    let mut after = store
        .tail("sess_a", TailFrom::After(cursor))
        .await
        .expect("tail");
    let bad = Cursor::new("req_x", 1);
    let bad = store.tail("sess_a", TailFrom::After(bad)).await.err();
    assert_eq!(bad.map(|e| e.code), Some(ErrorCode::RequestInvalid));
    assert_eq!(ids(&take(&mut from_start, 3).await), ids(&first));
    let mut live = Vec::new();
    for s in 1..=5 {
        let e = event("sess_a", "req_2", s, "live");
        store.append("sess_a", l.epoch, &e).await.expect("append");
        live.push(e);
    }
    assert_eq!(ids(&take(&mut from_start, 5).await), ids(&live));
    assert_eq!(ids(&take(&mut from_now, 5).await), ids(&live));
    let mut expected = vec![first[2].clone()];
    expected.extend(live.iter().cloned());
    assert_eq!(ids(&take(&mut after, 6).await), ids(&expected));
    assert!(store.delete("sess_a").await.expect("delete"));
    let end = tokio::time::timeout(PATIENCE, from_start.next()).await;
    assert!(
        matches!(end, Ok(None)),
        "the tail of a deleted session ends: {end:?}"
    );
}
