//! The cost of telemetry per tool call, as the kernel will pay it: an `execute_tool`
//! span with the gate's decision, entered around the handler, arguments and result
//! offered, then finished (with its metrics). Cases, in one run:
//!
//! - **none**: the same loop without any telemetry call (a build without it);
//! - **off**: `Recorder::off` under the CLI's log subscriber without the OpenTelemetry
//!   layer (Keel's spans filtered out), the only subscriber in the process, as in
//!   production;
//! - **on**: the OpenTelemetry layer and metrics, exporting to a real OTLP/HTTP
//!   receiver on loopback;
//! - **on, down**: exporting to a closed port (every export fails);
//! - **on, slow**: to a receiver that never answers in time (the queue fills, spans
//!   are dropped).
//!
//! Then how long shutdown takes against the slow receiver and the closed port, with a
//! bound of 500 ms. Each case runs ROUNDS rounds of CALLS calls; the best round counts.
//!
//! Run: `cargo bench -p keel-telemetry --bench telemetry`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use keel_telemetry::testing::{closed_endpoint, Receiver, ReceiverOptions};
use keel_telemetry::{Pipeline, Recorder, Settings, ToolOutcome, ToolStart};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

const CALLS: usize = 20_000;
const ROUNDS: usize = 7;

fn tool_call(rec: &Recorder, i: usize) {
    let id = black_box(i);
    let call = rec.execute_tool(ToolStart {
        name: "read_file",
        call_id: "call_0001",
        tool_type: Some("function"),
        ..Default::default()
    });
    call.decision("allow", Some("read"));
    call.arguments(|| format!("{{\"path\":\"src/{id}.rs\"}}"));
    {
        let _entered = call.span().enter();
        black_box(id);
    }
    call.result(|| "fn main() {}".to_owned());
    call.finish(ToolOutcome::Ok, None);
}

fn no_telemetry(i: usize) {
    let id = black_box(i);
    black_box(("read_file", "call_0001", "allow", "read"));
    black_box(id);
}

/// Nanoseconds per call of the best round.
fn measure(mut f: impl FnMut(usize)) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        for i in 0..CALLS {
            f(i);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / CALLS as f64);
    }
    best
}

fn pipeline(endpoint: &str, queue: usize, timeout: Duration) -> Pipeline {
    let mut s = Settings::http(endpoint);
    s.queue_size = queue;
    s.max_batch = queue.min(512);
    s.batch_delay = Duration::from_millis(200);
    s.export_timeout = timeout;
    Pipeline::start(&s).expect("pipeline")
}

fn on(p: &Pipeline) -> f64 {
    let rec = p.recorder();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(p.layer()));
    tracing::dispatcher::with_default(&dispatch, || measure(|i| tool_call(&rec, i)))
}

fn main() {
    // The CLI's log with telemetry off: a formatter at `info`, Keel's spans left out.
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_filter(
            tracing_subscriber::EnvFilter::new("info")
                .add_directive("keel_telemetry::span=off".parse().expect("directive")),
        );
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(log))
        .expect("subscriber");

    let off_rec = Recorder::off();
    let mut none = Vec::new();
    let mut off = Vec::new();
    // Interleaved, so that both see the same machine.
    for _ in 0..3 {
        none.push(measure(no_telemetry));
        off.push(measure(|i| tool_call(&off_rec, i)));
    }
    let best = |v: &[f64]| v.iter().cloned().fold(f64::MAX, f64::min);

    let receiver = Receiver::start().expect("receiver");
    let p = pipeline(&receiver.endpoint(), 2048, Duration::from_secs(3));
    let on_ns = on(&p);
    let done = p.shutdown(Duration::from_secs(10));
    let received = receiver.spans().len();

    let down = closed_endpoint().expect("port");
    let p = pipeline(&down, 2048, Duration::from_millis(500));
    let down_ns = on(&p);
    let t = Instant::now();
    let down_done = p.shutdown(Duration::from_millis(500));
    let down_shutdown = t.elapsed();

    let slow = Receiver::start_with(ReceiverOptions {
        delay: Duration::from_secs(60),
        status: None,
    })
    .expect("receiver");
    let p = pipeline(&slow.endpoint(), 256, Duration::from_millis(300));
    let slow_ns = on(&p);
    let handed = p.health().spans_handed_over;
    let t = Instant::now();
    let slow_done = p.shutdown(Duration::from_millis(500));
    let slow_shutdown = t.elapsed();

    let (none_ns, off_ns) = (best(&none), best(&off));
    println!("telemetry cost per tool call ({CALLS} calls, best of {ROUNDS} rounds)");
    println!("| case | ns per call | vs none |");
    println!("|---|---:|---:|");
    println!("| none (no telemetry calls) | {none_ns:.1} | 1.00× |");
    println!(
        "| off (log subscriber, Recorder::off) | {off_ns:.1} | +{:.1} ns |",
        off_ns - none_ns
    );
    println!(
        "| on, local receiver | {on_ns:.0} | +{:.0} ns |",
        on_ns - none_ns
    );
    println!(
        "| on, endpoint down | {down_ns:.0} | +{:.0} ns |",
        down_ns - none_ns
    );
    println!(
        "| on, endpoint hangs (queue 256) | {slow_ns:.0} | +{:.0} ns |",
        slow_ns - none_ns
    );
    println!("off rounds: none {none:.1?}, off {off:.1?}");
    println!(
        "on: {} spans made, {received} received, flushed {} ({:?})",
        CALLS * ROUNDS,
        done.flushed,
        done.health
    );
    println!(
        "down: shutdown took {:.0} ms (bound 500 ms), {} exports failed, {} warning",
        down_shutdown.as_secs_f64() * 1e3,
        down_done.health.exports_failed,
        down_done.health.warnings
    );
    println!(
        "hangs: {} of {} spans reached the exporter (the rest were dropped), shutdown took {:.0} ms (bound 500 ms), {} warning",
        handed,
        CALLS * ROUNDS,
        slow_shutdown.as_secs_f64() * 1e3,
        slow_done.health.warnings
    );
}
