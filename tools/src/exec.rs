//! Running a process for `run_shell` (foreground and background) and `git`: in the
//! sandbox [`crate::sandbox`] chooses, in its own process group, output captured with a
//! cap and streamed as progress, a time limit, cancellation, and everything it started
//! killed at the end.
//!
//! # Where the kill happens
//!
//! Every process is started by [`spawn_shell`] or [`spawn()`], which return a
//! [`ShellChild`]. The child is the leader of a new process group and carries a
//! per-call marker in its environment (`KEEL_RUN_ID`), inherited by everything it
//! starts. [`ShellChild::kill_all`] (on timeout and cancellation), [`ShellChild::wait`]
//! (after the command exits, for what it left behind) and dropping a `ShellChild` that
//! was not finished all end in `reap::Tree::kill_all`. While the root runs, that
//! takes the short ways described in `reap` (bubblewrap: kill the sandbox's pid 1 and
//! bubblewrap; otherwise the root is a child sub-reaper: stop it, kill its descendants,
//! then it). Otherwise (the root exited, or a short way cannot vouch for what it saw)
//! it:
//!
//! 1. freezes the whole process group with one `SIGSTOP` (a group signal also reaches
//!    a child being forked at that moment);
//! 2. scans `/proc` and freezes every process that carries the marker, is in the
//!    group, or is a child of a frozen process (a frozen parent keeps its children
//!    findable, and cannot fork);
//! 3. repeats until two scans in a row, each begun once every frozen process had
//!    really stopped, find nothing new (a process still on its way to stopping may be
//!    finishing a fork; a scan reads `/proc` over time, so one scan is not enough);
//! 4. kills the group and every frozen process with `SIGKILL`, through pidfds checked
//!    against each process's start time (a recycled pid is never signalled).
//!
//! The root is reaped only after that (its exit is seen through its pidfd without
//! reaping it), so the group id cannot be reused meanwhile.
//!
//! - Before the sandbox is exec'd: `spawn_shell` returns only after the exec (it is
//!   synchronous, so no caller can be dropped half-way), and nothing else exists yet.
//! - During bubblewrap's set-up: bwrap's first process forks the sandbox's pid 1, which
//!   calls `setsid` (leaving our group). It still carries the marker and has bwrap as
//!   its frozen parent, so it is found; killing it makes the kernel kill every process
//!   of the sandbox's PID namespace, whatever they did to their group or environment.
//! - After the command forked grandchildren, or a grandchild called `setsid`: the
//!   marker and the parent links find them. Without a PID namespace (Landlock, none),
//!   a process that leaves the group, clears its environment and is orphaned before
//!   the kill cannot be found.
//!
//! # When this process dies
//!
//! Nothing above runs if this process is killed. Then: every child is started by
//! [`crate::spawn`] (the parent-death signal armed before `exec`, and a check that
//! this process was still alive once it was), and every command runs under the
//! wrapper of `wrap`, whose watcher reads this process's lifeline and kills the
//! command's processes when it reads end-of-file (with bubblewrap, every process of
//! the sandbox's PID namespace). bubblewrap itself is not armed (see
//! [`sandbox::bwrap_args`]): it ends when the wrapper inside it does.
//!
//! After a kill every wait is bounded by [`KILL_GRACE`] (and the freeze by 300 ms):
//! the root's reaping, the processes' end (each exiting or with its `SIGKILL` pending:
//! the rest of an exit, such as a PID namespace's teardown, is not waited for) and the
//! output pipes (a pipe still held open after that is abandoned, keeping what was
//! read). A cancelled call waits only for the processes' end: its status and last
//! output are not reported, and its root is reaped once dropped.

use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_envelope::tools::{RunShellResult, SandboxKind};
use keel_envelope::{ErrorCode, ErrorPayload};
use tokio::io::unix::AsyncFd;
use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdout};

use crate::reap::{self, Killed, Shape, Tree};
use crate::sandbox::{self, Choice, SandboxConfig, SandboxMode, MARKER_VAR};
use crate::spawn::{self, Tie};
use crate::wrap;
use crate::{ProgressSink, ProgressStream, ToolContext};

