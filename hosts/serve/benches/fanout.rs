//! Delivery of one session's events: the single-subscriber path (a stdio bridge) and
//! the daemon's fan-out to client connections, through `Kernel::publish` (the hub's
//! delivery, without the store).
//!
//! Run: `cargo bench -p keel-serve --bench fanout` (about 15 s). Figures go to
//! docs/performance.md.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream;
use keel_envelope::commands::{CommandPayload, SessionWatch};
use keel_envelope::events::AssistantDelta;
use keel_envelope::{Command, Envelope, Event, Source};
use keel_kernel::model::{FinishReason, Model, ModelEvent, ModelRequest, ModelStream};
use keel_kernel::{Kernel, SessionOptions};
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
struct Quiet;

impl Model for Quiet {
    fn id(&self) -> String {
        "bench:quiet".into()
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    fn stream(&self, _r: ModelRequest, _c: CancellationToken) -> ModelStream {
        Box::pin(stream::iter(vec![Ok(ModelEvent::Finished(
            FinishReason::EndTurn,
        ))]))
    }
}

const EVENTS: usize = 100_000;
const ROUNDS: usize = 5;

fn envelope(session: &str) -> Envelope {
    Envelope::new(
        Some(session.to_owned()),
        "req_bench".into(),
        "evt_bench".into(),
        1_775_600_000_000,
        Source::Runtime,
        1,
        Event::AssistantDelta(AssistantDelta::new("a piece of streamed text ")),
    )
}

/// A kernel with one open session; returns it and the session id.
async fn kernel(dir: &std::path::Path) -> (Kernel, String) {
    let kernel = Kernel::builder()
        .workspace(dir)
        .model(Arc::new(Quiet))
        .memory_store()
        .builtin_tools(false)
        .build()
        .unwrap();
    let (handle, _events) = kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            ..SessionOptions::default()
        })
        .await
        .unwrap();
    let id = handle.id().to_owned();
    (kernel, id)
}

/// Publishes `EVENTS` envelopes; every consumer drains concurrently. Returns events/s
/// of the best round.
async fn run(followers: usize, watchers_on: usize, watchers_off: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (kernel, sid) = kernel(dir.path()).await;
    let mut drains = Vec::new();
    for _ in 0..followers {
        let mut s = kernel.subscribe();
        drains.push(tokio::spawn(async move {
            let mut n = 0usize;
            while s.recv().await.is_some() {
                n += 1;
                if n == EVENTS * ROUNDS {
                    break;
                }
            }
        }));
    }
    let mut watchers = Vec::new();
    for i in 0..(watchers_on + watchers_off) {
        let (w, mut s) = kernel.watcher(usize::MAX / 2);
        if i < watchers_on {
            w.execute(Command::new(
                format!("w{i}"),
                None,
                CommandPayload::SessionWatch(SessionWatch::new(sid.clone())),
            ))
            .await
            .unwrap();
            s.recv().await.unwrap();
            drains.push(tokio::spawn(async move {
                let mut n = 0usize;
                while s.recv().await.is_some() {
                    n += 1;
                    if n == EVENTS * ROUNDS {
                        break;
                    }
                }
            }));
        } else {
            drains.push(tokio::spawn(
                async move { while s.recv().await.is_some() {} },
            ));
        }
        watchers.push(w);
    }
    let env = envelope(&sid);
    let mut best = Duration::MAX;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..EVENTS {
            kernel.publish(env.clone()).await;
        }
        best = best.min(start.elapsed());
    }
    for w in &watchers {
        w.close();
    }
    drop(kernel);
    EVENTS as f64 / best.as_secs_f64()
}

/// The floor: a bounded tokio channel, one sender, one drained receiver.
async fn channel() -> f64 {
    let env = envelope("sess_bench");
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Envelope>(1024);
    let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
    let mut best = Duration::MAX;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..EVENTS {
            tx.send(env.clone()).await.unwrap();
        }
        best = best.min(start.elapsed());
    }
    drop(tx);
    drain.await.unwrap();
    EVENTS as f64 / best.as_secs_f64()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let floor = channel().await;
        let single = run(1, 0, 0).await;
        let idle = run(1, 0, 16).await;
        let fan1 = run(0, 1, 0).await;
        let fan16 = run(0, 16, 0).await;
        println!("| case | events/s | time per event, relative to one follower |");
        println!("|---|---:|---:|");
        let row = |name: &str, v: f64| println!("| {name} | {v:.0} | {:.2}× |", single / v);
        row("bounded tokio channel, no hub (floor)", floor);
        row("one follower (the stdio bridge)", single);
        row("one follower, 16 idle watchers of other sessions", idle);
        row("one watcher of the session (one daemon client)", fan1);
        row("16 watchers of the session (16 daemon clients)", fan16);
    });
}
