//! `keel demo`, `keel exec`, `keel sessions` and `keel bridge` through the real binary.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use keel_envelope::{codec, Event};

fn keel() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
    // No daemon of the user running these tests is asked (`keel sessions`).
    cmd.env("KEEL_SOCKET", no_daemon());
    cmd
}

/// A socket path where no daemon listens.
fn no_daemon() -> std::path::PathBuf {
    std::env::temp_dir()
        .join("keel-tests-no-daemon")
        .join("none.sock")
}

fn script(dir: &Path, body: serde_json::Value) -> String {
    let p = dir.join("script.json");
    std::fs::write(&p, body.to_string()).unwrap();
    format!("scripted:{}", p.display())
}

fn write_script(dir: &Path) -> String {
    script(
        dir,
        serde_json::json!({"turns": [
            {"text": "Writing.", "toolCalls": [{"name": "write_file", "arguments": {"path": "out.txt", "content": "hi\n"}}]},
            {"text": "Done."}
        ]}),
    )
}

#[test]
fn demo_runs_offline_and_fixes_the_project() {
    let home = tempfile::tempdir().unwrap();
    let out = keel()
        .arg("demo")
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("src/greeting.txt now reads: Hello, world!"),
        "{stdout}"
    );
    assert!(stdout.contains("approve the plan? [y/n] y"));
    assert!(stdout.contains("-Hello, wrold!") && stdout.contains("+Hello, world!"));
    let log = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Session log (one envelope per line): "))
        .unwrap();
    let text = std::fs::read_to_string(log).unwrap();
    let types: Vec<String> = text
        .lines()
        .map(|l| {
            codec::decode_envelope(l.as_bytes())
                .unwrap()
                .type_name()
                .to_owned()
        })
        .collect();
    for t in [
        "plan.approval_required",
        "approval.granted",
        "tool.call.completed",
        "session.completed",
    ] {
        assert!(types.iter().any(|x| x == t), "{t} missing from {types:?}");
    }
}

#[test]
fn exec_json_prints_only_envelopes_and_succeeds() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("README.md"), "# project\n").unwrap();
    let model = script(
        home.path(),
        serde_json::json!({"turns": [
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
            {"text": "It is a project."}
        ]}),
    );
    let out = keel()
        .args(["exec", "what is this?", "--json", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let envs: Vec<_> = stdout
        .lines()
        .map(|l| codec::decode_envelope(l.as_bytes()).unwrap())
        .collect();
    assert!(envs
        .iter()
        .any(|e| matches!(&e.event, Event::AssistantFinal(f) if f.text == "It is a project.")));
    assert!(envs.iter().any(|e| e.type_name() == "tool.call.completed"));
}

#[test]
fn exec_denies_what_needs_approval_in_ask_mode() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = write_script(home.path());
    let out = keel()
        .args(["exec", "write it", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("needs approval") && stderr.contains("--mode"),
        "{stderr}"
    );
    assert!(!ws.path().join("out.txt").exists());
}

/// `keel exec -` (or no prompt, with input piped in) reads the prompt from standard
/// input; empty, non-UTF-8 or over-long input is a usage error (status 2), and nothing
/// runs.
#[test]
fn exec_reads_the_prompt_from_standard_input() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let model = script(
        home.path(),
        serde_json::json!({"turns": [{"text": "Read you."}]}),
    );
    let run = |args: &[&str], input: Vec<u8>| {
        let mut child = keel()
            .args(["exec", "--json", "-m", &model, "-w"])
            .arg(ws.path())
            .args(args)
            .env("KEEL_HOME", home.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // keel may stop reading early (over the limit): a broken pipe is expected then.
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap();
        out
    };
    for args in [&["-"][..], &[]] {
        let out = run(args, b"what is in\nthis project?\n".to_vec());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        let answer = stdout
            .lines()
            .map(|l| codec::decode_envelope(l.as_bytes()).unwrap())
            .find_map(|e| match e.event {
                Event::AssistantFinal(f) => Some(f.text),
                _ => None,
            });
        assert_eq!(answer.as_deref(), Some("Read you."), "{args:?}");
    }
    // The scripted model had one turn: a request that ran would fail the next run.
    let over = vec![b'a'; 4 * 1024 * 1024 + 1];
    for (input, why) in [
        (b" \n".to_vec(), "the prompt is empty"),
        (vec![b'h', b'i', 0xff], "not UTF-8 text (at byte 2)"),
        (over, "over 4194304 bytes"),
    ] {
        let out = run(&["-"], input);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{why}: {stderr}");
        assert!(stderr.contains(why), "{stderr}");
        assert!(out.stdout.is_empty(), "{why}");
    }
}

/// The session flags go before the command too (`keel -w DIR -m M --mode auto-edit exec
/// …`), as with git's `-C`; a flag given on both sides with two values is refused.
#[test]
fn session_flags_before_the_command_are_the_commands_own() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = write_script(home.path());
    let ws_arg = ws.path().to_str().unwrap();
    let out = keel()
        .args([
            "-w",
            ws_arg,
            "-m",
            &model,
            "--mode",
            "auto-edit",
            "exec",
            "write it",
        ])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).unwrap(),
        "hi\n"
    );

    // The same flag on both sides: the same value is fine, two values are refused.
    std::fs::remove_file(ws.path().join("out.txt")).unwrap();
    let out = keel()
        .args([
            "-w",
            ws_arg,
            "--mode",
            "ask",
            "exec",
            "write it",
            "--mode",
            "auto-edit",
        ])
        .args(["-m", &model])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--mode is given twice"), "{stderr}");
    assert!(!ws.path().join("out.txt").exists());
    let out = keel()
        .args(["-m", &model, "exec", "write it", "-w", ws_arg, "-m", &model])
        .args(["--mode", "auto-edit"])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(ws.path().join("out.txt").exists());
}

