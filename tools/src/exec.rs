//! Running a process for `run_shell` and `git`: its own process group, output
//! captured with a cap and streamed as progress, a time limit, cancellation, and the
//! whole group (grandchildren included) killed and reaped at the end. On Linux,
//! `run_shell` runs inside bubblewrap when it is available.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use keel_envelope::tools::RunShellResult;
use keel_envelope::{ErrorCode, ErrorPayload};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;

use crate::{ProgressSink, ProgressStream, ToolContext};

/// Captured bytes kept per stream.
pub const OUTPUT_CAP: usize = 256 * 1024;

/// What to run.
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

/// Whether the OS sandbox can be used in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// bubblewrap works; `run_shell` runs inside it.
    Available {
        /// The bubblewrap executable.
        bwrap: PathBuf,
    },
    /// The sandbox cannot be used; commands run unsandboxed.
    Unavailable {
        /// Why, for a warning.
        reason: String,
    },
}

static STATUS: OnceLock<SandboxStatus> = OnceLock::new();

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Probes bubblewrap once per process (with the same namespaces `run_shell` uses).
pub fn sandbox_status() -> SandboxStatus {
    STATUS
        .get_or_init(|| {
            if !cfg!(target_os = "linux") {
                return SandboxStatus::Unavailable {
                    reason: "the OS sandbox is only implemented on Linux".to_owned(),
                };
            }
            let Some(bwrap) = find_in_path("bwrap") else {
                return SandboxStatus::Unavailable {
                    reason: "bubblewrap (`bwrap`) is not installed".to_owned(),
                };
            };
            probe(&bwrap)
        })
        .clone()
}

/// Checks that `bwrap` can start a sandbox with the namespaces `run_shell` uses.
pub fn probe(bwrap: &Path) -> SandboxStatus {
    let probe = std::process::Command::new(bwrap)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "--new-session",
            "--",
            "/bin/sh",
            "-c",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(out) if out.status.success() => SandboxStatus::Available {
            bwrap: bwrap.to_path_buf(),
        },
        Ok(out) => SandboxStatus::Unavailable {
            reason: format!(
                "bubblewrap cannot start a sandbox here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        },
        Err(e) => SandboxStatus::Unavailable {
            reason: format!("bubblewrap cannot be run: {e}"),
        },
    }
}

/// The bubblewrap arguments that run `sh -c command` with the workspace writable, a
/// private `/tmp`, everything else read-only, `.git` read-only, and the network cut
/// unless `network` is true.
pub fn bwrap_args(workspace: &Path, cwd: &Path, command: &str, network: bool) -> Vec<String> {
    let ws = workspace.to_string_lossy().into_owned();
    let mut a: Vec<String> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    a.extend(["--bind".to_owned(), ws.clone(), ws.clone()]);
    let git = workspace.join(".git");
    if git.is_dir() {
        let g = git.to_string_lossy().into_owned();
        a.extend(["--ro-bind".to_owned(), g.clone(), g]);
    }
    if !network {
        a.push("--unshare-net".to_owned());
    }
    a.extend(
        [
            "--unshare-pid",
            "--die-with-parent",
            "--new-session",
            "--chdir",
        ]
        .iter()
        .map(|s| (*s).to_owned()),
    );
    a.push(cwd.to_string_lossy().into_owned());
    a.extend([
        "--".to_owned(),
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        command.to_owned(),
    ]);
    a
}

struct Captured {
    data: Vec<u8>,
    truncated: bool,
}

async fn pump<R: tokio::io::AsyncRead + Unpin>(
    mut r: R,
    stream: ProgressStream,
    progress: ProgressSink,
) -> Captured {
    let mut data = Vec::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let chunk = &buf[..n];
                let room = OUTPUT_CAP.saturating_sub(data.len());
                // Stream what is kept; past the cap, say so once and keep draining.
                if room > 0 {
                    progress(
                        stream,
                        String::from_utf8_lossy(&chunk[..n.min(room)]).into_owned(),
                    );
                }
                if room < n {
                    if !truncated {
                        progress(
                            ProgressStream::Info,
                            format!("{} output truncated at {OUTPUT_CAP} bytes", stream.as_str()),
                        );
                    }
                    truncated = true;
                }
                data.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
    Captured { data, truncated }
}

/// Kills the process group when dropped while armed, so a call whose future is
/// dropped mid-run (instead of cancelled) leaves nothing behind either.
struct GroupGuard {
    pgid: Option<u32>,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            kill_group(self.pgid);
        }
    }
}

