//! Load: many concurrent sessions in one kernel, each sending requests that make tool
//! calls on the scripted model (in process), with the file store.
//!
//! Reports requests per second, events per second and the peak memory of the process
//! (`VmHWM`), against a baseline measured in the same run (one session sending the
//! same requests), and checks that every stream's sequence is contiguous, that every
//! event a session's stream delivered is in its log and nothing else is, and that no
//! event reaches another session's stream.
//!
//! Run: `cargo bench --bench load` (1,000 sessions × 20 requests; about a minute).
//! `KEEL_LOAD_SESSIONS` and `KEEL_LOAD_REQUESTS` change the size. Figures go to
//! docs/reliability.md.

#![allow(clippy::unwrap_used)]

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_adapters::ScriptedModel;
use keel_envelope::types::Usage;
use keel_envelope::{Event, SequenceChecker};
use keel_kernel::model::{
    FinishReason, Message, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_kernel::{Kernel, KernelConfig, SessionOptions};
use tokio_util::sync::CancellationToken;

/// The scripted model of this benchmark: each request is one model turn asking for
/// two tool calls (`read_file`, `list_dir`), then one answering. It replays the same
/// turns as a `ScriptedModel` script would, without keeping the requests it received
/// (the `ScriptedModel` of keel-adapters keeps every request for tests to inspect,
/// which is what the figure with `KEEL_LOAD_MODEL=scripted` shows).
#[derive(Debug)]
struct Replay;

impl Model for Replay {
    fn id(&self) -> String {
        "bench:replay".into()
    }
    fn context_window(&self) -> u64 {
        1_000_000
    }
    fn stream(&self, request: ModelRequest, _cancel: CancellationToken) -> ModelStream {
        let answering = matches!(request.messages.last(), Some(Message::User { .. }));
        let items = if answering {
            vec![
                ModelEvent::ToolCall(ToolCallRequest {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: serde_json::json!({"path": "README.md"}),
                }),
                ModelEvent::ToolCall(ToolCallRequest {
                    id: "c2".into(),
                    name: "list_dir".into(),
                    arguments: serde_json::json!({"path": "."}),
                }),
                ModelEvent::Usage(Usage::new(100, 10, 0)),
                ModelEvent::Finished(FinishReason::ToolUse),
            ]
        } else {
            vec![
                ModelEvent::TextDelta("The request is done: ".into()),
                ModelEvent::TextDelta("the README was read.".into()),
                ModelEvent::Finished(FinishReason::EndTurn),
            ]
        };
        Box::pin(futures::stream::iter(items.into_iter().map(Ok)))
    }
}

/// The same requests as a `ScriptedModel` script.
fn script(requests: usize) -> serde_json::Value {
    let mut turns = Vec::new();
    for _ in 0..requests {
        turns.push(serde_json::json!({
            "toolCalls": [
                {"name": "read_file", "arguments": {"path": "README.md"}},
                {"name": "list_dir", "arguments": {"path": "."}}
            ],
            "usage": {"inputTokens": 100, "outputTokens": 10}
        }));
        turns.push(serde_json::json!({"text": "The request is done: the README was read."}));
    }
    serde_json::json!({ "turns": turns })
}

fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time of this process so far (user + system), in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is field 3.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15, in clock ticks (100 per second).
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}

/// What one session saw.
#[derive(Debug, Default)]
struct Seen {
    events: u64,
    digest: u64,
    requests: usize,
}

fn fold(digest: u64, event_id: &str) -> u64 {
    let mut h = DefaultHasher::new();
    (digest, event_id).hash(&mut h);
    h.finish()
}

async fn session(kernel: Kernel, requests: usize) -> (String, Seen) {
    let (s, mut events) = kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: Some("scripted:load".into()),
            ..SessionOptions::default()
        })
        .await
        .unwrap();
    let sid = s.id().to_owned();
    let mut checker = SequenceChecker::new();
    let mut seen = Seen::default();
    let mut on = |env: &keel_envelope::Envelope, seen: &mut Seen| {
        assert_eq!(
            env.session_id.as_deref(),
            Some(sid.as_str()),
            "an event of another session reached this session's stream"
        );
        checker.check(env).unwrap();
        seen.events += 1;
        seen.digest = fold(seen.digest, &env.event_id);
    };
    // `session.started` was delivered on this stream before start_session returned.
    let started = events.recv().await.unwrap();
    on(&started, &mut seen);
    for r in 0..requests {
        let rid = s
            .send(format!("request {r}: read the README"))
            .await
            .unwrap();
        let mut tools = 0;
        loop {
            let env = events.recv().await.unwrap();
            on(&env, &mut seen);
            match &env.event {
                Event::ToolCallCompleted(_) => tools += 1,
                Event::ToolCallFailed(f) => panic!("tool failed: {:?}", f.error),
                Event::SessionCompleted(c) if env.request_id == rid => {
                    assert_eq!(c.stop_reason, keel_envelope::types::StopReason::EndTurn);
                    break;
                }
                Event::SessionInterrupted(_) | Event::Error(_) | Event::Warning(_) => {
                    panic!("unexpected {env:?}")
                }
                _ => {}
            }
        }
        assert_eq!(tools, 2);
        seen.requests += 1;
    }
    (sid, seen)
}

