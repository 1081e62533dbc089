//! The multi-node scenarios under load, against a real PostgreSQL server and real
//! `keel serve --store postgres://…` processes: the owner killed (`SIGKILL`) at random
//! moments of a request, round after round, with a third node watching; PostgreSQL
//! restarted mid-request; 100 sessions × 10 requests over three nodes. CPU load runs
//! meanwhile. Nothing asserts on timing; every wait has a hang guard.
#![allow(clippy::unwrap_used)]

mod nodes_support;

use std::collections::{HashMap, HashSet};

use keel_envelope::{Envelope, Event};
use keel_store_pg::testing::PgServer;
use keel_testsupport::Rng;
use nodes_support::*;

/// Rounds of the kill test (20; `KEEL_TEST_KILL_ROUNDS` changes it).
fn kill_rounds() -> usize {
    std::env::var("KEEL_TEST_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

fn ids(events: &[Envelope]) -> Vec<String> {
    events.iter().map(|e| e.event_id.clone()).collect()
}

/// No event stored twice; each request's sequences are 1, 2, 3, … in log order; every
/// event is of the session.
fn assert_log_sound(log: &[Envelope], sid: &str) {
    let unique: HashSet<&str> = log.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(unique.len(), log.len(), "an event is stored twice");
    let mut next: HashMap<&str, u64> = HashMap::new();
    for e in log {
        assert_eq!(
            e.session_id.as_deref(),
            Some(sid),
            "an event of another session: {e:?}"
        );
        let n = next.entry(e.request_id.as_str()).or_insert(1);
        assert_eq!(
            e.sequence, *n,
            "a gap or a repeat in {}: {e:?}",
            e.request_id
        );
        *n += 1;
    }
}

#[test]
fn the_owner_killed_at_random_moments_is_taken_over_and_nothing_is_lost() {
    let _load = keel_testsupport::Busy::start(2);
    let server = PgServer::shared();
    let c = cluster(server.create_database());
    let watcher_node = c.node("node-w");
    let mut on_w = Conn::open(&watcher_node);
    let mut rng = Rng::new(0x5eed_0fc0_ffee);
    let mut owner = c.node("node-0");
    let mut on_owner = Conn::open(&owner);
    let sid = start_session(&mut on_owner, &c.workspace);
    let wrid = on_w.send(
        "session.watch",
        None,
        serde_json::json!({ "sessionId": sid }),
    );
    on_w.answer(&wrid, &["session.watched"]);
    let mut delivered: Vec<Envelope> = Vec::new();
    let mut watched: Vec<Envelope> = Vec::new();
    for round in 1..=kill_rounds() {
        // A request runs; the owner dies after a random number of its deltas.
        let cut = rng.below(300) as u64 + 2;
        let (req, seen) = run_until_streaming(&mut on_owner, &sid, 1);
        delivered.extend(seen);
        delivered.extend(on_owner.until(|e| e.request_id == req && e.sequence > cut));
        owner.child.kill().unwrap();
        let _ = owner.child.wait();
        // The next node takes it over.
        let next = c.node(&format!("node-{round}"));
        let mut on_next = Conn::open(&next);
        take_over(&mut on_next, &sid);
        let ended =
            on_next.until(|e| e.type_name() == "session.interrupted" && e.request_id == req);
        match &ended.last().unwrap().event {
            Event::SessionInterrupted(p) => assert_eq!(p.reason, "owner_lost", "round {round}"),
            other => panic!("{other:?}"),
        }
        watched
            .extend(on_w.until(|e| e.type_name() == "session.interrupted" && e.request_id == req));
        // The watcher was told who serves it now.
        assert!(
            watched.iter().any(|e| matches!(&e.event,
                Event::SessionOwnerChanged(p) if p.owner == next.name && p.previous_owner == owner.name)),
            "round {round}: no session.owner_changed to {}",
            next.name
        );
        owner = next;
        on_owner = on_next;
    }
    // The last owner completes a request.
    let last = on_owner.send(
        "request.send",
        Some(&sid),
        serde_json::json!({ "message": "finish" }),
    );
    delivered
        .extend(on_owner.until(|e| e.request_id == last && e.type_name() == "session.completed"));
    watched.extend(on_w.until(|e| e.request_id == last && e.type_name() == "session.completed"));

    let log = stored_log(&c.url, &sid);
    assert_log_sound(&log, &sid);
    let stored: HashSet<String> = ids(&log).into_iter().collect();
    for e in delivered
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(sid.as_str()))
    {
        assert!(stored.contains(&e.event_id), "delivered, not stored: {e:?}");
    }
    // The watcher saw the log from its watch on: each event once, in order.
    let seen: Vec<String> = watched
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(sid.as_str()))
        .map(|e| e.event_id.clone())
        .collect();
    let all = ids(&log);
    let first = all.iter().position(|i| *i == seen[0]).unwrap();
    assert_eq!(seen, all[first..first + seen.len()], "the watcher's view");
    assert_eq!(first + seen.len(), all.len(), "the watcher missed the end");
}

