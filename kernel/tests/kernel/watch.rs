//! Watchers: the subscribers of a daemon's client connections. Each gets the answers
//! to its own commands and the events of the sessions it watches, never holds a
//! session back, and a watch with a cursor replays exactly what was missed.

use super::*;
use keel_envelope::commands::{SessionResume, SessionUnwatch, SessionWatch};
use keel_envelope::types::Cursor;
use keel_kernel::{WatchEnd, WatchStream, Watcher};

fn cmd(rid: &str, session: Option<&str>, payload: CommandPayload) -> Command {
    Command::new(rid, session.map(str::to_owned), payload)
}

fn watch_cmd(rid: &str, session: &str, after: Option<Cursor>) -> Command {
    cmd(
        rid,
        None,
        CommandPayload::SessionWatch(SessionWatch::new(session.to_owned()).after_sequence(after)),
    )
}

fn send_cmd(rid: &str, session: &str, text: &str) -> Command {
    cmd(
        rid,
        Some(session),
        CommandPayload::RequestSend(RequestSend::new(text.to_owned())),
    )
}

/// Reads a watcher's envelopes until `pred` holds for one (inclusive).
async fn until_w(
    events: &mut WatchStream,
    what: &str,
    pred: impl Fn(&Envelope) -> bool,
) -> Vec<Envelope> {
    let mut out = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(600), events.recv())
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}; got {:?}", types(&out)))
            .unwrap_or_else(|| panic!("stream ended waiting for {what}; got {:?}", types(&out)));
        let done = pred(&env);
        out.push(env);
        if done {
            return out;
        }
    }
}

fn completed(rid: &str) -> impl Fn(&Envelope) -> bool + '_ {
    move |e: &Envelope| e.request_id == rid && e.type_name() == "session.completed"
}

fn ids(envs: &[Envelope]) -> Vec<String> {
    envs.iter().map(|e| e.event_id.clone()).collect()
}

fn many_deltas(n: usize) -> Turn {
    Turn {
        text: (0..n).map(|_| "x").collect(),
        ..Turn::default()
    }
}

async fn watched_session(f: &Fixture) -> (String, Watcher, WatchStream) {
    let (w, mut ev) = f.kernel.watcher(1024);
    w.execute(cmd(
        "c_start",
        None,
        CommandPayload::SessionStart(keel_envelope::commands::SessionStart::new()),
    ))
    .await
    .unwrap();
    let started = until_w(&mut ev, "session.started", |e| {
        e.type_name() == "session.started"
    })
    .await;
    let sid = started[0].session_id.clone().unwrap();
    (sid, w, ev)
}

#[tokio::test]
async fn two_watchers_see_the_same_events_in_the_same_order_and_only_their_own_answers() {
    let f = fixture(vec![say("hello"), many_deltas(20)], Duration::from_secs(60));
    let (sid, a, mut a_ev) = watched_session(&f).await;
    let (b, mut b_ev) = f.kernel.watcher(1024);
    b.execute(watch_cmd("b_watch", &sid, None)).await.unwrap();
    let w = until_w(&mut b_ev, "session.watched", |e| {
        e.type_name() == "session.watched"
    })
    .await;
    assert_eq!(w.len(), 1, "{:?}", types(&w));

    a.execute(send_cmd("a_send", &sid, "hi")).await.unwrap();
    let a_seen = until_w(&mut a_ev, "completion", completed("a_send")).await;
    let b_seen = until_w(&mut b_ev, "completion", completed("a_send")).await;
    assert_eq!(ids(&a_seen), ids(&b_seen));
    check_sequences(&a_seen);

    // A command of B on the same session: both see the request (it is the session's),
    // but a kernel-level answer reaches only the one who asked.
    b.execute(cmd(
        "b_list",
        None,
        CommandPayload::SessionList(keel_envelope::commands::SessionListCmd::new()),
    ))
    .await
    .unwrap();
    let listed = until_w(&mut b_ev, "session.list", |e| {
        e.type_name() == "session.list"
    })
    .await;
    assert_eq!(listed.last().unwrap().request_id, "b_list");
    b.execute(send_cmd("b_send", &sid, "again")).await.unwrap();
    let a_seen = until_w(&mut a_ev, "completion", completed("b_send")).await;
    assert!(
        a_seen.iter().all(|e| e.type_name() != "session.list"),
        "A got B's answer: {:?}",
        types(&a_seen)
    );
    assert_eq!(b.watching(), vec![sid.clone()]);
    assert_eq!(a.watching(), vec![sid]);
}

