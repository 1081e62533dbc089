//! The bridge driver: a real `keel bridge` process driven over its stdio. Command
//! lines go in through a writer thread (the test never blocks on a full pipe while
//! the bridge waits for its stdout to be read); every stdout line must be an
//! envelope, read by a reader thread that a test can pause (a host that stops
//! reading).
//!
//! ```no_run
//! use keel_testsupport::bridge::{command, Bridge, Setup};
//! # fn demo(home: &std::path::Path, ws: &std::path::Path) {
//! let mut b = Bridge::start(Setup::new("target/debug/keel", home, ws, "scripted:s.json"));
//! b.send(&command("session.start", "r1", None, serde_json::json!({})));
//! let started = b.answer("r1");
//! # let _ = started; }
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use keel_envelope::{codec, Envelope};
use serde_json::Value;

/// How long the driver waits for one line before it calls the bridge hung.
pub const HANG: Duration = Duration::from_secs(120);

/// How to start a bridge.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    /// The `keel` binary (`env!("CARGO_BIN_EXE_keel")` in the CLI's tests).
    pub bin: &'a str,
    /// `KEEL_HOME`.
    pub home: &'a Path,
    /// `--workspace`.
    pub workspace: &'a Path,
    /// `--model`.
    pub model: &'a str,
    /// A `ulimit -n` for the process.
    pub max_files: Option<u64>,
    /// More arguments after the workspace and the model.
    pub extra_args: &'a [&'a str],
    /// More environment variables (`KEEL_MODEL` is removed and `KEEL_LOG` is `warn`
    /// unless set here).
    pub env: &'a [(&'a str, &'a str)],
}

impl<'a> Setup<'a> {
    /// `bin bridge --model model --workspace workspace` with `KEEL_HOME=home`, nothing
    /// more.
    pub fn new(bin: &'a str, home: &'a Path, workspace: &'a Path, model: &'a str) -> Self {
        Self {
            bin,
            home,
            workspace,
            model,
            max_files: None,
            extra_args: &[],
            env: &[],
        }
    }
}

/// One line of the bridge's output.
#[derive(Debug)]
enum Line {
    Envelope(Box<Envelope>),
    /// Not an envelope: always a failure (stdout carries envelopes only).
    Garbage(String),
}

