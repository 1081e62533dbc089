//! The sandbox policy with real processes: writes outside the workspace fail under
//! bubblewrap and Landlock, the network is off unless allowed, a required sandbox
//! that cannot run refuses the command, and every result says which sandbox ran.

use std::net::TcpListener;

use super::*;

fn landlock_missing() -> Option<String> {
    keel_tools::sandbox_report(&SandboxConfig::default())
        .landlock
        .err()
}

/// A workspace outside the temp directory (which Landlock leaves writable).
fn ws_outside_tmp() -> Ws {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let tmp = std::env::temp_dir();
    let base = if base.starts_with(&tmp) || base.starts_with("/tmp") {
        Path::new("/var/tmp")
    } else {
        base
    };
    ws_in(base)
}

async fn shell_with(
    root: &Path,
    args: Value,
    config: SandboxConfig,
    elevated: bool,
) -> (Result<RunShellResult, ErrorPayload>, Chunks) {
    let (ctx, chunks) = ctx_config(root, config, elevated);
    let r = tool("run_shell")
        .run(args, ctx)
        .await
        .map(|v| serde_json::from_value(v).expect("shape"));
    (r, chunks)
}

#[tokio::test]
async fn landlock_blocks_writes_outside_the_workspace() {
    if let Some(why) = landlock_missing() {
        println!("skipped: the kernel lacks Landlock: {why}");
        return;
    }
    let w = ws_outside_tmp();
    let target = w.outside.join("escaped.txt");
    let in_tmp = std::env::temp_dir().join(format!("keel-landlock-{}.txt", std::process::id()));
    let cmd = format!(
        "echo pwned > {}; echo inside > ok.txt; echo tmp > {} && cat {}; echo quiet > /dev/null && echo devnull",
        target.display(),
        in_tmp.display(),
        in_tmp.display()
    );
    let (r, _) = shell_with(
        &w.root,
        json!({"command": cmd}),
        SandboxConfig::new(SandboxMode::Landlock),
        false,
    )
    .await;
    let r = r.expect("ran");
    assert_eq!(r.sandbox, SandboxKind::Landlock);
    assert!(r.sandboxed);
    assert!(
        !target.exists(),
        "a Landlock-sandboxed command wrote outside"
    );
    assert!(r.stderr.contains("Permission denied"), "{}", r.stderr);
    assert_eq!(r.stdout, "tmp\ndevnull\n");
    assert_eq!(
        std::fs::read_to_string(w.root.join("ok.txt")).expect("inside write"),
        "inside\n"
    );
    let _ = std::fs::remove_file(&in_tmp);
    // The restriction stayed with the command: this process still writes there, and
    // so does an unsandboxed command.
    std::fs::write(w.outside.join("test.txt"), "x").expect("the test process is free");
    let (r, _) = shell_with(
        &w.root,
        json!({"command": format!("echo ok > {}", target.display())}),
        SandboxConfig::off(),
        false,
    )
    .await;
    let r = r.expect("ran");
    assert_eq!((r.sandbox, r.exit_code), (SandboxKind::None, Some(0)));
    assert!(target.exists());
}

#[tokio::test]
async fn bubblewrap_blocks_writes_outside_the_workspace_when_forced() {
    let w = ws_outside_tmp();
    let target = w.outside.join("escaped.txt");
    let (r, _) = shell_with(
        &w.root,
        json!({"command": format!("echo pwned > {}", target.display())}),
        SandboxConfig::new(SandboxMode::Bubblewrap),
        false,
    )
    .await;
    let r = r.expect("ran");
    assert_eq!(r.sandbox, SandboxKind::Bubblewrap);
    assert_ne!(r.exit_code, Some(0));
    assert!(!target.exists());
}

/// Runs a TCP connect to `port` from inside the sandbox; returns whether the listener
/// got the connection.
async fn connects(
    root: &Path,
    listener: &TcpListener,
    config: SandboxConfig,
    elevated: bool,
) -> (bool, RunShellResult) {
    let port = listener.local_addr().expect("addr").port();
    let cmd = format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo connected");
    let (r, _) = shell_with(root, json!({"command": cmd}), config, elevated).await;
    let r = r.expect("ran");
    let accepted = listener.accept().is_ok();
    assert_eq!(accepted, r.stdout.contains("connected"), "{r:?}");
    (accepted, r)
}

