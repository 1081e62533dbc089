//! What budgets and hooks cost per tool call: a model asks for many no-op tool calls
//! in one turn, with no limits, with every limit of the budget set (none reached), with
//! a Rust host's no-op hook, and with a `PreToolUse` command hook that runs `true`;
//! beside, in the same run, spawning `/bin/sh -c true` directly.
//!
//! Run: `cargo bench --bench limits` (about half a minute). Figures go to
//! docs/performance.md.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{noop, Burst};
use std::time::{Duration, Instant};

use keel_envelope::budget::BudgetLimits;
use keel_envelope::types::Usage;
use keel_kernel::config::{BudgetConfig, CommandHookConfig, HooksConfig};
use keel_kernel::hooks::Hooks;
use keel_kernel::{Kernel, KernelConfig, SessionOptions};

#[derive(Debug)]
struct NoopHooks;

impl Hooks for NoopHooks {}

#[derive(Clone, Copy, Debug)]
enum Setup {
    Plain,
    Budgets,
    HostHook,
    CommandHook,
}

async fn run_burst(calls: usize, setup: Setup) -> Duration {
    let ws = tempfile::tempdir().unwrap();
    let mut config = KernelConfig {
        workspace: Some(ws.path().to_owned()),
        ..KernelConfig::default()
    };
    let limits = BudgetLimits::new()
        .model_calls(1000)
        .tokens(u64::MAX / 2)
        .cost_usd(1e9)
        .wall_time_secs(3600)
        .tool_calls(BTreeMap::from([("noop".to_owned(), 1_000_000)]));
    match setup {
        Setup::Budgets => {
            config.budget = BudgetConfig {
                request: limits.clone(),
                session: limits,
            };
        }
        Setup::CommandHook => {
            config.hooks = HooksConfig {
                pre_tool_use: vec![CommandHookConfig {
                    command: "true".into(),
                    matcher: Some("noop".into()),
                    timeout: None,
                }],
                ..HooksConfig::default()
            };
        }
        Setup::Plain | Setup::HostHook => {}
    }
    let mut b = Kernel::builder()
        .config(config)
        .model(Arc::new(Burst {
            calls,
            tool: "noop",
            args: serde_json::json!({}),
            usage: Usage::new(100, 10, 0),
        }))
        .memory_store()
        .builtin_tools(false)
        .tool(noop());
    if let Setup::HostHook = setup {
        b = b.hooks(Arc::new(NoopHooks));
    }
    let kernel = b.build().unwrap();
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
}

/// Time per call, best of three, without the request's fixed cost.
async fn per_call(calls: usize, setup: Setup) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let zero = run_burst(0, setup).await.as_secs_f64();
        let full = run_burst(calls, setup).await.as_secs_f64();
        best = best.min((full - zero) / calls as f64);
    }
    best
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let plain = per_call(2000, Setup::Plain).await;
        let budgets = per_call(2000, Setup::Budgets).await;
        let host = per_call(2000, Setup::HostHook).await;
        let command = per_call(200, Setup::CommandHook).await;
        // Baseline for the command hook: the same process started directly.
        let n = 200;
        let t = Instant::now();
        for _ in 0..n {
            let ok = std::process::Command::new("/bin/sh")
                .args(["-c", "true"])
                .status()
                .unwrap()
                .success();
            assert!(ok);
        }
        let spawn = t.elapsed().as_secs_f64() / n as f64;
        let us = |s: f64| s * 1e6;
        println!("tool call, no limits, no hooks: {:.1} µs", us(plain));
        println!(
            "tool call, every budget limit set (request and session): {:.1} µs ({:.2}×)",
            us(budgets),
            budgets / plain
        );
        println!(
            "tool call, a Rust host's no-op hooks: {:.1} µs ({:.2}×)",
            us(host),
            host / plain
        );
        println!(
            "tool call, a PreToolUse command hook running `true`: {:.0} µs; `/bin/sh -c true` spawned directly: {:.0} µs ({:.2}×)",
            us(command),
            us(spawn),
            command / spawn
        );
    });
}
