//! PostgreSQL store benchmark, beside the file store in the same run: events appended
//! per second (one commit per event, and a request's events batched in one commit;
//! one session, and eight at once), listing 10,000 sessions, and the latency of a tail
//! in this process following appends made by another process (NOTIFY → reader).
//!
//! The server is a throwaway cluster made by the test harness, with `fsync = on` (every
//! commit reaches the disk, as in production), on a Unix socket.
//!
//! Run: `cargo bench -p keel-store-pg --bench pg` (about a minute after the build).
//! Figures go to docs/performance.md.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use keel_envelope::events::AssistantDelta;
use keel_envelope::{Envelope, Event, Source};
use keel_kernel::store::{FileStore, FileStoreOptions, Store};
use keel_store_pg::conformance::{state, user};
use keel_store_pg::testing::PgServer;
use keel_store_pg::{AsyncStore, GroupAppender, Lease, LeaseOutcome, PgStore, TailFrom};

const TEXT: &str = "some streamed text of a typical size ";

fn envelope(session: &str, request: &str, sequence: u64, text: &str) -> Envelope {
    Envelope::new(
        Some(session.to_owned()),
        request.to_owned(),
        format!("evt_{request}_{sequence:08}"),
        1_775_600_000_000 + sequence,
        Source::Runtime,
        sequence,
        Event::AssistantDelta(AssistantDelta::new(text)),
    )
}

