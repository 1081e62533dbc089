//! Several `keel serve --store postgres://…` processes on one database, each with
//! its own socket and `KEEL_HOME`, against a real PostgreSQL server (a cluster made
//! with initdb in a temporary directory): every node lists every session, watches a
//! session served elsewhere live, is refused a session another live node serves
//! (`SESSION_OWNED_ELSEWHERE`, naming it), and takes over one whose owner died
//! (`SIGKILL`) or was paused past its lease (`SIGSTOP`). CPU load runs meanwhile.
//! Nothing asserts on timing; every wait has a hang guard.
#![allow(clippy::unwrap_used)]

mod nodes_support;

use std::collections::HashSet;
use std::process::Command;

use keel_envelope::{Envelope, ErrorCode, Event};
use keel_store_pg::testing::PgServer;
use nodes_support::*;

#[test]
fn any_node_lists_watches_refuses_and_takes_over_a_killed_owner() {
    let _load = keel_testsupport::Busy::start(2);
    let server = PgServer::shared();
    let c = cluster(server.create_database());
    let mut a = c.node("node-a");
    let b = c.node("node-b");
    let w = c.node("node-c");
    let mut on_a = Conn::open(&a);
    let mut on_b = Conn::open(&b);
    let mut on_w = Conn::open(&w);
    let sid = start_session(&mut on_a, &c.workspace);

    // Every node lists it.
    for conn in [&mut on_b, &mut on_w] {
        let rid = conn.send("session.list", None, serde_json::json!({}));
        match conn.answer(&rid, &["session.list"]).event {
            Event::SessionList(l) => {
                assert!(l.sessions.iter().any(|s| s.session_id == sid), "{l:?}")
            }
            other => panic!("{other:?}"),
        }
    }

    let (req, seen_on_a) = run_until_streaming(&mut on_a, &sid, 5);
    // A node that does not own it watches it live.
    let wrid = on_w.send(
        "session.watch",
        None,
        serde_json::json!({ "sessionId": sid }),
    );
    let watched = on_w.answer(&wrid, &["session.watched"]);
    let Event::SessionWatched(ans) = &watched.event else {
        panic!("{watched:?}")
    };
    assert_eq!(ans.active_request_id.as_deref(), Some(req.as_str()));
    let live = on_w.until(|e| e.request_id == req && e.type_name() == "assistant.delta");
    assert!(!live.is_empty());

    // Another node is refused, told who serves it.
    let rrid = on_b.send(
        "session.resume",
        None,
        serde_json::json!({ "sessionId": sid }),
    );
    let refused = on_b.answer(&rrid, &["session.resumed"]);
    let e = error_of(&refused);
    assert_eq!(e.code, ErrorCode::SessionOwnedElsewhere, "{e:?}");
    assert_eq!(e.details["owner"], "node-a");
    assert!(e.retryable);
    let srid = on_b.send(
        "request.send",
        Some(&sid),
        serde_json::json!({ "message": "mine?" }),
    );
    let refused = on_b.answer(&srid, &["request.accepted", "request.rejected"]);
    assert_eq!(error_of(&refused).code, ErrorCode::SessionOwnedElsewhere);

    // The owner dies mid-request.
    let more = on_a.until(|e| e.type_name() == "assistant.delta" && e.sequence > 40);
    a.child.kill().unwrap();
    let _ = a.child.wait();
    let mut delivered_by_a: Vec<Envelope> = seen_on_a;
    delivered_by_a.extend(more);

    // Another node takes it over: the cut request ends as owner_lost, and every
    // watcher learns who serves the session now.
    let resumed = take_over(&mut on_b, &sid);
    assert_eq!(resumed.last().unwrap().type_name(), "session.resumed");
    let after = on_b.until(|e| e.type_name() == "session.interrupted" && e.request_id == req);
    let changed = after
        .iter()
        .chain(resumed.iter())
        .find_map(|e| match &e.event {
            Event::SessionOwnerChanged(p) => Some(p.clone()),
            _ => None,
        })
        .expect("session.owner_changed on the new owner");
    assert_eq!(changed.previous_owner, "node-a");
    assert_eq!(changed.owner, "node-b");
    match &after.last().unwrap().event {
        Event::SessionInterrupted(p) => assert_eq!(p.reason, "owner_lost"),
        other => panic!("{other:?}"),
    }
    let watched_live =
        on_w.until(|e| e.type_name() == "session.interrupted" && e.request_id == req);
    assert!(watched_live
        .iter()
        .any(|e| matches!(&e.event, Event::SessionOwnerChanged(p) if p.owner == "node-b")));

    // The next request completes, on the new owner; the watcher follows it.
    let next = on_b.send(
        "request.send",
        Some(&sid),
        serde_json::json!({ "message": "again" }),
    );
    let done = on_b.until(|e| e.request_id == next && e.type_name() == "session.completed");
    assert!(deltas(&done) > 0);
    let followed = on_w.until(|e| e.request_id == next && e.type_name() == "session.completed");
    assert!(deltas(&followed) > 0);

    // Nothing a client saw is missing from the log, nothing is in it twice, and the
    // watcher saw every event of the log from its watch on, once, in order.
    let log = stored_log(&c.url, &sid);
    let ids: Vec<&str> = log.iter().map(|e| e.event_id.as_str()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an event is stored twice");
    for e in &delivered_by_a {
        assert!(
            unique.contains(e.event_id.as_str()),
            "delivered, not stored: {e:?}"
        );
    }
    let mut watched_all: Vec<Envelope> = live;
    watched_all.extend(watched_live);
    watched_all.extend(followed);
    let seen: Vec<&str> = watched_all
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(sid.as_str()))
        .filter(|e| e.meta.as_ref().and_then(|m| m.replay) != Some(true))
        .map(|e| e.event_id.as_str())
        .collect();
    let first = ids
        .iter()
        .position(|i| *i == seen[0])
        .expect("watched events are stored");
    assert_eq!(
        seen,
        ids[first..],
        "the watcher's live view is the log from its start on"
    );
    drop(b);
    drop(w);
}

