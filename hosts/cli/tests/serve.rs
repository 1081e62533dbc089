//! `keel serve`, `keel attach` and `keel sessions list` as real processes: the daemon
//! on a socket in a private temporary directory, clients speaking the wire protocol,
//! the REPL in a pseudo-terminal. Nothing asserts on timing; every wait has a hang
//! guard.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_envelope::{codec, Envelope, Event};
use portable_pty::{native_pty_system, CommandBuilder, PtySize};

const HANG_GUARD: Duration = Duration::from_secs(60);

struct Dirs {
    root: tempfile::TempDir,
    workspace: PathBuf,
    home: PathBuf,
    script: PathBuf,
    socket: PathBuf,
}

fn dirs(turns: serde_json::Value) -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("project");
    let home = root.path().join("home");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let script = root.path().join("script.json");
    std::fs::write(&script, serde_json::json!({ "turns": turns }).to_string()).unwrap();
    // The socket's own directory, private (0700), created by the daemon.
    let socket = root.path().join("run").join("keel.sock");
    Dirs {
        root,
        workspace,
        home,
        script,
        socket,
    }
}

fn serve(d: &Dirs, extra: &[&str]) -> Command {
    serve_on(d, &d.socket, extra)
}

fn serve_on(d: &Dirs, socket: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_keel"));
    cmd.arg("serve")
        .arg("--socket")
        .arg(socket)
        .arg("--workspace")
        .arg(&d.workspace)
        .arg("--model")
        .arg(format!("scripted:{}", d.script.display()))
        .args(extra)
        .env("KEEL_HOME", &d.home)
        .env_remove("KEEL_SOCKET")
        .env_remove("KEEL_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < HANG_GUARD, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(start.elapsed() < HANG_GUARD, "the process did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    child.stderr.take().unwrap().read_to_string(&mut s).unwrap();
    s
}

fn terminate(pid: u32) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status();
}

/// A client of the daemon on a plain blocking socket.
struct Conn {
    lines: BufReader<UnixStream>,
    out: UnixStream,
    ready: Envelope,
}

impl Conn {
    fn open(socket: &Path) -> Conn {
        let s = UnixStream::connect(socket).unwrap();
        s.set_read_timeout(Some(HANG_GUARD)).unwrap();
        let out = s.try_clone().unwrap();
        let mut lines = BufReader::new(s);
        let ready = read_envelope(&mut lines);
        assert_eq!(ready.type_name(), "runtime.ready");
        Conn { lines, out, ready }
    }
    fn pid(&self) -> u32 {
        match &self.ready.event {
            Event::RuntimeReady(r) => r.pid,
            _ => unreachable!(),
        }
    }
    fn send(&mut self, v: serde_json::Value) {
        writeln!(self.out, "{v}").unwrap();
    }
    fn next(&mut self) -> Envelope {
        read_envelope(&mut self.lines)
    }
    fn until(&mut self, pred: impl Fn(&Envelope) -> bool) -> Vec<Envelope> {
        let mut out = Vec::new();
        loop {
            let e = self.next();
            let done = pred(&e);
            out.push(e);
            if done {
                return out;
            }
        }
    }
}

fn read_envelope(lines: &mut BufReader<UnixStream>) -> Envelope {
    let mut line = String::new();
    let n = lines.read_line(&mut line).unwrap();
    assert!(n > 0, "the daemon closed the connection");
    codec::decode_envelope(line.as_bytes()).unwrap()
}

/// Stops a daemon by its pid when the test ends, however it ends.
struct Stop(u32);
impl Drop for Stop {
    fn drop(&mut self) {
        terminate(self.0);
    }
}

fn busy_cores() -> Vec<Child> {
    (0..2)
        .map(|_| {
            Command::new("sh")
                .arg("-c")
                .arg("while :; do :; done")
                .spawn()
                .unwrap()
        })
        .collect()
}

