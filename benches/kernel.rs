//! Kernel benchmarks: overhead per tool call, interrupt latency with a running shell
//! child, resume of a 100,000-event log, memory of an idle session.
//!
//! Run: `cargo bench --bench kernel` (about a minute). Figures go to
//! docs/performance.md.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{noop, Burst};
use std::time::{Duration, Instant};

use keel_envelope::ids::IdKind;
use keel_envelope::types::PermissionMode;
use keel_envelope::{codec, Envelope, Event, Source};
use keel_kernel::{Kernel, KernelConfig, SessionOptions};
use keel_tools::{SandboxConfig, Tool, ToolContext};
use tokio_util::sync::CancellationToken;

fn opts() -> SessionOptions {
    SessionOptions {
        workspace_path: None,
        permission_mode: None,
        model: None,
        title: None,
    }
}

async fn run_burst(calls: usize, file_store: bool) -> Duration {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut b = Kernel::builder()
        .workspace(ws.path())
        .model(Burst::new(calls, "noop", serde_json::json!({})))
        .builtin_tools(false)
        .tool(noop());
    b = if file_store {
        b.store_dir(store.path())
    } else {
        b.memory_store()
    };
    let kernel = b.build().unwrap();
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    let t = Instant::now();
    s.send("go").await.unwrap();
    while let Some(e) = events.recv().await {
        if e.type_name() == "session.completed" {
            break;
        }
    }
    t.elapsed()
}

async fn tool_overhead() {
    const N: usize = 2000;
    // Baseline: the same tool called directly, N times.
    let tool = noop();
    let ctx = ToolContext {
        workspace: std::env::temp_dir(),
        cancel: CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated: false,
        sandbox: SandboxConfig::default(),
        roots: keel_tools::jail::Roots::none(),
    };
    let t = Instant::now();
    for _ in 0..N {
        let _ = tool.run(serde_json::json!({}), ctx.clone()).await;
    }
    let direct = t.elapsed().as_secs_f64() / N as f64;
    for (label, file) in [("memory store", false), ("file store", true)] {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let zero = run_burst(0, file).await.as_secs_f64();
            let full = run_burst(N, file).await.as_secs_f64();
            best = best.min((full - zero) / N as f64);
        }
        println!(
            "tool call through the kernel ({label}): {:.1} µs per call (direct call {:.2} µs; {} events per call incl. log append)",
            best * 1e6,
            direct * 1e6,
            2
        );
    }
}

/// Interrupt latency: from `SessionHandle::interrupt` to `session.interrupted`, while
/// `run_shell` runs `sleep 60`. `delay_ms` is the range of the pause after
/// `tool.call.started` before interrupting (a random moment in it, seeded, so some
/// interrupts land during the sandbox's start-up); `busy` threads spin on the cores
/// for the whole measurement.
async fn interrupt_latency(label: &str, sandbox: SandboxConfig, delay_ms: u64, busy: usize) {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder()
        .config(KernelConfig {
            sandbox,
            ..KernelConfig::default()
        })
        .workspace(ws.path())
        .permission_mode(PermissionMode::Auto)
        .model(Burst::new(
            1,
            "run_shell",
            serde_json::json!({"command": "sleep 60"}),
        ))
        .store_dir(store.path())
        .build()
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinners: Vec<_> = (0..busy)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(
                        x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1),
                    );
                }
            })
        })
        .collect();
    let (s, mut events) = kernel.start_session(opts()).await.unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut samples = Vec::new();
    for _ in 0..60 {
        s.send("go").await.unwrap();
        while let Some(e) = events.recv().await {
            if e.type_name() == "tool.call.started" {
                break;
            }
        }
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let pause = (seed >> 33) % (delay_ms * 1000 + 1);
        tokio::time::sleep(Duration::from_micros(pause)).await;
        let t = Instant::now();
        s.interrupt().await.unwrap();
        while let Some(e) = events.recv().await {
            if e.type_name() == "session.interrupted" {
                break;
            }
        }
        samples.push(t.elapsed());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in spinners {
        t.join().unwrap();
    }
    samples.sort();
    let p = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e3;
    println!(
        "interrupt latency, {label}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} runs; `sleep 60` child killed and reaped)",
        p(0.5),
        p(0.99),
        p(1.0),
        samples.len()
    );
}

