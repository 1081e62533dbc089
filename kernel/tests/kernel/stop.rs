//! Interrupts always land. A probe pauses a request at each point of its life and the
//! test interrupts (or closes the session, or shuts the kernel down) right there; a
//! seeded stress test interrupts shell commands at random moments while busy threads
//! compete for the cores. Every interrupt gets its `session.interrupted`, no process
//! started for the request survives, and the session stays usable.
#![allow(clippy::unwrap_used)]

use super::Busy;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream;
use keel_envelope::types::{HistoryMessage, PermissionMode, Role, Usage};
use keel_envelope::{Envelope, Event};
use keel_kernel::model::{
    FinishReason, Message, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_kernel::testing::{Point, Probe};
use keel_kernel::{EventStream, Kernel, KernelConfig, SessionHandle, SessionOptions};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// A model that reads the last user message: `shell <marker>` asks for `sleep
/// <marker>`; `approve <marker>` asks for a command that needs approval; `agent
/// <marker>` spawns a sub-agent that runs the shell command; `long` answers at length
/// (for compaction); anything else is answered with text. After a tool result it
/// answers with text.
#[derive(Debug)]
struct Scripted {
    window: u64,
}

fn last_user(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

impl Model for Scripted {
    fn id(&self) -> String {
        "test:scripted".into()
    }
    fn context_window(&self) -> u64 {
        self.window
    }
    fn stream(&self, req: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let answered = matches!(req.messages.last(), Some(Message::Tool { .. }));
        let user = last_user(&req);
        let mut words = user.split_whitespace();
        let verb = words.next().unwrap_or("");
        let marker = words.next().unwrap_or("30").to_owned();
        let call = |name: &str, args: serde_json::Value| {
            ModelEvent::ToolCall(ToolCallRequest {
                id: "call_1".into(),
                name: name.into(),
                arguments: args,
            })
        };
        let mut items = vec![ModelEvent::TextDelta("thinking ".into())];
        match verb {
            _ if answered || req.tools.is_empty() => {
                items.push(ModelEvent::TextDelta("done".into()))
            }
            "shell" => items.push(call(
                "run_shell",
                serde_json::json!({"command": format!("sleep {marker}")}),
            )),
            "approve" => items.push(call(
                "run_shell",
                serde_json::json!({"command": format!("touch made-{marker} && sleep {marker}")}),
            )),
            "agent" => {
                // The sub-agent's own turn (its task is the user message) runs the shell.
                if user.starts_with("agent")
                    && req.tools.iter().any(|t| t.name == "spawn_sub_agent")
                {
                    items.push(call(
                        "spawn_sub_agent",
                        serde_json::json!({"task": format!("shell {marker}"), "tools": ["run_shell"]}),
                    ))
                } else {
                    items.push(ModelEvent::TextDelta("done".into()))
                }
            }
            _ => items.push(ModelEvent::TextDelta("done".into())),
        }
        items.push(ModelEvent::Usage(Usage::new(10, 5, 0)));
        items.push(ModelEvent::Finished(FinishReason::EndTurn));
        Box::pin(stream::unfold(
            (items.into_iter(), cancel),
            |(mut it, cancel)| async move {
                // A little latency per item, so interrupts can land mid-stream.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(2)) => {}
                    _ = cancel.cancelled() => return None,
                }
                let item = it.next()?;
                Some((Ok(item), (it, cancel)))
            },
        ))
    }
}

/// Pauses the first request that reaches `point` until the test lets it go.
#[derive(Debug)]
struct PauseAt {
    point: Point,
    reached: mpsc::UnboundedSender<String>,
    release: Mutex<Option<oneshot::Receiver<()>>>,
}

impl Probe for PauseAt {
    fn reached(&self, point: Point, _session: &str, request: &str) -> BoxFuture<'static, ()> {
        if point != self.point {
            return Box::pin(async {});
        }
        let Some(release) = self.release.lock().unwrap().take() else {
            return Box::pin(async {});
        };
        let _ = self.reached.send(request.to_owned());
        Box::pin(async move {
            let _ = release.await;
        })
    }
}

static MARKER: AtomicU64 = AtomicU64::new(1);

/// A `sleep` argument no other process on the machine uses: 30 seconds and a unique
/// fraction.
fn marker() -> String {
    let n = MARKER.fetch_add(1, Ordering::SeqCst);
    format!("30.{:09}", std::process::id() as u64 * 1000 + n)
}

/// Processes whose command line mentions `marker` and that are not zombies.
fn alive_with(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmd).contains(marker) {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or("").trim().chars().next();
        if state != Some('Z') && state.is_some() {
            out.push(pid);
        }
    }
    out
}

