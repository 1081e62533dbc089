//! Cases of leases and fencing.

use super::*;

/// Acquire, hold, renew, release, acquire again higher.
pub async fn leases(store: &dyn AsyncStore) {
    assert_eq!(store.lease_owner("sess_a").await.expect("owner"), None);
    let a = lease(store, "sess_a", NODE_A).await;
    assert!(a.epoch >= Epoch(1));
    match store
        .acquire_lease("sess_a", NODE_B, LONG)
        .await
        .expect("acquire")
    {
        LeaseOutcome::Held(info) => {
            assert_eq!(info.owner, NODE_A);
            assert_eq!(info.epoch, a.epoch);
            assert!(info.live);
        }
        other => panic!("a live lease was taken: {other:?}"),
    }
    store.renew_lease(&a).await.expect("renew");
    let info = store
        .lease_owner("sess_a")
        .await
        .expect("owner")
        .expect("held");
    assert_eq!(
        (info.owner.as_str(), info.epoch, info.live),
        (NODE_A, a.epoch, true)
    );
    // The owner asking again gets a higher epoch; the old one is fenced.
    let a2 = lease(store, "sess_a", NODE_A).await;
    assert!(a2.epoch > a.epoch);
    assert_kind(
        store.renew_lease(&a).await,
        StoreErrorKind::Fenced,
        "renew a superseded lease",
    );
    assert!(!store.release_lease(&a).await.expect("release superseded"));
    assert!(store.release_lease(&a2).await.expect("release"));
    assert_eq!(store.lease_owner("sess_a").await.expect("owner"), None);
    assert_kind(
        store.renew_lease(&a2).await,
        StoreErrorKind::Fenced,
        "renew a released lease",
    );
    let b = lease(store, "sess_a", NODE_B).await;
    assert!(b.epoch > a2.epoch, "a new owner gets a higher epoch");
    let bad = store.acquire_lease("sess_a", NODE_A, Duration::ZERO).await;
    assert_kind(bad, StoreErrorKind::InvalidInput, "a zero ttl");
    let bad = store.acquire_lease("a/b", NODE_A, LONG).await;
    assert_eq!(
        bad.map_err(|e| e.code).err(),
        Some(ErrorCode::SessionNotFound)
    );
}

/// A lease that is not renewed expires; then another owner gets it with a higher
/// epoch, and the first owner's writes and renewals are refused.
pub async fn lease_expiry(store: &dyn AsyncStore) {
    let a = match store
        .acquire_lease("sess_a", NODE_A, Duration::from_millis(50))
        .await
    {
        Ok(LeaseOutcome::Acquired(l)) => l,
        other => panic!("acquire: {other:?}"),
    };
    let start = Instant::now();
    let b = loop {
        match store
            .acquire_lease("sess_a", NODE_B, LONG)
            .await
            .expect("acquire")
        {
            LeaseOutcome::Acquired(l) => break l,
            LeaseOutcome::Held(info) => assert_eq!(info.owner, NODE_A),
        }
        assert!(start.elapsed() < PATIENCE, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(b.epoch > a.epoch);
    assert_kind(
        store.renew_lease(&a).await,
        StoreErrorKind::Fenced,
        "renew after expiry",
    );
    assert_kind(
        store
            .append("sess_a", a.epoch, &event("sess_a", "req_1", 2, "late"))
            .await,
        StoreErrorKind::Fenced,
        "append after takeover",
    );
    assert_kind(
        store.save_state(a.epoch, &state("sess_a", vec![])).await,
        StoreErrorKind::Fenced,
        "save after takeover",
    );
    let info = store
        .lease_owner("sess_a")
        .await
        .expect("owner")
        .expect("held");
    assert_eq!((info.owner.as_str(), info.epoch), (NODE_B, b.epoch));
    let e = event("sess_a", "req_2", 1, "new owner");
    store.append("sess_a", b.epoch, &e).await.expect("append");
    let log = store.load_events("sess_a").await.expect("load").events;
    assert_eq!(log, [e], "only the new owner's event is in the log");
}

/// Every write carries an epoch and a stale or unknown one changes nothing.
pub async fn fencing(store: &dyn AsyncStore) {
    let e = event("sess_a", "req_1", 1, "x");
    assert_kind(
        store.append("sess_a", Epoch(1), &e).await,
        StoreErrorKind::Fenced,
        "no lease",
    );
    let a = lease(store, "sess_a", NODE_A).await;
    let stale = Epoch(a.epoch.0 - 1);
    let wrong = Epoch(a.epoch.0 + 1);
    for epoch in [stale, wrong] {
        assert_kind(
            store.append("sess_a", epoch, &e).await,
            StoreErrorKind::Fenced,
            "append",
        );
        assert_kind(
            store
                .append_batch("sess_a", epoch, std::slice::from_ref(&e))
                .await,
            StoreErrorKind::Fenced,
            "batch",
        );
        assert_kind(
            store
                .save_state(epoch, &state("sess_a", vec![user("x")]))
                .await,
            StoreErrorKind::Fenced,
            "save",
        );
        let o = CheckpointObject::of(b"x".to_vec());
        assert_kind(
            store.put_objects("sess_a", epoch, &[o]).await,
            StoreErrorKind::Fenced,
            "put",
        );
        let m = Manifest {
            seq: 1,
            body: serde_json::json!({}),
            objects: vec![],
        };
        assert_kind(
            store.put_manifest("sess_a", epoch, &m).await,
            StoreErrorKind::Fenced,
            "manifest",
        );
    }
    assert!(store
        .load_events("sess_a")
        .await
        .expect("load")
        .events
        .is_empty());
    assert_eq!(store.load_state("sess_a").await.expect("load"), None);
    assert!(store
        .manifests("sess_a")
        .await
        .expect("manifests")
        .is_empty());
    store
        .append("sess_a", a.epoch, &e)
        .await
        .expect("the live epoch writes");
    store.release_lease(&a).await.expect("release");
    assert_kind(
        store
            .append("sess_a", a.epoch, &event("sess_a", "req_1", 2, "y"))
            .await,
        StoreErrorKind::Fenced,
        "append after release",
    );
}