/// Captured bytes kept per stream.
pub const OUTPUT_CAP: usize = 256 * 1024;

/// The longest any wait lasts once a kill was sent.
pub const KILL_GRACE: Duration = Duration::from_millis(300);

/// What to run, unsandboxed (the `git` tool).
#[derive(Debug, Clone)]
pub struct ExecSpec {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The working directory (absolute).
    pub cwd: PathBuf,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// The time limit.
    pub timeout: Duration,
}

/// A shell command to run in the sandbox.
#[derive(Debug, Clone)]
pub struct ShellCommand {
    /// The workspace root (canonical): writable inside the sandbox.
    pub workspace: PathBuf,
    /// Other folders writable inside the sandbox (canonical): the session's `write`
    /// extra roots.
    pub writable: Vec<PathBuf>,
    /// The working directory (absolute, inside the workspace).
    pub cwd: PathBuf,
    /// The command line, run by `/bin/sh -c`.
    pub command: String,
    /// Whether the network is on inside the sandbox.
    pub network: bool,
}

/// A started process and everything it starts: its output pipes, the sandbox it runs
/// in, and the means to kill all of it.
#[derive(Debug)]
pub struct ShellChild {
    child: tokio::process::Child,
    pid: u32,
    tree: Tree,
    exit: Option<AsyncFd<OwnedFd>>,
    marker: String,
    sandbox: SandboxKind,
    unsandboxed: Option<String>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    status: Option<ExitStatus>,
    finished: bool,
}

fn next_marker() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{nanos:x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn start_error(program: &str, e: impl std::fmt::Display) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::ToolExecutionFailed,
        format!("cannot start `{program}`: {e}"),
    )
    .with_detail("program", program.to_owned())
}

/// The command that runs `argv` under the wrapper (`wrap`) with `program` (`/bin/sh`,
/// or bubblewrap whose arguments end in the wrapper's): its own process group, the
/// call's marker, the lifeline as standard input, output piped.
fn command(
    program: &str,
    args: &[String],
    cwd: &Path,
    marker: &str,
) -> Result<tokio::process::Command, ErrorPayload> {
    let lifeline = spawn::lifeline().map_err(|e| start_error(program, e))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env(MARKER_VAR, marker)
        .stdin(Stdio::from(lifeline))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    Ok(cmd)
}

/// Starts `sh -c command` in the sandbox `config` chooses. Refuses with
/// `SANDBOX_UNAVAILABLE` when none can run, the mode is not `off` and
/// `config.require_sandbox` is set. Call it inside a tokio runtime, from any thread.
/// It blocks briefly: the first call probes the sandboxes, and the spawn waits for the
/// command's `exec`.
pub fn spawn_shell(
    shell: &ShellCommand,
    config: &SandboxConfig,
) -> Result<ShellChild, ErrorPayload> {
    let mode = config.effective_mode();
    let choice = sandbox::choose(config);
    if let Choice::None { reason } = &choice {
        if mode != SandboxMode::Off && config.require_sandbox {
            return Err(sandbox::unavailable(mode, reason));
        }
    }
    let marker = next_marker();
    let sh = ["/bin/sh".to_owned(), "-c".to_owned(), shell.command.clone()];
    let wrapped = wrap::args(&sh);
    let (program, args, tie, unsandboxed) = match &choice {
        Choice::Bubblewrap(bwrap) => {
            let mut inner = vec!["/bin/sh".to_owned()];
            inner.extend(wrapped);
            let args = sandbox::bwrap_args(
                &shell.workspace,
                &shell.writable,
                &shell.cwd,
                &inner,
                shell.network,
            );
            // bubblewrap is not armed: see `sandbox::bwrap_args`.
            let tie = Tie {
                no_death_signal: true,
                ..Tie::default()
            };
            (bwrap.to_string_lossy().into_owned(), args, tie, None)
        }
        Choice::Landlock(_) => {
            let ruleset =
                sandbox::landlock_ruleset(&shell.workspace, &shell.writable, shell.network)
                    .map_err(|e| ErrorPayload::new(ErrorCode::SandboxUnavailable, e))?;
            let tie = Tie {
                subreaper: true,
                landlock: Some(ruleset),
                ..Tie::default()
            };
            ("/bin/sh".to_owned(), wrapped, tie, None)
        }
        Choice::None { reason } => {
            let tie = Tie {
                subreaper: true,
                ..Tie::default()
            };
            let why = (mode != SandboxMode::Off).then(|| reason.clone());
            ("/bin/sh".to_owned(), wrapped, tie, why)
        }
    };
    let cmd = command(&program, &args, &shell.cwd, &marker)?;
    let child = spawn::spawn(cmd, tie).map_err(|e| start_error(&program, e))?;
    Ok(ShellChild::new(child, marker, choice.kind(), unsandboxed))
}