#[test]
fn an_owner_paused_past_its_lease_appends_nothing_and_its_clients_are_told() {
    let _load = keel_testsupport::Busy::start(2);
    let server = PgServer::shared();
    // The streamed text is followed by a tool call that would write a file.
    let turns = serde_json::json!({ "turns": [{
        "text": "tick ", "textRepeat": 400, "chunkDelayMs": 10,
        "toolCalls": [{ "name": "write_file",
                        "arguments": { "path": "written-late.txt", "content": "late" } }]
    }]});
    let c = cluster_with(server.create_database(), turns, 2);
    let a = c.node("node-a");
    let b = c.node("node-b");
    let mut on_a = Conn::open(&a);
    let mut on_b = Conn::open(&b);
    let sid = start_session(&mut on_a, &c.workspace);
    let (req, _) = run_until_streaming(&mut on_a, &sid, 5);
    let pid = a.child.id().to_string();
    let signal = |sig: &str| {
        assert!(Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success());
    };
    signal("-STOP");
    let _cont = ContOnDrop(pid.clone());
    take_over(&mut on_b, &sid);
    on_b.until(|e| e.type_name() == "session.interrupted" && e.request_id == req);
    let taken_at = stored_log(&c.url, &sid).len();
    signal("-CONT");
    // Its client is told the session stopped here.
    let told = on_a.until(|e| e.type_name() == "session.closed");
    let interrupted = told
        .iter()
        .find_map(|e| match &e.event {
            Event::SessionInterrupted(p) => Some(p.clone()),
            _ => None,
        })
        .expect("session.interrupted on the paused node");
    assert_eq!(interrupted.reason, "lease_lost");
    match &told.last().unwrap().event {
        Event::SessionClosed(p) => assert_eq!(p.reason, "lease_lost"),
        other => panic!("{other:?}"),
    }
    // Its request is over (the session was closed on it after its runner ended) and
    // the tool call that followed the text never started.
    assert!(
        !told.iter().any(|e| e.type_name() == "tool.call.started"),
        "{told:?}"
    );
    assert!(!c.workspace.join("written-late.txt").exists());
    // And it appended nothing: the log is what the new owner left.
    let log = stored_log(&c.url, &sid);
    let late: Vec<&Envelope> = log[taken_at..]
        .iter()
        .filter(|e| e.request_id == req)
        .collect();
    assert!(
        late.is_empty(),
        "the paused owner wrote after the takeover: {late:?}"
    );
}

/// Sends SIGCONT when dropped, so a failed test leaves no stopped process behind.
struct ContOnDrop(String);
impl Drop for ContOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0]).status();
    }
}
