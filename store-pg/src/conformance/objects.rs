//! Cases of checkpoint objects and of deleting a session.

use super::*;

/// Deleting removes everything of one session and nothing of another.
pub async fn delete(store: &dyn AsyncStore) {
    assert!(!store.delete("sess_none").await.expect("unknown"));
    let a = lease(store, "sess_a", NODE_A).await;
    let b = lease(store, "sess_b", NODE_A).await;
    for (l, id) in [(&a, "sess_a"), (&b, "sess_b")] {
        store
            .save_state(l.epoch, &state(id, vec![user("x")]))
            .await
            .expect("save");
        store
            .append(id, l.epoch, &event(id, "req_1", 1, "x"))
            .await
            .expect("append");
    }
    let shared = CheckpointObject::of(b"shared by both".to_vec());
    let own = CheckpointObject::of(b"only sess_a's".to_vec());
    store
        .put_objects("sess_a", a.epoch, &[shared.clone(), own.clone()])
        .await
        .expect("put");
    store
        .put_objects("sess_b", b.epoch, std::slice::from_ref(&shared))
        .await
        .expect("put");
    let m = Manifest {
        seq: 1,
        body: serde_json::json!({"id": "req_1"}),
        objects: vec![shared.hash.clone(), own.hash.clone()],
    };
    store
        .put_manifest("sess_a", a.epoch, &m)
        .await
        .expect("manifest");

    assert!(store.delete("sess_a").await.expect("delete"));
    assert_eq!(store.load_state("sess_a").await.expect("load"), None);
    assert!(store
        .load_events("sess_a")
        .await
        .expect("load")
        .events
        .is_empty());
    assert!(store
        .manifests("sess_a")
        .await
        .expect("manifests")
        .is_empty());
    assert_eq!(store.lease_owner("sess_a").await.expect("owner"), None);
    let list = store.list_summaries().await.expect("list");
    assert_eq!(
        list.iter()
            .map(|s| s.session_id.as_str())
            .collect::<Vec<_>>(),
        ["sess_b"]
    );
    assert_eq!(
        store.get_object(&own.hash).await.expect("get"),
        None,
        "no one refers to it"
    );
    assert_eq!(
        store.get_object(&shared.hash).await.expect("get"),
        Some(shared.bytes.clone())
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
    assert!(!store.delete("sess_a").await.expect("again"));
    assert_kind(
        store
            .append("sess_a", a.epoch, &event("sess_a", "req_2", 1, "late"))
            .await,
        StoreErrorKind::Fenced,
        "an append after the delete",
    );
    // The id can be used again, from scratch.
    let again = lease(store, "sess_a", NODE_B).await;
    store
        .append("sess_a", again.epoch, &event("sess_a", "req_1", 1, "new"))
        .await
        .expect("append");
    assert_eq!(
        store
            .load_events("sess_a")
            .await
            .expect("load")
            .events
            .len(),
        1
    );
}

/// Objects are stored once, found, read back; manifests list by seq.
pub async fn checkpoint_objects(store: &dyn AsyncStore) {
    let l = lease(store, "sess_a", NODE_A).await;
    let one = CheckpointObject::of(b"fn main() {}\n".to_vec());
    let two = CheckpointObject::of(vec![0, 159, 146, 150, 255]);
    let empty = CheckpointObject::of(Vec::new());
    let absent = CheckpointObject::of(b"never stored".to_vec());
    let n = store
        .put_objects(
            "sess_a",
            l.epoch,
            &[one.clone(), two.clone(), one.clone(), empty.clone()],
        )
        .await
        .expect("put");
    assert_eq!(n, 3, "the repeated object counts once");
    assert_eq!(
        store
            .put_objects("sess_a", l.epoch, std::slice::from_ref(&one))
            .await
            .expect("again"),
        0
    );
    let asked = vec![
        one.hash.clone(),
        absent.hash.clone(),
        two.hash.clone(),
        empty.hash.clone(),
    ];
    assert_eq!(
        store.has_objects(&asked).await.expect("has"),
        [true, false, true, true]
    );
    assert_eq!(
        store.get_object(&two.hash).await.expect("get"),
        Some(two.bytes.clone())
    );
    assert_eq!(
        store.get_object(&empty.hash).await.expect("get"),
        Some(Vec::new())
    );
    assert_eq!(store.get_object(&absent.hash).await.expect("get"), None);
    let mut forged = one.clone();
    forged.bytes.push(b'!');
    assert_kind(
        store.put_objects("sess_a", l.epoch, &[forged]).await,
        StoreErrorKind::InvalidInput,
        "bytes that do not match the hash",
    );
    assert_kind(
        store.get_object("not-a-hash").await,
        StoreErrorKind::InvalidInput,
        "bad hash",
    );

    let m1 = Manifest {
        seq: 1,
        body: serde_json::json!({"id": "req_1", "baseline": true, "text": "NUL \u{0}"}),
        objects: vec![one.hash.clone(), two.hash.clone()],
    };
    let m2 = Manifest {
        seq: 2,
        body: serde_json::json!({"id": "call_1", "changes": [{"path": "src/main.rs"}]}),
        objects: vec![empty.hash.clone()],
    };
    store
        .put_manifest("sess_a", l.epoch, &m2)
        .await
        .expect("manifest 2");
    store
        .put_manifest("sess_a", l.epoch, &m1)
        .await
        .expect("manifest 1");
    store
        .put_manifest("sess_a", l.epoch, &m1)
        .await
        .expect("the same again is a no-op");
    let mut other = m1.clone();
    other.body = serde_json::json!({"id": "something else"});
    assert_kind(
        store.put_manifest("sess_a", l.epoch, &other).await,
        StoreErrorKind::InvalidInput,
        "another manifest under a taken seq",
    );
    let missing = Manifest {
        seq: 3,
        body: serde_json::json!({}),
        objects: vec![absent.hash.clone()],
    };
    match store.put_manifest("sess_a", l.epoch, &missing).await {
        Err(e) => {
            assert_eq!(kind_of(&e), Some(StoreErrorKind::ObjectMissing), "{e:?}");
            assert!(e.retryable);
            assert_eq!(e.details["missing"], serde_json::json!([absent.hash]));
        }
        Ok(()) => panic!("a manifest naming an absent object was recorded"),
    }
    assert_eq!(
        store.manifests("sess_a").await.expect("manifests"),
        [m1, m2]
    );
    assert!(store.manifests("sess_b").await.expect("none").is_empty());
}