/// Finds `program` as `execvp` would (in `PATH`, from `env` if it sets it), so that a
/// missing program is a start error rather than the wrapper's exit status 127.
fn resolve(program: &str, env: &[(String, String)]) -> Result<PathBuf, String> {
    let executable = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return if executable(&p) {
            Ok(p)
        } else {
            Err("no such executable file".to_owned())
        };
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| std::ffi::OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| executable(p))
        .ok_or_else(|| "not found in PATH".to_owned())
}

/// Starts `spec` unsandboxed, in its own process group (the `git` tool, hooks).
pub fn spawn(spec: &ExecSpec) -> Result<ShellChild, ErrorPayload> {
    let marker = next_marker();
    let program = resolve(&spec.program, &spec.env).map_err(|e| start_error(&spec.program, e))?;
    let mut argv = vec![program.to_string_lossy().into_owned()];
    argv.extend(spec.args.iter().cloned());
    let mut cmd = command("/bin/sh", &wrap::args(&argv), &spec.cwd, &marker)?;
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let tie = Tie {
        subreaper: true,
        ..Tie::default()
    };
    let child = spawn::spawn(cmd, tie).map_err(|e| start_error(&spec.program, e))?;
    Ok(ShellChild::new(child, marker, SandboxKind::None, None))
}

impl ShellChild {
    fn new(
        mut child: tokio::process::Child,
        marker: String,
        sandbox: SandboxKind,
        unsandboxed: Option<String>,
    ) -> Self {
        // Not reaped yet (nobody waited), so the pid is known.
        let pid = child.id().unwrap_or(0);
        let shape = match sandbox {
            SandboxKind::Bubblewrap => Shape::Sandbox,
            _ => Shape::Subtree,
        };
        let tree = Tree::new(pid, shape, MARKER_VAR, &marker);
        let exit = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .and_then(|p| {
                rustix::process::pidfd_open(p, rustix::process::PidfdFlags::NONBLOCK).ok()
            })
            .and_then(watch_exit);
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        Self {
            child,
            pid,
            tree,
            exit,
            marker,
            sandbox,
            unsandboxed,
            stdout,
            stderr,
            status: None,
            finished: false,
        }
    }

    /// The root process's id.
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// The sandbox the command runs in.
    pub fn sandbox(&self) -> SandboxKind {
        self.sandbox.clone()
    }

    /// Why the command runs without a sandbox although one was wanted (the mode is not
    /// `off`), for a warning.
    pub fn unsandboxed_reason(&self) -> Option<&str> {
        self.unsandboxed.as_deref()
    }