#[tokio::test]
async fn the_network_is_off_by_default_and_on_when_allowed() {
    let w = ws();
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    let mut modes = vec![SandboxMode::Bubblewrap];
    match landlock_missing() {
        None => modes.push(SandboxMode::Landlock),
        Some(why) => println!("Landlock part skipped: the kernel lacks Landlock: {why}"),
    }
    for mode in modes {
        let (ok, r) = connects(&w.root, &listener, SandboxConfig::new(mode), false).await;
        assert!(!ok, "{mode}: connected without network: {r:?}");
        assert_eq!(r.sandbox.as_str(), mode.as_str());
        let (ok, r) = connects(
            &w.root,
            &listener,
            SandboxConfig::new(mode).with_network(true),
            false,
        )
        .await;
        assert!(ok, "{mode}: network allowed by the config: {r:?}");
        let (ok, r) = connects(&w.root, &listener, SandboxConfig::new(mode), true).await;
        assert!(ok, "{mode}: network allowed by an elevated approval: {r:?}");
    }
    // Unsandboxed, the connection is not blocked (so the checks above mean something).
    let (ok, _) = connects(&w.root, &listener, SandboxConfig::off(), false).await;
    assert!(ok);
}

/// A configuration whose only sandbox cannot start here.
fn broken_bubblewrap() -> SandboxConfig {
    let mut c = SandboxConfig::new(SandboxMode::Bubblewrap);
    c.bwrap = Some(PathBuf::from("/bin/false"));
    c
}

#[tokio::test]
async fn a_required_sandbox_that_cannot_run_refuses_the_command() {
    let w = ws();
    let marker = w.root.join("ran.txt");
    let cmd = format!("echo ran > {}", marker.display());
    let (r, _) = shell_with(
        &w.root,
        json!({"command": cmd}),
        broken_bubblewrap().required(true),
        false,
    )
    .await;
    let e = r.expect_err("refused");
    assert_eq!(e.code, ErrorCode::SandboxUnavailable);
    assert!(e.message.contains("install bubblewrap"), "{}", e.message);
    assert!(e.message.contains("sandbox = \"off\""), "{}", e.message);
    assert!(e.message.contains("cannot start"), "{}", e.message);
    assert_eq!(e.details["mode"], "bubblewrap");
    assert!(!marker.exists(), "a refused command ran");

    // Not required: it runs unsandboxed, says so in the result and warns once.
    let (r, _) = shell_with(&w.root, json!({"command": cmd}), broken_bubblewrap(), false).await;
    let r = r.expect("ran");
    assert_eq!((r.sandbox, r.sandboxed), (SandboxKind::None, false));
    assert!(marker.exists());

    // `off` is an explicit choice: required or not, the command runs.
    let (r, _) = shell_with(
        &w.root,
        json!({"command": "echo off"}),
        SandboxConfig::off().required(true),
        false,
    )
    .await;
    assert_eq!(r.expect("ran").sandbox, SandboxKind::None);
}

#[tokio::test]
async fn the_report_says_what_commands_get_and_why() {
    let r = keel_tools::sandbox_report(&SandboxConfig::default());
    assert_eq!(r.mode, SandboxMode::Auto);
    assert_eq!(r.sandbox, SandboxKind::Bubblewrap, "{r:?}");
    assert!(r.reason.contains("bubblewrap"), "{}", r.reason);
    assert!(!r.refused && !r.network);

    let mut auto = broken_bubblewrap();
    auto.mode = SandboxMode::Auto;
    let r = keel_tools::sandbox_report(&auto);
    match &r.landlock {
        Ok(info) => {
            assert_eq!(r.sandbox, SandboxKind::Landlock);
            assert!(r.reason.contains("cannot start"), "{}", r.reason);
            assert!(
                r.reason.contains(&format!("ABI {}", info.abi)),
                "{}",
                r.reason
            );
            assert!(info.features.contains(&"fs_write"));
            assert_eq!(info.features.contains(&"tcp"), info.abi >= 4);
        }
        Err(why) => {
            println!("Landlock part skipped: {why}");
            assert_eq!(r.sandbox, SandboxKind::None);
        }
    }
    let r = keel_tools::sandbox_report(&broken_bubblewrap().required(true));
    assert!(r.refused && r.reason.contains("refused"), "{r:?}");
    let r = keel_tools::sandbox_report(&SandboxConfig::off());
    assert_eq!((r.sandbox, r.refused), (SandboxKind::None, false));
    assert!(r.reason.contains("off"), "{}", r.reason);
}

