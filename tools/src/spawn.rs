//! The one way Keel starts a child process, tied to this process's life.
//!
//! Every child (shell commands and their sandbox, `git`, hooks, MCP stdio servers,
//! background tasks) is started by [`spawn`] or [`spawn_std`]:
//!
//! - **The parent-death signal from the first instant.** Between `fork` and `exec` the
//!   child sets `PR_SET_PDEATHSIG(SIGKILL)`, then compares `getppid()` with this
//!   process's pid recorded before the fork: if they differ, this process died in
//!   between (the signal was armed too late to fire) and the child exits at once
//!   instead of running. The signal survives `exec` (except into a set-user-ID
//!   program).
//! - **A parent thread that never ends.** Linux sends the parent-death signal when the
//!   *thread* that forked the child ends, not the process. Children are therefore
//!   forked by one dedicated thread (`keel-spawn`), started on first use and never
//!   ended: the signal fires only when the whole process dies. Spawning is a short
//!   hand-off to it (the caller waits for the `exec`, as it would anyway).
//! - **Landlock before `exec`.** A Landlock ruleset is built by the caller (on its
//!   own thread, unrestricted) and enforced by the child alone, before `exec`, with
//!   `PR_SET_NO_NEW_PRIVS` and `landlock_restrict_self`: this process and its threads
//!   stay unrestricted.
//! - **A sub-reaper root.** A child may become a child sub-reaper, so that whatever it
//!   starts stays among its descendants even when orphaned (the kill in `reap` walks
//!   them).
//! - **A lifeline.** [`lifeline`] gives a read end of a pipe whose only writer is this
//!   process (kept open, never written, closed by the kernel when this process dies,
//!   however it dies). A child reading it sees end-of-file exactly when this process
//!   is gone: `exec` gives it to every shell command as its standard input, for a
//!   watcher that kills the command's processes (the grandchildren the parent-death
//!   signal does not reach).
//!
//! # Unsafe code
//!
//! This is the only module of the workspace that may use `unsafe`: the code run in the
//! child between `fork` and `exec` is registered with `CommandExt::pre_exec`, which is
//! `unsafe` because it runs in a copy of a multi-threaded process where only
//! async-signal-safe calls are allowed. `child_setup` makes only raw system calls
//! (`prctl`, `getppid`, `landlock_restrict_self`) on values prepared before the fork,
//! allocates nothing, takes no lock, and reports failure by returning an
//! `io::Error` built from an errno (no allocation), which the standard library sends
//! to the parent before `_exit`. See docs/ARCHITECTURE.md, "Unsafe code".
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use rustix::process::{Pid, Signal};

/// How a child is tied to this process.
#[derive(Debug, Default)]
pub struct Tie {
    /// Arm the parent-death signal (SIGKILL) before `exec`. On by default; off only for
    /// a child whose own start-up must not be cut (bubblewrap: see `exec`).
    pub no_death_signal: bool,
    /// Make the child a child sub-reaper (its orphaned descendants stay its own).
    pub subreaper: bool,
    /// A Landlock ruleset to enforce in the child before `exec`.
    pub landlock: Option<OwnedFd>,
}

/// What the child does between `fork` and `exec`, prepared before the fork.
#[derive(Debug, Clone, Copy)]
struct Setup {
    parent: Option<Pid>,
    death_signal: bool,
    subreaper: bool,
    landlock: Option<RawFd>,
}

/// `PR_SET_NO_NEW_PRIVS` is required before `landlock_restrict_self` for an
/// unprivileged process.
const PR_SET_NO_NEW_PRIVS: libc::c_int = 38;