/// A running `keel bridge`, killed when dropped.
#[derive(Debug)]
pub struct Bridge {
    child: Child,
    input: Option<mpsc::Sender<Vec<u8>>>,
    lines: mpsc::Receiver<Line>,
    /// The process's stderr, in a folder of its own.
    stderr: PathBuf,
    _stderr_dir: tempfile::TempDir,
    /// While true, the reader thread stops reading stdout.
    paused: Arc<(Mutex<bool>, Condvar)>,
    ready: Option<Envelope>,
    /// Every envelope read so far, in order (`runtime.ready` first).
    pub seen: Vec<Envelope>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Bridge {
    /// Starts the bridge and reads its `runtime.ready`. Panics if it cannot start or
    /// says anything else first.
    pub fn start(setup: Setup<'_>) -> Bridge {
        let stderr_dir = tempfile::tempdir().expect("a folder for the bridge's stderr");
        let stderr = stderr_dir.path().join("stderr.txt");
        let mut cmd = match setup.max_files {
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(setup.bin);
                c
            }
            None => Command::new(setup.bin),
        };
        cmd.arg("bridge")
            .arg("--model")
            .arg(setup.model)
            .arg("--workspace")
            .arg(setup.workspace)
            .args(setup.extra_args)
            .env("KEEL_HOME", setup.home)
            .env_remove("KEEL_MODEL")
            .env("KEEL_LOG", "warn")
            .envs(setup.env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("the bridge's stderr file"));
        let mut child = cmd.spawn().expect("start keel bridge");
        let mut stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        std::thread::spawn(move || {
            for chunk in rx {
                if stdin
                    .write_all(&chunk)
                    .and_then(|()| stdin.flush())
                    .is_err()
                {
                    break;
                }
            }
        });
        let (ltx, lines) = mpsc::channel();
        let paused = Arc::new((Mutex::new(false), Condvar::new()));
        let gate = paused.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(1 << 16, stdout);
            let mut buf = Vec::new();
            loop {
                {
                    let (flag, cv) = &*gate;
                    let mut p = lock(flag);
                    while *p {
                        p = cv.wait(p).unwrap_or_else(|e| e.into_inner());
                    }
                }
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if buf.last() != Some(&b'\n') {
                    // The end of the output without a newline: a line a kill cut in
                    // the middle of its write. No host takes it as delivered.
                    break;
                }
                let line = match codec::decode_envelope(&buf) {
                    Ok(env) => Line::Envelope(Box::new(env)),
                    Err(_) => Line::Garbage(String::from_utf8_lossy(&buf).into_owned()),
                };
                if ltx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut bridge = Bridge {
            child,
            input: Some(tx),
            lines,
            stderr,
            _stderr_dir: stderr_dir,
            paused,
            ready: None,
            seen: Vec::new(),
        };
        let ready = bridge.next().unwrap_or_else(|| {
            panic!("the bridge wrote nothing; stderr: {}", bridge.stderr_text())
        });
        assert_eq!(ready.type_name(), "runtime.ready", "{ready:?}");
        bridge.ready = Some(ready);
        bridge
    }

    /// The `runtime.ready` the bridge started with.
    pub fn ready(&self) -> &Envelope {
        self.ready.as_ref().expect("start read runtime.ready")
    }

    /// Stops (or resumes) reading the bridge's stdout. Lines already read stay
    /// available to [`Bridge::next`].
    pub fn pause_reading(&self, pause: bool) {
        let (flag, cv) = &*self.paused;
        *lock(flag) = pause;
        cv.notify_all();
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command line (a newline is added).
    pub fn send(&self, line: &str) {
        self.send_bytes(format!("{line}\n").into_bytes());
    }

    /// Sends raw bytes.
    pub fn send_bytes(&self, bytes: Vec<u8>) {
        if let Some(tx) = &self.input {
            let _ = tx.send(bytes);
        }
    }

    /// Reads until `pred` holds for an envelope; returns everything read, that one
    /// last.
    pub fn until(&mut self, mut pred: impl FnMut(&Envelope) -> bool) -> Vec<Envelope> {
        let mut out = Vec::new();
        loop {
            let env = self
                .next()
                .unwrap_or_else(|| panic!("output ended; stderr: {}", self.stderr_text()));
            let done = pred(&env);
            out.push(env);
            if done {
                return out;
            }
        }
    }

    /// Reads until an envelope of `ty` on `request_id`; returns everything read.
    pub fn until_on(&mut self, request_id: &str, ty: &str) -> Vec<Envelope> {
        self.until(|e| e.request_id == request_id && e.type_name() == ty)
    }

    /// The first envelope on `request_id`.
    pub fn first_on(&mut self, request_id: &str) -> Envelope {
        self.last_until(|e| e.request_id == request_id)
    }

    /// The answer to command `request_id`: the first envelope carrying it, or
    /// answering it through `meta.replyTo`.
    pub fn answer(&mut self, request_id: &str) -> Envelope {
        self.last_until(|e| {
            e.request_id == request_id
                || e.meta.as_ref().and_then(|m| m.reply_to.as_deref()) == Some(request_id)
        })
    }

    /// The first envelope, as its JSON, for which `pred` holds.
    pub fn until_json(&mut self, mut pred: impl FnMut(&Value) -> bool) -> Value {
        loop {
            let env = self
                .next()
                .unwrap_or_else(|| panic!("output ended; stderr: {}", self.stderr_text()));
            let v = serde_json::to_value(&env).expect("an envelope is JSON");
            if pred(&v) {
                return v;
            }
        }
    }

    fn last_until(&mut self, pred: impl FnMut(&Envelope) -> bool) -> Envelope {
        let mut read = self.until(pred);
        read.pop().expect("until returns what it stopped at")
    }

    /// Starts a session with `payload` (JSON text) and returns its id.
    pub fn start_session(&mut self, request_id: &str, payload: &str) -> String {
        self.send(&format!(
            r#"{{"version":"1.0","type":"session.start","requestId":"{request_id}","payload":{payload}}}"#
        ));
        let started = self.until_on(request_id, "session.started");
        started
            .last()
            .and_then(|e| e.session_id.clone())
            .expect("session.started carries the session")
    }

    /// Sends `request.send` with `payload` (JSON text) to session `session`.
    pub fn request(&mut self, session: &str, request_id: &str, payload: &str) {
        self.send(&format!(
            r#"{{"version":"1.0","type":"request.send","requestId":"{request_id}","sessionId":"{session}","payload":{payload}}}"#
        ));
    }

    /// Shuts the bridge down with `runtime.shutdown` and checks that it stops and
    /// exits with success.
    pub fn stop(mut self) {
        self.send(r#"{"version":"1.0","type":"runtime.shutdown","requestId":"bye"}"#);
        self.until_on("bye", "runtime.stopped");
        assert!(self.wait(), "stderr: {}", self.stderr_text());
    }

    /// Kills the process with SIGKILL and reads what it had written before.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.input = None;
        while self.next().is_some() {}
    }

    /// Closes the bridge's stdin (an end of input, which stops it).
    pub fn close_input(&mut self) {
        self.input = None;
    }

    /// Waits for the process to exit (after `runtime.shutdown`, or an end of input);
    /// reads the rest of its output. Returns whether it exited with success.
    pub fn wait(&mut self) -> bool {
        while self.next().is_some() {}
        self.input = None;
        self.child.wait().is_ok_and(|s| s.success())
    }

    /// What the process wrote on stderr so far.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Fails if the process reported a panic.
    pub fn assert_no_panic(&self) {
        let err = self.stderr_text();
        assert!(!err.contains("panicked"), "the bridge panicked: {err}");
    }

    /// How many files the process has open.
    pub fn open_files(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// A `/proc/<pid>/status` figure in KiB (`VmRSS:`, `VmHWM:`).
    pub fn status_kib(&self, key: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

/// The envelopes the bridge writes, as they come.
impl Iterator for Bridge {
    type Item = Envelope;

    /// The next envelope, or `None` at the end of the output. Panics on a line that
    /// is not an envelope, or when nothing comes for [`HANG`].
    fn next(&mut self) -> Option<Envelope> {
        match self.lines.recv_timeout(HANG) {
            Ok(Line::Envelope(env)) => {
                self.seen.push((*env).clone());
                Some(*env)
            }
            Ok(Line::Garbage(g)) => panic!("stdout carried a line that is not an envelope: {g:?}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!(
                    "the bridge hung: nothing for {HANG:?}; stderr: {}",
                    self.stderr_text()
                )
            }
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A command line: `{"version":"1.0","type":ty,"requestId":rid,"sessionId":…,"payload":…}`
/// (no `sessionId` when `session` is `None`).
pub fn command(ty: &str, rid: &str, session: Option<&str>, payload: Value) -> String {
    let mut v =
        serde_json::json!({"version": "1.0", "type": ty, "requestId": rid, "payload": payload});
    if let Some(s) = session {
        v["sessionId"] = Value::String(s.to_owned());
    }
    v.to_string()
}
