//! No process outlives the runtime: a real `keel bridge` or `keel serve` process is
//! killed with SIGKILL at a seeded random moment 0–50 ms after `tool.call.started` of a
//! `run_shell` call, while two busy `yes` loops load the cores, with bubblewrap, with
//! Landlock and with no sandbox. After each kill no process of the call may remain:
//! they are found by the call's marker (`KEEL_RUN_ID=<keel's pid>-…` in
//! `/proc/<pid>/environ`) and by a unique argument of the command line.
//!
//! Each kill waits (at most [`SETTLE`], a hang guard, not a timing figure) for the
//! call's processes to go, then fails naming what survived.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keel_envelope::{codec, Envelope, Event};
use serde_json::json;

use crate::common::*;

/// How long the processes of a killed runtime may take to go.
const SETTLE: Duration = Duration::from_secs(10);

/// Kills of the bridge per sandbox.
const BRIDGE_KILLS: usize = 100;

/// Kills of the daemon per sandbox (about 100 in all).
const DAEMON_KILLS: usize = 34;

/// Two busy loops on the two cores for the life of the value.
struct Load(Vec<Child>);

impl Load {
    fn start() -> Load {
        Load(
            (0..2)
                .map(|_| {
                    Command::new("yes")
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A process still running after its runtime was killed.
struct Survivor {
    pid: u32,
    cmdline: String,
}

/// Processes carrying `KEEL_RUN_ID=<runtime>-…` or `token` in their command line.
fn processes_of(runtime: u32, token: &str) -> Vec<Survivor> {
    let needle = format!("KEEL_RUN_ID={runtime}-");
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // A zombie waits for its parent to reap it: it runs nothing.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .unwrap_or("");
        if state.is_empty() || state == "Z" || state == "X" {
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let marked = environ
            .split(|b| *b == 0)
            .any(|v| v.starts_with(needle.as_bytes()));
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        if marked || cmdline.contains(token) {
            out.push(Survivor { pid, cmdline });
        }
    }
    out
}

/// Waits until nothing of the killed runtime's call runs; fails naming what survived
/// (and kills it, so one failure does not load the next rounds).
fn assert_nothing_survives(runtime: u32, token: &str, what: &str) {
    let start = Instant::now();
    loop {
        let left = processes_of(runtime, token);
        if left.is_empty() {
            return;
        }
        if start.elapsed() > SETTLE {
            for s in &left {
                let _ = Command::new("kill")
                    .args(["-KILL", &s.pid.to_string()])
                    .status();
            }
            let names: Vec<String> = left
                .iter()
                .map(|s| format!("{} {}", s.pid, s.cmdline))
                .collect();
            panic!("{what}: processes outlived the runtime: {names:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn config(home: &Path, sandbox: &str) {
    std::fs::create_dir_all(home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!("sandbox = \"{sandbox}\"\n"),
    )
    .unwrap();
}

/// A script whose first turn runs `command` with `run_shell`.
fn shell_script(dir: &Path, name: &str, command: &str) -> String {
    script(
        dir,
        name,
        json!({"turns": [
            {"toolCalls": [{"name": "run_shell", "arguments": {"command": command}}]},
            {"text": "done"}
        ]}),
    )
}

/// The command of round `n`: a shell with two `sleep`s of a unique length (the
/// token), one of them in the background.
fn command_of(n: usize) -> (String, String) {
    let token = format!("31.{:06}", 100_000 + n);
    (format!("sleep {token} & sleep {token}; wait"), token)
}

/// A bridge on `model` with a session in `auto` mode and its request `r` sent.
fn bridge_running(home: &Path, ws: &Path, model: &str) -> Bridge {
    let mut b = Bridge::start(Setup::new(KEEL, home, ws, model));
    b.send(&command(
        "session.start",
        "s",
        None,
        json!({"permissionMode": "auto"}),
    ));
    let sid = session_of(b.until_on("s", "session.started").last().unwrap());
    b.send(&command(
        "request.send",
        "r",
        Some(&sid),
        json!({"message": "go"}),
    ));
    b
}

/// Checks once that the sandbox asked for is the one commands run in.
fn check_sandbox_bridge(sandbox: &str) {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    config(home.path(), sandbox);
    let model = shell_script(home.path(), "probe.json", "echo probe");
    let mut b = bridge_running(home.path(), ws.path(), &model);
    let got = b.until_on("r", "tool.call.completed");
    let Event::ToolCallCompleted(c) = &got.last().unwrap().event else {
        panic!("{got:?}")
    };
    let want = if sandbox == "off" { "none" } else { sandbox };
    assert_eq!(
        c.result["sandbox"],
        json!(want),
        "commands do not run in {sandbox} here: {c:?}"
    );
}

fn kills_through_the_bridge(sandbox: &str, seed: u64) {
    check_sandbox_bridge(sandbox);
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    config(home.path(), sandbox);
    let mut rng = Rng::new(seed);
    let _load = Load::start();
    for n in 0..BRIDGE_KILLS {
        let (cmd, token) = command_of(n);
        let model = shell_script(home.path(), &format!("s{n}.json"), &cmd);
        let mut b = bridge_running(home.path(), ws.path(), &model);
        b.until_on("r", "tool.call.started");
        std::thread::sleep(Duration::from_micros(rng.range(0, 50_000)));
        let pid = b.pid();
        b.kill();
        b.assert_no_panic();
        assert_nothing_survives(pid, &token, &format!("bridge, {sandbox}, kill {n}"));
    }
}

/// A running `keel serve` and one client connection to it.
struct Daemon {
    child: Child,
    lines: BufReader<UnixStream>,
    out: UnixStream,
}

impl Daemon {
    fn start(home: &Path, ws: &Path, model: &str, socket: &Path) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .arg("serve")
            .arg("--socket")
            .arg(socket)
            .arg("--workspace")
            .arg(ws)
            .arg("--model")
            .arg(model)
            .args(["--idle-exit", "0"])
            .env("KEEL_HOME", home)
            .env_remove("KEEL_SOCKET")
            .env_remove("KEEL_MODEL")
            .env("KEEL_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let s = loop {
            if let Ok(s) = UnixStream::connect(socket) {
                break s;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("keel serve exited: {status}");
            }
            assert!(start.elapsed() < HANG, "keel serve never listened");
            std::thread::sleep(Duration::from_millis(2));
        };
        s.set_read_timeout(Some(HANG)).unwrap();
        let out = s.try_clone().unwrap();
        let mut d = Daemon {
            child,
            lines: BufReader::new(s),
            out,
        };
        assert_eq!(d.next().type_name(), "runtime.ready");
        d
    }

    fn send(&mut self, line: String) {
        writeln!(self.out, "{line}").unwrap();
    }

    fn next(&mut self) -> Envelope {
        let mut line = String::new();
        let n = self.lines.read_line(&mut line).unwrap();
        assert!(n > 0, "the daemon closed the connection");
        codec::decode_envelope(line.as_bytes()).unwrap()
    }

    fn until_on(&mut self, rid: &str, ty: &str) -> Envelope {
        loop {
            let e = self.next();
            if e.request_id == rid && e.type_name() == ty {
                return e;
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kills_through_the_daemon(sandbox: &str, seed: u64) {
    check_sandbox_bridge(sandbox);
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let run = tempfile::tempdir().unwrap();
    config(home.path(), sandbox);
    let mut rng = Rng::new(seed);
    let _load = Load::start();
    for n in 0..DAEMON_KILLS {
        let (cmd, token) = command_of(n);
        let model = shell_script(home.path(), &format!("s{n}.json"), &cmd);
        let socket: PathBuf = run.path().join(format!("d{n}")).join("keel.sock");
        let mut d = Daemon::start(home.path(), ws.path(), &model, &socket);
        d.send(command(
            "session.start",
            "s",
            None,
            json!({"permissionMode": "auto"}),
        ));
        let sid = session_of(&d.until_on("s", "session.started"));
        d.send(command(
            "request.send",
            "r",
            Some(&sid),
            json!({"message": "go"}),
        ));
        d.until_on("r", "tool.call.started");
        std::thread::sleep(Duration::from_micros(rng.range(0, 50_000)));
        let pid = d.child.id();
        let _ = d.child.kill();
        let _ = d.child.wait();
        assert_nothing_survives(pid, &token, &format!("daemon, {sandbox}, kill {n}"));
    }
}

#[test]
fn a_killed_bridge_leaves_no_process_with_bubblewrap() {
    kills_through_the_bridge("bubblewrap", 0x5EED_0101);
}

#[test]
fn a_killed_bridge_leaves_no_process_with_landlock() {
    kills_through_the_bridge("landlock", 0x5EED_0102);
}

#[test]
fn a_killed_bridge_leaves_no_process_without_a_sandbox() {
    kills_through_the_bridge("off", 0x5EED_0103);
}

#[test]
fn a_killed_daemon_leaves_no_process_with_bubblewrap() {
    kills_through_the_daemon("bubblewrap", 0x5EED_0201);
}

#[test]
fn a_killed_daemon_leaves_no_process_with_landlock() {
    kills_through_the_daemon("landlock", 0x5EED_0202);
}

#[test]
fn a_killed_daemon_leaves_no_process_without_a_sandbox() {
    kills_through_the_daemon("off", 0x5EED_0203);
}
