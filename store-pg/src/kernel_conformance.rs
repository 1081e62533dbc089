//! The conformance suite of the kernel's store interface (`keel_kernel::store::Store`):
//! one set of cases that every backend the kernel can use runs — the file store, the
//! memory store and PostgreSQL ([`crate::PgKernelStore`]).
//! [`kernel_store_tests!`](crate::kernel_store_tests) turns a factory into one test
//! per case. The factory answers two handles on one empty storage, as two nodes
//! (or two processes) would have: `(a, b)`.
//!
//! The cases: append and replay from a cursor; state, history and summaries;
//! listing 10,000 sessions; delete; leases (a store one process uses alone answers
//! every claim `Local`; a shared one grants one owner at a time, raises the epoch at
//! each claim, names the previous owner after a takeover, and fences the writes of
//! a node whose lease ran out); tails of a shared store; workspace checkpoints (a
//! shared store keeps them for every node: objects once per content, records in
//! order, writes fenced by the lease, bad input refused). The lease expiry waits,
//! bounded, for the expiry to happen: no case depends on timing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_envelope::types::Cursor;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_kernel::ownership::{is_fenced, Claim};
use keel_kernel::store::{SharedCheckpoint, Store};

use crate::conformance::{assistant, event, state, user, PATIENCE};

/// One `#[test]` per case; `$make` is an expression whose value is `(a, b)`, two
/// `Arc<dyn Store>` on one fresh, empty storage.
#[macro_export]
macro_rules! kernel_store_tests {
    ($make:expr) => {
        $crate::kernel_store_tests!(@case $make;
            append_and_replay, state_history_and_summaries, ten_thousand_sessions, delete,
            leases, tails, checkpoints);
    };
    (@case $make:expr; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                let (a, b) = $make;
                $crate::kernel_conformance::$case(a, b);
            }
        )*
    };
}

fn ids(events: &[keel_envelope::Envelope]) -> Vec<String> {
    events.iter().map(|e| e.event_id.clone()).collect()
}

/// Claims `session` for `owner` (which must get it).
pub fn claim(store: &dyn Store, session: &str, owner: &str, ttl: Duration) -> Claim {
    let c = store.claim(session, owner, ttl).expect("claim");
    assert!(
        matches!(c, Claim::Local | Claim::Owned(_)),
        "{owner} claims {session}: {c:?}"
    );
    c
}

const LONG: Duration = Duration::from_secs(600);

/// Events appended come back in order, whole or after a cursor; a cursor that is not
/// in the log is `REQUEST_INVALID`; sessions do not mix.
pub fn append_and_replay(a: Arc<dyn Store>, _b: Arc<dyn Store>) {
    claim(&*a, "sess_log", "node-a", LONG);
    claim(&*a, "sess_other", "node-a", LONG);
    let mut written = Vec::new();
    for (i, rid) in ["req_1", "req_1", "req_1", "req_2", "req_2"]
        .iter()
        .enumerate()
    {
        let e = event(
            "sess_log",
            rid,
            i as u64 + 1,
            &format!("text {i} \u{0} \"q\""),
        );
        a.append("sess_log", &e).expect("append");
        written.push(e);
    }
    a.append("sess_other", &event("sess_other", "req_9", 1, "x"))
        .expect("append other");
    let log = a.load_events("sess_log").expect("load");
    assert!(!log.torn_tail_dropped);
    assert_eq!(log.events, written);
    assert_eq!(a.events_after("sess_log", None).expect("all"), written);
    let cursor = Cursor::new("req_1", 2);
    assert_eq!(
        ids(&a.events_after("sess_log", Some(&cursor)).expect("after")),
        ids(&written[2..])
    );
    let last = Cursor::new("req_2", 5);
    assert!(a
        .events_after("sess_log", Some(&last))
        .expect("after last")
        .is_empty());
    let bad = Cursor::new("req_nope", 1);
    let e = a.events_after("sess_log", Some(&bad)).err();
    assert_eq!(e.map(|e| e.code), Some(ErrorCode::RequestInvalid));
    assert_eq!(a.load_events("sess_other").expect("other").events.len(), 1);
    assert!(a
        .load_events("sess_unknown")
        .expect("unknown")
        .events
        .is_empty());
}