    /// The value of `KEEL_RUN_ID` in the environment of every process of this call.
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// The command's standard output (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The command's standard error (once).
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.stderr.take()
    }

    /// Waits until the command exits, kills whatever it left running, and returns its
    /// exit status. Cancel-safe: dropping the future changes nothing.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        if !self.finished {
            match &self.exit {
                // Readable once the process has exited, before anyone reaps it.
                Some(fd) => {
                    let _ = fd.readable().await?;
                }
                None => {
                    let status = self.child.wait().await?;
                    self.status = Some(status);
                }
            }
            // The root is not reaped unless pidfds are missing: its group is ours.
            let killed = self.kill_tree().await;
            wait_gone(&killed).await;
        }
        let status = match self.status {
            Some(s) => s,
            None => self.child.wait().await?,
        };
        self.status = Some(status);
        Ok(status)
    }

    /// Kills the command and everything it started, reaps it, and waits (at most
    /// [`KILL_GRACE`] for each) until they are gone. Returns the exit status if the
    /// command was reaped.
    pub async fn kill_all(&mut self) -> Option<ExitStatus> {
        if !self.finished {
            let killed = self.kill_tree().await;
            if self.status.is_none() {
                if let Ok(Ok(s)) = tokio::time::timeout(KILL_GRACE, self.child.wait()).await {
                    self.status = Some(s);
                }
            }
            wait_gone(&killed).await;
        }
        self.status
    }

    /// Kills the command and everything it started and waits (at most [`KILL_GRACE`])
    /// until each is done for, without reaping the root: for a cancelled call, whose
    /// status and last output nobody reads. The root is reaped once dropped
    /// (`kill_on_drop`).
    pub async fn kill_only(&mut self) {
        if !self.finished {
            let killed = self.kill_tree().await;
            wait_gone(&killed).await;
        }
    }

    /// Freezes and kills the tree on a blocking thread (it waits for the freeze).
    async fn kill_tree(&mut self) -> Vec<Killed> {
        let tree = self.tree.clone();
        let group = self.status.is_none();
        let killed = match tokio::task::spawn_blocking(move || tree.kill_all(group)).await {
            Ok(k) => k,
            // No blocking thread (the runtime is shutting down): kill from here.
            Err(_) => self.tree.kill_all(group),
        };
        self.finished = true;
        killed
    }

    /// Kills everything from the calling thread (for `Drop` and synchronous callers);
    /// returns how many processes were signalled.
    pub fn kill_all_now(&mut self) -> usize {
        if self.finished {
            return 0;
        }
        self.finished = true;
        self.tree.kill_all(self.status.is_none()).len()
    }
}

impl Drop for ShellChild {
    fn drop(&mut self) {
        // A call dropped mid-run (instead of cancelled) leaves nothing behind either;
        // the root is reaped by tokio once killed (`kill_on_drop`).
        self.kill_all_now();
    }
}

/// Registers a pidfd with the runtime: it turns readable when the process exits,
/// before anyone reaps it.
// The registration takes ownership of the `OwnedFd`, which stays open for the
// `AsyncFd`'s lifetime: the I/O-safety concern of `with_interest` does not apply (its
// replacement is `unsafe`, which this workspace forbids).
#[allow(deprecated)]
fn watch_exit(fd: OwnedFd) -> Option<AsyncFd<OwnedFd>> {
    AsyncFd::with_interest(fd, tokio::io::Interest::READABLE).ok()
}

/// Waits (boundedly) until every killed process is done for (`reap::finished`).
async fn wait_gone(killed: &[Killed]) {
    let deadline = Instant::now() + KILL_GRACE;
    while killed.iter().any(|k| !reap::finished(k.pid, k.start)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Decodes a byte stream as UTF-8 chunk by chunk, carrying a character split between
/// two chunks over to the next one; invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Decodes `bytes` after what was carried over; keeps an incomplete trailing
    /// character for the next call.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: wait for the next chunk.
                        None => {
                            rest = after;
                            break;
                        }
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[n..];
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        out
    }

    /// What is left at the end of the stream (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        s
    }
}

/// Splits a byte stream into lines: decoded lossily, without the line break (`\n` or
/// `\r\n`), each cut at `cap` bytes with a marker (the rest of a long line is read and
/// dropped), so memory stays bounded whatever the stream holds.
#[derive(Debug)]
pub struct LineSplitter {
    cap: usize,
    line: Vec<u8>,
    dropped: usize,
}