/// The length of an envelope's JSON text.
fn json_len(e: &Envelope) -> usize {
    keel_envelope::codec::encode_line(e).len() - 1
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

async fn take_lease(store: &PgStore, session: &str, owner: &str) -> Lease {
    match store
        .acquire_lease(session, owner, Duration::from_secs(600))
        .await
        .unwrap()
    {
        LeaseOutcome::Acquired(l) => l,
        LeaseOutcome::Held(h) => panic!("held by {h:?}"),
    }
}

/// Appends `per_session` events to each of `sessions` sessions at once, `batch`
/// events per commit; events per second.
async fn pg_appends(
    store: &PgStore,
    tag: &str,
    sessions: usize,
    per_session: usize,
    batch: usize,
) -> f64 {
    let mut leases = Vec::new();
    for i in 0..sessions {
        let sid = format!("sess_{tag}_{i}");
        leases.push((sid.clone(), take_lease(store, &sid, "bench").await.epoch));
    }
    let t = Instant::now();
    let tasks: Vec<_> = leases
        .into_iter()
        .map(|(sid, epoch)| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut seq = 0;
                let mut request = 0;
                while seq < per_session {
                    request += 1;
                    let rid = format!("req_{request:06}");
                    let events: Vec<Envelope> = (1..=batch as u64)
                        .map(|s| envelope(&sid, &rid, s, TEXT))
                        .collect();
                    store.append_batch(&sid, epoch, &events).await.unwrap();
                    seq += batch;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (sessions * per_session) as f64 / t.elapsed().as_secs_f64()
}

/// Emits `per_session` events to each of `sessions` sessions without waiting for
/// commits, through a [`GroupAppender`] each (a batch is what arrived during the
/// previous commit), then waits for the last; events per second.
async fn pg_group(store: &PgStore, tag: &str, sessions: usize, per_session: usize) -> f64 {
    let shared: Arc<dyn AsyncStore> = Arc::new(store.clone());
    let mut appenders = Vec::new();
    for i in 0..sessions {
        let sid = format!("sess_{tag}_{i}");
        let epoch = take_lease(store, &sid, "bench").await.epoch;
        appenders.push((sid.clone(), GroupAppender::new(shared.clone(), sid, epoch)));
    }
    let t = Instant::now();
    let tasks: Vec<_> = appenders
        .into_iter()
        .map(|(sid, appender)| {
            tokio::spawn(async move {
                let mut pending = Vec::with_capacity(per_session);
                for s in 1..=per_session as u64 {
                    pending.push(appender.append(envelope(&sid, "req_1", s, TEXT)));
                }
                for p in pending {
                    p.await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (sessions * per_session) as f64 / t.elapsed().as_secs_f64()
}

/// The same with the file store (one `append` per event; it has no batch), each
/// session on a thread of its own.
fn file_appends(options: FileStoreOptions, sessions: usize, per_session: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileStore::with_options(dir.path(), options));
    for i in 0..sessions {
        let sid = format!("sess_{i}");
        store
            .append(&sid, &envelope(&sid, "req_0", 1, TEXT))
            .unwrap();
    }
    let t = Instant::now();
    let threads: Vec<_> = (0..sessions)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                let sid = format!("sess_{i}");
                for s in 0..per_session as u64 {
                    store
                        .append(&sid, &envelope(&sid, "req_1", s + 1, TEXT))
                        .unwrap();
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    (sessions * per_session) as f64 / t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn listing(pg: &PgStore) -> (Duration, Duration) {
    const N: usize = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let files = FileStore::new(dir.path());
    let ids: Vec<String> = (0..N).map(|i| format!("sess_list_{i:05}")).collect();
    for id in &ids {
        let s = state(id, vec![user("a prompt of a typical size, one line")]);
        files.save_state(&s).unwrap();
    }
    futures::stream::iter(ids.iter())
        .for_each_concurrent(16, |id| async move {
            let l = take_lease(pg, id, "bench").await;
            let s = state(id, vec![user("a prompt of a typical size, one line")]);
            pg.save_state(l.epoch, &s).await.unwrap();
        })
        .await;
    let mut pg_t = Vec::new();
    let mut file_t = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let n = pg.list_summaries().await.unwrap().len();
        pg_t.push(t.elapsed());
        assert!(n >= N);
        let t = Instant::now();
        assert_eq!(files.list_summaries().unwrap().len(), N);
        file_t.push(t.elapsed());
    }
    (median(pg_t), median(file_t))
}

/// The other process: appends `n` events to `session`, 10 ms apart, each stamped with
/// the time just before its append; after each append prints `seq done_nanos
/// append_ms` (when the append returned, how long it took).
async fn writer(url: &str, session: &str, n: usize) {
    let store = PgStore::open(url).await.unwrap();
    let l = take_lease(&store, session, "bench-writer").await;
    for s in 1..=n as u64 {
        let stamp = now_nanos().to_string();
        let t = Instant::now();
        store
            .append(session, l.epoch, &envelope(session, "req_w", s, &stamp))
            .await
            .unwrap();
        let took = t.elapsed().as_secs_f64() * 1000.0;
        println!("{s} {} {took:.4}", now_nanos());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// p50, p99 and max of some milliseconds.
fn spread(mut v: Vec<f64>) -> [f64; 3] {
    v.sort_by(f64::total_cmp);
    [percentile(&v, 0.5), percentile(&v, 0.99), v[v.len() - 1]]
}

/// Watch latency across processes, ms (p50, p99, max each): from just before the
/// append to the tail's delivery; from the append's return to the delivery; the
/// append itself.
async fn watch_latency(url: &str, store: &PgStore) -> [[f64; 3]; 3] {
    const N: usize = 500;
    let session = "sess_watch";
    let l = take_lease(store, session, "bench").await;
    store.release_lease(&l).await.unwrap();
    let mut tail = store.tail(session, TailFrom::Now).await.unwrap();
    let child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--writer", url, session, &N.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // (sequence, stamped before the append, delivered here)
    let mut got = Vec::new();
    while got.len() < N {
        let e = tail.next().await.unwrap().unwrap();
        let at = now_nanos();
        let Event::AssistantDelta(d) = &e.event else {
            continue;
        };
        got.push((e.sequence, d.text.parse::<u128>().unwrap(), at));
    }
    let out = child.wait_with_output().await.unwrap();
    let mut done = std::collections::HashMap::new();
    let mut appends = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let [seq, at, took] = f[..] {
            done.insert(seq.parse::<u64>().unwrap(), at.parse::<u128>().unwrap());
            appends.push(took.parse::<f64>().unwrap());
        }
    }
    let ms = |a: u128, b: u128| a.saturating_sub(b) as f64 / 1e6;
    let end_to_end = got.iter().map(|&(_, sent, at)| ms(at, sent)).collect();
    let after_commit = got.iter().map(|&(seq, _, at)| ms(at, done[&seq])).collect();
    [spread(end_to_end), spread(after_commit), spread(appends)]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

async fn bench() {
    println!("load average at the start: {}", load_average());
    let server = PgServer::start_with_fsync(true).unwrap();
    let url = server.create_database();
    let pg = PgStore::open(&url).await.unwrap();
    let cached = FileStoreOptions::default();
    let synced = FileStoreOptions {
        fsync_each_event: true,
        ..cached
    };

    let base = file_appends(cached, 1, 50_000);
    let rows = [
        ("file store, 1 session, no sync (baseline)", base),
        (
            "file store, 1 session, fsync each event",
            file_appends(synced, 1, 1_000),
        ),
        (
            "file store, 8 sessions at once, no sync",
            file_appends(cached, 8, 10_000),
        ),
        (
            "file store, 8 sessions at once, fsync each event",
            file_appends(synced, 8, 250),
        ),
        (
            "PostgreSQL, 1 session, 1 event per commit",
            pg_appends(&pg, "a", 1, 2_000, 1).await,
        ),
        (
            "PostgreSQL, 1 session, 20 events per commit",
            pg_appends(&pg, "b", 1, 20_000, 20).await,
        ),
        (
            "PostgreSQL, 8 sessions at once, 1 event per commit",
            pg_appends(&pg, "c", 8, 500, 1).await,
        ),
        (
            "PostgreSQL, 8 sessions at once, 20 events per commit",
            pg_appends(&pg, "d", 8, 5_000, 20).await,
        ),
        (
            "PostgreSQL, 1 session, group commit (the emitter does not wait)",
            pg_group(&pg, "e", 1, 20_000).await,
        ),
        (
            "PostgreSQL, 8 sessions at once, group commit",
            pg_group(&pg, "f", 8, 5_000).await,
        ),
    ];
    let db = url.rsplit('/').next().unwrap_or_default().to_owned();
    let per_event = server
        .psql(
            &db,
            "SELECT pg_total_relation_size('keel_events') / greatest(count(*), 1) FROM keel_events",
        )
        .unwrap();
    println!("| case | events/s | vs. baseline |");
    println!("|---|---:|---:|");
    for (what, rate) in rows {
        println!("| {what} | {rate:.0} | {:.3}× |", rate / base);
    }

    println!();
    println!(
        "disk per stored event ({} B of envelope text, table and indexes): {} B",
        json_len(&envelope("sess_x", "req_000001", 1, TEXT)),
        per_event.trim()
    );

    let (pg_list, file_list) = listing(&pg).await;
    println!();
    println!("| listing 10,000 sessions | median of 5 |");
    println!("|---|---:|");
    println!(
        "| file store (baseline) | {:.1} ms |",
        file_list.as_secs_f64() * 1000.0
    );
    println!(
        "| PostgreSQL | {:.1} ms ({:.2}×) |",
        pg_list.as_secs_f64() * 1000.0,
        pg_list.as_secs_f64() / file_list.as_secs_f64()
    );

    let [total, after, append] = watch_latency(&url, &pg).await;
    println!();
    println!(
        "| another process appends, a tail here reads (500 events, 10 ms apart) | p50 | p99 | max |"
    );
    println!("|---|---:|---:|---:|");
    let row = |what: &str, [p50, p99, max]: [f64; 3]| {
        println!("| {what} | {p50:.2} ms | {p99:.2} ms | {max:.2} ms |");
    };
    row("just before the append → the tail delivers it", total);
    row(
        "the append returned → the tail delivers it (NOTIFY → reader)",
        after,
    );
    row("the append itself (the commit)", append);
    println!();
    println!("load average at the end: {}", load_average());
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if let Some(i) = args.iter().position(|a| a == "--writer") {
        let n = args[i + 3].parse().unwrap();
        rt.block_on(writer(&args[i + 1], &args[i + 2], n));
        return;
    }
    rt.block_on(bench());
}