/// States round-trip as the history grows and is compacted; summaries follow.
pub fn state_history_and_summaries(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    assert_eq!(a.load_state("sess_s").expect("unknown"), None);
    claim(&*a, "sess_s", "node-a", LONG);
    let mut s = state("sess_s", vec![user("fix the test"), assistant("On it.")]);
    a.save_state(&s).expect("save");
    assert_eq!(a.load_state("sess_s").expect("load"), Some(s.clone()));
    s.history.push(user("and the docs"));
    s.history.push(assistant("Done."));
    s.title = Some("Fix the failing test".into());
    s.updated_at += 10;
    a.save_state(&s).expect("save grown");
    // The other handle reads what the first wrote.
    assert_eq!(b.load_state("sess_s").expect("load b"), Some(s.clone()));
    s.history = vec![user("summary"), assistant("NUL \u{0} kept")].into();
    a.save_state(&s).expect("save compacted");
    s.history.push(user("one more"));
    a.save_state(&s).expect("save grown again");
    assert_eq!(a.load_state("sess_s").expect("load"), Some(s.clone()));
    let summaries = b.list_summaries().expect("summaries");
    let mine: Vec<_> = summaries
        .iter()
        .filter(|x| x.session_id == "sess_s")
        .collect();
    assert_eq!(mine.len(), 1, "{summaries:?}");
    assert_eq!(mine[0].title.as_deref(), Some("Fix the failing test"));
    assert_eq!(mine[0].updated_at, s.updated_at);
    let all = a.list().expect("list");
    assert_eq!(all.iter().filter(|x| x.session_id == "sess_s").count(), 1);
}

/// 10,000 sessions saved (from eight threads), then listed, each once.
pub fn ten_thousand_sessions(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    const N: usize = 10_000;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                for i in (t..N).step_by(8) {
                    let id = format!("sess_{i:05}");
                    claim(&*a, &id, "node-a", LONG);
                    let mut s = state(&id, vec![user(&format!("task {i}"))]);
                    s.updated_at += i as u64;
                    a.save_state(&s).expect("save");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("saver");
    }
    let list = b.list_summaries().expect("list");
    assert_eq!(list.len(), N);
    let mut seen: Vec<&str> = list.iter().map(|s| s.session_id.as_str()).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), N, "every session once");
}

/// A deleted session is gone: state, log, listing; deleting it again answers false.
pub fn delete(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    claim(&*a, "sess_d", "node-a", LONG);
    a.save_state(&state("sess_d", vec![user("x")]))
        .expect("save");
    a.append("sess_d", &event("sess_d", "req_1", 1, "x"))
        .expect("append");
    claim(&*a, "sess_keep", "node-a", LONG);
    a.save_state(&state("sess_keep", vec![])).expect("save");
    assert!(b.delete("sess_d").expect("delete"));
    assert_eq!(a.load_state("sess_d").expect("load"), None);
    assert!(a.load_events("sess_d").expect("events").events.is_empty());
    assert!(!a.delete("sess_d").expect("again"));
    let list = a.list_summaries().expect("list");
    assert_eq!(
        list.iter()
            .map(|s| s.session_id.as_str())
            .collect::<Vec<_>>(),
        ["sess_keep"]
    );
}

fn must_fence(r: Result<(), ErrorPayload>, what: &str) {
    match r {
        Err(e) => assert!(is_fenced(&e), "{what}: {e:?}"),
        Ok(()) => panic!("{what}: a stale writer was not fenced"),
    }
}

