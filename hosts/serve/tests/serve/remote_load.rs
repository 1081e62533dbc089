//! Many remote clients on one session, and one that does not read.

use super::remote::*;
use super::*;
use keel_envelope::types::Cursor;
use keel_serve::roles::Role;
use keel_serve::Client;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_clients_watching_one_session_get_the_same_events_in_the_same_order() {
    let _load = cpu_load();
    let turn = Turn {
        deltas: 300,
        pace: Some(20),
        ..Turn::default()
    };
    let r = remote(vec![turn], ConnectionOptions::default(), |_| {}).await;
    let (admin, _) = r.token(Role::Controller, None);
    let (watcher, _) = r.token(Role::Observer, None);
    let (c, _, mut c_rx) = Client::connect_remote(&r.url, admin.expose(), None)
        .await
        .unwrap();
    let sid = start_session(&c).await;
    let mut clients = Vec::new();
    for _ in 0..100 {
        let (w, _, rx) = Client::connect_remote(&r.url, watcher.expose(), None)
            .await
            .unwrap();
        let answer = watch(&w, &sid, None).await;
        assert_eq!(answer.type_name(), "session.watched");
        clients.push((w, rx));
    }
    let rid = send(&c, &sid, "to everyone").await;
    let reference = ids(&until(&mut c_rx, "completion", completed(&rid))
        .await
        .into_iter()
        .filter(|e| e.request_id == rid)
        .collect::<Vec<_>>());
    assert!(reference.len() > 300);
    let mut readers = Vec::new();
    for (w, mut rx) in clients {
        let rid = rid.clone();
        readers.push(tokio::spawn(async move {
            let got = until(&mut rx, "completion", completed(&rid)).await;
            drop(w);
            ids(&got
                .into_iter()
                .filter(|e| e.request_id == rid)
                .collect::<Vec<_>>())
        }));
    }
    for (i, reader) in readers.into_iter().enumerate() {
        assert_eq!(reader.await.unwrap(), reference, "client {i}");
    }
    r.stop().await;
}

/// A raw WebSocket client on a socket with a small receive buffer, so that what it
/// does not read backs up quickly.
async fn small_buffer_client(url: &str, token: &keel_serve::tokens::Secret) -> Ws {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket
        .connect(tcp_addr(url).parse().unwrap())
        .await
        .unwrap();
    let mut ws = upgrade(url, Box::new(tcp), &bearer(token)).await.unwrap();
    assert_eq!(ws.envelope().await.type_name(), "runtime.ready");
    ws
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_is_cut_off_told_where_to_resume_and_gets_exactly_what_it_missed() {
    let _load = cpu_load();
    // Big pieces, so that the socket buffers and the queue hold far fewer than the flood.
    let flood = Turn {
        deltas: 3000,
        pace: Some(4),
        width: Some(2048),
        ..Turn::default()
    };
    let options = ConnectionOptions {
        queue_capacity: 256,
        ..ConnectionOptions::default()
    };
    let r = remote(vec![flood, say(2)], options, |_| {}).await;
    let (admin, _) = r.token(Role::Controller, None);
    let (c, _, mut c_rx) = Client::connect_remote(&r.url, admin.expose(), None)
        .await
        .unwrap();
    let sid = start_session(&c).await;
    let mut slow = small_buffer_client(&r.url, &admin).await;
    let w = slow
        .ask("session.watch", None, json!({"sessionId": sid}))
        .await;
    assert_eq!(w.type_name(), "session.watched");
    // From now on it reads nothing until the flood is over; the other client goes on.
    let rid = send(&c, &sid, "flood").await;
    let all: Vec<Envelope> = until(&mut c_rx, "completion", completed(&rid))
        .await
        .into_iter()
        .filter(|e| e.session_id.as_deref() == Some(sid.as_str()))
        .collect();
    let (got, close) = slow.rest().await;
    assert_eq!(close.map(|c| c.0), Some(1008));
    let last = got.last().unwrap();
    let Event::RuntimeStopped(stopped) = &last.event else {
        panic!("the last message is {}", last.type_name())
    };
    assert_eq!(stopped.reason, "too_slow");
    let live: Vec<&Envelope> = got
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(sid.as_str()))
        .collect();
    assert!(
        live.len() < all.len(),
        "it could not have received everything"
    );
    let resume = stopped.resume_from.clone().unwrap();
    assert_eq!(resume.len(), 1);
    assert_eq!(resume[0].session_id, sid);
    let cursor = resume[0].cursor.clone().unwrap();
    let tail = live.last().unwrap();
    assert_eq!(
        cursor,
        Cursor::new(tail.request_id.clone(), tail.sequence),
        "the cursor is the last event it was sent"
    );
    // Watching again from the cursor replays exactly the rest.
    let (again, _, mut rx) = Client::connect_remote(&r.url, admin.expose(), None)
        .await
        .unwrap();
    let answer = watch(&again, &sid, Some(cursor)).await;
    let Event::SessionWatched(w) = &answer.event else {
        panic!("{answer:?}")
    };
    let mut replayed = Vec::new();
    while replayed.len() < w.replayed as usize {
        let e = tokio::time::timeout(HANG, rx.recv())
            .await
            .unwrap()
            .unwrap();
        if is_replay(&e) {
            replayed.push(e);
        }
    }
    let mut joined: Vec<&Envelope> = live.clone();
    joined.extend(replayed.iter());
    let from = all
        .iter()
        .position(|e| e.event_id == joined[0].event_id)
        .unwrap();
    let want = &all[from..];
    let first_difference = joined
        .iter()
        .zip(want.iter())
        .position(|(a, b)| a.event_id != b.event_id);
    let around = |v: &[&Envelope], i: usize| {
        v[i.saturating_sub(2)..(i + 2).min(v.len())]
            .iter()
            .map(|e| format!("{}#{}", e.type_name(), e.sequence))
            .collect::<Vec<_>>()
    };
    if let Some(i) = first_difference {
        let want_refs: Vec<&Envelope> = want.iter().collect();
        panic!(
            "a gap or a repeat at {i} (live {}): got {:?}, want {:?}",
            live.len(),
            around(&joined, i),
            around(&want_refs, i)
        );
    }
    assert_eq!(
        joined.len(),
        want.len(),
        "live {} + replayed {}: got ..{:?}, want ..{:?}",
        live.len(),
        replayed.len(),
        around(&joined, joined.len() - 1),
        around(&want.iter().collect::<Vec<_>>(), want.len() - 1),
    );
    // The daemon and the other client go on.
    let rid = send(&c, &sid, "again").await;
    until(&mut c_rx, "completion", completed(&rid)).await;
    r.stop().await;
}