struct Figures {
    elapsed: Duration,
    cpu: f64,
    requests: usize,
    events: u64,
}

async fn run(sessions: usize, requests: usize, ws: &std::path::Path, scripted: bool) -> Figures {
    let store = tempfile::tempdir().unwrap();
    let script = script(requests);
    let kernel = Kernel::builder()
        .config(KernelConfig {
            max_open_sessions: sessions,
            ..KernelConfig::default()
        })
        .workspace(ws)
        .store_dir(store.path())
        .model_factory(Arc::new(move |id: &str| {
            if scripted {
                let m = ScriptedModel::from_json(script.clone())?.with_id(id);
                Ok(Arc::new(m) as Arc<dyn Model>)
            } else {
                Ok(Arc::new(Replay) as Arc<dyn Model>)
            }
        }))
        .build()
        .unwrap();
    let t = Instant::now();
    let cpu = cpu_seconds();
    let tasks: Vec<_> = (0..sessions)
        .map(|_| tokio::spawn(session(kernel.clone(), requests)))
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    let elapsed = t.elapsed();
    let cpu = cpu_seconds() - cpu;
    // Nothing lost, nothing extra: each log holds exactly what its stream delivered.
    let mut events = 0;
    let mut done = 0;
    for (sid, seen) in &results {
        let log = kernel.session_log(sid).unwrap();
        let digest = log.iter().fold(0, |d, e| fold(d, &e.event_id));
        assert_eq!(
            (log.len() as u64, digest),
            (seen.events, seen.digest),
            "the log of {sid} differs from what its stream delivered"
        );
        events += seen.events;
        done += seen.requests;
    }
    assert_eq!(done, sessions * requests);
    kernel.shutdown("bench").await;
    Figures {
        elapsed,
        cpu,
        requests: done,
        events,
    }
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let sessions = env_usize("KEEL_LOAD_SESSIONS", 1000);
    let requests = env_usize("KEEL_LOAD_REQUESTS", 20);
    let scripted = std::env::var("KEEL_LOAD_MODEL").is_ok_and(|m| m == "scripted");
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("README.md"),
        "# A project\n\nIt has a README of a few lines.\n".repeat(20),
    )
    .unwrap();
    std::fs::create_dir(ws.path().join("src")).unwrap();
    for i in 0..20 {
        std::fs::write(
            ws.path().join("src").join(format!("m{i}.rs")),
            "fn f() {}\n",
        )
        .unwrap();
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let before = status_kib("VmHWM:");
        let base = run(1, requests, ws.path(), scripted).await;
        let base_hwm = status_kib("VmHWM:");
        let load = run(sessions, requests, ws.path(), scripted).await;
        let hwm = status_kib("VmHWM:");
        let rps = |f: &Figures| f.requests as f64 / f.elapsed.as_secs_f64();
        let eps = |f: &Figures| f.events as f64 / f.elapsed.as_secs_f64();
        println!(
            "model: {}",
            if scripted { "ScriptedModel (keeps every request)" } else { "in-process replay" }
        );
        println!("| run | requests | events | wall | requests/s | events/s | CPU per request |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for (label, f) in [
            ("1 session (baseline)".to_owned(), &base),
            (format!("{sessions} concurrent sessions"), &load),
        ] {
            println!(
                "| {label} | {} | {} | {:.2} s | {:.0} | {:.0} | {:.2} ms |",
                f.requests,
                f.events,
                f.elapsed.as_secs_f64(),
                rps(f),
                eps(f),
                f.cpu * 1e3 / f.requests as f64
            );
        }
        println!(
            "throughput ratio, {sessions} sessions vs. 1: {:.2}×; events per request: {:.1}",
            rps(&load) / rps(&base),
            load.events as f64 / load.requests as f64
        );
        println!(
            "peak memory (VmHWM): {:.1} MiB at start, {:.1} MiB after the baseline, {:.1} MiB after {sessions} sessions ({:.1} KiB per session above the baseline)",
            before as f64 / 1024.0,
            base_hwm as f64 / 1024.0,
            hwm as f64 / 1024.0,
            hwm.saturating_sub(base_hwm) as f64 / sessions as f64
        );
        println!("checks: every sequence contiguous, every log equal to its stream, no event on another session's stream");
    });
}
