//! The kernel's cost per tool call with telemetry off and on, in one run: a request
//! whose one model turn asks for N calls of a read-level no-op tool, timed from
//! `request.send` to `session.completed`, minus the same request with no calls,
//! divided by N (the memory store). Cases, taking turns round after round:
//!
//! - **off**: `Recorder::off` and no subscriber, as a Rust host that never heard of
//!   telemetry;
//! - **off, log**: `Recorder::off` under a log subscriber that leaves Keel's spans
//!   out (an `info` formatter writing nowhere), as `keel` without export;
//! - **on**: the OpenTelemetry layer and the pipeline's recorder, exporting over
//!   OTLP/HTTP to a real receiver on loopback (`keel_telemetry::testing::Receiver`).
//!
//! The best request without calls and the best with CALLS calls are each taken over
//! ROUNDS rounds, then subtracted.
//!
//! Each case runs on a current-thread runtime under its own thread-local subscriber.
//! With telemetry on, each tool call makes an `execute_tool` span and two metric
//! points (no hooks are configured); each request an `invoke_agent` span and two
//! `chat` spans.
//!
//! Run: `cargo bench -p keel-kernel --bench telemetry`. Figures go to
//! docs/performance.md.

#![allow(clippy::unwrap_used)]

#[path = "../../benches/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{noop, Burst};
use keel_kernel::{Kernel, SessionOptions};
use keel_telemetry::testing::Receiver;
use keel_telemetry::{Pipeline, Recorder, Settings};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

const CALLS: usize = 5000;
const ROUNDS: usize = 7;

fn burst(calls: usize, recorder: &Recorder) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ws = tempfile::tempdir().unwrap();
        let kernel = Kernel::builder()
            .workspace(ws.path())
            .model(Burst::new(calls, "noop", serde_json::json!({})))
            .builtin_tools(false)
            .tool(noop())
            .memory_store()
            .telemetry(recorder.clone())
            .build()
            .unwrap();
        let (s, mut events) = kernel
            .start_session(SessionOptions::default())
            .await
            .unwrap();
        let t = Instant::now();
        s.send("go").await.unwrap();
        while let Some(e) = events.recv().await {
            if e.type_name() == "session.completed" {
                break;
            }
        }
        t.elapsed()
    })
}

/// One round under `dispatch`: seconds of a request without calls, and with CALLS.
fn round(dispatch: &tracing::Dispatch, recorder: &Recorder) -> (f64, f64) {
    tracing::dispatcher::with_default(dispatch, || {
        let zero = burst(0, recorder).as_secs_f64();
        let full = burst(CALLS, recorder).as_secs_f64();
        (zero, full)
    })
}

fn main() {
    let receiver = Receiver::start().unwrap();
    let mut settings = Settings::http(&receiver.endpoint());
    settings.batch_delay = Duration::from_millis(200);
    let pipeline = Pipeline::start(&settings).unwrap();

    let none = tracing::Dispatch::none();
    let log = tracing::Dispatch::new(
        tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::sink)
                .with_filter(
                    tracing_subscriber::filter::Targets::new()
                        .with_default(tracing::Level::INFO)
                        .with_target(
                            keel_telemetry::SPAN_TARGET,
                            tracing::level_filters::LevelFilter::OFF,
                        ),
                ),
        ),
    );
    let on = tracing::Dispatch::new(tracing_subscriber::registry().with(pipeline.layer()));
    let off_rec = Recorder::off();
    let on_rec = pipeline.recorder();

    let cases: [(&str, &tracing::Dispatch, &Recorder); 3] = [
        ("off", &none, &off_rec),
        ("off, log", &log, &off_rec),
        ("on, local receiver", &on, &on_rec),
    ];
    // Warm up once, then take turns. The best request without calls and the best
    // with them are taken apart (a slow round of either is the machine's, not the
    // case's), then subtracted.
    for (_, d, r) in cases {
        round(d, r);
    }
    let mut zero = [f64::MAX; 3];
    let mut full = [f64::MAX; 3];
    for _ in 0..ROUNDS {
        for (i, (_, d, r)) in cases.iter().enumerate() {
            let (z, f) = round(d, r);
            zero[i] = zero[i].min(z);
            full[i] = full[i].min(f);
        }
    }
    let best: Vec<f64> = (0..3).map(|i| (full[i] - zero[i]) / CALLS as f64).collect();
    println!("kernel tool call, {CALLS} calls a request, best of {ROUNDS} rounds:");
    for (i, (label, _, _)) in cases.iter().enumerate() {
        println!(
            "  {label:<20} {:>8.2} µs per call ({:+.1} % against off)",
            best[i] * 1e6,
            (best[i] / best[0] - 1.0) * 100.0
        );
    }
    let done = pipeline.shutdown(Duration::from_secs(2));
    receiver.wait_until(Duration::from_secs(2), |r| r.requests() > 0);
    println!(
        "  spans received: {} ({} handed to the exporter; the queue drops beyond 2,048)",
        receiver.spans().len(),
        done.health.spans_handed_over
    );
}
