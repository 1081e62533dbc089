//! A kernel on PostgreSQL streaming a long answer: its deltas are committed in
//! batches (the emitter does not wait for each one), yet every event a client sees is
//! already in the database when it arrives, the stream keeps its order and sequences,
//! and the log holds exactly what was delivered.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use keel_envelope::{Envelope, SequenceChecker};
use keel_kernel::store::Store;
use keel_kernel::{EventStream, Kernel, SessionOptions};
use keel_store_pg::chatty::Chatty;
use keel_store_pg::testing::PgServer;
use keel_store_pg::PgKernelStore;

fn open(url: &str) -> Arc<dyn Store> {
    match PgKernelStore::open(url) {
        Ok(s) => Arc::new(s),
        Err(e) => panic!("cannot open {url}: {e:?}"),
    }
}

async fn until_done(events: &mut EventStream, mut each: impl FnMut(&Envelope)) -> Vec<Envelope> {
    let mut out = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(300), events.recv())
            .await
            .expect("timed out waiting for session.completed")
            .expect("stream ended");
        each(&env);
        let done = env.type_name() == "session.completed";
        out.push(env);
        if done {
            return out;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_deltas_are_committed_in_batches_and_never_seen_before_their_commit() {
    let url = PgServer::shared().create_database();
    let ws = tempfile::tempdir().unwrap();
    let n = 1_500;
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(Arc::new(Chatty(n)))
        .store(open(&url))
        .builtin_tools(false)
        .build()
        .unwrap();
    // Another handle on the database, as another node would read it.
    let reader = open(&url);
    let (session, mut events) = kernel
        .start_session(SessionOptions::default())
        .await
        .unwrap();
    let sid = session.id().to_owned();
    let rid = session.send("talk").await.unwrap();
    let mut checked = 0;
    let mut seen = 0usize;
    let got = until_done(&mut events, |env| {
        if env.session_id.as_deref() != Some(sid.as_str()) {
            return;
        }
        seen += 1;
        // Every 50th event, and every one that is not a delta: it must be committed
        // already (the durability rule), though the emitter did not wait for it.
        if seen % 50 == 0 || env.type_name() != "assistant.delta" {
            let log = reader.load_events(&sid).expect("load events");
            assert!(
                log.events.iter().any(|e| e.event_id == env.event_id),
                "{} ({}) was delivered before its commit",
                env.event_id,
                env.type_name()
            );
            checked += 1;
        }
    })
    .await;
    assert!(checked > n / 50, "checked {checked} events");
    let mine: Vec<&Envelope> = got
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(sid.as_str()))
        .collect();
    let deltas: Vec<&Envelope> = mine
        .iter()
        .copied()
        .filter(|e| e.type_name() == "assistant.delta" && e.request_id == rid)
        .collect();
    assert_eq!(deltas.len(), n, "every delta arrives once");
    let text: String = deltas
        .iter()
        .map(|e| match &e.event {
            keel_envelope::Event::AssistantDelta(d) => d.text.clone(),
            other => panic!("not a delta: {other:?}"),
        })
        .collect();
    assert_eq!(text, Chatty(n).text(), "the deltas arrive in order");
    // The final answer comes after the last delta.
    let last_delta = mine
        .iter()
        .rposition(|e| e.type_name() == "assistant.delta");
    let final_at = mine.iter().position(|e| e.type_name() == "assistant.final");
    assert!(
        last_delta < final_at,
        "assistant.final after every delta: {last_delta:?} {final_at:?}"
    );
    let mut checker = SequenceChecker::default();
    for e in &mine {
        checker
            .check(e)
            .unwrap_or_else(|gap| panic!("sequence gap: {gap:?}"));
    }
    // The log holds exactly the delivered events of the session, in the same order.
    let log = reader.load_events(&sid).unwrap().events;
    let logged: Vec<&str> = log.iter().map(|e| e.event_id.as_str()).collect();
    let delivered: Vec<&str> = mine.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(
        logged, delivered,
        "the log holds exactly the delivered events, in the delivered order"
    );
    // Batches: the transactions that inserted the session's events (each row's
    // `xmin`) are far fewer than the events.
    let database = url.rsplit('/').next().unwrap();
    let commits: usize = PgServer::shared()
        .psql(
            database,
            &format!(
                "SELECT count(DISTINCT xmin::text) FROM keel_events WHERE session_id = '{sid}'"
            ),
        )
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        commits * 4 < logged.len(),
        "{commits} commits for {} events: the streamed ones are not batched",
        logged.len()
    );
}