#[test]
fn postgres_restarted_mid_request_loses_nothing_a_client_saw() {
    let _load = keel_testsupport::Busy::start(2);
    // A server of its own: this test restarts it.
    let server = PgServer::start().unwrap();
    let url = server.url("postgres");
    let c = cluster_with(url, streaming(), 10);
    let a = c.node("node-a");
    let mut on_a = Conn::open(&a);
    let sid = start_session(&mut on_a, &c.workspace);
    let (req, mut seen) = run_until_streaming(&mut on_a, &sid, 20);
    server.restart().unwrap();
    // The request goes on, or ends saying the store failed.
    seen.extend(on_a.until(|e| {
        e.request_id == req
            && matches!(
                e.type_name(),
                "session.completed" | "session.interrupted" | "error"
            )
    }));
    let failed = seen.iter().any(|e| {
        matches!(&e.event, Event::Warning(p) | Event::Error(p)
            if p.code == keel_envelope::ErrorCode::SessionPersistenceFailed)
    });
    let completed = seen.iter().any(|e| e.type_name() == "session.completed");
    assert!(
        completed || failed,
        "neither went on nor said why: {:?}",
        seen.last()
    );
    let log = stored_log(&c.url, &sid);
    assert_log_sound(&log, &sid);
    let stored: HashSet<String> = ids(&log).into_iter().collect();
    let lost: Vec<&Envelope> = seen
        .iter()
        .filter(|e| !matches!(e.event, Event::Warning(_)))
        .filter(|e| !stored.contains(&e.event_id))
        .collect();
    assert!(
        lost.is_empty(),
        "seen by the client, not in the store: {lost:?}"
    );
    // The next request runs.
    let next = on_a.send(
        "request.send",
        Some(&sid),
        serde_json::json!({ "message": "again" }),
    );
    on_a.until(|e| e.request_id == next && e.type_name() == "session.completed");
}

#[test]
fn a_hundred_sessions_times_ten_requests_over_three_nodes() {
    let _load = keel_testsupport::Busy::start(2);
    let server = PgServer::shared();
    let turns = serde_json::json!({ "turns": (0..10).map(|i| serde_json::json!({
        "text": format!("answer {i}"),
    })).collect::<Vec<_>>() });
    let c = cluster_with(server.create_database(), turns, 10);
    let nodes: Vec<Node> = (0..3).map(|i| c.node(&format!("node-{i}"))).collect();
    let mut conns: Vec<Conn> = nodes.iter().map(Conn::open).collect();
    let mut sessions: Vec<(usize, String)> = Vec::new();
    for i in 0..100 {
        let n = i % 3;
        sessions.push((n, start_session(&mut conns[n], &c.workspace)));
    }
    for round in 0..10 {
        // Every session gets a request at once; each node's client reads its answers.
        let mut waiting: Vec<HashSet<String>> = vec![HashSet::new(); 3];
        for (n, sid) in &sessions {
            let rid = conns[*n].send(
                "request.send",
                Some(sid),
                serde_json::json!({ "message": format!("round {round}") }),
            );
            waiting[*n].insert(rid);
        }
        for (n, conn) in conns.iter_mut().enumerate() {
            while !waiting[n].is_empty() {
                let e = conn.next();
                if e.type_name() == "session.completed" {
                    waiting[n].remove(&e.request_id);
                }
                assert!(
                    !matches!(e.type_name(), "error" | "request.rejected"),
                    "round {round}: {e:?}"
                );
            }
        }
    }
    // Any node lists all of them; every log holds its ten requests and nothing else.
    let rid = conns[1].send("session.list", None, serde_json::json!({}));
    match conns[1].answer(&rid, &["session.list"]).event {
        Event::SessionList(l) => assert_eq!(l.sessions.len(), 100),
        other => panic!("{other:?}"),
    }
    for (_, sid) in &sessions {
        let log = stored_log(&c.url, sid);
        assert_log_sound(&log, sid);
        let done = log
            .iter()
            .filter(|e| e.type_name() == "session.completed")
            .count();
        assert_eq!(done, 10, "{sid}");
    }
    drop(nodes);
}
