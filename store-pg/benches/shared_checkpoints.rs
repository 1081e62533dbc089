//! Workspace checkpoints carried to PostgreSQL beside the checkpoints themselves, in
//! one run: what a kernel on a shared store adds to each checkpoint (the records not
//! carried yet, with only the objects the database lacks), and what a node that takes
//! a session over pays to take them in.
//!
//! A workspace of 2,000 files of about 2 KiB (40 folders); a throwaway cluster with
//! `fsync = on`. Baselines: the local checkpoint itself (`Checkpoints::checkpoint`),
//! measured in the same run.
//!
//! Run: `cargo bench -p keel-store-pg --bench shared_checkpoints`. Figures go to
//! docs/performance.md.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_kernel::shared_checkpoints::{carry, pull_into};
use keel_kernel::store::Store;
use keel_store_pg::testing::PgServer;
use keel_store_pg::PgKernelStore;
use keel_tools::checkpoint::{CheckpointConfig, CheckpointHome, Mirror};

const FILES: usize = 2_000;
const ROUNDS: usize = 20;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn workspace(root: &Path) {
    for i in 0..FILES {
        let dir = root.join(format!("d{:02}", i % 40));
        std::fs::create_dir_all(&dir).unwrap();
        let body: String = (0..64)
            .map(|l| format!("file {i} line {l} of the project\n"))
            .collect();
        std::fs::write(dir.join(format!("f{i}.txt")), body).unwrap();
    }
}

fn row(what: &str, t: f64, base: f64) {
    println!("| {what} | {t:.2} ms | {:.2}× |", t / base);
}

fn main() {
    let server = PgServer::start_with_fsync(true).unwrap();
    let url = server.create_database();
    let store: Arc<dyn Store> = Arc::new(PgKernelStore::open(&url).unwrap());
    let shared = store.shared_checkpoints().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    workspace(&ws);
    let home = CheckpointHome::new(tmp.path().join("home"));
    let config = || CheckpointConfig {
        git: false,
        ..CheckpointConfig::default()
    };
    let ttl = Duration::from_secs(600);

    // The baseline checkpoint of a session, then carried whole.
    store.claim("sess_bench_1", "bench", ttl).unwrap();
    let mut engine = home.open(&ws, "sess_bench_1", config()).unwrap();
    let t = Instant::now();
    engine.checkpoint("c0", serde_json::json!(null)).unwrap();
    let local_base = ms(t.elapsed());
    let mut mirror = Mirror::default();
    let t = Instant::now();
    assert_eq!(
        carry(shared, &home, &ws, "sess_bench_1", &mut mirror).unwrap(),
        1
    );
    let carry_base = ms(t.elapsed());

    // One file changed before each checkpoint.
    let (mut local_one, mut carry_one) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        std::fs::write(ws.join("d07").join("f7.txt"), format!("round {r}\n")).unwrap();
        let t = Instant::now();
        engine
            .checkpoint(&format!("c{}", r + 1), serde_json::json!(null))
            .unwrap();
        local_one.push(ms(t.elapsed()));
        let t = Instant::now();
        assert_eq!(
            carry(shared, &home, &ws, "sess_bench_1", &mut mirror).unwrap(),
            1
        );
        carry_one.push(ms(t.elapsed()));
    }
    drop(engine);

    // A second session of the same workspace: its first checkpoint names every
    // object, all of them in the database already.
    store.claim("sess_bench_2", "bench", ttl).unwrap();
    let mut second = home.open(&ws, "sess_bench_2", config()).unwrap();
    let t = Instant::now();
    second.checkpoint("s0", serde_json::json!(null)).unwrap();
    let local_second = ms(t.elapsed());
    let t = Instant::now();
    carry(shared, &home, &ws, "sess_bench_2", &mut Mirror::default()).unwrap();
    let carry_second = ms(t.elapsed());
    drop(second);

    // A node that never saw the session takes in its 21 checkpoints.
    let there = CheckpointHome::new(tmp.path().join("there"));
    let t = Instant::now();
    let n = pull_into(shared, &there, &ws, "sess_bench_1").unwrap();
    let pull = ms(t.elapsed());
    assert_eq!(n, ROUNDS + 1);

    println!("{FILES} files, PostgreSQL with fsync = on; times are one run's (medians of {ROUNDS} for one file changed)");
    println!();
    println!("| case | time | vs. the local checkpoint |");
    println!("|---|---:|---:|");
    row(
        "first checkpoint of a session, on the node's disk (baseline)",
        local_base,
        local_base,
    );
    row(
        "… carried to PostgreSQL (2,000 contents and 41 trees sent)",
        carry_base,
        local_base,
    );
    let (lo, co) = (median(local_one), median(carry_one));
    row(
        "one file changed: checkpoint on the node's disk (baseline)",
        lo,
        lo,
    );
    row("… carried to PostgreSQL (one content, two trees)", co, lo);
    row(
        "a second session's first checkpoint, on disk (baseline)",
        local_second,
        local_second,
    );
    row(
        "… carried (every object in the database already: lookups only)",
        carry_second,
        local_second,
    );
    row(
        "taking in 21 checkpoints on a node that has none (vs. the first local checkpoint)",
        pull,
        local_base,
    );
}