/// Runs in the child between `fork` and `exec`: only raw system calls.
fn child_setup(s: Setup) -> io::Result<()> {
    if s.death_signal {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        // The parent may have died before the signal was armed: then it never fires.
        if rustix::process::getppid() != s.parent {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    if s.subreaper {
        // Any pid turns it on (`PR_SET_CHILD_SUBREAPER` takes a non-zero flag).
        rustix::process::set_child_subreaper(s.parent)?;
    }
    if let Some(fd) = s.landlock {
        // SAFETY: plain system calls on integers; `fd` is a Landlock ruleset open in
        // this (forked) process, inherited from the parent, which keeps it open until
        // the spawn returns.
        unsafe {
            if libc::prctl(PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::from_raw_os_error(errno()));
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0 as libc::c_uint) != 0 {
                return Err(io::Error::from_raw_os_error(errno()));
            }
        }
    }
    Ok(())
}

fn errno() -> i32 {
    // `last_os_error` reads `errno` without allocating.
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

fn register(cmd: &mut std::process::Command, tie: &Tie) {
    let setup = Setup {
        parent: Some(rustix::process::getpid()),
        death_signal: !tie.no_death_signal,
        subreaper: tie.subreaper,
        landlock: tie.landlock.as_ref().map(|f| f.as_raw_fd()),
    };
    // SAFETY: `child_setup` is async-signal-safe (raw system calls on copied integers,
    // no allocation, no lock; errors are built from an errno), as `pre_exec` requires.
    unsafe {
        cmd.pre_exec(move || child_setup(setup));
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// The thread that forks every child; it lives as long as the process.
fn spawner() -> io::Result<&'static Mutex<mpsc::Sender<Job>>> {
    static SPAWNER: OnceLock<Result<Mutex<mpsc::Sender<Job>>, String>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("keel-spawn".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .map(|_| Mutex::new(tx))
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| io::Error::other(format!("cannot start the spawning thread: {e}")))
}

/// Runs `f` on the spawning thread and waits for its answer.
fn on_spawner<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let (tx, rx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = tx.send(f());
    });
    spawner()?
        .lock()
        .map_err(|_| io::Error::other("the spawning thread's queue is poisoned"))?
        .send(job)
        .map_err(|_| io::Error::other("the spawning thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("the spawning thread dropped a spawn"))?
}

/// Starts `cmd` (a tokio command) tied to this process as `tie` says. Call it inside a
/// tokio runtime (the child is registered with the caller's runtime); from any thread.
pub fn spawn(mut cmd: tokio::process::Command, tie: Tie) -> io::Result<tokio::process::Child> {
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|e| io::Error::other(format!("starting a process needs a tokio runtime: {e}")))?;
    register(cmd.as_std_mut(), &tie);
    on_spawner(move || {
        let _runtime = handle.enter();
        let child = cmd.spawn();
        // The ruleset (if any) stays open until the child has exec'd.
        drop(tie);
        child
    })
}

/// Starts `cmd` (a standard library command) tied to this process, without a runtime.
pub fn spawn_std(mut cmd: std::process::Command) -> io::Result<std::process::Child> {
    let tie = Tie::default();
    register(&mut cmd, &tie);
    on_spawner(move || cmd.spawn())
}

/// Runs `cmd` to its end through [`spawn_std`] (tied to this process, so that it dies
/// with it): its standard output and error captured, its standard input empty, as
/// [`std::process::Command::output`] does.
pub fn output_std(mut cmd: std::process::Command) -> io::Result<std::process::Output> {
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    spawn_std(cmd)?.wait_with_output()
}

/// Both ends of the lifeline: the write end is never written and never given away.
#[derive(Debug)]
struct Lifeline {
    read: OwnedFd,
    _write: OwnedFd,
}

/// A new descriptor on the read end of this process's lifeline: it reads end-of-file
/// when, and only when, this process has died.
pub fn lifeline() -> io::Result<OwnedFd> {
    static LIFELINE: OnceLock<Result<Lifeline, String>> = OnceLock::new();
    let line = LIFELINE
        .get_or_init(|| {
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                .map(|(read, write)| Lifeline {
                    read,
                    _write: write,
                })
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| io::Error::other(format!("cannot create the lifeline pipe: {e}")))?;
    line.read.try_clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_child_starts_and_a_failed_setup_is_an_error() {
        runtime().block_on(async {
            let cmd = tokio::process::Command::new("true");
            let status = spawn(cmd, Tie::default())
                .expect("spawn")
                .wait()
                .await
                .expect("wait");
            assert!(status.success());
            // A descriptor that is not a Landlock ruleset: the child's set-up fails
            // before `exec`, and the spawn says so.
            let not_a_ruleset = std::fs::File::open("/dev/null").expect("open").into();
            let tie = Tie {
                landlock: Some(not_a_ruleset),
                ..Tie::default()
            };
            let e = spawn(tokio::process::Command::new("true"), tie).expect_err("refused");
            assert!(e.raw_os_error().is_some(), "{e}");
        });
    }

    #[test]
    fn the_lifeline_has_a_writer_and_no_data() {
        let fd = lifeline().expect("lifeline");
        rustix::io::ioctl_fionbio(&fd, true).expect("nonblocking");
        let mut b = [0u8; 1];
        assert_eq!(rustix::io::read(&fd, &mut b), Err(rustix::io::Errno::AGAIN));
    }

    #[test]
    fn spawning_needs_a_runtime_but_the_std_flavour_does_not() {
        let e =
            spawn(tokio::process::Command::new("true"), Tie::default()).expect_err("no runtime");
        assert!(e.to_string().contains("tokio runtime"), "{e}");
        let status = spawn_std(std::process::Command::new("true"))
            .expect("spawn")
            .wait()
            .expect("wait");
        assert!(status.success());
    }
}