impl LineSplitter {
    /// A splitter keeping at most `cap` bytes of a line.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            line: Vec::new(),
            dropped: 0,
        }
    }

    fn take(&mut self) -> String {
        if self.line.last() == Some(&b'\r') && self.dropped == 0 {
            self.line.pop();
        }
        let mut s = String::from_utf8_lossy(&self.line).into_owned();
        if self.dropped > 0 {
            s.push_str(&format!(
                " [line truncated at {} bytes; {} more dropped]",
                self.cap, self.dropped
            ));
        }
        self.line.clear();
        self.dropped = 0;
        s
    }

    /// Feeds bytes; returns the lines they complete.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        while !bytes.is_empty() {
            let (part, done) = match bytes.iter().position(|b| *b == b'\n') {
                Some(i) => (&bytes[..i], Some(i + 1)),
                None => (bytes, None),
            };
            let room = self.cap.saturating_sub(self.line.len());
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            self.dropped += part.len().saturating_sub(room);
            match done {
                Some(n) => {
                    lines.push(self.take());
                    bytes = &bytes[n..];
                }
                None => break,
            }
        }
        lines
    }

    /// The last line if the stream did not end with a line break.
    pub fn finish(&mut self) -> Option<String> {
        (!self.line.is_empty() || self.dropped > 0).then(|| self.take())
    }
}

#[derive(Debug, Default)]
struct Captured {
    data: Vec<u8>,
    truncated: bool,
}

async fn pump<R: tokio::io::AsyncRead + Unpin>(
    mut r: R,
    stream: ProgressStream,
    progress: ProgressSink,
    into: Arc<Mutex<Captured>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut text = Utf8Stream::default();
    let mut kept = 0usize;
    let mut truncated = false;
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let chunk = &buf[..n];
                let room = OUTPUT_CAP.saturating_sub(kept);
                let keep = &chunk[..n.min(room)];
                kept += keep.len();
                // Stream what is kept; past the cap, say so once and keep draining.
                if !keep.is_empty() {
                    let s = text.push(keep);
                    if !s.is_empty() {
                        progress(stream, s);
                    }
                }
                if room < n && !truncated {
                    truncated = true;
                    let rest = text.finish();
                    if !rest.is_empty() {
                        progress(stream, rest);
                    }
                    progress(
                        ProgressStream::Info,
                        format!("{} output truncated at {OUTPUT_CAP} bytes", stream.as_str()),
                    );
                }
                if let Ok(mut c) = into.lock() {
                    c.data.extend_from_slice(keep);
                    c.truncated |= truncated;
                }
            }
        }
    }
    let rest = text.finish();
    if !rest.is_empty() {
        progress(stream, rest);
    }
}

/// Runs `spec` unsandboxed (the `git` tool); see [`run_child`].
pub async fn run(spec: ExecSpec, ctx: &ToolContext) -> Result<RunShellResult, ErrorPayload> {
    let child = spawn(&spec)?;
    run_child(child, spec.timeout, ctx).await
}