async fn resume_large_log() {
    const N: u64 = 100_000;
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(Burst::new(0, "noop", serde_json::json!({})))
        .store_dir(store.path())
        .builtin_tools(false)
        .build()
        .unwrap();
    let (s, _events) = kernel.start_session(opts()).await.unwrap();
    let sid = s.id().to_owned();
    kernel.shutdown("bench").await;
    drop(kernel);
    // Append N events as a long session would have written them.
    let log = store
        .path()
        .join("sessions")
        .join(&sid)
        .join("events.jsonl");
    let ids = keel_envelope::ids::UlidGen::default();
    let mut bytes = std::fs::read(&log).unwrap();
    for i in 0..N {
        let env = Envelope::new(
            Some(sid.clone()),
            format!("req_{}", i / 100),
            keel_envelope::ids::IdGen::next_id(&ids, IdKind::Event),
            1_775_600_000_000 + i,
            Source::Runtime,
            i % 100 + 1,
            Event::AssistantDelta(keel_envelope::events::AssistantDelta::new(
                "some streamed text of a typical size ",
            )),
        );
        codec::encode_into(&env, &mut bytes);
    }
    std::fs::write(&log, &bytes).unwrap();
    // Baseline: read the file and parse every line as plain JSON.
    let t = Instant::now();
    let text = std::fs::read_to_string(&log).unwrap();
    let n = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.is_object())
        .count();
    let raw = t.elapsed();
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let kernel = Kernel::builder()
            .workspace(ws.path())
            .model(Burst::new(0, "noop", serde_json::json!({})))
            .store_dir(store.path())
            .builtin_tools(false)
            .build()
            .unwrap();
        let t = Instant::now();
        let (_s, mut ev) = kernel.resume_session(&sid, None).await.unwrap();
        let first = ev.recv().await.unwrap();
        best = best.min(t.elapsed());
        assert_eq!(first.type_name(), "session.resumed");
        kernel.shutdown("bench").await;
    }
    println!(
        "resume of a {n}-event log ({:.1} MB): {:.0} ms (reading and parsing it as plain JSON: {:.0} ms; ratio {:.2}×)",
        bytes.len() as f64 / 1e6,
        best.as_secs_f64() * 1e3,
        raw.as_secs_f64() * 1e3,
        best.as_secs_f64() / raw.as_secs_f64()
    );
}

fn rss_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4
}

async fn idle_memory() {
    const N: usize = 2000;
    let ws = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder()
        .config(KernelConfig {
            max_open_sessions: N + 100,
            ..KernelConfig::default()
        })
        .workspace(ws.path())
        .model(Burst::new(0, "noop", serde_json::json!({})))
        .memory_store()
        .build()
        .unwrap();
    let mut keep = Vec::new();
    // Warm up allocators.
    for _ in 0..50 {
        keep.push(kernel.start_session(opts()).await.unwrap());
    }
    let before = rss_kib();
    for _ in 0..N {
        keep.push(kernel.start_session(opts()).await.unwrap());
    }
    let after = rss_kib();
    println!(
        "memory of an idle session: {:.1} KiB each (RSS growth over {N} sessions, memory store, each with its event stream)",
        (after.saturating_sub(before)) as f64 / N as f64
    );
    drop(keep);
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tool_overhead().await;
        interrupt_latency(
            "sandbox off, idle cores, 20 ms after start",
            SandboxConfig::off(),
            20,
            0,
        )
        .await;
        let sandbox = keel_tools::sandbox_report(&SandboxConfig::default());
        let label = format!(
            "sandbox {}, 2 busy threads, random moment in the first 30 ms",
            sandbox.sandbox.as_str()
        );
        interrupt_latency(&label, SandboxConfig::default(), 30, 2).await;
        interrupt_latency(
            "sandbox off, 2 busy threads, random moment in the first 30 ms",
            SandboxConfig::off(),
            30,
            2,
        )
        .await;
        resume_large_log().await;
        idle_memory().await;
    });
}