#[tokio::test]
async fn unwatch_stops_the_stream_and_answers_even_for_an_unknown_session() {
    let f = fixture(vec![say("one"), say("two")], Duration::from_secs(60));
    let (sid, a, mut a_ev) = watched_session(&f).await;
    let (b, mut b_ev) = f.kernel.watcher(1024);
    b.execute(watch_cmd("b_watch", &sid, None)).await.unwrap();
    until_w(&mut b_ev, "session.watched", |e| {
        e.type_name() == "session.watched"
    })
    .await;
    b.execute(cmd(
        "b_unwatch",
        None,
        CommandPayload::SessionUnwatch(SessionUnwatch::new(sid.clone())),
    ))
    .await
    .unwrap();
    let un = until_w(&mut b_ev, "session.unwatched", |e| {
        e.type_name() == "session.unwatched"
    })
    .await;
    assert_eq!(un.last().unwrap().request_id, "b_unwatch");
    assert!(b.watching().is_empty());
    a.execute(send_cmd("a_send", &sid, "hi")).await.unwrap();
    until_w(&mut a_ev, "completion", completed("a_send")).await;
    // B hears nothing more of the session: the next thing it gets is its own answer.
    b.execute(cmd(
        "b_unwatch2",
        None,
        CommandPayload::SessionUnwatch(SessionUnwatch::new("sess_nope")),
    ))
    .await
    .unwrap();
    let next = b_ev.recv().await.unwrap();
    assert_eq!(
        (next.type_name(), next.request_id.as_str()),
        ("session.unwatched", "b_unwatch2")
    );
}

#[tokio::test]
async fn watching_an_unknown_session_or_with_a_cursor_not_in_the_log_is_refused() {
    let f = fixture(vec![say("one")], Duration::from_secs(60));
    let (sid, _a, _a_ev) = watched_session(&f).await;
    let (b, mut b_ev) = f.kernel.watcher(16);
    let e = b
        .execute(watch_cmd("b1", "sess_missing", None))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::SessionNotFound);
    let got = b_ev.recv().await.unwrap();
    assert_eq!((got.type_name(), got.request_id.as_str()), ("error", "b1"));
    let bad = Cursor::new("req_nope", 3);
    let e = b
        .execute(watch_cmd("b2", &sid, Some(bad)))
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestInvalid);
    assert_eq!(e.details["field"], "payload.afterSequence");
    let got = b_ev.recv().await.unwrap();
    assert_eq!((got.type_name(), got.request_id.as_str()), ("error", "b2"));
    assert!(b.watching().is_empty(), "a refused watch watches nothing");
}

