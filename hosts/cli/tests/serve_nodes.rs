//! Several `keel serve --store postgres://…` processes on one database, each with
//! its own socket and `KEEL_HOME`, against a real PostgreSQL server (a cluster made
//! with initdb in a temporary directory): every node lists every session, watches a
//! session served elsewhere live, is refused a session another live node serves
//! (`SESSION_OWNED_ELSEWHERE`, naming it), and takes over one whose owner died
//! (`SIGKILL`) or was paused past its lease (`SIGSTOP`). CPU load runs meanwhile.
//! Nothing asserts on timing; every wait has a hang guard.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keel_envelope::{codec, Envelope, ErrorCode, Event};
use keel_store_pg::testing::PgServer;

const HANG_GUARD: Duration = Duration::from_secs(90);

/// One node: a `keel serve` process.
struct Node {
    name: String,
    socket: PathBuf,
    child: Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Cluster {
    root: tempfile::TempDir,
    url: String,
    workspace: PathBuf,
    script: PathBuf,
}

/// A script whose one turn streams for a few seconds (400 deltas, 10 ms apart).
fn cluster(url: String) -> Cluster {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("project");
    std::fs::create_dir_all(&workspace).unwrap();
    let script = root.path().join("script.json");
    let turns = serde_json::json!({
        "turns": [{ "text": "tick ", "textRepeat": 400, "chunkDelayMs": 10 }]
    });
    std::fs::write(&script, turns.to_string()).unwrap();
    Cluster {
        root,
        url,
        workspace,
        script,
    }
}

impl Cluster {
    fn node(&self, name: &str) -> Node {
        let home = self.root.path().join(name);
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("config.toml"), "leaseTtlSecs = 2\n").unwrap();
        let socket = self
            .root
            .path()
            .join(format!("run-{name}"))
            .join("keel.sock");
        let log = std::fs::File::create(self.root.path().join(format!("{name}.stderr"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .arg("serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--idle-exit")
            .arg("0")
            .arg("--workspace")
            .arg(&self.workspace)
            .arg("--model")
            .arg(format!("scripted:{}", self.script.display()))
            .arg("--store")
            .arg(&self.url)
            .env("KEEL_HOME", &home)
            .env("KEEL_NODE_ID", name)
            .env_remove("KEEL_SOCKET")
            .env_remove("KEEL_MODEL")
            .env_remove("KEEL_STORE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let node = Node {
            name: name.to_owned(),
            socket,
            child,
        };
        wait_until(&format!("{name} to listen"), || {
            UnixStream::connect(&node.socket).is_ok()
        });
        node
    }
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < HANG_GUARD, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client of one node.
struct Conn {
    lines: BufReader<UnixStream>,
    out: UnixStream,
    n: u64,
}

impl Conn {
    fn open(node: &Node) -> Conn {
        let s = UnixStream::connect(&node.socket).unwrap();
        s.set_read_timeout(Some(HANG_GUARD)).unwrap();
        let out = s.try_clone().unwrap();
        let mut c = Conn {
            lines: BufReader::new(s),
            out,
            n: 0,
        };
        let ready = c.next();
        assert_eq!(ready.type_name(), "runtime.ready", "{}", node.name);
        c
    }

    /// Sends a command; answers its request id.
    fn send(&mut self, kind: &str, session: Option<&str>, payload: serde_json::Value) -> String {
        self.n += 1;
        let rid = format!("req_{}_{}", kind.replace('.', "_"), self.n);
        let mut cmd = serde_json::json!({
            "version": "1.0", "type": kind, "requestId": rid, "payload": payload,
        });
        if let Some(s) = session {
            cmd["sessionId"] = s.into();
        }
        writeln!(self.out, "{cmd}").unwrap();
        rid
    }

    fn next(&mut self) -> Envelope {
        let mut line = String::new();
        let n = self.lines.read_line(&mut line).unwrap();
        assert!(n > 0, "the node closed the connection");
        codec::decode_envelope(line.as_bytes()).unwrap()
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

    /// The answer to `rid`: its first event that is a result or an error.
    fn answer(&mut self, rid: &str, types: &[&str]) -> Envelope {
        let got = self.until(|e| {
            (e.request_id == rid || e.reply_to() == Some(rid))
                && (types.contains(&e.type_name()) || e.type_name() == "error")
        });
        got.into_iter().last().unwrap()
    }
}

fn start_session(c: &mut Conn, workspace: &Path) -> String {
    let rid = c.send(
        "session.start",
        None,
        serde_json::json!({ "workspacePath": workspace, "permissionMode": "auto" }),
    );
    match c.answer(&rid, &["session.started"]).event {
        Event::SessionStarted(s) => s.session_id,
        other => panic!("session.start: {other:?}"),
    }
}

fn error_of(e: &Envelope) -> &keel_envelope::ErrorPayload {
    match &e.event {
        Event::Error(p) | Event::RequestRejected(p) => p,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Every event of the session, in log order, read from the database itself.
fn stored_log(url: &str, sid: &str) -> Vec<Envelope> {
    let store = keel_store_pg::PgKernelStore::open(url).unwrap();
    keel_kernel::store::Store::load_events(&store, sid)
        .unwrap()
        .events
}

fn deltas(events: &[Envelope]) -> usize {
    events
        .iter()
        .filter(|e| e.type_name() == "assistant.delta")
        .count()
}

/// Resumes `sid` on `c`, retrying while the old owner's lease runs out; answers the
/// events of the successful resume up to `session.resumed`.
fn take_over(c: &mut Conn, sid: &str) -> Vec<Envelope> {
    let start = Instant::now();
    loop {
        let rid = c.send(
            "session.resume",
            None,
            serde_json::json!({ "sessionId": sid }),
        );
        let got = c
            .until(|e| e.request_id == rid && matches!(e.type_name(), "session.resumed" | "error"));
        let last = got.last().unwrap();
        if last.type_name() == "session.resumed" {
            return got;
        }
        let e = error_of(last);
        assert_eq!(e.code, ErrorCode::SessionOwnedElsewhere, "{e:?}");
        assert!(e.retryable);
        assert!(start.elapsed() < HANG_GUARD, "the lease never ran out");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The owner's client sees a few deltas of a running request.
fn run_until_streaming(owner: &mut Conn, sid: &str, after: usize) -> (String, Vec<Envelope>) {
    let rid = owner.send(
        "request.send",
        Some(sid),
        serde_json::json!({ "message": "count" }),
    );
    let seen = owner.until(|e| e.type_name() == "assistant.delta" && e.sequence as usize > after);
    (rid, seen)
}

#[test]
fn any_node_lists_watches_refuses_and_takes_over_a_killed_owner() {
    let _load = keel_testsupport::Busy::start(2);
    let server = PgServer::shared();
    let c = cluster(server.create_database());
    let mut a = c.node("node-a");
    let b = c.node("node-b");
    let w = c.node("node-c");
    let mut on_a = Conn::open(&a);
    let mut on_b = Conn::open(&b);
    let mut on_w = Conn::open(&w);
    let sid = start_session(&mut on_a, &c.workspace);

    // Every node lists it.
    for conn in [&mut on_b, &mut on_w] {
        let rid = conn.send("session.list", None, serde_json::json!({}));
        match conn.answer(&rid, &["session.list"]).event {
            Event::SessionList(l) => {
                assert!(l.sessions.iter().any(|s| s.session_id == sid), "{l:?}")
            }
            other => panic!("{other:?}"),
        }
    }

    let (req, seen_on_a) = run_until_streaming(&mut on_a, &sid, 5);
    // A node that does not own it watches it live.
    let wrid = on_w.send(
        "session.watch",
        None,
        serde_json::json!({ "sessionId": sid }),
    );
    let watched = on_w.answer(&wrid, &["session.watched"]);
    let Event::SessionWatched(ans) = &watched.event else {
        panic!("{watched:?}")
    };
    assert_eq!(ans.active_request_id.as_deref(), Some(req.as_str()));
    let live = on_w.until(|e| e.request_id == req && e.type_name() == "assistant.delta");
    assert!(!live.is_empty());

    // Another node is refused, told who serves it.
    let rrid = on_b.send(
        "session.resume",
        None,
        serde_json::json!({ "sessionId": sid }),
    );
    let refused = on_b.answer(&rrid, &["session.resumed"]);
    let e = error_of(&refused);
    assert_eq!(e.code, ErrorCode::SessionOwnedElsewhere, "{e:?}");
    assert_eq!(e.details["owner"], "node-a");
    assert!(e.retryable);
    let srid = on_b.send(
        "request.send",
        Some(&sid),
        serde_json::json!({ "message": "mine?" }),
    );
    let refused = on_b.answer(&srid, &["request.accepted", "request.rejected"]);
    assert_eq!(error_of(&refused).code, ErrorCode::SessionOwnedElsewhere);

    // The owner dies mid-request.
    let more = on_a.until(|e| e.type_name() == "assistant.delta" && e.sequence > 40);
    a.child.kill().unwrap();
    let _ = a.child.wait();
    let mut delivered_by_a: Vec<Envelope> = seen_on_a;
    delivered_by_a.extend(more);

    // Another node takes it over: the cut request ends as owner_lost, and every
    // watcher learns who serves the session now.
    let resumed = take_over(&mut on_b, &sid);
    assert_eq!(resumed.last().unwrap().type_name(), "session.resumed");
    let after = on_b.until(|e| e.type_name() == "session.interrupted" && e.request_id == req);
    let changed = after
        .iter()
        .chain(resumed.iter())
        .find_map(|e| match &e.event {
            Event::SessionOwnerChanged(p) => Some(p.clone()),
            _ => None,
        })
        .expect("session.owner_changed on the new owner");
    assert_eq!(changed.previous_owner, "node-a");
    assert_eq!(changed.owner, "node-b");
    match &after.last().unwrap().event {
        Event::SessionInterrupted(p) => assert_eq!(p.reason, "owner_lost"),
        other => panic!("{other:?}"),
    }
    let watched_live =
        on_w.until(|e| e.type_name() == "session.interrupted" && e.request_id == req);
    assert!(watched_live
        .iter()
        .any(|e| matches!(&e.event, Event::SessionOwnerChanged(p) if p.owner == "node-b")));

    // The next request completes, on the new owner; the watcher follows it.
    let next = on_b.send(
        "request.send",
        Some(&sid),
        serde_json::json!({ "message": "again" }),
    );
    let done = on_b.until(|e| e.request_id == next && e.type_name() == "session.completed");
    assert!(deltas(&done) > 0);
    let followed = on_w.until(|e| e.request_id == next && e.type_name() == "session.completed");
    assert!(deltas(&followed) > 0);

    // Nothing a client saw is missing from the log, nothing is in it twice, and the
    // watcher saw every event of the log from its watch on, once, in order.
    let log = stored_log(&c.url, &sid);
    let ids: Vec<&str> = log.iter().map(|e| e.event_id.as_str()).collect();
    let unique: HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "an event is stored twice");
    for e in &delivered_by_a {
        assert!(
            unique.contains(e.event_id.as_str()),
            "delivered, not stored: {e:?}"
        );
    }
    let mut watched_all: Vec<Envelope> = live;
    watched_all.extend(watched_live);
    watched_all.extend(followed);
    let seen: Vec<&str> = watched_all
        .iter()
        .filter(|e| e.session_id.as_deref() == Some(sid.as_str()))
        .filter(|e| e.meta.as_ref().and_then(|m| m.replay) != Some(true))
        .map(|e| e.event_id.as_str())
        .collect();
    let first = ids
        .iter()
        .position(|i| *i == seen[0])
        .expect("watched events are stored");
    assert_eq!(
        seen,
        ids[first..],
        "the watcher's live view is the log from its start on"
    );
    drop(b);
    drop(w);
}

#[test]
fn an_owner_paused_past_its_lease_appends_nothing_and_its_clients_are_told() {
    let _load = keel_testsupport::Busy::start(2);
    let server = PgServer::shared();
    let c = cluster(server.create_database());
    let a = c.node("node-a");
    let b = c.node("node-b");
    let mut on_a = Conn::open(&a);
    let mut on_b = Conn::open(&b);
    let sid = start_session(&mut on_a, &c.workspace);
    let (req, _) = run_until_streaming(&mut on_a, &sid, 5);
    let pid = a.child.id().to_string();
    let signal = |sig: &str| {
        assert!(Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success());
    };
    signal("-STOP");
    let _cont = ContOnDrop(pid.clone());
    take_over(&mut on_b, &sid);
    on_b.until(|e| e.type_name() == "session.interrupted" && e.request_id == req);
    let taken_at = stored_log(&c.url, &sid).len();
    signal("-CONT");
    // Its client is told the session stopped here.
    let told = on_a.until(|e| e.type_name() == "session.closed");
    let interrupted = told
        .iter()
        .find_map(|e| match &e.event {
            Event::SessionInterrupted(p) => Some(p.clone()),
            _ => None,
        })
        .expect("session.interrupted on the paused node");
    assert_eq!(interrupted.reason, "lease_lost");
    match &told.last().unwrap().event {
        Event::SessionClosed(p) => assert_eq!(p.reason, "lease_lost"),
        other => panic!("{other:?}"),
    }
    // And it appended nothing: the log is what the new owner left, and the next
    // request runs on the new owner.
    let next = on_b.send(
        "request.send",
        Some(&sid),
        serde_json::json!({ "message": "again" }),
    );
    on_b.until(|e| e.request_id == next && e.type_name() == "session.completed");
    let log = stored_log(&c.url, &sid);
    let late: Vec<&Envelope> = log[taken_at..]
        .iter()
        .filter(|e| e.request_id == req)
        .collect();
    assert!(
        late.is_empty(),
        "the paused owner wrote after the takeover: {late:?}"
    );
}

/// Sends SIGCONT when dropped, so a failed test leaves no stopped process behind.
struct ContOnDrop(String);
impl Drop for ContOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.0]).status();
    }
}
