//! The kernel's store interface (`keel_kernel::store::Store`) on PostgreSQL beside the
//! file store, in one run: events appended per second through `Store::append` (what
//! the kernel's emitter calls for every event, one commit each), one session and eight
//! at once; and the takeover of a session whose owner stopped renewing its lease (the
//! time from its last renewal until another node's claim succeeds, polling every
//! 20 ms, with a 1 s lease). Then the same through a kernel: sessions whose one
//! request streams an answer of many deltas, timed from `request.send` until every
//! session's `session.completed` has reached its host, on the file store and on
//! PostgreSQL (where the emitter commits a turn's streamed events in batches).
//!
//! The server is a throwaway cluster made by the test harness, with `fsync = on`.
//!
//! Run: `cargo bench -p keel-store-pg --bench kernel_store`. Figures go to
//! docs/performance.md.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_kernel::ownership::Claim;
use keel_kernel::store::{FileStore, Store};
use keel_kernel::{Kernel, SessionOptions};
use keel_store_pg::chatty::Chatty;
use keel_store_pg::conformance::event;
use keel_store_pg::testing::PgServer;
use keel_store_pg::PgKernelStore;

const TEXT: &str = "some streamed text of a typical size ";

/// Events per second appending `per_session` events to each of `sessions` sessions at
/// once, one thread per session.
fn rate(store: &Arc<dyn Store>, tag: &str, sessions: usize, per_session: u64) -> f64 {
    for s in 0..sessions {
        let id = format!("sess_{tag}_{s}");
        let c = store.claim(&id, "bench", Duration::from_secs(600)).unwrap();
        assert!(matches!(c, Claim::Local | Claim::Owned(_)));
    }
    let start = Instant::now();
    let threads: Vec<_> = (0..sessions)
        .map(|s| {
            let store = store.clone();
            let id = format!("sess_{tag}_{s}");
            std::thread::spawn(move || {
                for seq in 1..=per_session {
                    store.append(&id, &event(&id, "req_1", seq, TEXT)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    (sessions as u64 * per_session) as f64 / start.elapsed().as_secs_f64()
}

/// Events per second a kernel on `store` delivers to its hosts: `sessions` sessions
/// at once, each one request answered in `deltas` deltas; every event counted once
/// it reached the session's host (after its commit).
async fn through_kernel(store: Arc<dyn Store>, sessions: usize, deltas: usize) -> f64 {
    let ws = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(Arc::new(Chatty(deltas)))
        .store(store)
        .builtin_tools(false)
        .build()
        .unwrap();
    let mut opened = Vec::new();
    for _ in 0..sessions {
        opened.push(
            kernel
                .start_session(SessionOptions::default())
                .await
                .unwrap(),
        );
    }
    let start = Instant::now();
    let mut waits = Vec::new();
    for (session, mut events) in opened {
        session.send("talk").await.unwrap();
        waits.push(tokio::spawn(async move {
            let mut n = 0u64;
            while let Some(env) = events.recv().await {
                n += 1;
                if env.type_name() == "session.completed" {
                    break;
                }
            }
            n
        }));
    }
    let mut total = 0;
    for w in waits {
        total += w.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}

fn takeover(url: &str, rounds: usize) -> Vec<f64> {
    let a = PgKernelStore::open(url).unwrap();
    let b = PgKernelStore::open(url).unwrap();
    let ttl = Duration::from_secs(1);
    let mut out = Vec::new();
    for r in 0..rounds {
        let id = format!("sess_takeover_{r}");
        assert!(matches!(
            a.claim(&id, "node-a", ttl).unwrap(),
            Claim::Owned(_)
        ));
        a.renew(&id).unwrap();
        // The owner dies right after this renewal.
        let last = Instant::now();
        loop {
            if let Claim::Owned(_) = b.claim(&id, "node-b", ttl).unwrap() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        out.push(last.elapsed().as_secs_f64() * 1000.0);
    }
    out
}

fn main() {
    let server = PgServer::start_with_fsync(true).unwrap();
    let url = server.create_database();
    let dir = tempfile::tempdir().unwrap();
    let file: Arc<dyn Store> = Arc::new(FileStore::new(dir.path()));
    let pg: Arc<dyn Store> = Arc::new(PgKernelStore::open(&url).unwrap());
    let base = rate(&file, "f1", 1, 20_000);
    let rows = [
        ("file store, 1 session (baseline)", base),
        (
            "file store, 8 sessions at once",
            rate(&file, "f8", 8, 5_000),
        ),
        ("PostgreSQL, 1 session", rate(&pg, "p1", 1, 500)),
        ("PostgreSQL, 8 sessions at once", rate(&pg, "p8", 8, 300)),
    ];
    println!("| case | events/s | vs. baseline |\n|---|---:|---:|");
    for (name, r) in rows {
        println!("| {name} | {r:.0} | {:.3}× |", r / base);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let kdir = tempfile::tempdir().unwrap();
    let kfile = || Arc::new(FileStore::new(kdir.path())) as Arc<dyn Store>;
    let kpg = || Arc::new(PgKernelStore::open(&url).unwrap()) as Arc<dyn Store>;
    let kbase = rt.block_on(through_kernel(kfile(), 1, 5_000));
    let krows = [
        (
            "kernel, file store, 1 session streaming 5,000 deltas (baseline)",
            kbase,
        ),
        (
            "kernel, file store, 8 sessions at once, 2,000 deltas each",
            rt.block_on(through_kernel(kfile(), 8, 2_000)),
        ),
        (
            "kernel, PostgreSQL, 1 session streaming 5,000 deltas",
            rt.block_on(through_kernel(kpg(), 1, 5_000)),
        ),
        (
            "kernel, PostgreSQL, 8 sessions at once, 2,000 deltas each",
            rt.block_on(through_kernel(kpg(), 8, 2_000)),
        ),
    ];
    println!("\n| case | events/s delivered | vs. baseline |\n|---|---:|---:|");
    for (name, r) in krows {
        println!("| {name} | {r:.0} | {:.3}× |", r / kbase);
    }
    let mut t = takeover(&url, 10);
    t.sort_by(f64::total_cmp);
    println!(
        "takeover after the owner's last renewal, 1 s lease, 10 rounds: median {:.0} ms, max {:.0} ms",
        t[t.len() / 2],
        t[t.len() - 1]
    );
}