#[test]
fn two_daemons_started_at_once_end_with_one_listening() {
    let mut load = busy_cores();
    for round in 0..4 {
        let d = dirs(serde_json::json!([]));
        if round % 2 == 1 {
            std::fs::create_dir_all(d.socket.parent().unwrap()).unwrap();
            std::fs::set_permissions(
                d.socket.parent().unwrap(),
                std::fs::Permissions::from_mode(0o700),
            )
            .unwrap();
            // A daemon that died: its socket file is left behind.
            drop(std::os::unix::net::UnixListener::bind(&d.socket).unwrap());
        }
        let mut children: Vec<Child> = (0..3)
            .map(|_| serve(&d, &["--idle-exit", "0"]).spawn().unwrap())
            .collect();
        // All but one give up with exit code 4, saying where the daemon is.
        let mut refused = 0;
        wait_until("the losers to exit", || {
            let mut done = 0;
            for c in children.iter_mut() {
                if c.try_wait().unwrap().is_some() {
                    done += 1;
                }
            }
            done == 2
        });
        let mut alive = None;
        for (i, c) in children.iter_mut().enumerate() {
            match c.try_wait().unwrap() {
                Some(status) => {
                    assert_eq!(status.code(), Some(4), "round {round}");
                    let err = stderr_of(c);
                    assert!(err.contains("already listens on"), "{err}");
                    assert!(err.contains(&d.socket.display().to_string()), "{err}");
                    refused += 1;
                }
                None => alive = Some(i),
            }
        }
        assert_eq!(refused, 2);
        let mut winner = children.swap_remove(alive.unwrap());
        let conn = Conn::open(&d.socket);
        assert_eq!(conn.pid(), winner.id(), "the one still running listens");
        let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(d.socket.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        terminate(winner.id());
        let status = wait_exit(&mut winner);
        assert_eq!(status.code(), Some(0), "{}", stderr_of(&mut winner));
        assert!(!d.socket.exists(), "the socket is removed on exit");
        drop(conn);
    }
    for c in &mut load {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn an_unsafe_socket_directory_is_refused() {
    let d = dirs(serde_json::json!([]));
    let open_dir = d.root.path().join("shared");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = serve_on(&d, &open_dir.join("keel.sock"), &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to put the socket in"), "{err}");
    assert!(err.contains("lets everyone write to it"), "{err}");
    assert!(!open_dir.join("keel.sock").exists());
}

#[test]
fn sessions_list_and_delete_ask_the_daemon_when_one_runs() {
    let d = dirs(serde_json::json!([{ "text": "hi" }]));
    let mut daemon = serve(&d, &["--idle-exit", "0"]).spawn().unwrap();
    let _stop = Stop(daemon.id());
    wait_until("the daemon", || UnixStream::connect(&d.socket).is_ok());
    let mut c = Conn::open(&d.socket);
    c.send(serde_json::json!({"version": "1.0", "type": "session.start", "requestId": "s1", "payload": {"title": "held by the daemon"}}));
    let started = c.until(|e| e.type_name() == "session.started");
    let sid = started.last().unwrap().session_id.clone().unwrap();
    // Another KEEL_HOME, empty: only the daemon knows the session.
    let other_home = d.root.path().join("other-home");
    std::fs::create_dir_all(&other_home).unwrap();
    let list = |socket: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(["sessions", "list", "--json"])
            .env("KEEL_HOME", &other_home)
            .env("KEEL_SOCKET", socket)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array().unwrap().clone()
    };
    let listed = list(&d.socket);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["sessionId"], sid.as_str());
    assert_eq!(listed[0]["title"], "held by the daemon");
    // Deleting goes through the daemon too: it closes the open session (the watching
    // client sees why), and the session is gone from its list.
    let delete = |id: &str| {
        Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(["sessions", "delete", id])
            .env("KEEL_HOME", &other_home)
            .env("KEEL_SOCKET", &d.socket)
            .output()
            .unwrap()
    };
    let out = delete("sess_unknown");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sess_unknown"));
    let out = delete(&sid);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let closed = c.until(|e| e.type_name() == "session.closed");
    match &closed.last().unwrap().event {
        Event::SessionClosed(p) => assert_eq!(p.reason, "deleted"),
        _ => unreachable!(),
    }
    assert!(list(&d.socket).is_empty());
    drop(c);
    terminate(daemon.id());
    assert_eq!(wait_exit(&mut daemon).code(), Some(0));
    // No daemon: the store of KEEL_HOME, empty.
    assert!(list(&d.socket).is_empty());
}

/// `keel attach` in a pseudo-terminal.
struct Term {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    output: Arc<Mutex<Vec<u8>>>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
    seen: usize,
}

impl Term {
    fn attach(d: &Dirs, extra: &[&str]) -> Term {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 50,
                cols: 140,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_keel"));
        cmd.arg("attach");
        for a in extra {
            cmd.arg(a);
        }
        cmd.arg("--model");
        cmd.arg(format!("scripted:{}", d.script.display()));
        cmd.cwd(&d.workspace);
        cmd.env("KEEL_HOME", &d.home);
        cmd.env("KEEL_SOCKET", &d.socket);
        cmd.env("TERM", "dumb");
        cmd.env("NO_COLOR", "1");
        cmd.env_remove("KEEL_MODEL");
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let output = Arc::new(Mutex::new(Vec::new()));
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Term {
            child,
            writer,
            output,
            _master: pair.master,
            seen: 0,
        }
    }
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).replace('\r', "")
    }
    fn expect(&mut self, text: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            let from = self.seen.min(screen.len());
            if let Some(i) = screen.get(from..).and_then(|s| s.find(text)) {
                let end = from + i + text.len();
                self.seen = end;
                return screen[from..end].to_owned();
            }
            assert!(
                start.elapsed() < HANG_GUARD,
                "waited for {text:?}; screen:\n{}",
                screen.get(from..).unwrap_or("")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    fn line(&mut self, text: &str) {
        self.writer.write_all(text.as_bytes()).unwrap();
        self.writer.write_all(b"\r").unwrap();
        self.writer.flush().unwrap();
    }
    fn exit_code(&mut self) -> u32 {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.exit_code();
            }
            assert!(start.elapsed() < HANG_GUARD, "keel attach did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
    }
}

#[test]
fn attach_starts_the_daemon_and_leaving_keeps_the_session_for_the_next_client() {
    let d = dirs(serde_json::json!([
        { "text": "First answer, from the daemon." },
        { "text": "Second answer, seen by two clients." }
    ]));
    assert!(!d.socket.exists());
    let mut t = Term::attach(&d, &[]);
    t.expect("ask › ");
    // The daemon runs now; a client learns its pid so that the test can stop it.
    let mut watcher = Conn::open(&d.socket);
    let _stop = Stop(watcher.pid());
    t.line("hello");
    t.expect("First answer, from the daemon.");
    t.expect("ask › ");
    t.line("/status");
    let status = t.expect("ask › ");
    let sid = status
        .split_whitespace()
        .find(|w| w.starts_with("sess_"))
        .unwrap()
        .to_owned();
    // Leaving detaches: the session stays in the daemon.
    t.line("/quit");
    t.expect("detached");
    assert_eq!(t.exit_code(), 0, "{}", t.screen());
    assert!(UnixStream::connect(&d.socket).is_ok(), "the daemon went on");

    // Back to it, with another client watching the same session.
    watcher.send(serde_json::json!({"version": "1.0", "type": "session.watch", "requestId": "w1", "payload": {"sessionId": sid}}));
    let watched = watcher.until(|e| e.type_name() == "session.watched");
    assert_eq!(watched.last().unwrap().request_id, "w1");
    let mut t = Term::attach(&d, &[&sid]);
    t.expect("ask › ");
    t.line("again");
    t.expect("Second answer, seen by two clients.");
    let seen = watcher.until(|e| e.type_name() == "session.completed");
    let text: String = seen
        .iter()
        .filter_map(|e| match &e.event {
            Event::AssistantDelta(p) => Some(p.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Second answer, seen by two clients.");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0);
}

/// `/fork` in `keel attach` switches to the fork while the parent goes on in the
/// daemon; `/new` then starts a fresh session there.
#[test]
fn fork_in_an_attached_repl_switches_to_the_fork_and_the_parent_goes_on_in_the_daemon() {
    // Each session of the daemon plays the script from its start, the fork too.
    let d = dirs(serde_json::json!([{ "text": "Scripted answer." }]));
    let mut t = Term::attach(&d, &[]);
    t.expect("ask › ");
    let mut watcher = Conn::open(&d.socket);
    let _stop = Stop(watcher.pid());
    t.line("hello");
    t.expect("Scripted answer.");
    t.expect("ask › ");
    t.line("/fork");
    let forked = t.expect("ask › ");
    let ids: Vec<&str> = forked
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|w| w.starts_with("sess_"))
        .collect();
    assert!(
        forked.contains("forked") && ids.len() >= 2,
        "no fork: {forked}"
    );
    let (parent, fork) = (ids[0].to_owned(), ids[1].to_owned());
    assert_ne!(parent, fork);
    assert!(forked.contains("2 messages"), "{forked}");

    // The REPL now talks to the fork: its request runs there, and the daemon holds both.
    watcher.send(serde_json::json!({"version": "1.0", "type": "session.watch", "requestId": "w1", "payload": {"sessionId": fork}}));
    watcher.until(|e| e.type_name() == "session.watched");
    t.line("again");
    t.expect("Scripted answer.");
    let seen = watcher.until(|e| e.type_name() == "session.completed");
    assert!(seen
        .iter()
        .all(|e| e.session_id.as_deref() == Some(fork.as_str())));
    t.expect("ask › ");
    t.line("/status");
    let status = t.expect("ask › ");
    assert!(status.contains(&fork), "{status}");
    watcher.send(serde_json::json!({"version": "1.0", "type": "session.list", "requestId": "l1", "payload": {}}));
    let answer = watcher.until(|e| e.request_id == "l1");
    let listed: Vec<String> = match &answer.last().unwrap().event {
        Event::SessionList(l) => l.sessions.iter().map(|s| s.session_id.clone()).collect(),
        other => panic!("not a list: {other:?}"),
    };
    assert!(
        listed.contains(&parent) && listed.contains(&fork),
        "{listed:?}"
    );

    // `/new` starts a fresh session in the daemon, and the REPL's requests go there.
    t.line("/new");
    let switched = t.expect(&format!("/resume {fork}"));
    let fresh = switched
        .split_whitespace()
        .find(|w| w.starts_with("sess_") && *w != fork && *w != parent)
        .unwrap_or_else(|| panic!("no new session: {switched}"))
        .to_owned();
    t.expect("ask › ");
    watcher.send(serde_json::json!({"version": "1.0", "type": "session.watch", "requestId": "w2", "payload": {"sessionId": fresh}}));
    watcher.until(|e| e.request_id == "w2");
    t.line("fresh start");
    t.expect("Scripted answer.");
    let seen = watcher.until(|e| e.type_name() == "session.completed");
    assert_eq!(
        seen.last().unwrap().session_id.as_deref(),
        Some(fresh.as_str())
    );
    t.expect("ask › ");
    t.line("/status");
    let status = t.expect("ask › ");
    assert!(
        status.contains(&fresh) && status.contains("messages   2"),
        "{status}"
    );
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "{}", t.screen());
}
