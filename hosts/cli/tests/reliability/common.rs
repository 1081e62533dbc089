//! A real `keel bridge` process driven over its stdio, and helpers shared by the
//! reliability tests.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use keel_envelope::{codec, Envelope, Event, SequenceChecker};

/// How long a test waits for one line before it calls the bridge hung.
pub const HANG: Duration = Duration::from_secs(120);

/// Whether the full (long) versions of the tests run: `KEEL_RELIABILITY_FULL=1`.
pub fn full() -> bool {
    std::env::var("KEEL_RELIABILITY_FULL").is_ok_and(|v| v == "1")
}

/// A small seeded generator (xorshift64*), so every run kills at the same points.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(n);
        out
    }
}

/// Writes a scripted model's script and returns its `scripted:` selection.
pub fn script(dir: &Path, name: &str, body: serde_json::Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body.to_string()).unwrap();
    format!("scripted:{}", p.display())
}

/// One line of the bridge's output.
#[derive(Debug)]
pub enum Line {
    Envelope(Box<Envelope>),
    /// Not an envelope: always a failure (stdout carries envelopes only).
    Garbage(String),
}

/// A running `keel bridge`.
pub struct Bridge {
    child: Child,
    input: Option<mpsc::Sender<Vec<u8>>>,
    lines: mpsc::Receiver<Line>,
    stderr: PathBuf,
    /// While true, the reader thread stops reading stdout (a host that stops reading).
    paused: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    /// Every envelope read so far, in order.
    pub seen: Vec<Envelope>,
}

/// How to start a bridge.
pub struct Setup<'a> {
    pub home: &'a Path,
    pub workspace: &'a Path,
    pub model: &'a str,
    /// A `ulimit -n` for the process.
    pub max_files: Option<u64>,
    pub extra_args: &'a [&'a str],
}