fn kill_group(pgid: Option<u32>) {
    if let Some(id) = pgid.and_then(|p| i32::try_from(p).ok()) {
        let _ = killpg(Pid::from_raw(id), Signal::SIGKILL);
    }
}

/// Runs `spec` in its own process group. On timeout the group is killed and the
/// result says `timedOut`; on cancellation the group is killed and `INTERRUPTED` is
/// returned. When the main process exits, whatever it left running in its group is
/// killed too, so no stray grandchild outlives the call.
pub async fn run(
    spec: ExecSpec,
    ctx: &ToolContext,
    sandboxed: bool,
) -> Result<RunShellResult, ErrorPayload> {
    let started = Instant::now();
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(|e| {
        ErrorPayload::new(
            ErrorCode::ToolExecutionFailed,
            format!("cannot start `{}`: {e}", spec.program),
        )
        .with_detail("program", spec.program.clone())
    })?;
    let pgid = child.id();
    let mut guard = GroupGuard { pgid, armed: true };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let p1 = ctx.progress.clone();
    let p2 = ctx.progress.clone();
    let out_task = tokio::spawn(async move {
        match stdout {
            Some(s) => pump(s, ProgressStream::Stdout, p1).await,
            None => Captured {
                data: Vec::new(),
                truncated: false,
            },
        }
    });
    let err_task = tokio::spawn(async move {
        match stderr {
            Some(s) => pump(s, ProgressStream::Stderr, p2).await,
            None => Captured {
                data: Vec::new(),
                truncated: false,
            },
        }
    });
    enum End {
        Exited(std::process::ExitStatus),
        TimedOut,
        Cancelled,
        Failed(std::io::Error),
    }
    let end = tokio::select! {
        status = child.wait() => match status { Ok(s) => End::Exited(s), Err(e) => End::Failed(e) },
        _ = tokio::time::sleep(spec.timeout) => End::TimedOut,
        _ = ctx.cancel.cancelled() => End::Cancelled,
    };
    // Kill the whole group: on timeout and cancellation the command itself, after a
    // normal exit whatever it left behind.
    kill_group(pgid);
    let status = match &end {
        End::Exited(s) => Some(*s),
        _ => child.wait().await.ok(),
    };
    // The leader is reaped: its group id may be reused from now on.
    guard.armed = false;
    let out = out_task.await.unwrap_or(Captured {
        data: Vec::new(),
        truncated: false,
    });
    let err = err_task.await.unwrap_or(Captured {
        data: Vec::new(),
        truncated: false,
    });
    let duration_ms = started.elapsed().as_millis() as u64;
    match end {
        End::Cancelled => Err(ErrorPayload::new(
            ErrorCode::Interrupted,
            "the command was cancelled; its process group was killed",
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
                    "\n[timed out after {} ms; the process group was killed]",
                    spec.timeout.as_millis()
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
                sandboxed,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bwrap_that_cannot_start_is_reported_unavailable() {
        match probe(Path::new("/bin/false")) {
            SandboxStatus::Unavailable { reason } => {
                assert!(reason.contains("cannot start"), "{reason}")
            }
            other => panic!("expected unavailable, got {other:?}"),
        }
        match probe(Path::new("/nonexistent/bwrap")) {
            SandboxStatus::Unavailable { reason } => {
                assert!(reason.contains("cannot be run"), "{reason}")
            }
            other => panic!("expected unavailable, got {other:?}"),
        }
        let bwrap = find_in_path("bwrap").expect("bubblewrap is installed");
        assert!(matches!(probe(&bwrap), SandboxStatus::Available { .. }));
    }
}
