//! What the multi-node tests share: a cluster of `keel serve --store postgres://…`
//! nodes on one database of a real PostgreSQL server, clients on their sockets, and
//! reading a session's log from the database itself.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keel_envelope::{codec, Envelope, ErrorCode, Event};

pub const HANG_GUARD: Duration = Duration::from_secs(90);

/// One node: a `keel serve` process.
pub struct Node {
    pub name: String,
    pub socket: PathBuf,
    pub child: Child,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Cluster {
    pub root: tempfile::TempDir,
    pub url: String,
    pub workspace: PathBuf,
    pub script: PathBuf,
    /// `leaseTtlSecs` of every node.
    pub ttl_secs: u64,
}

/// A script whose one turn streams for a few seconds (400 deltas, 10 ms apart).
pub fn streaming() -> serde_json::Value {
    serde_json::json!({
        "turns": [{ "text": "tick ", "textRepeat": 400, "chunkDelayMs": 10 }]
    })
}

/// A cluster of nodes (none started yet) on database `url`, whose model plays
/// `script`; leases of 2 s.
pub fn cluster(url: String) -> Cluster {
    cluster_with(url, streaming(), 2)
}

/// [`cluster`] with another script and lease.
pub fn cluster_with(url: String, turns: serde_json::Value, ttl_secs: u64) -> Cluster {
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("project");
    std::fs::create_dir_all(&workspace).unwrap();
    let script = root.path().join("script.json");
    std::fs::write(&script, turns.to_string()).unwrap();
    Cluster {
        root,
        url,
        workspace,
        script,
        ttl_secs,
    }
}

impl Cluster {
    pub fn node(&self, name: &str) -> Node {
        let home = self.root.path().join(name);
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("config.toml"),
            format!("leaseTtlSecs = {}\n", self.ttl_secs),
        )
        .unwrap();
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

pub fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < HANG_GUARD, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client of one node.
pub struct Conn {
    lines: BufReader<UnixStream>,
    out: UnixStream,
    n: u64,
}

impl Conn {
    pub fn open(node: &Node) -> Conn {
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
    pub fn send(
        &mut self,
        kind: &str,
        session: Option<&str>,
        payload: serde_json::Value,
    ) -> String {
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

    pub fn next(&mut self) -> Envelope {
        let mut line = String::new();
        let n = self.lines.read_line(&mut line).unwrap();
        assert!(n > 0, "the node closed the connection");
        codec::decode_envelope(line.as_bytes()).unwrap()
    }

    pub fn until(&mut self, pred: impl Fn(&Envelope) -> bool) -> Vec<Envelope> {
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
    pub fn answer(&mut self, rid: &str, types: &[&str]) -> Envelope {
        let got = self.until(|e| {
            (e.request_id == rid || e.reply_to() == Some(rid))
                && (types.contains(&e.type_name()) || e.type_name() == "error")
        });
        got.into_iter().last().unwrap()
    }
}

pub fn start_session(c: &mut Conn, workspace: &Path) -> String {
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

pub fn error_of(e: &Envelope) -> &keel_envelope::ErrorPayload {
    match &e.event {
        Event::Error(p) | Event::RequestRejected(p) => p,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Every event of the session, in log order, read from the database itself.
pub fn stored_log(url: &str, sid: &str) -> Vec<Envelope> {
    let store = keel_store_pg::PgKernelStore::open(url).unwrap();
    keel_kernel::store::Store::load_events(&store, sid)
        .unwrap()
        .events
}

pub fn deltas(events: &[Envelope]) -> usize {
    events
        .iter()
        .filter(|e| e.type_name() == "assistant.delta")
        .count()
}

/// Resumes `sid` on `c`, retrying while the old owner's lease runs out; answers the
/// events of the successful resume up to `session.resumed`.
pub fn take_over(c: &mut Conn, sid: &str) -> Vec<Envelope> {
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

/// Resumes `sid` on `c` (no `materializeTo`), retrying while the old owner's lease is
/// live; answers the error of the first resume that is not `SESSION_OWNED_ELSEWHERE`
/// (for a session whose workspace is not on this node: `WORKSPACE_MISSING`).
pub fn resume_once_free(c: &mut Conn, sid: &str) -> keel_envelope::ErrorPayload {
    let start = Instant::now();
    loop {
        let rid = c.send(
            "session.resume",
            None,
            serde_json::json!({ "sessionId": sid }),
        );
        let p = error_of(&c.answer(&rid, &["session.resumed"])).clone();
        if p.code != ErrorCode::SessionOwnedElsewhere {
            return p;
        }
        assert!(start.elapsed() < HANG_GUARD, "the lease never ran out");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The owner's client sees a few deltas of a running request.
pub fn run_until_streaming(owner: &mut Conn, sid: &str, after: usize) -> (String, Vec<Envelope>) {
    let rid = owner.send(
        "request.send",
        Some(sid),
        serde_json::json!({ "message": "count" }),
    );
    let seen = owner.until(|e| e.type_name() == "assistant.delta" && e.sequence as usize > after);
    (rid, seen)
}