/// Streams a started command's output until it exits, its time limit passes, or
/// `ctx.cancel` fires. On timeout everything it started is killed and the result says
/// `timedOut`; on cancellation everything is killed and `INTERRUPTED` is returned;
/// after an exit whatever it left running is killed. Returns promptly after a kill even
/// if a pipe is still held open.
pub async fn run_child(
    mut child: ShellChild,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<RunShellResult, ErrorPayload> {
    let started = Instant::now();
    let out = Arc::new(Mutex::new(Captured::default()));
    let err = Arc::new(Mutex::new(Captured::default()));
    let mut tasks = Vec::new();
    if let Some(s) = child.take_stdout() {
        let (p, into) = (ctx.progress.clone(), out.clone());
        tasks.push(tokio::spawn(pump(s, ProgressStream::Stdout, p, into)));
    }
    if let Some(s) = child.take_stderr() {
        let (p, into) = (ctx.progress.clone(), err.clone());
        tasks.push(tokio::spawn(pump(s, ProgressStream::Stderr, p, into)));
    }
    enum End {
        Exited(ExitStatus),
        TimedOut,
        Cancelled,
        Failed(std::io::Error),
    }
    let end = tokio::select! {
        status = child.wait() => match status { Ok(s) => End::Exited(s), Err(e) => End::Failed(e) },
        _ = tokio::time::sleep(timeout) => End::TimedOut,
        _ = ctx.cancel.cancelled() => End::Cancelled,
    };
    let status = match &end {
        End::Exited(s) => Some(*s),
        End::Cancelled => {
            // Nothing of a cancelled call is reported but the cancellation: its
            // processes are done for, and neither their exit nor the end of their
            // output is waited for.
            child.kill_only().await;
            for t in &tasks {
                t.abort();
            }
            None
        }
        _ => child.kill_all().await,
    };
    // Every writer is gone now (unless something escaped): the pipes end at once. A
    // pipe still open after the grace is abandoned with what was read.
    let deadline = tokio::time::Instant::now() + KILL_GRACE;
    for t in &mut tasks {
        if tokio::time::timeout_at(deadline, &mut *t).await.is_err() {
            t.abort();
        }
    }
    let take = |c: &Arc<Mutex<Captured>>| {
        c.lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    };
    let (out, err) = (take(&out), take(&err));
    let duration_ms = started.elapsed().as_millis() as u64;
    let sandbox = child.sandbox();
    match end {
        End::Cancelled => Err(ErrorPayload::new(
            ErrorCode::Interrupted,
            "the command was cancelled; everything it started was killed",
        )
        .with_detail("durationMs", duration_ms)),
        End::Failed(e) => Err(ErrorPayload::new(
            ErrorCode::ToolExecutionFailed,
            format!("waiting for the command failed: {e}"),
        )),
        End::TimedOut | End::Exited(_) => {
            let timed_out = matches!(end, End::TimedOut);
            let mut stderr = String::from_utf8_lossy(&err.data).into_owned();
            let mut stdout = String::from_utf8_lossy(&out.data).into_owned();
            if out.truncated {
                stdout.push_str(&format!("\n[output truncated at {OUTPUT_CAP} bytes]"));
            }
            if err.truncated {
                stderr.push_str(&format!("\n[output truncated at {OUTPUT_CAP} bytes]"));
            }
            if timed_out {
                stderr.push_str(&format!(
                    "\n[timed out after {} ms; everything it started was killed]",
                    timeout.as_millis()
                ));
            }
            Ok(RunShellResult {
                exit_code: if timed_out {
                    None
                } else {
                    status.and_then(|s| s.code())
                },
                stdout,
                stderr,
                timed_out,
                truncated: out.truncated || err.truncated,
                duration_ms,
                sandboxed: sandbox != SandboxKind::None,
                sandbox,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_stream_keeps_characters_split_between_chunks() {
        let text = "é€😀 ascii ü";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut d = Utf8Stream::default();
            let mut s = d.push(&bytes[..cut]);
            s.push_str(&d.push(&bytes[cut..]));
            s.push_str(&d.finish());
            assert_eq!(s, text, "cut at {cut}");
        }
        // Byte by byte.
        let mut d = Utf8Stream::default();
        let s: String = bytes.iter().map(|b| d.push(&[*b])).collect();
        assert_eq!(s, text);
        // Invalid bytes still become U+FFFD, and so does a character cut by the end.
        let mut d = Utf8Stream::default();
        assert_eq!(d.push(b"a\xffb\xe2\x82"), "a\u{fffd}b");
        assert_eq!(d.finish(), "\u{fffd}");
    }

    #[test]
    fn line_splitter_caps_lines_and_decodes_lossily() {
        let mut s = LineSplitter::new(8);
        let mut lines = s.push(b"one\r\ntw");
        lines.extend(s.push(b"o\n\xff\xfebad\nabcdefghijkl"));
        lines.extend(s.push(b"mnop\nlast"));
        lines.extend(s.finish());
        assert_eq!(
            lines,
            [
                "one",
                "two",
                "\u{fffd}\u{fffd}bad",
                "abcdefgh [line truncated at 8 bytes; 8 more dropped]",
                "last"
            ]
        );
        assert_eq!(s.finish(), None);
    }
}
