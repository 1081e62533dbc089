//! Background shell tasks (`run_shell {…, background: true}`): started after the gate
//! allowed the call, in the same sandbox as a foreground `run_shell`, in their own
//! process group. The call returns at once; the output is collected in the session's
//! [`BackgroundBook`](super::background::BackgroundBook). A task runs until it exits
//! or is stopped (`background.stop`, the session closing, the runtime shutting down):
//! stopping kills its whole process group.

use std::process::Stdio;
use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::ext::{BackgroundStatus, BackgroundTask};
use keel_envelope::ids::IdKind;
use keel_envelope::tools::RunShellArgs;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::exec::{self, SandboxStatus};
use keel_tools::jail;
use keel_tools::spec::Analysis;
use keel_tools::ToolSpec;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::model::ToolCallRequest;
use crate::pipeline::CallCx;
use crate::registry::Stage;
use crate::session::Session;

/// A running task's stop switch and the task that waits for it.
#[derive(Debug)]
pub(crate) struct Running {
    stop: CancellationToken,
    waiter: JoinHandle<()>,
}

fn kill_group(pgid: Option<u32>) {
    if let Some(id) = pgid.and_then(|p| i32::try_from(p).ok()) {
        let _ = killpg(Pid::from_raw(id), Signal::SIGKILL);
    }
}

fn pump<R: AsyncRead + Unpin + Send + 'static>(
    session: Arc<Session>,
    id: String,
    stream: Option<R>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let Some(stream) = stream else { return };
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            session.data().ext.background.output(&id, line);
        }
    })
}

/// Starts the task; returns its record.
fn start(
    session: &Arc<Session>,
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
    let cwd = jail::resolve_cwd(&session.workspace, args.cwd.as_deref())?;
    let root = jail::canonical_root(&session.workspace);
    let (program, argv) = match session
        .kernel
        .config
        .sandbox
        .enabled
        .then(exec::sandbox_status)
    {
        Some(SandboxStatus::Available { bwrap }) => (
            bwrap.to_string_lossy().into_owned(),
            exec::bwrap_args(&root, &cwd, &args.command, elevated),
        ),
        _ => (
            "/bin/sh".to_owned(),
            vec!["-c".to_owned(), args.command.clone()],
        ),
    };
    let mut cmd = tokio::process::Command::new(&program);
    cmd.args(&argv)
        .current_dir(&cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| {
        ErrorPayload::new(
            ErrorCode::ToolExecutionFailed,
            format!("cannot start `{program}`: {e}"),
        )
    })?;
    let id = session.kernel.ctx.ids.next_id(IdKind::Background);
    let task = BackgroundTask {
        task_id: id.clone(),
        session_id: session.id.clone(),
        command: args.command.clone(),
        status: BackgroundStatus::Running,
        exit_code: None,
        started_at: session.now(),
        ended_at: None,
        output_tail: String::new(),
    };
    session.data().ext.background.start(task.clone());
    let out = pump(session.clone(), id.clone(), child.stdout.take());
    let err = pump(session.clone(), id.clone(), child.stderr.take());
    // A child of the session's token: closing the session stops the task.
    let stop = session.cancel.child_token();
    let pgid = child.id();
    let me = session.clone();
    let switch = stop.clone();
    let task_id = id.clone();
    let waiter = tokio::spawn(async move {
        let (status, code) = tokio::select! {
            s = child.wait() => (BackgroundStatus::Exited, s.ok().and_then(|s| s.code())),
            _ = switch.cancelled() => (BackgroundStatus::Stopped, None),
        };
        // The whole group: the command when stopped, leftovers after an exit.
        kill_group(pgid);
        let _ = child.wait().await;
        let _ = out.await;
        let _ = err.await;
        let now = me.now();
        let mut d = me.data();
        d.ext.background.end(&task_id, status, code, now);
        d.ext.processes.remove(&task_id);
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
    fn claims(&self, _session: &Session, spec: &ToolSpec, call: &ToolCallRequest) -> bool {
        spec.analysis == Analysis::Shell
            && call.arguments.get("background") == Some(&serde_json::Value::Bool(true))
    }

    async fn run(&self, cx: &CallCx<'_>) -> Result<serde_json::Value, ErrorPayload> {
        let args =
            keel_tools::fs::parse_args::<RunShellArgs>(&cx.call.name, cx.call.arguments.clone())?;
        let task = start(cx.session, &args, cx.verdict.elevated())?;
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