/// A watch with a cursor while the session is emitting: replay and live stream join
/// with no gap and no duplicate, whatever the moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_with_a_cursor_during_a_running_request_has_no_gap_and_no_duplicate() {
    for round in 0..12u64 {
        let mut turns = vec![say("first")];
        turns.push(Turn {
            text: (0..40).map(|_| "y").collect(),
            calls: vec![("peek", serde_json::json!({"sleep_ms": round % 3}))],
            ..Turn::default()
        });
        turns.push(many_deltas(40));
        let f = fixture(turns, Duration::from_secs(60));
        let (sid, a, mut a_ev) = watched_session(&f).await;
        a.execute(send_cmd("r1", &sid, "one")).await.unwrap();
        let first = until_w(&mut a_ev, "r1", completed("r1")).await;
        let last = first.last().unwrap();
        let cursor = Cursor::new(last.request_id.clone(), last.sequence);
        a.execute(send_cmd("r2", &sid, "two")).await.unwrap();
        // Let the request run a varying while before the watch starts.
        for _ in 0..(round * 7) {
            tokio::task::yield_now().await;
        }
        let (b, mut b_ev) = f.kernel.watcher(100_000);
        b.execute(watch_cmd("w", &sid, Some(cursor.clone())))
            .await
            .unwrap();
        let got = until_w(&mut b_ev, "r2", completed("r2")).await;
        until_w(&mut a_ev, "r2", completed("r2")).await;
        assert_eq!(got[0].type_name(), "session.watched");
        let log = f.kernel.session_log(&sid).unwrap();
        let pos = log
            .iter()
            .position(|e| e.request_id == cursor.request_id && e.sequence == cursor.sequence)
            .unwrap();
        let expected = ids(&log[pos + 1..]);
        let seen = ids(&got[1..]);
        assert_eq!(seen, expected, "round {round}");
        let Event::SessionWatched(w) = &got[0].event else {
            unreachable!()
        };
        let replayed = got[1..]
            .iter()
            .filter(|e| e.meta.as_ref().and_then(|m| m.replay) == Some(true))
            .count();
        assert_eq!(w.replayed as usize, replayed, "round {round}");
        assert!(got[1..=replayed]
            .iter()
            .all(|e| e.meta.as_ref().and_then(|m| m.replay) == Some(true)));
        check_sequences(&got[1..]);
    }
}

#[tokio::test]
async fn a_watcher_that_does_not_read_is_cut_off_and_the_session_goes_on() {
    let f = fixture(vec![many_deltas(200)], Duration::from_secs(60));
    let (sid, a, mut a_ev) = watched_session(&f).await;
    let (slow, mut slow_ev) = f.kernel.watcher(4);
    slow.execute(watch_cmd("s_watch", &sid, None))
        .await
        .unwrap();
    a.execute(send_cmd("a_send", &sid, "go")).await.unwrap();
    let seen = until_w(&mut a_ev, "completion", completed("a_send")).await;
    assert!(seen.len() > 200, "{}", seen.len());
    assert_eq!(slow.end(), Some(WatchEnd::Overflow { capacity: 4 }));
    let mut got = 0;
    while slow_ev.recv().await.is_some() {
        got += 1;
    }
    assert_eq!(got, 4, "the queue held its capacity, then ended");
    assert_eq!(slow_ev.end(), Some(WatchEnd::Overflow { capacity: 4 }));
}

#[tokio::test]
async fn a_resume_replay_goes_only_to_the_watcher_that_asked() {
    let f = fixture(vec![say("one"), say("two")], Duration::from_secs(60));
    let (sid, a, mut a_ev) = watched_session(&f).await;
    a.execute(send_cmd("r1", &sid, "one")).await.unwrap();
    let first = until_w(&mut a_ev, "r1", completed("r1")).await;
    let cursor = Cursor::new(first[0].request_id.clone(), first[0].sequence);
    let (b, mut b_ev) = f.kernel.watcher(1024);
    b.execute(cmd(
        "b_resume",
        None,
        CommandPayload::SessionResume(SessionResume::new(sid.clone()).after_sequence(cursor)),
    ))
    .await
    .unwrap();
    let got = until_w(&mut b_ev, "replay end", completed("r1")).await;
    assert_eq!(got[0].type_name(), "session.resumed");
    assert!(got[1..]
        .iter()
        .all(|e| e.meta.as_ref().and_then(|m| m.replay) == Some(true)));
    assert_eq!(got.len() - 1, first.len() - 1);
    // A sees B's `session.resumed` (an event of the session) but none of the replay.
    a.execute(send_cmd("r2", &sid, "two")).await.unwrap();
    let after = until_w(&mut a_ev, "r2", completed("r2")).await;
    assert!(after.iter().any(|e| e.type_name() == "session.resumed"));
    assert!(
        after
            .iter()
            .all(|e| e.meta.as_ref().and_then(|m| m.replay).is_none()),
        "{:?}",
        types(&after)
    );
    // B now watches the session it resumed.
    let b_after = until_w(&mut b_ev, "r2", completed("r2")).await;
    assert!(b_after.iter().any(|e| e.request_id == "r2"));
}

