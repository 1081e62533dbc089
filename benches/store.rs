//! File store benchmark: appending events with the log kept open (the baseline), with
//! a log opened and closed for each event, round-robin over many sessions with the
//! bounded cache of open logs, and with a disk sync per event (`fsyncEachEvent`).
//!
//! Run: `cargo bench --bench store` (about 20 seconds). Figures go to
//! docs/reliability.md.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use keel_envelope::events::AssistantDelta;
use keel_envelope::{Envelope, Event, Source};
use keel_kernel::store::{FileStore, FileStoreOptions, Store};

fn envelope(session: &str, sequence: u64) -> Envelope {
    Envelope::new(
        Some(session.to_owned()),
        "req_01JBENCH0000000000000000".to_owned(),
        format!("evt_{sequence:026}"),
        1_775_600_000_000 + sequence,
        Source::Runtime,
        sequence,
        Event::AssistantDelta(AssistantDelta::new("some streamed text of a typical size ")),
    )
}

/// Appends `events` events spread round-robin over `sessions` sessions; returns the
/// best events per second of three rounds.
fn run(sessions: usize, events: usize, options: FileStoreOptions) -> f64 {
    let ids: Vec<String> = (0..sessions).map(|i| format!("sess_{i:06}")).collect();
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::with_options(dir.path(), options);
        // Create every log first so the round measures appends, not directory creation.
        for id in &ids {
            store.append(id, &envelope(id, 0)).unwrap();
        }
        let t = Instant::now();
        for i in 0..events {
            let id = &ids[i % sessions];
            store.append(id, &envelope(id, i as u64 + 1)).unwrap();
        }
        best = best.min(t.elapsed());
        store.flush().unwrap();
        assert!(store.open_logs() <= options.max_open_logs.max(1));
    }
    events as f64 / best.as_secs_f64()
}

fn main() {
    let cached = FileStoreOptions::default();
    let reopen = FileStoreOptions {
        max_open_logs: 1,
        ..cached
    };
    let synced = FileStoreOptions {
        fsync_each_event: true,
        ..cached
    };
    let base = run(1, 50_000, cached);
    let row = |what: &str, rate: f64| {
        println!("| {what} | {:.0} | {:.2}× |", rate, rate / base);
    };
    println!("| case | events/s | vs. baseline |");
    println!("|---|---:|---:|");
    row("1 session, log kept open (baseline)", base);
    row(
        "2 sessions alternating, 1 open log (open, append, close per event)",
        run(2, 20_000, reopen),
    );
    for sessions in [64, 256, 1000] {
        row(
            &format!(
                "{sessions} sessions round-robin, at most {} open logs",
                cached.max_open_logs
            ),
            run(sessions, 20_000, cached),
        );
    }
    row(
        "1000 sessions round-robin, at most 1000 open logs",
        run(
            1000,
            20_000,
            FileStoreOptions {
                max_open_logs: 1000,
                ..cached
            },
        ),
    );
    row(
        "1 session, fsyncEachEvent (fdatasync per event)",
        run(1, 500, synced),
    );
    row(
        "64 sessions round-robin, fsyncEachEvent",
        run(64, 500, synced),
    );
}
