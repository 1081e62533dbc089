//! Several clients on one daemon over its real socket.

use super::*;
use keel_envelope::commands::ApprovalRespond;
use keel_envelope::types::ApprovalDecision;
use keel_envelope::ErrorCode;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn approval_id(envs: &[Envelope]) -> String {
    envs.iter()
        .find_map(|e| match &e.event {
            Event::ApprovalRequested(a) => Some(a.approval_id.clone()),
            _ => None,
        })
        .expect("approval.requested")
}

fn approve(id: &str) -> CommandPayload {
    CommandPayload::ApprovalRespond(ApprovalRespond::new(id, ApprovalDecision::AllowOnce))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_see_the_same_events_in_order_and_one_approval_closes_both_dialogs() {
    let _load = cpu_load();
    for round in 0..3 {
        let d = daemon(vec![poke(), say(40)], ConnectionOptions::default()).await;
        let (a, mut a_rx) = connect(&d.socket).await;
        let (b, mut b_rx) = connect(&d.socket).await;
        let sid = start_session(&a).await;
        let watched = watch(&b, &sid, None).await;
        assert_eq!(watched.type_name(), "session.watched");
        until(&mut b_rx, "session.watched", |e| {
            e.type_name() == "session.watched"
        })
        .await;

        let rid = send(&a, &sid, "poke it").await;
        let a_asked = until(&mut a_rx, "approval", |e| {
            e.type_name() == "approval.requested"
        })
        .await;
        let b_asked = until(&mut b_rx, "approval", |e| {
            e.type_name() == "approval.requested"
        })
        .await;
        let approval = approval_id(&a_asked);
        assert_eq!(approval_id(&b_asked), approval);

        // Whoever answers first wins; the other's answer is refused.
        let (first, second) = if round % 2 == 0 { (&b, &a) } else { (&a, &b) };
        let granted = first.request(Some(&sid), approve(&approval)).await.unwrap();
        assert_eq!(granted.type_name(), "approval.granted");
        let late = second
            .request(Some(&sid), approve(&approval))
            .await
            .unwrap_err();
        assert_eq!(late.code, ErrorCode::ApprovalNotFound);

        let a_rest = until(&mut a_rx, "completion", completed(&rid)).await;
        let b_rest = until(&mut b_rx, "completion", completed(&rid)).await;
        // Both dialogs close on the same `approval.granted`.
        for rest in [&a_rest, &b_rest] {
            let g: Vec<&Envelope> = rest
                .iter()
                .filter(|e| e.type_name() == "approval.granted")
                .collect();
            assert_eq!(g.len(), 1, "{:?}", types(rest));
            assert_eq!(g[0].event_id, granted.event_id);
        }
        // The same session events, in the same order, for both.
        let a_all: Vec<Envelope> = a_asked.into_iter().chain(a_rest).collect();
        let b_all: Vec<Envelope> = b_asked.into_iter().chain(b_rest).collect();
        let from = |v: &[Envelope]| {
            let i = v.iter().position(|e| e.request_id == rid).unwrap();
            ids(&v[i..])
        };
        assert_eq!(from(&a_all), from(&b_all), "round {round}");
        let mut checker = keel_envelope::SequenceChecker::new();
        for e in a_all.iter().filter(|e| e.request_id == rid) {
            checker.check(e).unwrap();
        }
        d.stop.cancel();
        d.task.await.unwrap();
    }
}

/// A raw client: the socket itself, so that it can vanish mid-stream like a killed
/// process.
async fn raw(path: &Path) -> (tokio::net::UnixStream, Envelope) {
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    let ready = read_line(&mut s).await.unwrap();
    (s, decode(&ready))
}

async fn read_line(s: &mut tokio::net::UnixStream) -> Option<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match tokio::io::AsyncReadExt::read(s, &mut byte).await {
            Ok(0) | Err(_) => return (!line.is_empty()).then(|| String::from_utf8(line).unwrap()),
            Ok(_) if byte[0] == b'\n' => return Some(String::from_utf8(line).unwrap()),
            Ok(_) => line.push(byte[0]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_mid_stream_leaves_the_request_running_and_a_new_client_catches_up() {
    let _load = cpu_load();
    let long = Turn {
        deltas: 400,
        delay: Some(Duration::from_millis(30)),
        ..Turn::default()
    };
    let d = daemon(vec![say(3), long], ConnectionOptions::default()).await;
    let (mut s, _) = raw(&d.socket).await;
    let line = |rid: &str, ty: &str, sid: Option<&str>, payload: serde_json::Value| {
        let mut v =
            serde_json::json!({"version": "1.0", "type": ty, "requestId": rid, "payload": payload});
        if let Some(sid) = sid {
            v["sessionId"] = sid.into();
        }
        format!("{v}\n")
    };
    s.write_all(line("k1", "session.start", None, serde_json::json!({})).as_bytes())
        .await
        .unwrap();
    let started = decode(&read_line(&mut s).await.unwrap());
    let sid = started.session_id.clone().unwrap();
    s.write_all(
        line(
            "k2",
            "request.send",
            Some(&sid),
            serde_json::json!({"message": "short"}),
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    loop {
        let e = decode(&read_line(&mut s).await.unwrap());
        if e.request_id == "k2" && e.type_name() == "session.completed" {
            break;
        }
    }
    s.write_all(
        line(
            "k3",
            "request.send",
            Some(&sid),
            serde_json::json!({"message": "long"}),
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let last = loop {
        let e = decode(&read_line(&mut s).await.unwrap());
        if e.type_name() == "assistant.delta" {
            break e;
        }
    };
    // Killed: the socket vanishes without a word.
    drop(s);
    let cursor = Cursor::new(last.request_id.clone(), last.sequence);

    let (b, mut b_rx) = connect(&d.socket).await;
    let answer = watch(&b, &sid, Some(cursor.clone())).await;
    let Event::SessionWatched(w) = &answer.event else {
        panic!("{}", answer.type_name())
    };
    let got = until(&mut b_rx, "completion", completed("k3")).await;
    assert_eq!(got[0].event_id, answer.event_id);
    let log = d.kernel.session_log(&sid).unwrap();
    let pos = log
        .iter()
        .position(|e| e.request_id == cursor.request_id && e.sequence == cursor.sequence)
        .unwrap();
    assert_eq!(
        ids(&got[1..]),
        ids(&log[pos + 1..]),
        "exactly what it missed, once"
    );
    assert!(got[1..=w.replayed as usize].iter().all(is_replay));
    assert!(got[1 + w.replayed as usize..].iter().all(|e| !is_replay(e)));
    let deltas = got
        .iter()
        .filter(|e| e.type_name() == "assistant.delta")
        .count();
    assert_eq!(deltas, 399, "the request ran to its end");
    d.stop.cancel();
    d.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_on_one_connection_is_answered_there_and_everything_else_goes_on() {
    let options = ConnectionOptions {
        max_line_bytes: Some(512),
        ..ConnectionOptions::default()
    };
    let d = daemon(vec![say(3), say(3)], options).await;
    let (a, mut a_rx) = connect(&d.socket).await;
    let (b, mut b_rx) = connect(&d.socket).await;
    let sid = start_session(&a).await;
    until(&mut a_rx, "started", |e| e.type_name() == "session.started").await;
    watch(&b, &sid, None).await;
    until(&mut b_rx, "watched", |e| e.type_name() == "session.watched").await;

    let long = format!(
        r#"{{"version":"1.0","type":"session.list","requestId":"bad_long","payload":{{"x":"{}"}}}}"#,
        "y".repeat(2000)
    );
    let cases: Vec<(Vec<u8>, &str, &str, Option<&str>)> = vec![
        (b"not json".to_vec(), "REQUEST_INVALID", "invalid_json", None),
        (long.into_bytes(), "REQUEST_INVALID", "line_too_long", Some("bad_long")),
        (b"{\"version\":\"1.0\",\"type\":\"session.watch\",\"requestId\":\"bad_w\",\"payload\":{}}".to_vec(), "REQUEST_INVALID", "missing_field", Some("bad_w")),
        (b"{\"version\":\"1.0\",\"type\":\"nope.never\",\"requestId\":\"bad_t\"}".to_vec(), "REQUEST_INVALID", "unknown_type", Some("bad_t")),
        (b"{\"version\":\"1.0\",\"schemaVersion\":2,\"type\":\"session.list\",\"requestId\":\"bad_sv\"}".to_vec(), "VERSION_MISMATCH", "version_mismatch", Some("bad_sv")),
        (vec![b'{', 0xff, 0xfe, b'}'], "REQUEST_INVALID", "invalid_utf8", None),
        (format!("{{\"version\":\"1.0\",\"type\":\"request.send\",\"requestId\":\"bad_s\",\"sessionId\":\"{sid}\",\"payload\":{{\"message\":7}}}}").into_bytes(), "REQUEST_INVALID", "wrong_type", Some("bad_s")),
    ];
    for (bytes, code, reason, rid) in &cases {
        a.write_line(bytes).await.unwrap();
        let got = until(&mut a_rx, "error", |e| e.type_name() == "error").await;
        let e = got.last().unwrap();
        let Event::Error(p) = &e.event else {
            unreachable!()
        };
        assert_eq!(p.code.as_str(), *code, "{reason}");
        assert_eq!(p.details["reason"], *reason);
        match rid {
            Some(r) => assert_eq!(e.request_id, *r),
            None => assert!(e.request_id.starts_with("req_")),
        }
    }
    // A watch of a session that is not open is refused with a stable code.
    let e = watch_err(&a, "sess_nope").await;
    assert_eq!(e.code, ErrorCode::SessionNotFound);

    // The connection, the other one and the daemon all go on.
    let rid = send(&a, &sid, "still here").await;
    until(&mut a_rx, "completion", completed(&rid)).await;
    let seen = until(&mut b_rx, "completion", completed(&rid)).await;
    assert!(
        seen.iter().all(|e| e.type_name() != "error"),
        "B saw A's errors: {:?}",
        types(&seen)
    );
    let listed = b
        .request(
            None,
            CommandPayload::SessionList(keel_envelope::commands::SessionListCmd::new()),
        )
        .await
        .unwrap();
    assert_eq!(listed.type_name(), "session.list");
    d.stop.cancel();
    d.task.await.unwrap();
}

async fn watch_err(c: &Client, sid: &str) -> ErrorPayload {
    c.request(None, CommandPayload::SessionWatch(SessionWatch::new(sid)))
        .await
        .unwrap_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_is_disconnected_and_the_others_go_on() {
    // A queue a reading client never fills at this pace, even with the cores busy; the
    // socket's buffer and the queue together hold far fewer events than the flood.
    let options = ConnectionOptions {
        queue_capacity: 512,
        ..ConnectionOptions::default()
    };
    let flood = Turn {
        deltas: 3000,
        pace: Some(2),
        ..Turn::default()
    };
    let d = daemon(vec![flood], options).await;
    let (a, mut a_rx) = connect(&d.socket).await;
    let sid = start_session(&a).await;
    let (mut slow, _) = raw(&d.socket).await;
    slow.write_all(
        format!("{{\"version\":\"1.0\",\"type\":\"session.watch\",\"requestId\":\"s1\",\"payload\":{{\"sessionId\":\"{sid}\"}}}}\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    // Watching once the answer is there; from now on it reads nothing.
    let answer = decode(&read_line(&mut slow).await.unwrap());
    assert_eq!(answer.type_name(), "session.watched");
    let rid = send(&a, &sid, "flood").await;
    let all = until(&mut a_rx, "completion", completed(&rid)).await;
    assert!(all.len() > 3000);
    // Now it reads: what fitted in the socket and the queue, then the reason, then EOF.
    let mut lines = BufReader::new(slow).lines();
    let mut got = Vec::new();
    while let Some(l) = lines.next_line().await.unwrap() {
        got.push(decode(&l));
    }
    assert!(got.len() < all.len(), "it could not have read everything");
    let last = got.last().unwrap();
    assert_eq!(
        stopped_reason(last),
        Some("too_slow"),
        "{}",
        last.type_name()
    );
    // It is told where to watch again from: the last event of the session it got.
    let Event::RuntimeStopped(stopped) = &last.event else {
        unreachable!()
    };
    let resume = stopped.resume_from.clone().unwrap();
    let tail = got
        .iter()
        .rev()
        .find(|e| e.session_id.as_deref() == Some(sid.as_str()))
        .unwrap();
    assert_eq!(resume.len(), 1);
    assert_eq!(resume[0].session_id, sid);
    assert_eq!(
        resume[0].cursor,
        Some(Cursor::new(tail.request_id.clone(), tail.sequence))
    );
    // The daemon and the other client go on.
    let rid = send(&a, &sid, "again").await;
    until(&mut a_rx, "completion", completed(&rid)).await;
    d.stop.cancel();
    d.task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_daemon_closes_sessions_and_tells_every_client() {
    let d = daemon(vec![say(2)], ConnectionOptions::default()).await;
    let (a, mut a_rx) = connect(&d.socket).await;
    let (_b, mut b_rx) = connect(&d.socket).await;
    let sid = start_session(&a).await;
    d.stop.cancel();
    let a_end = until(&mut a_rx, "stopped", |e| e.type_name() == "runtime.stopped").await;
    assert!(a_end
        .iter()
        .any(|e| e.type_name() == "session.closed" && e.session_id.as_deref() == Some(&sid)));
    assert_eq!(stopped_reason(a_end.last().unwrap()), Some("shutdown"));
    let b_end = until(&mut b_rx, "stopped", |e| e.type_name() == "runtime.stopped").await;
    assert_eq!(b_end.len(), 1, "B watched nothing: {:?}", types(&b_end));
    assert!(a_rx.recv().await.is_none());
    d.task.await.unwrap();
    assert!(!d.socket.exists(), "the socket file is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_that_forks_a_session_watches_the_fork_and_the_others_do_not() {
    let _load = cpu_load();
    let d = daemon(vec![say(3), say(5), say(2)], ConnectionOptions::default()).await;
    let (a, mut a_rx) = connect(&d.socket).await;
    let (b, mut b_rx) = connect(&d.socket).await;
    let sid = start_session(&a).await;
    watch(&b, &sid, None).await;
    let first = send(&a, &sid, "first").await;
    until(&mut a_rx, "the first request", completed(&first)).await;
    until(&mut b_rx, "the first request", completed(&first)).await;

    let forked = a
        .request(
            Some(&sid),
            CommandPayload::SessionFork(keel_envelope::commands::SessionFork::new()),
        )
        .await
        .unwrap();
    let Event::SessionForked(f) = &forked.event else {
        panic!("not a fork: {}", forked.type_name());
    };
    assert_eq!(f.parent_session_id, sid);
    let fork = f.session_id.clone();
    assert_eq!(forked.session_id.as_deref(), Some(fork.as_str()));

    // A request sent to the fork from a third connection reaches the connection that
    // forked it (it watches the fork), not the one that watches only the parent.
    let (c, _c_rx) = connect(&d.socket).await;
    let second = send(&c, &fork, "second").await;
    let seen = until(&mut a_rx, "the fork's request", completed(&second)).await;
    assert!(seen
        .iter()
        .filter(|e| e.request_id == second)
        .all(|e| e.session_id.as_deref() == Some(fork.as_str())));
    let third = send(&a, &sid, "third").await;
    let theirs = until(&mut b_rx, "the parent's request", completed(&third)).await;
    assert!(
        theirs
            .iter()
            .all(|e| e.session_id.as_deref() != Some(fork.as_str())),
        "the other connection got the fork's events: {:?}",
        types(&theirs)
    );
    // The forking connection still watches the parent too.
    until(&mut a_rx, "the parent's request", completed(&third)).await;
    d.stop.cancel();
    d.task.await.unwrap();
}
