//! Load through the real bridge: many sessions at once, each sending requests that
//! make tool calls on the scripted model; a host that stops reading; thousands of
//! sessions under `ulimit -n 1024`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_envelope::{Envelope, Event, SequenceChecker};
use serde_json::json;

use crate::common::*;

fn requests_script(requests: usize) -> serde_json::Value {
    let mut turns = Vec::new();
    for r in 0..requests {
        turns.push(json!({"toolCalls": [
            {"name": "read_file", "arguments": {"path": "README.md"}},
            {"name": "list_dir", "arguments": {"path": "."}}
        ]}));
        turns.push(json!({"text": format!("Request {r} done.")}));
    }
    json!({"turns": turns})
}

struct Env {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
}

fn env(config: &str) -> Env {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("README.md"), "# Project\n\nA readme.\n").unwrap();
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    Env { home, ws }
}

/// Per-session bookkeeping of the load run.
#[derive(Default)]
struct Tracker {
    /// requestId → session index.
    owner: HashMap<String, usize>,
    sessions: Vec<String>,
    done: Vec<usize>,
    tools: HashMap<String, usize>,
    checker: SequenceChecker,
    events: usize,
}

impl Tracker {
    /// Checks one envelope; returns the session index and whether it ended a request.
    fn on(&mut self, env: &Envelope) -> Option<(usize, bool)> {
        self.checker.check(env).unwrap();
        self.events += 1;
        let &i = self.owner.get(&env.request_id)?;
        if let (Event::SessionStarted(_), Some(slot)) = (&env.event, self.sessions.get_mut(i)) {
            *slot = env.session_id.clone().unwrap();
        }
        if let Some(sid) = self.sessions.get(i) {
            assert_eq!(
                env.session_id.as_deref(),
                Some(sid.as_str()),
                "an event of request {} reached another session",
                env.request_id
            );
        }
        match &env.event {
            Event::ToolCallCompleted(_) => {
                *self.tools.entry(env.request_id.clone()).or_default() += 1
            }
            Event::ToolCallFailed(f) => panic!("a tool failed: {:?}", f.error),
            Event::Error(e) | Event::Warning(e) | Event::RequestRejected(e) => {
                panic!("{} on {}: {e:?}", env.type_name(), env.request_id)
            }
            Event::SessionInterrupted(_) => panic!("interrupted: {env:?}"),
            Event::SessionCompleted(_) => {
                assert_eq!(
                    self.tools.get(&env.request_id),
                    Some(&2),
                    "{}",
                    env.request_id
                );
                return Some((i, true));
            }
            _ => {}
        }
        Some((i, false))
    }
}

/// `sessions` sessions each send `requests` requests, one after another, all sessions
/// at once, through one bridge. Returns (requests, events, seconds, bridge VmHWM KiB).
fn run_load(sessions: usize, requests: usize, max_files: Option<u64>) -> (usize, usize, f64, u64) {
    let e = env(&format!("maxOpenSessions = {}\n", sessions + 10));
    let model = script(e.home.path(), "load.json", requests_script(requests));
    let mut b = Bridge::start(Setup {
        bin: KEEL,
        home: e.home.path(),
        workspace: e.ws.path(),
        model: &model,
        max_files,
        extra_args: &[],
        env: &[],
    });
    let t = Instant::now();
    let mut tr = Tracker {
        sessions: vec![String::new(); sessions],
        done: vec![0; sessions],
        ..Tracker::default()
    };
    for i in 0..sessions {
        let rid = format!("start{i}");
        tr.owner.insert(rid.clone(), i);
        // Each session gets its own scripted model (the default one would be shared).
        b.send(&command(
            "session.start",
            &rid,
            None,
            json!({"model": model}),
        ));
    }
    let mut started = 0;
    let mut finished = 0;
    let mut peak_files = 0;
    let send = |b: &Bridge, tr: &mut Tracker, i: usize| {
        let rid = format!("s{i}r{}", tr.done[i]);
        tr.owner.insert(rid.clone(), i);
        b.send(&command(
            "request.send",
            &rid,
            Some(&tr.sessions[i]),
            json!({"message": "read the readme"}),
        ));
    };
    while finished < sessions {
        let env = b.next().expect("the bridge stopped");
        let Some((i, ended)) = tr.on(&env) else {
            continue;
        };
        if let Event::SessionStarted(_) = env.event {
            started += 1;
            send(&b, &mut tr, i);
            if started % 100 == 0 {
                peak_files = peak_files.max(b.open_files());
            }
        } else if ended {
            tr.done[i] += 1;
            if tr.done[i] < requests {
                send(&b, &mut tr, i);
            } else {
                finished += 1;
            }
            if finished % 100 == 0 {
                peak_files = peak_files.max(b.open_files());
            }
        }
    }
    let elapsed = t.elapsed().as_secs_f64();
    let hwm = b.status_kib("VmHWM:");
    if let Some(limit) = max_files {
        eprintln!("open files of the bridge: at most {peak_files} seen (limit {limit})");
        assert!(peak_files < limit as usize);
        // The logs kept open and the checkpoint watchers are bounded; the rest is the
        // process's own (stdio, the runtime, the log file) and files a tool or a
        // checkpoint has open for a moment.
        assert!(
            peak_files
                <= keel_kernel::store::DEFAULT_MAX_OPEN_LOGS
                    + keel_tools::checkpoint::MAX_WATCHERS
                    + 64,
            "{peak_files} files open"
        );
    }
    let events = tr.events;
    b.send(&command("runtime.shutdown", "bye", None, json!({})));
    assert!(b.wait(), "{}", b.stderr_text());
    b.assert_no_panic();
    // Nothing lost: each log holds exactly what its session delivered.
    let seen = std::mem::take(&mut b.seen);
    let mut by_session: HashMap<&str, Vec<Envelope>> = HashMap::new();
    for env in &seen {
        if let Some(s) = env.session_id.as_deref() {
            by_session.entry(s).or_default().push(env.clone());
        }
    }
    for sid in &tr.sessions {
        let mine = by_session.remove(sid.as_str()).unwrap();
        assert_saw_all(e.home.path(), sid, &mine);
        let (log, torn) = read_log(e.home.path(), sid);
        assert!(!torn);
        assert_eq!(log.len(), mine.len());
    }
    (sessions * requests, events, elapsed, hwm)
}