impl Bridge {
    pub fn start(setup: Setup<'_>) -> Bridge {
        let stderr = setup.home.join(format!(
            "bridge-stderr-{}.txt",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let bin = env!("CARGO_BIN_EXE_keel");
        let mut cmd = match setup.max_files {
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(bin);
                c
            }
            None => Command::new(bin),
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
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        // A writer thread, so the test never blocks on a full stdin pipe while the
        // bridge waits for its stdout to be read.
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        std::thread::spawn(move || {
            for chunk in rx {
                if stdin.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
        let (ltx, lines) = mpsc::channel();
        let paused = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let gate = paused.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::with_capacity(1 << 16, stdout);
            let mut buf = Vec::new();
            loop {
                {
                    let (lock, cv) = &*gate;
                    let mut p = lock.lock().unwrap();
                    while *p {
                        p = cv.wait(p).unwrap();
                    }
                }
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if buf.last() != Some(&b'\n') {
                    // The end of the output without a newline: a line the kill cut in
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
            paused,
            seen: Vec::new(),
        };
        let ready = bridge.next().expect("the bridge wrote nothing");
        assert_eq!(ready.type_name(), "runtime.ready");
        bridge
    }

    /// Stops (or resumes) reading the bridge's stdout. Lines already read stay
    /// available to [`Bridge::next`].
    pub fn pause_reading(&self, pause: bool) {
        let (lock, cv) = &*self.paused;
        *lock.lock().unwrap() = pause;
        cv.notify_all();
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command line (a newline is added).
    pub fn send(&self, line: &str) {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.send_bytes(bytes);
    }

    /// Sends raw bytes.
    pub fn send_bytes(&self, bytes: Vec<u8>) {
        if let Some(tx) = &self.input {
            let _ = tx.send(bytes);
        }
    }

    /// The next envelope, or `None` at the end of the output. Panics on a line that
    /// is not an envelope, or when nothing comes for [`HANG`].
    pub fn next(&mut self) -> Option<Envelope> {
        self.next_within(HANG)
    }

    fn next_within(&mut self, wait: Duration) -> Option<Envelope> {
        match self.lines.recv_timeout(wait) {
            Ok(Line::Envelope(env)) => {
                self.seen.push((*env).clone());
                Some(*env)
            }
            Ok(Line::Garbage(g)) => panic!("stdout carried a line that is not an envelope: {g:?}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!(
                    "the bridge hung: nothing for {wait:?}; stderr: {}",
                    self.stderr_text()
                )
            }
        }
    }

    /// Reads until `pred` holds for an envelope; returns everything read.
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

    /// Reads until an envelope of `ty` on `request_id`.
    pub fn until_on(&mut self, request_id: &str, ty: &str) -> Vec<Envelope> {
        self.until(|e| e.request_id == request_id && e.type_name() == ty)
    }

    /// The answer to command `request_id`: the first envelope carrying it, or
    /// answering it through `meta.replyTo`.
    pub fn answer(&mut self, request_id: &str) -> Envelope {
        self.until(|e| {
            e.request_id == request_id
                || e.meta.as_ref().and_then(|m| m.reply_to.as_deref()) == Some(request_id)
        })
        .pop()
        .unwrap()
    }

    /// Kills the process with SIGKILL and reads what it had written before.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.input = None;
        while self.next_within(HANG).is_some() {}
    }

    /// Waits for the process to exit (after `runtime.shutdown` or EOF); reads the
    /// rest of its output. Returns whether it exited with success.
    pub fn wait(&mut self) -> bool {
        while self.next().is_some() {}
        self.input = None;
        let status = self.child.wait().unwrap();
        status.success()
    }

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

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A command line.
pub fn command(ty: &str, rid: &str, session: Option<&str>, payload: serde_json::Value) -> String {
    let mut v =
        serde_json::json!({"version": "1.0", "type": ty, "requestId": rid, "payload": payload});
    if let Some(s) = session {
        v["sessionId"] = serde_json::Value::String(s.to_owned());
    }
    v.to_string()
}

/// A session's log as stored: its envelopes, and whether the last line was torn.
/// Panics if any other line is unreadable.
pub fn read_log(home: &Path, session: &str) -> (Vec<Envelope>, bool) {
    let path = home.join("sessions").join(session).join("events.jsonl");
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    let mut out = Vec::new();
    let mut torn = false;
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        match rest.iter().position(|b| *b == b'\n') {
            Some(i) => {
                let line = &rest[..=i];
                let env = codec::decode_envelope(line).unwrap_or_else(|e| {
                    panic!(
                        "line {} of the log of {session} is unreadable: {e:?}",
                        out.len() + 1
                    )
                });
                out.push(env);
                rest = &rest[i + 1..];
            }
            None => {
                torn = true;
                break;
            }
        }
    }
    (out, torn)
}

/// Checks that `events` (one session's log, or what a host received of it) have
/// contiguous sequences per request.
pub fn assert_contiguous(events: &[Envelope]) {
    let mut checker = SequenceChecker::new();
    for e in events {
        checker.check(e).unwrap_or_else(|gap| {
            panic!("sequence gap {gap:?} at {} {}", e.request_id, e.type_name())
        });
    }
}

/// Checks the crash-safety rule: every event the host received of a session is in
/// its log, the same event (id, request, sequence); the events received first-hand
/// (not replayed) come in log order; the log has contiguous sequences. Returns the
/// log.
pub fn assert_log_holds(home: &Path, session: &str, seen: &[Envelope]) -> Vec<Envelope> {
    let (log, _torn) = read_log(home, session);
    assert_contiguous(&log);
    let at: HashMap<&str, usize> = log
        .iter()
        .enumerate()
        .map(|(i, e)| (e.event_id.as_str(), i))
        .collect();
    let mut last = None;
    for d in seen
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(session))
    {
        let Some(&i) = at.get(d.event_id.as_str()) else {
            // Not session events, so not logged: the bridge's answers to lines it could
            // not decode, and the error answering a command the session never took
            // (it was closed, or not open in this process).
            let refused = matches!(d.event, Event::Error(_) | Event::RequestRejected(_))
                && !log.iter().any(|l| l.request_id == d.request_id);
            if d.source == keel_envelope::Source::Bridge || refused {
                continue;
            }
            panic!(
                "delivered event {} {} #{} is not in the log",
                d.type_name(),
                d.request_id,
                d.sequence
            );
        };
        assert_eq!(
            (&d.request_id, d.sequence, d.type_name()),
            (&log[i].request_id, log[i].sequence, log[i].type_name())
        );
        let replayed = d.meta.as_ref().and_then(|m| m.replay) == Some(true);
        if !replayed {
            assert!(
                last.is_none_or(|l| i > l),
                "delivered event {} {} #{} is out of log order",
                d.type_name(),
                d.request_id,
                d.sequence
            );
            last = Some(i);
        }
    }
    log
}

/// Whether the host received every event of the session's log.
pub fn assert_saw_all(home: &Path, session: &str, seen: &[Envelope]) {
    let log = assert_log_holds(home, session, seen);
    let got: std::collections::HashSet<&str> = seen
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(session))
        .map(|e| e.event_id.as_str())
        .collect();
    let missing: Vec<String> = log
        .iter()
        .filter(|e| !got.contains(e.event_id.as_str()))
        .map(|e| format!("{} {} #{}", e.type_name(), e.request_id, e.sequence))
        .collect();
    assert!(missing.is_empty(), "never delivered: {missing:?}");
}

/// The session id in a `session.started` answer.
pub fn session_of(env: &Envelope) -> String {
    assert!(
        matches!(
            env.event,
            Event::SessionStarted(_) | Event::SessionResumed(_)
        ),
        "{env:?}"
    );
    env.session_id.clone().unwrap()
}