/// Waits (bounded) until no process mentions `marker`; returns the survivors.
async fn survivors(marker: &str) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let alive = alive_with(marker);
        if alive.is_empty() || Instant::now() > deadline {
            for pid in &alive {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status();
            }
            return alive;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn kernel(ws: &std::path::Path, probe: Option<Arc<dyn Probe>>, sandbox: bool) -> Kernel {
    let mut config = KernelConfig {
        workspace: Some(ws.to_path_buf()),
        permission_mode: PermissionMode::Auto,
        approval_timeout: Duration::ZERO,
        ..KernelConfig::default()
    };
    config.sandbox.enabled = sandbox;
    let mut b = Kernel::builder()
        .config(config)
        .model(Arc::new(Scripted { window: 100_000 }))
        .memory_store();
    if let Some(p) = probe {
        b = b.probe(p);
    }
    b.build().unwrap()
}

/// Waits for an event matching `pred` (bounded: a lost answer fails the test).
async fn wait_for(
    events: &mut EventStream,
    what: &str,
    pred: impl Fn(&Envelope) -> bool,
) -> Envelope {
    let deadline = Duration::from_secs(15);
    loop {
        match tokio::time::timeout(deadline, events.recv()).await {
            Ok(Some(e)) if pred(&e) => return e,
            Ok(Some(_)) => {}
            Ok(None) => panic!("the stream ended before {what}"),
            Err(_) => panic!("no {what} within {deadline:?}: the answer was lost"),
        }
    }
}

fn answers(interrupt: &str) -> impl Fn(&Envelope) -> bool + '_ {
    move |e: &Envelope| {
        matches!(e.event, Event::SessionInterrupted(_))
            && e.meta.as_ref().and_then(|m| m.reply_to.as_deref()) == Some(interrupt)
    }
}

async fn start(k: &Kernel) -> (SessionHandle, EventStream) {
    k.start_session(SessionOptions {
        workspace_path: None,
        permission_mode: None,
        model: None,
        title: None,
    })
    .await
    .unwrap()
}

/// What the request does, so that it reaches each point (a shell command wherever
/// the point comes before it, so the test also sees that none was left running).
fn prompt_for(point: Point, m: &str) -> (String, PermissionMode) {
    match point {
        Point::ApprovalWait => (format!("approve {m}"), PermissionMode::Ask),
        Point::SubAgentTurn => (format!("agent {m}"), PermissionMode::Auto),
        Point::BeforeTerminal | Point::Compaction => ("say hi".into(), PermissionMode::Auto),
        _ => (format!("shell {m}"), PermissionMode::Auto),
    }
}

/// How the test stops the paused request.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Interrupt,
    Close,
    Shutdown,
}