#[tokio::test]
async fn progress_keeps_characters_split_between_reads() {
    let w = ws();
    // One ASCII byte, then two-byte characters: every even read boundary (the pipe
    // is read 16 KiB at a time) falls inside a character.
    let mut text = String::from("a");
    text.push_str(&"é".repeat(60_000));
    std::fs::write(w.root.join("text.txt"), &text).expect("write");
    let (ctx, chunks) = ctx_with(&w.root, false, false);
    let v = tool("run_shell")
        .run(json!({"command": "cat text.txt"}), ctx)
        .await
        .expect("ran");
    let r: RunShellResult = serde_json::from_value(v).expect("shape");
    assert_eq!(r.stdout, text);
    let streamed: String = chunks
        .lock()
        .expect("lock")
        .iter()
        .filter(|(s, _)| *s == ProgressStream::Stdout)
        .map(|(_, t)| t.as_str())
        .collect();
    assert!(!streamed.contains('\u{fffd}'), "a character was split");
    assert_eq!(streamed, text);
}

/// Under each sandbox, a session's `write` extra root is writable, its `read` root is
/// readable but not writable, and the command still runs in the workspace.
#[tokio::test]
async fn extra_roots_in_the_sandbox() {
    let w = ws_outside_tmp();
    let base = w.root.parent().expect("base").to_path_buf();
    let (wr, rd) = (base.join("write-root"), base.join("read-root"));
    for d in [&wr, &rd] {
        std::fs::create_dir_all(d.join(".git")).expect("mkdir");
    }
    std::fs::write(rd.join("data.txt"), "readable\n").expect("write");
    let roots = keel_tools::jail::extra_roots(
        &w.root,
        &[
            (wr.to_str().expect("utf-8"), true),
            (rd.to_str().expect("utf-8"), false),
        ],
    )
    .expect("roots");
    let cmd = format!(
        "pwd; cat {rd}/data.txt; echo w > {wr}/made.txt && echo wrote; echo r > {rd}/made.txt || echo refused; echo g > {wr}/.git/x || echo git-refused",
        rd = rd.display(),
        wr = wr.display()
    );
    let mut modes = vec![SandboxMode::Bubblewrap];
    match landlock_missing() {
        None => modes.push(SandboxMode::Landlock),
        Some(why) => println!("Landlock part skipped: {why}"),
    }
    for mode in modes {
        let _ = std::fs::remove_file(wr.join("made.txt"));
        let (mut ctx, _) = ctx_config(&w.root, SandboxConfig::new(mode), false);
        ctx.roots = roots.clone();
        let r: RunShellResult = serde_json::from_value(
            tool("run_shell")
                .run(json!({"command": cmd}), ctx)
                .await
                .expect("ran"),
        )
        .expect("shape");
        assert!(r.sandboxed, "{mode:?}: {r:?}");
        let mut lines = r.stdout.lines();
        assert_eq!(
            lines.next(),
            Some(&*w.root.to_string_lossy()),
            "{mode:?}: cwd"
        );
        assert_eq!(lines.next(), Some("readable"), "{mode:?}: {}", r.stdout);
        assert_eq!(lines.next(), Some("wrote"), "{mode:?}: {}", r.stderr);
        assert_eq!(lines.next(), Some("refused"), "{mode:?}: {}", r.stdout);
        assert_eq!(
            std::fs::read_to_string(wr.join("made.txt")).expect("written"),
            "w\n",
            "{mode:?}"
        );
        assert!(
            !rd.join("made.txt").exists(),
            "{mode:?}: a read root was written"
        );
        if mode == SandboxMode::Bubblewrap {
            // bubblewrap keeps a write root's `.git` read-only, like the workspace's.
            assert_eq!(lines.next(), Some("git-refused"), "{mode:?}: {}", r.stdout);
            assert!(!wr.join(".git/x").exists());
        }
    }
}