#[test]
fn many_sessions_at_once_through_the_bridge_lose_nothing() {
    let (sessions, requests) = if full() { (1000, 20) } else { (200, 20) };
    let (reqs, events, secs, hwm) = run_load(sessions, requests, None);
    eprintln!(
        "bridge load: {sessions} sessions × {requests} requests: {reqs} requests, {events} events in {secs:.1} s ({:.0} requests/s, {:.0} events/s); bridge VmHWM {:.1} MiB",
        reqs as f64 / secs,
        events as f64 / secs,
        hwm as f64 / 1024.0
    );
}

#[test]
fn two_thousand_sessions_under_ulimit_1024() {
    // Each session is started, makes one request with tool calls and stays open: the
    // store's bounded cache of open logs keeps the bridge far below the limit.
    let sessions = if full() { 5000 } else { 2000 };
    let (reqs, events, secs, hwm) = run_load(sessions, 1, Some(1024));
    eprintln!(
        "{sessions} open sessions under ulimit -n 1024: {reqs} requests, {events} events in {secs:.1} s; bridge VmHWM {:.1} MiB",
        hwm as f64 / 1024.0
    );
}

#[test]
fn a_host_that_stops_reading_does_not_grow_the_bridge() {
    let e = env("");
    let model = script(
        e.home.path(),
        "quick.json",
        json!({"turns": [{"text": "ok"}]}),
    );
    let mut b = Bridge::start(Setup {
        bin: KEEL,
        home: e.home.path(),
        workspace: e.ws.path(),
        model: &model,
        max_files: None,
        extra_args: &[],
        env: &[],
    });
    b.send(&command(
        "session.start",
        "st",
        None,
        json!({"title": "x".repeat(200)}),
    ));
    let sid = session_of(b.until_on("st", "session.started").last().unwrap());
    let base = b.status_kib("VmRSS:");
    // The host stops reading, and writes commands as fast as the bridge takes them
    // (straight into the bridge's stdin pipe, so a write blocks when the bridge stops
    // reading).
    b.pause_reading(true);
    const COMMANDS: usize = 20_000;
    let written = Arc::new(AtomicUsize::new(0));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{}/fd/0", b.pid()))
        .unwrap();
    let input = {
        let sid = sid.clone();
        let written = written.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut file = file;
            for i in 0..COMMANDS {
                let line = format!(
                    "{}\n",
                    command("session.state", &format!("q{i}"), Some(&sid), json!({}))
                );
                if file.write_all(line.as_bytes()).is_err() {
                    return;
                }
                written.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    // Wait until the bridge stops taking commands (nothing taken for 2 s).
    let mut last = usize::MAX;
    let mut still = Instant::now();
    let mut peak = 0;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        peak = peak.max(b.status_kib("VmRSS:"));
        let now = written.load(Ordering::SeqCst);
        if now != last {
            last = now;
            still = Instant::now();
        } else if still.elapsed() > Duration::from_secs(2) || input.is_finished() {
            break;
        }
    }
    let accepted = written.load(Ordering::SeqCst);
    let hwm = b.status_kib("VmHWM:");
    eprintln!(
        "host not reading: the bridge took {accepted} of {COMMANDS} commands, then stopped reading; RSS {:.1} MiB before, peak {:.1} MiB (VmHWM {:.1} MiB)",
        base as f64 / 1024.0,
        peak as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    assert!(
        accepted < COMMANDS,
        "the bridge kept reading commands while its output was not read"
    );
    assert!(
        hwm < base + 64 * 1024,
        "memory grew from {base} KiB to {hwm} KiB while the host did not read"
    );
    // Reading again lets every answer through, in order.
    b.pause_reading(false);
    let mut expect = 0usize;
    while expect < COMMANDS {
        let env = b.next().unwrap();
        if env.type_name() == "session.state" {
            assert_eq!(env.request_id, format!("q{expect}"));
            expect += 1;
        }
    }
    input.join().unwrap();
    b.send(&command("runtime.shutdown", "bye", None, json!({})));
    assert!(b.wait());
    b.assert_no_panic();
}