#[tokio::test]
async fn a_watch_without_a_cursor_gets_the_pending_approval_and_one_answer_closes_it_for_all() {
    let f = fixture(
        vec![call("poke", serde_json::json!({})), say("done")],
        Duration::from_secs(600),
    );
    let (sid, a, mut a_ev) = watched_session(&f).await;
    a.execute(send_cmd("r", &sid, "poke it")).await.unwrap();
    let asked = until_w(&mut a_ev, "approval", |e| {
        e.type_name() == "approval.requested"
    })
    .await;
    let approval = approval_id(&asked);

    let (b, mut b_ev) = f.kernel.watcher(1024);
    b.execute(watch_cmd("b_watch", &sid, None)).await.unwrap();
    let got = until_w(&mut b_ev, "approval", |e| {
        e.type_name() == "approval.requested"
    })
    .await;
    let Event::SessionWatched(w) = &got[0].event else {
        panic!("{:?}", types(&got))
    };
    assert_eq!(w.active_request_id.as_deref(), Some("r"));
    assert_eq!(w.replayed, 1);
    assert_eq!(got.len(), 2);
    assert_eq!(got[1].meta.as_ref().and_then(|m| m.replay), Some(true));
    assert_eq!(approval_id(&got), approval);

    let respond = |rid: &str| {
        cmd(
            rid,
            Some(&sid),
            CommandPayload::ApprovalRespond(keel_envelope::commands::ApprovalRespond::new(
                approval.clone(),
                ApprovalDecision::AllowOnce,
            )),
        )
    };
    b.execute(respond("b_yes")).await.unwrap();
    let e = a.execute(respond("a_yes")).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ApprovalNotFound);
    let a_rest = until_w(&mut a_ev, "r", completed("r")).await;
    let granted: Vec<&Envelope> = a_rest
        .iter()
        .filter(|e| e.type_name() == "approval.granted")
        .collect();
    assert_eq!(granted.len(), 1);
    assert_eq!(granted[0].reply_to(), Some("b_yes"));
    assert!(a_rest
        .iter()
        .any(|e| e.type_name() == "error" && e.request_id == "a_yes"));
    let b_rest = until_w(&mut b_ev, "r", completed("r")).await;
    // Both see the session's events alike, the late answer's refusal included.
    assert_eq!(ids(&a_rest), ids(&b_rest));
}

#[tokio::test]
async fn a_session_in_the_envelope_alone_is_watched_and_two_different_ones_are_refused() {
    let f = fixture(vec![say("one")], Duration::from_secs(60));
    let (sid, _a, _a_ev) = watched_session(&f).await;
    let (b, mut b_ev) = f.kernel.watcher(1024);
    b.execute(cmd(
        "b_watch",
        Some(&sid),
        CommandPayload::SessionWatch(SessionWatch::new("")),
    ))
    .await
    .unwrap();
    until_w(&mut b_ev, "session.watched", |e| {
        e.type_name() == "session.watched"
    })
    .await;
    assert_eq!(b.watching(), vec![sid.clone()]);
    let err = b
        .execute(cmd(
            "b_two",
            Some(&sid),
            CommandPayload::SessionUnwatch(SessionUnwatch::new("sess_other")),
        ))
        .await
        .unwrap_err();
    assert_eq!(
        err.code,
        keel_envelope::ErrorCode::RequestInvalid,
        "{err:?}"
    );
    assert!(
        err.message.contains(&sid) && err.message.contains("sess_other"),
        "{}",
        err.message
    );
    let answer = until_w(&mut b_ev, "the refusal", |e| e.request_id == "b_two").await;
    assert_eq!(answer.last().unwrap().type_name(), "error");
    assert_eq!(
        b.watching(),
        vec![sid],
        "the refused unwatch changed nothing"
    );
}
