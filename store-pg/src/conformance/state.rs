//! Cases of states, histories and summaries, at scale too.

use super::*;

/// States round-trip with their history as it grows, is compacted and grows again;
/// summaries follow.
pub async fn state_history_and_summaries(store: &dyn AsyncStore) {
    assert_eq!(store.load_state("sess_a").await.expect("unknown"), None);
    assert!(store.list_summaries().await.expect("empty list").is_empty());
    let l = lease(store, "sess_a", NODE_A).await;
    assert_eq!(store.load_state("sess_a").await.expect("leased only"), None);
    assert!(
        store.list_summaries().await.expect("list").is_empty(),
        "no state, no summary"
    );

    let mut s = state("sess_a", vec![user("fix the test"), assistant("On it.")]);
    store.save_state(l.epoch, &s).await.expect("save");
    assert_eq!(
        store.load_state("sess_a").await.expect("load"),
        Some(s.clone())
    );

    // Grows: what a turn adds.
    s.history.push(user("and the docs\nplease"));
    s.history
        .push(assistant("Done: the tests pass.\nMore details"));
    s.request_marks.push(keel_kernel::store::RequestMark {
        request_id: "req_1".into(),
        history_len: 0,
    });
    s.updated_at += 10;
    s.title = Some("Fix the failing test".into());
    store.save_state(l.epoch, &s).await.expect("save grown");
    assert_eq!(
        store.load_state("sess_a").await.expect("load"),
        Some(s.clone())
    );

    // Compacted: the history is replaced by a shorter one.
    s.history = vec![
        user("summary of the conversation"),
        assistant("NUL \u{0} kept"),
    ]
    .into();
    store.save_state(l.epoch, &s).await.expect("save compacted");
    assert_eq!(
        store.load_state("sess_a").await.expect("load"),
        Some(s.clone())
    );
    s.history.push(user("one more"));
    store
        .save_state(l.epoch, &s)
        .await
        .expect("save grown again");
    let loaded = store
        .load_state("sess_a")
        .await
        .expect("load")
        .expect("stored");
    assert_eq!(loaded, s);
    // Emptied.
    let mut empty = s.clone();
    empty.history = Vec::new().into();
    store.save_state(l.epoch, &empty).await.expect("save empty");
    assert_eq!(store.load_state("sess_a").await.expect("load"), Some(empty));
    store.save_state(l.epoch, &s).await.expect("save again");

    let l2 = lease(store, "sess_b", NODE_A).await;
    let mut b = state("sess_b", vec![user("hello")]);
    b.updated_at = s.updated_at + 100;
    b.closed = true;
    store.save_state(l2.epoch, &b).await.expect("save b");
    let list = store.list_summaries().await.expect("list");
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].session_id, "sess_b", "most recently updated first");
    assert!(list[0].closed);
    let a = &list[1];
    assert_eq!(a.title.as_deref(), Some("Fix the failing test"));
    assert_eq!(a.request_count, 1);
    assert_eq!(a.last_message.as_deref(), Some("one more"));
    assert_eq!(a, &keel_kernel::summary::SessionSummary::of(&s));
}

/// 10,000 sessions are listed, each once.
pub async fn ten_thousand_sessions(store: &dyn AsyncStore) {
    const N: usize = 10_000;
    let ids: Vec<String> = (0..N).map(|i| format!("sess_{i:05}")).collect();
    futures::stream::iter(ids.iter())
        .for_each_concurrent(16, |id| async move {
            let l = lease(store, id, NODE_A).await;
            let mut s = state(id, vec![user(&format!("prompt of {id}"))]);
            s.updated_at += u64::try_from(id[5..].parse::<usize>().unwrap_or(0)).unwrap_or(0);
            store.save_state(l.epoch, &s).await.expect("save");
        })
        .await;
    let list = store.list_summaries().await.expect("list");
    assert_eq!(list.len(), N);
    let mut listed: Vec<&str> = list.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(listed[0], "sess_09999", "most recent first");
    listed.sort_unstable();
    listed.dedup();
    assert_eq!(listed.len(), N);
    let x = list
        .iter()
        .find(|s| s.session_id == "sess_04242")
        .expect("listed");
    assert_eq!(x.last_message.as_deref(), Some("prompt of sess_04242"));
}
