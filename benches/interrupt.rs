//! Interrupt latency of a running shell command: from `request.interrupt`
//! (`SessionHandle::interrupt`) to `session.interrupted` on the session's stream, while
//! `run_shell` runs `sleep 30` in each sandbox this machine has (bubblewrap, Landlock,
//! none), against a baseline measured in the same run: the same interrupt of an
//! in-process tool that only awaits its cancellation (no process to kill). Samples of
//! the setups are interleaved, so that a loaded machine weighs on all alike. A model asks for the call; the bench waits for `tool.call.started`, then
//! until the command's `sleep` runs (found in `/proc` by the call's marker), then
//! interrupts. Everything the call started is killed before the event (each process
//! exiting or with its `SIGKILL` pending; the bench checks that no `sleep` runs after
//! it), and the root is reaped.
//!
//! Run: `cargo bench --bench interrupt` (about 30 s after the build). `KEEL_BENCH_RUNS=N` changes the
//! number of interrupts per sandbox (default 100). Figures go to docs/performance.md.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use std::sync::Arc;

use common::{opts, Burst};
use keel_envelope::types::{PermissionLevel, PermissionMode};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_kernel::{EventStream, Kernel, KernelConfig, SessionHandle};
use keel_tools::{
    ApprovalRequirement, PlanBehavior, SandboxConfig, SandboxKind, SandboxMode, Tool, ToolContext,
    ToolSpec,
};
use serde_json::Value;

/// Whether a process is done for: exiting, or with a `SIGKILL` pending.
fn doomed(p: &std::path::Path) -> bool {
    let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
    let rest: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let exiting = rest.get(6).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0) & 0x4 != 0;
    let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
    let pending = status
        .lines()
        .filter(|l| l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
        .fold(0, |a, b| a | b);
    exiting || matches!(rest.first(), Some(&"Z" | &"X")) || pending & (1 << 8) != 0
}

/// Whether a `sleep 30` of this process's calls runs (its marker starts with our pid)
/// and is not done for.
fn sleep_runs() -> bool {
    let needle = format!("KEEL_RUN_ID={}-", std::process::id());
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        let p = e.path();
        std::fs::read(p.join("cmdline")).is_ok_and(|c| c.starts_with(b"sleep\x0030"))
            && std::fs::read(p.join("environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|v| v.starts_with(needle.as_bytes()))
            })
            && !doomed(&p)
    })
}

/// A tool that waits for its cancellation: the baseline, an interrupt with no process
/// to kill (the kernel's own path from `request.interrupt` to `session.interrupted`).
#[derive(Debug)]
struct Wait(ToolSpec);

#[async_trait::async_trait]
impl Tool for Wait {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn run(&self, _args: Value, ctx: ToolContext) -> Result<Value, ErrorPayload> {
        ctx.cancel.cancelled().await;
        Err(ErrorPayload::new(
            ErrorCode::Interrupted,
            "the call was cancelled",
        ))
    }
}

/// One session whose request runs one long call, interrupted again and again.
struct Setup {
    label: String,
    session: SessionHandle,
    events: EventStream,
    /// Whether the call runs `sleep 30` (then the bench waits until it runs).
    shell: bool,
    samples: Vec<Duration>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

/// A session whose calls run `sleep 30` under `mode`, or (`None`) the baseline's
/// waiting tool; `None` when the sandbox is not available here.
async fn setup(mode: Option<SandboxMode>) -> Option<Setup> {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let mut builder = Kernel::builder()
        .workspace(ws.path())
        .permission_mode(PermissionMode::Auto)
        .store_dir(store.path());
    let label = match mode {
        Some(mode) => {
            let config = SandboxConfig::new(mode);
            let report = keel_tools::sandbox_report(&config);
            let want = match mode {
                SandboxMode::Bubblewrap => SandboxKind::Bubblewrap,
                SandboxMode::Landlock => SandboxKind::Landlock,
                _ => SandboxKind::None,
            };
            if report.sandbox != want {
                println!("{mode}: not available here ({})", report.reason);
                return None;
            }
            // The configuration first: it replaces the whole of it, workspace included.
            builder = Kernel::builder()
                .config(KernelConfig {
                    sandbox: config,
                    ..KernelConfig::default()
                })
                .workspace(ws.path())
                .permission_mode(PermissionMode::Auto)
                .store_dir(store.path())
                .model(Burst::new(
                    1,
                    "run_shell",
                    serde_json::json!({"command": "sleep 30"}),
                ));
            format!("`sleep 30` in run_shell, sandbox {mode}")
        }
        None => {
            builder = builder
                .tool(Arc::new(Wait(ToolSpec::custom(
                    "wait",
                    "waits for its cancellation",
                    serde_json::json!({"type": "object"}),
                    PermissionLevel::Read,
                    PlanBehavior::Allowed,
                    ApprovalRequirement::Never,
                ))))
                .model(Burst::new(1, "wait", serde_json::json!({})));
            "baseline: an in-process tool awaiting its cancellation".to_owned()
        }
    };
    let kernel = builder.build().unwrap();
    let (session, events) = kernel.start_session(opts()).await.unwrap();
    Some(Setup {
        label,
        session,
        events,
        shell: mode.is_some(),
        samples: Vec::new(),
        _dirs: (ws, store),
    })
}

/// One interrupt of `s`'s running call.
async fn sample(s: &mut Setup) {
    s.session.send("go").await.unwrap();
    while let Some(e) = s.events.recv().await {
        if e.type_name() == "tool.call.started" {
            break;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.shell && !sleep_runs() {
        assert!(Instant::now() < deadline, "the command never started");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // A moment for the command to settle in its wait.
    tokio::time::sleep(Duration::from_millis(2)).await;
    let t = Instant::now();
    s.session.interrupt().await.unwrap();
    while let Some(e) = s.events.recv().await {
        if e.type_name() == "session.interrupted" {
            break;
        }
    }
    s.samples.push(t.elapsed());
    assert!(!sleep_runs(), "the command survived its interrupt");
}

/// The `q` quantile of sorted `samples`, in milliseconds.
fn quantile(samples: &[Duration], q: f64) -> f64 {
    samples[((samples.len() - 1) as f64 * q).round() as usize].as_secs_f64() * 1e3
}

fn main() {
    let runs = std::env::var("KEEL_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100usize);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut setups = Vec::new();
        for mode in [
            None,
            Some(SandboxMode::Bubblewrap),
            Some(SandboxMode::Landlock),
            Some(SandboxMode::Off),
        ] {
            setups.extend(setup(mode).await);
        }
        // Interleaved, so that the load of the moment weighs on every setup alike.
        for _ in 0..runs {
            for s in &mut setups {
                sample(s).await;
            }
        }
        for s in &mut setups {
            s.samples.sort();
        }
        let base = quantile(&setups[0].samples, 0.99);
        for s in &setups {
            let p99 = quantile(&s.samples, 0.99);
            println!(
                "interrupt latency, {}: p50 {:.2} ms, p99 {:.2} ms ({:.1}× the baseline's p99), max {:.2} ms ({} runs)",
                s.label,
                quantile(&s.samples, 0.5),
                p99,
                p99 / base,
                quantile(&s.samples, 1.0),
                s.samples.len()
            );
        }
    });
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average after the run: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
