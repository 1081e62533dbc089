//! The kernel's store interface (`keel_kernel::store::Store`) on PostgreSQL beside the
//! file store, in one run: events appended per second through `Store::append` (what
//! the kernel's emitter calls for every event, one commit each), one session and eight
//! at once; and the takeover of a session whose owner stopped renewing its lease (the
//! time from its last renewal until another node's claim succeeds, polling every
//! 20 ms, with a 1 s lease).
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
    let mut t = takeover(&url, 10);
    t.sort_by(f64::total_cmp);
    println!(
        "takeover after the owner's last renewal, 1 s lease, 10 rounds: median {:.0} ms, max {:.0} ms",
        t[t.len() / 2],
        t[t.len() - 1]
    );
}
