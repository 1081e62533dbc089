//! Background shell tasks (`run_shell {…, background: true}`): started after the gate
//! allowed the call, by the same `keel_tools::exec::spawn_shell` as a foreground
//! `run_shell` (same sandbox, same kill). The call returns at once; the output is
//! collected in the session's [`BackgroundBook`](crate::session::ext::background::BackgroundBook),
//! line by line. A task runs until it exits, is stopped (`background.stop`, the session
//! closing, the runtime shutting down) or reaches its time limit: then everything it
//! started is killed.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_envelope::events::BackgroundEvent;
use keel_envelope::ext::{BackgroundStatus, BackgroundTask};
use keel_envelope::ids::IdKind;
use keel_envelope::tools::RunShellArgs;
use keel_envelope::types::PermissionMode;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use keel_tools::exec::{self, LineSplitter, ShellCommand};
use keel_tools::{jail, ToolArgs, MAX_TIMEOUT_MS};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

use crate::session::ext::Running;
use crate::session::registry::{args_mismatch, Args, CallCx, Stage};
use crate::session::Session;

/// Longest kept output line of a background task; the rest of the line is dropped.
const LINE_CAP: usize = 8 * 1024;

/// Reads a task's output to its end: bytes decoded lossily, split into lines of at
/// most [`LINE_CAP`] bytes (a longer one is cut with a marker), so the process never
/// blocks on a full pipe or dies of `SIGPIPE` whatever it prints.
fn pump<R: AsyncRead + Unpin + Send + 'static>(
    session: Arc<Session>,
    id: String,
    stream: Option<R>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let Some(mut stream) = stream else { return };
        let mut lines = LineSplitter::new(LINE_CAP);
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    for line in lines.push(&buf[..n]) {
                        session.data().ext.background.output(&id, line);
                    }
                }
            }
        }
        if let Some(line) = lines.finish() {
            session.data().ext.background.output(&id, line);
        }
    })
}

/// Starts the task; returns its record. The task runs in the same sandbox as a
/// foreground `run_shell` (refused with `SANDBOX_UNAVAILABLE` in the `auto` permission
/// mode when none can run), until it exits, is stopped, or its time limit
/// (`timeoutMs`, default and maximum one hour) passes; then everything it started is
/// killed.
/// `request_id`: the request whose stream gets `background.exited` when the task ends
/// by itself.
fn start(
    session: &Arc<Session>,
    request_id: &str,
    args: &RunShellArgs,
    elevated: bool,
) -> Result<BackgroundTask, ErrorPayload> {
    if args.command.trim().is_empty() || args.command.contains('\0') {
        return Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            "`command` is empty or contains a NUL byte",
        )
        .with_detail("field", "command"));
    }
    let timeout_ms = args.timeout_ms.unwrap_or(MAX_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        return Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("`timeoutMs` must be between 1 and {MAX_TIMEOUT_MS}"),
        )
        .with_detail("field", "timeoutMs"));
    }
    let cwd = jail::resolve_cwd(&session.workspace, args.cwd.as_deref())?;
    let mode = session.data().state.mode.clone();
    let sandbox = session
        .services
        .config()
        .sandbox
        .clone()
        .required(mode == PermissionMode::Auto);
    let shell = ShellCommand {
        workspace: jail::canonical_root(&session.workspace),
        writable: session.data().roots.writable(),
        cwd,
        command: args.command.clone(),
        network: sandbox.network || elevated,
    };
    let mut child = exec::spawn_shell(&shell, &sandbox)?;
    let id = session.services.next_id(IdKind::Background);
    let task = BackgroundTask::new(
        id.clone(),
        session.id.clone(),
        args.command.clone(),
        BackgroundStatus::Running,
        session.now(),
        String::new(),
    );
    session.data().ext.background.start(task.clone());
    let out = pump(session.clone(), id.clone(), child.take_stdout());
    let err = pump(session.clone(), id.clone(), child.take_stderr());
    // A child of the session's token: closing the session stops the task.
    let stop = session.cancel.child_token();
    let me = session.clone();
    let switch = stop.clone();
    let task_id = id.clone();
    let request_id = request_id.to_owned();
    let timeout = Duration::from_millis(timeout_ms);
    let waiter = tokio::spawn(async move {
        let mut timed_out = false;
        let (status, code) = tokio::select! {
            s = child.wait() => (BackgroundStatus::Exited, s.ok().and_then(|s| s.code())),
            _ = switch.cancelled() => (BackgroundStatus::Stopped, None),
            _ = tokio::time::sleep(timeout) => {
                timed_out = true;
                (BackgroundStatus::Stopped, None)
            }
        };
        // Everything it started: the command when stopped, leftovers after an exit.
        child.kill_all().await;
        // The pipes end once every writer is gone; one held open by a process that
        // escaped is abandoned after the grace.
        let deadline = tokio::time::Instant::now() + exec::KILL_GRACE;
        for mut pump in [out, err] {
            if tokio::time::timeout_at(deadline, &mut pump).await.is_err() {
                pump.abort();
            }
        }
        let now = me.now();
        let ended = {
            let mut d = me.data();
            if timed_out {
                d.ext.background.output(
                    &task_id,
                    format!("[timed out after {timeout_ms} ms; everything it started was killed]"),
                );
            }
            d.ext.background.end(&task_id, status.clone(), code, now)
        };
        // Ended by itself (an exit or the time limit, not a stop): the host hears of
        // it on the stream of the request that started it. Still listed in
        // `processes` meanwhile, so a closing session waits for this event.
        if let Some(task) = ended.filter(|_| status == BackgroundStatus::Exited || timed_out) {
            me.emitter
                .emit(
                    &request_id,
                    Event::BackgroundExited(BackgroundEvent::new(task)),
                )
                .await;
        }
        me.data().ext.processes.remove(&task_id);
    });
    session
        .data()
        .ext
        .processes
        .insert(id, Running { stop, waiter });
    Ok(task)
}

/// `run_shell {…, background: true}` after the gate allowed it: the task starts and
/// the call returns at once.
#[derive(Debug)]
pub(crate) struct Background;

#[async_trait]
impl Stage for Background {
    fn claims(&self, _session: &Session, args: &Args) -> bool {
        matches!(args.tool_args(), ToolArgs::RunShell(a) if a.background == Some(true))
    }

    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<serde_json::Value, ErrorPayload> {
        let ToolArgs::RunShell(args) = args.tool_args() else {
            return Err(args_mismatch(&cx.call.name));
        };
        let task = start(cx.session, cx.rid, args, cx.verdict.elevated())?;
        let message = format!(
            "Started background task {}: `{}`. It keeps running after this call; the user can follow its output and stop it.",
            task.task_id, task.command
        );
        Ok(serde_json::json!({
            "taskId": task.task_id,
            "status": "running",
            "message": message,
        }))
    }
}

/// Stops a task (if it runs) and waits until it is gone; returns its record.
pub(crate) async fn stop(session: &Session, id: &str) -> Result<BackgroundTask, ErrorPayload> {
    let running = {
        let mut d = session.data();
        d.ext.background.get(id)?;
        d.ext.processes.remove(id)
    };
    if let Some(r) = running {
        r.stop.cancel();
        let _ = r.waiter.await;
    }
    session.data().ext.background.get(id)
}

/// Stops every task of the session (it is closing).
pub(crate) async fn stop_all(session: &Session) {
    let all: Vec<Running> = session
        .data()
        .ext
        .processes
        .drain()
        .map(|(_, r)| r)
        .collect();
    for r in &all {
        r.stop.cancel();
    }
    for r in all {
        let _ = r.waiter.await;
    }
}
