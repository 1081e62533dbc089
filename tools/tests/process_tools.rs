//! run_shell and git with real processes: results, output caps, progress, timeouts,
//! cancellation that kills grandchildren, the bubblewrap sandbox, and git's safe
//! configuration.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_envelope::tools::RunShellResult;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::{
    ProgressStream, SandboxConfig, SandboxKind, SandboxMode, SandboxStatus, Tool, ToolContext,
};
use serde_json::{json, Value};

#[path = "process_tools/kill.rs"]
mod kill;
#[path = "process_tools/sandbox.rs"]
mod sandbox;

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn ws() -> Ws {
    ws_in(&std::env::temp_dir())
}

fn ws_in(parent: &Path) -> Ws {
    std::fs::create_dir_all(parent).expect("mkdir");
    let dir = tempfile::tempdir_in(parent).expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let root = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    Ws {
        _dir: dir,
        root,
        outside,
    }
}

type Chunks = Arc<Mutex<Vec<(ProgressStream, String)>>>;

fn ctx_with(root: &Path, sandbox: bool, elevated: bool) -> (ToolContext, Chunks) {
    let config = if sandbox {
        SandboxConfig::new(SandboxMode::Bubblewrap)
    } else {
        SandboxConfig::off()
    };
    ctx_config(root, config, elevated)
}