#[test]
fn exec_in_auto_edit_mode_writes() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = write_script(home.path());
    let out = keel()
        .args(["exec", "write it", "--mode", "auto-edit", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).unwrap(),
        "hi\n"
    );
    // The session is in the store.
    let list = keel()
        .args(["sessions", "list", "--json"])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    let sessions: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1);
    // Its title was made from the message.
    assert_eq!(sessions[0]["title"], "write it");

    // `keel sessions delete` removes it; a second delete, or an unknown id, fails.
    let id = sessions[0]["sessionId"].as_str().unwrap().to_owned();
    let out = keel()
        .args(["sessions", "delete", &id])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("deleted {id}\n")
    );
    let list = keel()
        .args(["sessions", "list", "--json"])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&list.stdout).trim(), "[]");
    assert!(!home.path().join("sessions").join(&id).exists());
    for bad in [id.as_str(), "sess_unknown", "../x"] {
        let out = keel()
            .args(["sessions", "delete", bad])
            .env("KEEL_HOME", home.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("keel sessions delete: "), "{stderr}");
    }
    let out = keel()
        .args(["sessions", "delete"])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a missing id is a usage error");
}

#[test]
fn exec_reports_model_failures_and_bad_usage() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = script(
        home.path(),
        serde_json::json!({"turns": [{"error": {"message": "boom"}}]}),
    );
    let out = keel()
        .args(["exec", "x", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    for bad in [
        vec!["exec"],
        vec!["exec", "a", "b"],
        vec!["exec", "x", "--mode", "yolo"],
        vec!["exec", "x", "--bogus"],
    ] {
        let out = keel()
            .args(&bad)
            .env("KEEL_HOME", home.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
    let out = keel()
        .args(["exec", "x", "--model", "nope:thing", "--workspace"])
        .arg(ws.path())
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn exec_interrupted_by_ctrl_c_exits_130() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = script(
        home.path(),
        serde_json::json!({"turns": [{"delayMs": 60000, "text": "late"}]}),
    );
    let mut child = keel()
        .args(["exec", "slow", "--json", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Wait until the request runs, then press Ctrl-C.
    loop {
        let line = lines.next().unwrap().unwrap();
        if codec::decode_envelope(line.as_bytes()).unwrap().type_name() == "request.accepted" {
            break;
        }
    }
    interrupt(child.id());
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(
        rest.iter().any(|l| l.contains("\"session.interrupted\"")),
        "{rest:?}"
    );
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

fn interrupt(pid: u32) {
    let status = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Ctrl-C pressed while `keel exec` is busy writing envelopes (here: blocked on a full
/// stdout pipe that nobody reads) is not lost: the request is interrupted once the
/// output drains. Several runs, several Ctrl-C each, with the cores kept busy.
#[test]
fn exec_keeps_a_ctrl_c_that_arrives_while_it_writes() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // A long answer: thousands of deltas, far more output than a pipe holds.
    let long = "lorem ipsum dolor sit amet ".repeat(8000);
    let model = script(home.path(), serde_json::json!({"turns": [{"text": long}]}));
    let mut seed = std::process::id() as u64;
    let mut rand = move |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for run in 0..3 {
        let mut child = keel()
            .args(["exec", "talk", "--json", "--workspace"])
            .arg(ws.path())
            .args(["--model", &model])
            .env("KEEL_HOME", home.path())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        loop {
            let line = lines.next().unwrap().unwrap();
            if codec::decode_envelope(line.as_bytes()).unwrap().type_name() == "assistant.delta" {
                break;
            }
        }
        // Stop reading: the pipe fills and `keel exec` blocks in a write. Press
        // Ctrl-C a few times at random moments meanwhile.
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(100 + rand(300)));
            interrupt(child.id());
        }
        let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
        let code = child.wait().unwrap().code();
        assert!(
            rest.iter().any(|l| l.contains("\"session.interrupted\"")),
            "run {run}: the request was not interrupted ({} lines after, exit {code:?})",
            rest.len()
        );
        assert_eq!(code, Some(130), "run {run}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for b in busy {
        b.join().unwrap();
    }
}

#[test]
fn bridge_stdout_carries_envelopes_only() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = write_script(home.path());
    let mut child = keel()
        .args(["bridge", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model, "--permission-mode", "auto-edit"])
        .env("KEEL_HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = codec::decode_envelope(lines.next().unwrap().unwrap().as_bytes()).unwrap();
    assert_eq!(ready.type_name(), "runtime.ready");
    writeln!(stdin, "this is not json").unwrap();
    writeln!(
        stdin,
        r#"{{"version":"1.0","type":"session.start","requestId":"r1"}}"#
    )
    .unwrap();
    let mut sid = None;
    let mut all = Vec::new();
    for line in lines.by_ref() {
        let env = codec::decode_envelope(line.unwrap().as_bytes()).unwrap();
        if env.type_name() == "session.started" {
            sid = env.session_id.clone();
            writeln!(
                stdin,
                r#"{{"version":"1.0","type":"request.send","requestId":"r2","sessionId":"{}","payload":{{"message":"go"}}}}"#,
                sid.as_deref().unwrap()
            )
            .unwrap();
        }
        let done = env.type_name() == "session.completed";
        all.push(env);
        if done {
            break;
        }
    }
    drop(stdin);
    for line in lines {
        all.push(codec::decode_envelope(line.unwrap().as_bytes()).unwrap());
    }
    assert!(child.wait().unwrap().success());
    assert!(sid.is_some());
    assert!(matches!(&all[0].event, Event::Error(e) if e.details["reason"] == "invalid_json"));
    assert_eq!(all.last().unwrap().type_name(), "runtime.stopped");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out.txt")).unwrap(),
        "hi\n"
    );
}

/// Runs two `echo`s with bubblewrap forced and off the PATH (so no sandbox can run).
fn run_without_a_sandbox(mode: &str) -> (Option<i32>, Vec<keel_envelope::Envelope>) {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "sandbox = \"bubblewrap\"\n",
    )
    .unwrap();
    // A PATH with a shell but without bubblewrap.
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/bin/sh", bin.path().join("sh")).unwrap();
    let model = script(
        home.path(),
        serde_json::json!({"turns": [
            {"toolCalls": [
                {"name": "run_shell", "arguments": {"command": "echo one"}},
                {"name": "run_shell", "arguments": {"command": "echo two"}}
            ]},
            {"text": "ran"}
        ]}),
    );
    let out = keel()
        .args(["exec", "run", "--json", "--mode", mode, "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .env("PATH", bin.path())
        .output()
        .unwrap();
    let envs = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| codec::decode_envelope(l.as_bytes()).unwrap())
        .collect();
    (out.status.code(), envs)
}

#[test]
fn a_missing_sandbox_is_reported_once_as_a_warning() {
    // In `ask` mode a command the gate allows runs unsandboxed, with one warning.
    let (code, envs) = run_without_a_sandbox("ask");
    assert_eq!(code, Some(0));
    let warnings: Vec<_> = envs
        .iter()
        .filter(|e| matches!(&e.event, Event::Warning(w) if w.details["reason"] == "sandbox_unavailable"))
        .collect();
    assert_eq!(warnings.len(), 1, "warned once");
    let completed = envs
        .iter()
        .filter(|e| e.type_name() == "tool.call.completed")
        .count();
    assert_eq!(completed, 2);
}

#[test]
fn auto_mode_refuses_commands_when_no_sandbox_can_run() {
    let (code, envs) = run_without_a_sandbox("auto");
    assert_eq!(code, Some(0));
    let failed: Vec<_> = envs
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallFailed(f) => Some(f.error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    for f in &failed {
        assert_eq!(f.code, keel_envelope::ErrorCode::SandboxUnavailable);
        assert!(f.message.contains("sandbox = \"off\""), "{}", f.message);
    }
    assert_eq!(
        envs.iter()
            .filter(|e| e.type_name() == "tool.call.completed")
            .count(),
        0
    );
}

#[test]
fn resume_opens_a_stored_session() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = script(
        home.path(),
        serde_json::json!({"turns": [{"text": "first answer"}]}),
    );
    let out = keel()
        .args(["exec", "remember this", "--json", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let sid = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .find_map(|l| codec::decode_envelope(l.as_bytes()).ok()?.session_id)
        .unwrap();
    // `keel resume [ID]` in the workspace, answering `/status` at its prompt.
    let status = |id: Option<&str>| {
        let mut child = keel()
            .arg("resume")
            .args(id)
            .arg("--workspace")
            .arg(ws.path())
            .args(["--model", &model])
            .env("KEEL_HOME", home.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"/status\n").unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let stdout = status(Some(&sid));
    assert!(stdout.contains(&sid), "{stdout}");
    // Without an id: the workspace's most recent session; none in another workspace.
    let stdout = status(None);
    assert!(stdout.contains(&sid), "{stdout}");
    let elsewhere = tempfile::tempdir().unwrap();
    let out = keel()
        .args(["resume", "--workspace"])
        .arg(elsewhere.path())
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no stored session in"));
    // Bad input.
    let out = keel()
        .args(["resume", "--model"])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = keel()
        .args(["resume", "sess_nope", "--workspace"])
        .arg(ws.path())
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sess_nope"));
}

#[test]
fn patch_preview_in_the_config_turns_edits_into_patches() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let model = write_script(home.path());
    let run = |config: &str| {
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        let out = keel()
            .args([
                "exec",
                "write it",
                "--json",
                "--mode",
                "auto-edit",
                "--workspace",
            ])
            .arg(ws.path())
            .args(["--model", &model])
            .env("KEEL_HOME", home.path())
            .output()
            .unwrap();
        let types: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                codec::decode_envelope(l.as_bytes())
                    .unwrap()
                    .type_name()
                    .to_owned()
            })
            .collect();
        (out.status.code(), types)
    };
    let (code, types) = run("patchPreview = true\n");
    assert_eq!(code, Some(0));
    assert!(types.iter().any(|t| t == "patch.proposed"), "{types:?}");
    assert!(!ws.path().join("out.txt").exists(), "nothing written");
    let (code, types) = run("patchPreview = false\n");
    assert_eq!(code, Some(0));
    assert!(!types.iter().any(|t| t == "patch.proposed"), "{types:?}");
    assert!(ws.path().join("out.txt").exists());
    // A bad value is a set-up error that names the key and its line.
    std::fs::write(home.path().join("config.toml"), "\npatchPreview = 1\n").unwrap();
    let out = keel()
        .args(["exec", "x", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("patchPreview") && err.contains(":2:"), "{err}");
}

#[test]
fn exec_renders_the_model_s_markdown_as_plain_text_off_a_terminal() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let text = "# Result\n\nThe **answer** is *here*:\n\n- one\n- two\n\n| k | v |\n|---|---|\n| a | 1 |\n\n```rust\nfn main() {}\n```\nBye \u{1b}]0;pwned\u{7}\u{1b}[2Jnow.";
    let model = script(home.path(), serde_json::json!({"turns": [{"text": text}]}));
    let out = keel()
        .args(["exec", "show me", "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        !stdout.contains('\u{1b}'),
        "no escapes off a terminal: {stdout:?}"
    );
    assert!(
        !stdout.contains("pwned"),
        "the OSC string is removed whole: {stdout:?}"
    );
    for gone in ["**", "# Result", "```", "|---|"] {
        assert!(!stdout.contains(gone), "{gone:?} left in:\n{stdout}");
    }
    for kept in [
        "Result\n",
        "The answer is here:",
        "- one\n- two",
        "k | v",
        "a | 1",
        "    fn main() {}",
        "Bye now.",
    ] {
        assert!(stdout.contains(kept), "{kept:?} missing from:\n{stdout}");
    }
}