/// Leases: one owner at a time, epochs that only rise, the previous owner named
/// after a takeover, and every write of a node whose lease ran out refused.
pub fn leases(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    if !a.is_shared() {
        // One process uses the store: every claim is granted, nothing is fenced.
        assert_eq!(claim(&*a, "sess_l", "node-a", LONG), Claim::Local);
        assert_eq!(claim(&*b, "sess_l", "node-b", LONG), Claim::Local);
        assert_eq!(a.owner_of("sess_l").expect("owner"), None);
        a.renew("sess_l").expect("renew");
        a.unclaim("sess_l").expect("unclaim");
        a.save_state(&state("sess_l", vec![])).expect("save");
        return;
    }
    let Claim::Owned(first) = claim(&*a, "sess_l", "node-a", LONG) else {
        panic!("a shared store gives an epoch")
    };
    assert_eq!(first.previous_owner, None);
    a.save_state(&state("sess_l", vec![user("hi")]))
        .expect("save");
    match b.claim("sess_l", "node-b", LONG).expect("claim b") {
        Claim::Elsewhere(o) => {
            assert_eq!(o.owner, "node-a");
            assert_eq!(o.epoch, first.epoch);
            assert!(o.live);
            assert!(o.remaining_ms > 0);
        }
        other => panic!("b got a held lease: {other:?}"),
    }
    // B holds no lease: its writes are refused.
    must_fence(
        b.append("sess_l", &event("sess_l", "req_b", 1, "b")),
        "append without a lease",
    );
    a.renew("sess_l").expect("renew");
    let o = b.owner_of("sess_l").expect("owner").expect("held");
    assert_eq!((o.owner.as_str(), o.live), ("node-a", true));
    // Released: B takes it at once, no takeover to report.
    a.unclaim("sess_l").expect("unclaim");
    let Claim::Owned(second) = claim(&*b, "sess_l", "node-b", LONG) else {
        panic!("free after release")
    };
    assert!(second.epoch > first.epoch);
    assert_eq!(second.previous_owner, None);
    must_fence(
        a.append("sess_l", &event("sess_l", "req_a", 1, "a")),
        "append after release",
    );
    b.unclaim("sess_l").expect("unclaim b");

    // A short lease runs out: B takes over, naming A; A is fenced.
    let Claim::Owned(short) = claim(&*a, "sess_l", "node-a", Duration::from_millis(300)) else {
        panic!("free again")
    };
    a.append("sess_l", &event("sess_l", "req_a", 1, "a"))
        .expect("a appends while it holds the lease");
    let start = Instant::now();
    let taken = loop {
        match b.claim("sess_l", "node-b", LONG).expect("claim") {
            Claim::Owned(o) => break o,
            Claim::Elsewhere(_) => {}
            Claim::Local => panic!("shared"),
        }
        assert!(start.elapsed() < PATIENCE, "the lease never ran out");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(taken.epoch > short.epoch);
    assert_eq!(taken.previous_owner.as_deref(), Some("node-a"));
    must_fence(
        a.append("sess_l", &event("sess_l", "req_a", 2, "late")),
        "late append",
    );
    must_fence(
        a.save_state(&state("sess_l", vec![user("late")])),
        "late save",
    );
    must_fence(a.renew("sess_l"), "late renewal");
    b.append("sess_l", &event("sess_l", "req_b", 1, "b"))
        .expect("the new owner appends");
    let log = b.load_events("sess_l").expect("load").events;
    assert_eq!(
        ids(&log),
        ["evt_req_a_1", "evt_req_b_1"],
        "nothing of the late writer"
    );
}

/// A shared store's tail gives the events another handle appends, after a cursor,
/// then live; a store one process uses alone has none.
pub fn tails(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    if !a.is_shared() {
        assert!(b.tail("sess_t", None).expect("tail").is_none());
        return;
    }
    claim(&*a, "sess_t", "node-a", LONG);
    a.append("sess_t", &event("sess_t", "req_1", 1, "one"))
        .expect("append");
    a.append("sess_t", &event("sess_t", "req_1", 2, "two"))
        .expect("append");
    let after = Cursor::new("req_1", 1);
    let mut tail = b
        .tail("sess_t", Some(&after))
        .expect("tail")
        .expect("shared");
    a.append("sess_t", &event("sess_t", "req_1", 3, "three"))
        .expect("append");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let got: Vec<String> = rt.block_on(async {
        let mut got = Vec::new();
        while got.len() < 2 {
            match tokio::time::timeout(PATIENCE, tail.recv()).await {
                Ok(Some(Ok(e))) => got.push(e.event_id),
                other => panic!("tail: {other:?}"),
            }
        }
        got
    });
    assert_eq!(got, ["evt_req_1_2", "evt_req_1_3"]);
}

fn object(text: &str) -> (String, Vec<u8>) {
    (
        crate::objects::hash(text.as_bytes()),
        text.as_bytes().to_vec(),
    )
}

/// Workspace checkpoints: a store several nodes share keeps them for all (a store one
/// process uses alone keeps none: they stay beside it, on its machine). Objects are
/// kept once per content and read by any node; records come back in order; every
/// write needs the session's live lease; names that are not hashes, bytes that do not
/// match their name and records naming objects not stored are refused; deleting the
/// session removes what only it used.
pub fn checkpoints(a: Arc<dyn Store>, b: Arc<dyn Store>) {
    let (Some(sa), Some(sb)) = (a.shared_checkpoints(), b.shared_checkpoints()) else {
        assert!(
            !a.is_shared(),
            "a shared store must keep checkpoints for every node"
        );
        return;
    };
    let sid = "sess_cp";
    let (one, two) = (object("one\n"), object("two\n"));
    // No lease: refused, nothing written.
    let e = sa
        .put_objects(sid, std::slice::from_ref(&one))
        .expect_err("no lease");
    assert!(is_fenced(&e), "{e:?}");
    let missing = sa
        .missing_objects(std::slice::from_ref(&one.0))
        .expect("missing");
    assert_eq!(missing, std::slice::from_ref(&one.0));

    claim(&*a, sid, "node-a", Duration::from_millis(300));
    sa.put_objects(sid, &[one.clone(), two.clone()])
        .expect("objects");
    assert!(sb
        .missing_objects(&[one.0.clone(), two.0.clone()])
        .expect("missing")
        .is_empty());
    let first = SharedCheckpoint {
        seq: 1,
        body: serde_json::json!({"seq": 1, "root": one.0}),
        objects: vec![one.0.clone(), two.0.clone()],
    };
    sa.put_checkpoint(sid, &first).expect("record");
    sa.put_checkpoint(sid, &first)
        .expect("the same record again is a no-op");
    let unknown = object("never stored\n");
    let e = sa
        .put_checkpoint(
            sid,
            &SharedCheckpoint {
                seq: 2,
                body: serde_json::json!({"seq": 2}),
                objects: vec![unknown.0.clone()],
            },
        )
        .expect_err("an object not stored");
    assert_eq!(e.details["reason"], "object_missing", "{e:?}");
    let e = sa
        .put_objects(sid, &[(one.0.clone(), b"other bytes".to_vec())])
        .expect_err("bytes that do not match");
    assert_eq!(e.details["reason"], "invalid_input", "{e:?}");
    assert!(sb.objects(&["../etc/passwd".to_owned()]).is_err());
    assert!(sb.missing_objects(&["ZZ".to_owned()]).is_err());

    // Another node reads what a wrote.
    assert_eq!(sb.last_checkpoint(sid).expect("last"), 1);
    assert_eq!(sb.checkpoints(sid).expect("records"), [first]);
    let mut got = sb
        .objects(&[two.0.clone(), one.0.clone(), unknown.0.clone()])
        .expect("objects");
    got.sort();
    let mut want = vec![one.clone(), two.clone()];
    want.sort();
    assert_eq!(got, want);

    // A's lease runs out and b takes the session over: a's writes are refused.
    let start = Instant::now();
    while !matches!(
        b.claim(sid, "node-b", LONG).expect("claim"),
        Claim::Owned(_)
    ) {
        assert!(start.elapsed() < PATIENCE, "a's lease never ran out");
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = SharedCheckpoint {
        seq: 2,
        body: serde_json::json!({"seq": 2}),
        objects: vec![two.0.clone()],
    };
    must_fence(
        sa.put_checkpoint(sid, &second),
        "a checkpoint after a takeover",
    );
    sb.put_checkpoint(sid, &second).expect("b records");
    assert_eq!(sa.last_checkpoint(sid).expect("last"), 2);

    assert!(b.delete(sid).expect("delete"));
    assert_eq!(sb.last_checkpoint(sid).expect("last"), 0);
    assert_eq!(
        sb.missing_objects(std::slice::from_ref(&one.0))
            .expect("missing"),
        [one.0]
    );
}