fn ctx_config(root: &Path, sandbox: SandboxConfig, elevated: bool) -> (ToolContext, Chunks) {
    let chunks: Chunks = Arc::default();
    let sink = Arc::clone(&chunks);
    let ctx = ToolContext {
        workspace: root.to_path_buf(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: Arc::new(move |s, t| {
            if let Ok(mut v) = sink.lock() {
                v.push((s, t));
            }
        }),
        elevated,
        sandbox,
        roots: keel_tools::jail::Roots::none(),
    };
    (ctx, chunks)
}

fn tool(name: &str) -> Arc<dyn Tool> {
    keel_tools::builtin_tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .expect("tool")
}

async fn shell(root: &Path, args: Value, sandbox: bool) -> Result<RunShellResult, ErrorPayload> {
    let (ctx, _) = ctx_with(root, sandbox, false);
    tool("run_shell")
        .run(args, ctx)
        .await
        .map(|v| serde_json::from_value(v).expect("shape"))
}

/// Waits (boundedly) for a killed process to finish dying: a SIGKILL is delivered
/// asynchronously, so the /proc entry can lag the kill by a moment.
fn gone_soon(pid: u32) -> bool {
    for _ in 0..300 {
        if process_gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Whether a process is gone (no /proc entry, or a zombie waiting for init).
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn read_pid(path: &Path) -> u32 {
    for _ in 0..200 {
        if let Ok(s) = std::fs::read_to_string(path) {
            if let Ok(pid) = s.trim().parse() {
                return pid;
            }
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("no pid written to {}", path.display());
}

#[tokio::test]
async fn run_shell_returns_a_structured_result_and_streams_output() {
    let w = ws();
    for sandbox in [false, true] {
        let (ctx, chunks) = ctx_with(&w.root, sandbox, false);
        let v = tool("run_shell")
            .run(
                json!({"command": "echo out; echo err >&2; pwd; exit 3", "cwd": "sub"}),
                ctx,
            )
            .await
            .expect("ok");
        let r: RunShellResult = serde_json::from_value(v).expect("shape");
        assert_eq!(r.exit_code, Some(3));
        assert_eq!(r.stdout, format!("out\n{}\n", w.root.join("sub").display()));
        assert_eq!(r.stderr, "err\n");
        assert!(!r.timed_out && !r.truncated);
        assert_eq!(r.sandboxed, sandbox);
        let seen = chunks.lock().expect("lock").clone();
        let out: String = seen
            .iter()
            .filter(|(s, _)| *s == ProgressStream::Stdout)
            .map(|(_, t)| t.as_str())
            .collect();
        let err: String = seen
            .iter()
            .filter(|(s, _)| *s == ProgressStream::Stderr)
            .map(|(_, t)| t.as_str())
            .collect();
        assert_eq!(out, r.stdout);
        assert_eq!(err, "err\n");
    }
}

#[tokio::test]
async fn run_shell_caps_huge_output() {
    let w = ws();
    let (ctx, chunks) = ctx_with(&w.root, false, false);
    let v = tool("run_shell")
        .run(
            json!({"command": "head -c 3000000 /dev/zero | tr '\\0' a"}),
            ctx,
        )
        .await
        .expect("ok");
    let r: RunShellResult = serde_json::from_value(v).expect("shape");
    let seen = chunks.lock().expect("lock").clone();
    let streamed: usize = seen
        .iter()
        .filter(|(s, _)| *s == ProgressStream::Stdout)
        .map(|(_, t)| t.len())
        .sum();
    assert_eq!(streamed, 262_144, "progress stops at the cap too");
    assert!(seen
        .iter()
        .any(|(s, t)| *s == ProgressStream::Info && t.contains("truncated")));
    assert!(r.truncated);
    assert_eq!(r.exit_code, Some(0));
    assert!(r.stdout.len() < 300 * 1024, "{}", r.stdout.len());
    assert!(r.stdout.ends_with("[output truncated at 262144 bytes]"));
}

#[tokio::test]
async fn run_shell_timeout_kills_the_whole_group() {
    let w = ws();
    let pidfile = w.root.join("grandchild.pid");
    let cmd = format!(
        "sh -c 'sleep 300 & echo $! > {}; wait' ; echo never",
        pidfile.display()
    );
    let r = shell(&w.root, json!({"command": cmd, "timeoutMs": 700}), false)
        .await
        .expect("ok");
    assert!(r.timed_out);
    assert_eq!(r.exit_code, None);
    assert!(!r.stdout.contains("never"));
    let pid = read_pid(&pidfile);
    assert!(gone_soon(pid), "grandchild {pid} survived the timeout");
}

#[tokio::test]
async fn run_shell_cancellation_kills_grandchildren() {
    let w = ws();
    let pidfile = w.root.join("gc.pid");
    let (ctx, _) = ctx_with(&w.root, false, false);
    let cancel = ctx.cancel.clone();
    let cmd = format!(
        "(sleep 300; echo late) & echo $! > {}; sleep 300",
        pidfile.display()
    );
    let task =
        tokio::spawn(async move { tool("run_shell").run(json!({"command": cmd}), ctx).await });
    let pid = tokio::task::spawn_blocking({
        let p = pidfile.clone();
        move || read_pid(&p)
    })
    .await
    .expect("pid");
    assert!(
        !process_gone(pid),
        "the grandchild should be running before the cancel"
    );
    cancel.cancel();
    let e = task.await.expect("join").expect_err("cancelled");
    assert_eq!(e.code, ErrorCode::Interrupted);
    assert!(gone_soon(pid), "grandchild {pid} survived the cancellation");
}

#[tokio::test]
async fn run_shell_kills_leftover_background_processes_after_exit() {
    let w = ws();
    let pidfile = w.root.join("bg.pid");
    let cmd = format!("sleep 300 & echo $! > {}; echo done", pidfile.display());
    let r = shell(&w.root, json!({"command": cmd}), false)
        .await
        .expect("ok");
    assert_eq!(r.stdout, "done\n");
    let pid = read_pid(&pidfile);
    assert!(gone_soon(pid), "background process {pid} outlived the call");
}

#[tokio::test]
async fn run_shell_cancellation_inside_the_sandbox() {
    let w = ws();
    let (ctx, _) = ctx_with(&w.root, true, false);
    let cancel = ctx.cancel.clone();
    let marker = w.root.join("started");
    let cmd = format!("touch {}; sleep 300 & sleep 300", marker.display());
    let task =
        tokio::spawn(async move { tool("run_shell").run(json!({"command": cmd}), ctx).await });
    for _ in 0..400 {
        if marker.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(marker.exists(), "the sandboxed command did not start");
    cancel.cancel();
    let e = task.await.expect("join").expect_err("cancelled");
    assert_eq!(e.code, ErrorCode::Interrupted);
}

#[tokio::test]
async fn run_shell_rejects_bad_input() {
    let w = ws();
    let cases = [
        (json!({}), ErrorCode::ToolArgumentsInvalid),
        (json!({"command": 42}), ErrorCode::ToolArgumentsInvalid),
        (
            json!({"command": "ls", "extra": true}),
            ErrorCode::ToolArgumentsInvalid,
        ),
        (json!({"command": "   "}), ErrorCode::ToolArgumentsInvalid),
        (
            json!({"command": "ls", "timeoutMs": 0}),
            ErrorCode::ToolArgumentsInvalid,
        ),
        (
            json!({"command": "ls", "timeoutMs": -5}),
            ErrorCode::ToolArgumentsInvalid,
        ),
        (
            json!({"command": "ls", "cwd": ".."}),
            ErrorCode::PathOutsideWorkspace,
        ),
        (
            json!({"command": "ls", "cwd": "/"}),
            ErrorCode::PathOutsideWorkspace,
        ),
        (
            json!({"command": "ls", "cwd": "missing"}),
            ErrorCode::ToolArgumentsInvalid,
        ),
        (
            json!({"command": "ls", "background": true}),
            ErrorCode::ToolExecutionFailed,
        ),
        (
            json!({"command": "ls\u{0}"}),
            ErrorCode::ToolArgumentsInvalid,
        ),
    ];
    for (args, want) in cases {
        let e = shell(&w.root, args.clone(), false)
            .await
            .expect_err("bad input");
        assert_eq!(e.code, want, "{args}: {}", e.message);
    }
    let e = shell(&w.root, json!({"command": "ls", "background": true}), false)
        .await
        .expect_err("bg");
    assert!(e.message.contains("not supported yet"));
}

#[tokio::test]
async fn sandbox_is_available_and_blocks_writes_outside_the_workspace() {
    // CI installs bubblewrap: if it cannot run, this test fails on purpose.
    let status = keel_tools::sandbox_status();
    assert!(
        matches!(status, SandboxStatus::Available { .. }),
        "bubblewrap must be usable for this test: {status:?}"
    );
    // Outside /tmp, which the sandbox replaces with a private one (a checkout may
    // itself live under /tmp; then use /var/tmp).
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if base.starts_with("/tmp") {
        Path::new("/var/tmp")
    } else {
        base
    };
    let w = ws_in(base);
    let target = w.outside.join("escaped.txt");
    let private_tmp = format!("/tmp/keel-sandbox-test-{}.txt", std::process::id());
    let cmd = format!(
        "echo pwned > {}; echo inside > ok.txt; echo tmp > {private_tmp} && cat {private_tmp}",
        target.display()
    );
    let r = shell(&w.root, json!({"command": cmd}), true)
        .await
        .expect("ran");
    assert!(r.sandboxed);
    assert!(
        !target.exists(),
        "a sandboxed command wrote outside the workspace"
    );
    assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(w.root.join("ok.txt")).expect("inside write"),
        "inside\n"
    );
    assert_eq!(r.stdout, "tmp\n", "a private /tmp is writable");
    assert!(
        !Path::new(&private_tmp).exists(),
        "the sandbox's /tmp is private"
    );

    // The network is unshared unless the call is elevated: only the loopback device.
    let r = shell(&w.root, json!({"command": "cat /proc/net/dev"}), true)
        .await
        .expect("ran");
    let ifaces: Vec<&str> = r
        .stdout
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(ifaces, vec!["lo"], "{}", r.stdout);

    // Unsandboxed, the same write goes through (so the check above is meaningful).
    let r = shell(
        &w.root,
        json!({"command": format!("echo ok > {}", target.display())}),
        false,
    )
    .await
    .expect("ran");
    assert!(!r.sandboxed && r.exit_code == Some(0));
    assert!(target.exists());
}

#[tokio::test]
async fn sandbox_keeps_git_metadata_read_only() {
    let w = ws();
    std::fs::create_dir_all(w.root.join(".git")).expect("mkdir");
    let r = shell(
        &w.root,
        json!({"command": "echo x > .git/hooks_pwned"}),
        true,
    )
    .await
    .expect("ran");
    assert_ne!(r.exit_code, Some(0));
    assert!(!w.root.join(".git/hooks_pwned").exists());
}

// ---------------------------------------------------------------- git

fn git(root: &Path, args: &[&str]) {
    let st = std::process::Command::new("git")
        .args(args)
        .current_dir(root)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .expect("git");
    assert!(st.success(), "git {args:?}");
}

fn repo() -> Ws {
    let w = ws();
    git(&w.root, &["init", "-q", "-b", "main"]);
    git(&w.root, &["config", "user.email", "t@example.com"]);
    git(&w.root, &["config", "user.name", "T"]);
    std::fs::write(w.root.join("a.txt"), "one\n").expect("write");
    git(&w.root, &["add", "."]);
    git(&w.root, &["commit", "-qm", "first"]);
    w
}

async fn run_git(root: &Path, args: Value) -> Result<RunShellResult, ErrorPayload> {
    let (ctx, _) = ctx_with(root, false, false);
    tool("git")
        .run(args, ctx)
        .await
        .map(|v| serde_json::from_value(v).expect("shape"))
}

#[tokio::test]
async fn git_runs_read_only_commands() {
    let w = repo();
    std::fs::write(w.root.join("a.txt"), "two\n").expect("write");
    let r = run_git(&w.root, json!({"command": "status", "args": ["--short"]}))
        .await
        .expect("ok");
    assert_eq!(r.stdout, " M a.txt\n");
    let r = run_git(&w.root, json!({"command": "diff"}))
        .await
        .expect("ok");
    assert!(r.stdout.contains("-one\n+two\n"), "{}", r.stdout);
    let r = run_git(&w.root, json!({"command": "log", "args": ["--format=%s"]}))
        .await
        .expect("ok");
    assert_eq!(r.stdout, "first\n");
    let r = run_git(&w.root, json!({"command": "branch"}))
        .await
        .expect("ok");
    assert_eq!(r.stdout, "* main\n");
    let r = run_git(
        &w.root,
        json!({"command": "show", "args": ["--stat", "--format=%s"]}),
    )
    .await
    .expect("ok");
    assert!(r.stdout.starts_with("first\n"));
}

#[tokio::test]
async fn git_ignores_pagers_external_diffs_and_fsmonitor_from_the_repo() {
    let w = repo();
    let pwned = w.outside.join("pwned");
    let script = w.outside.join("evil.sh");
    std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", pwned.display())).expect("write");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let s = script.to_string_lossy().into_owned();
    git(&w.root, &["config", "diff.external", &s]);
    git(&w.root, &["config", "core.pager", &s]);
    git(&w.root, &["config", "core.fsmonitor", &s]);
    std::fs::write(w.root.join(".gitattributes"), "*.txt diff=conv\n").expect("write");
    git(&w.root, &["config", "diff.conv.textconv", &s]);
    std::fs::write(w.root.join("a.txt"), "changed\n").expect("write");
    for (cmd, args) in [
        ("status", json!([])),
        ("diff", json!([])),
        ("log", json!(["-p"])),
        ("show", json!([])),
    ] {
        let r = run_git(&w.root, json!({"command": cmd, "args": args}))
            .await
            .expect("ok");
        assert_eq!(r.exit_code, Some(0), "{cmd}: {}", r.stderr);
    }
    assert!(
        !pwned.exists(),
        "git ran a program configured in the repository"
    );
}

#[tokio::test]
async fn git_changes_and_rejects_bad_input() {
    let w = repo();
    std::fs::write(w.root.join("b.txt"), "b\n").expect("write");
    run_git(&w.root, json!({"command": "add", "args": ["b.txt"]}))
        .await
        .expect("add");
    let r = run_git(
        &w.root,
        json!({"command": "commit", "args": ["-m", "second"]}),
    )
    .await
    .expect("commit");
    assert_eq!(r.exit_code, Some(0), "{}", r.stderr);
    let r = run_git(&w.root, json!({"command": "log", "args": ["--format=%s"]}))
        .await
        .expect("log");
    assert_eq!(r.stdout, "second\nfirst\n");
    // A commit without a message cannot hang on an editor.
    std::fs::write(w.root.join("c.txt"), "c\n").expect("write");
    run_git(&w.root, json!({"command": "add", "args": ["c.txt"]}))
        .await
        .expect("add");
    let r = run_git(&w.root, json!({"command": "commit"}))
        .await
        .expect("ran");
    assert_ne!(r.exit_code, Some(0));
    assert!(!r.timed_out);
    for (args, want) in [
        (json!({}), ErrorCode::ToolArgumentsInvalid),
        (json!({"command": "-c"}), ErrorCode::ToolArgumentsInvalid),
        (
            json!({"command": "--exec-path=/tmp"}),
            ErrorCode::ToolArgumentsInvalid,
        ),
        (
            json!({"command": "status", "args": "x"}),
            ErrorCode::ToolArgumentsInvalid,
        ),
        (
            json!({"command": "status", "args": [1]}),
            ErrorCode::ToolArgumentsInvalid,
        ),
        (
            json!({"command": "Status"}),
            ErrorCode::ToolArgumentsInvalid,
        ),
    ] {
        let e = run_git(&w.root, args.clone()).await.expect_err("bad");
        assert_eq!(e.code, want, "{args}");
    }
}

#[tokio::test]
async fn dropping_a_running_call_kills_its_group() {
    let w = ws();
    let pidfile = w.root.join("dropped.pid");
    let (ctx, _) = ctx_with(&w.root, false, false);
    let cmd = format!("(sleep 300) & echo $! > {}; sleep 300", pidfile.display());
    let task =
        tokio::spawn(async move { tool("run_shell").run(json!({"command": cmd}), ctx).await });
    let pid = tokio::task::spawn_blocking({
        let p = pidfile.clone();
        move || read_pid(&p)
    })
    .await
    .expect("pid");
    task.abort();
    let _ = task.await;
    assert!(
        gone_soon(pid),
        "grandchild {pid} survived dropping the call"
    );
}