async fn stop_at(point: Point, how: Stop) {
    let ws = tempfile::tempdir().unwrap();
    let (tx, mut reached) = mpsc::unbounded_channel();
    let (release, rx) = oneshot::channel();
    let probe = Arc::new(PauseAt {
        point,
        reached: tx,
        release: Mutex::new(Some(rx)),
    });
    let k = if point == Point::Compaction {
        // A window so small that the second request compacts before its model call.
        let mut config = KernelConfig {
            workspace: Some(ws.path().to_path_buf()),
            permission_mode: PermissionMode::Auto,
            ..KernelConfig::default()
        };
        config.sandbox.enabled = true;
        Kernel::builder()
            .config(config)
            .model(Arc::new(Scripted { window: 20 }))
            .memory_store()
            .probe(probe)
            .build()
            .unwrap()
    } else {
        kernel(ws.path(), Some(probe), true)
    };
    let (s, mut events) = start(&k).await;
    let m = marker();
    let (prompt, mode) = prompt_for(point, &m);
    s.set_mode(mode).await.unwrap();
    if point == Point::Compaction {
        // Earlier exchanges to summarise, loaded without model calls.
        let msg = |role, text: &str| HistoryMessage::new(role, text.to_owned());
        let mut history = Vec::new();
        for i in 0..3 {
            history.push(msg(
                Role::User,
                &format!("question {i} with some words in it"),
            ));
            history.push(msg(
                Role::Assistant,
                &format!("answer {i} with some words in it"),
            ));
        }
        s.load_history(history).await.unwrap();
    }
    let rid = s.send(prompt).await.unwrap();
    let paused = tokio::time::timeout(Duration::from_secs(15), reached.recv())
        .await
        .unwrap_or_else(|_| panic!("{point:?} was never reached"))
        .unwrap();
    assert_eq!(paused, rid, "{point:?}");
    match how {
        Stop::Interrupt => {
            let irid = s.interrupt().await.unwrap();
            let _ = release.send(());
            let ans = wait_for(&mut events, "session.interrupted", answers(&irid)).await;
            assert_eq!(ans.request_id, rid, "{point:?}");
            // The session is usable afterwards.
            let next = s.send("say hi").await.unwrap();
            wait_for(&mut events, "the next request's end", |e| {
                e.request_id == next && e.event.type_name() == "session.completed"
            })
            .await;
        }
        Stop::Close => {
            let k2 = k.clone();
            let id = s.id().to_owned();
            let closing = tokio::spawn(async move { k2.close_session(&id).await });
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = release.send(());
            tokio::time::timeout(Duration::from_secs(15), closing)
                .await
                .unwrap_or_else(|_| panic!("close hung at {point:?}"))
                .unwrap()
                .unwrap();
            wait_for(&mut events, "session.interrupted", |e| {
                e.request_id == rid && e.event.type_name() == "session.interrupted"
            })
            .await;
        }
        Stop::Shutdown => {
            let k2 = k.clone();
            let down = tokio::spawn(async move { k2.shutdown("test").await });
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = release.send(());
            tokio::time::timeout(Duration::from_secs(15), down)
                .await
                .unwrap_or_else(|_| panic!("shutdown hung at {point:?}"))
                .unwrap();
        }
    }
    let left = survivors(&m).await;
    assert!(
        left.is_empty(),
        "{point:?} {how:?}: processes survived: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_at_every_point_of_a_request_is_answered() {
    for &point in Point::ALL {
        stop_at(point, Stop::Interrupt).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_session_at_every_point_leaves_no_process() {
    for &point in Point::ALL {
        stop_at(point, Stop::Close).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_at_every_point_leaves_no_process() {
    for &point in Point::ALL {
        stop_at(point, Stop::Shutdown).await;
    }
}

/// A small seeded generator (xorshift), so a failing run can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `KEEL_STRESS_ITERATIONS` (default 200) interrupts at random moments of a sandboxed
/// (and, every other time, unsandboxed) `sleep`, with two busy threads. Seeded by
/// `KEEL_STRESS_SEED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupts_at_random_moments_under_load_are_all_answered() {
    let iterations: u64 = std::env::var("KEEL_STRESS_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed: u64 = std::env::var("KEEL_STRESS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_cafe);
    eprintln!("stress: {iterations} interrupts, seed {seed}");
    let mut rng = Rng(seed | 1);
    let ws = tempfile::tempdir().unwrap();
    let sandboxed = kernel(ws.path(), None, true);
    let plain = kernel(ws.path(), None, false);
    let (s1, mut e1) = start(&sandboxed).await;
    let (s2, mut e2) = start(&plain).await;
    let _busy = Busy::start(2);
    let started = Instant::now();
    let mut markers = HashSet::new();
    for i in 0..iterations {
        let (s, events) = if i % 2 == 0 {
            (&s1, &mut e1)
        } else {
            (&s2, &mut e2)
        };
        let m = marker();
        markers.insert(m.clone());
        let rid = s.send(format!("shell {m}")).await.unwrap();
        match rng.below(4) {
            0 => {}
            1 => {
                wait_for(events, "request.accepted", |e| {
                    e.request_id == rid && e.event.type_name() == "request.accepted"
                })
                .await;
                tokio::time::sleep(Duration::from_micros(rng.below(3000))).await;
            }
            2 => {
                wait_for(events, "tool.call.started", |e| {
                    e.request_id == rid && e.event.type_name() == "tool.call.started"
                })
                .await;
                tokio::time::sleep(Duration::from_micros(rng.below(20_000))).await;
            }
            _ => tokio::time::sleep(Duration::from_micros(rng.below(40_000))).await,
        }
        let irid = s.interrupt().await.unwrap();
        // The answer: either the request's `session.interrupted` (replyTo the interrupt)
        // or, when the request was already over, a no-op on the interrupt's own stream.
        wait_for(events, "the interrupt's answer", |e| {
            matches!(e.event, Event::SessionInterrupted(_))
                && (e.request_id == irid
                    || e.meta.as_ref().and_then(|m| m.reply_to.as_deref()) == Some(irid.as_str()))
        })
        .await;
        let left = survivors(&m).await;
        assert!(
            left.is_empty(),
            "iteration {i} (seed {seed}): processes survived: {left:?}"
        );
    }
    eprintln!(
        "stress: {iterations} interrupts answered in {:?}",
        started.elapsed()
    );
}
