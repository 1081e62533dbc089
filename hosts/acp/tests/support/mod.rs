//! The client side of the ACP tests: a kernel over a scripted model served in
//! process, and a JSON-RPC client that records what it reads.

#![allow(dead_code)]

use std::time::Duration;

use keel_acp::{serve, AcpOptions};
use keel_adapters::build_model;
use keel_config::Config;
use keel_kernel::Kernel;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub const GUARD: Duration = Duration::from_secs(20);

pub struct Client {
    pub to_agent: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    pub from_agent: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    pub seen: Vec<Value>,
}

impl Client {
    pub async fn send(&mut self, v: Value) {
        let mut line = v.to_string();
        line.push('\n');
        self.to_agent
            .write_all(line.as_bytes())
            .await
            .expect("write");
    }

    /// Reads messages until one satisfies `done`; returns it.
    pub async fn until(&mut self, done: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = tokio::time::timeout(GUARD, self.from_agent.next_line())
                .await
                .expect("the agent hung")
                .expect("read")
                .expect("the agent closed its output");
            let v: Value = serde_json::from_str(&line).expect("every line is JSON");
            assert_eq!(v["jsonrpc"], "2.0");
            self.seen.push(v.clone());
            if done(&v) {
                return v;
            }
        }
    }
}

/// A server over a scripted model with a small line limit; returns the client and the
/// server task.
pub fn start(
    script: serde_json::Value,
    max_line_bytes: Option<usize>,
) -> (
    Client,
    tokio::task::JoinHandle<()>,
    tempfile::TempDir,
    std::path::PathBuf,
) {
    start_with(script, |_, _| AcpOptions {
        max_line_bytes,
        ..AcpOptions::default()
    })
}

/// Like [`start`]; `prepare(dir, workspace)` writes files first and gives the
/// server's options.
pub fn start_with(
    script: serde_json::Value,
    prepare: impl FnOnce(&std::path::Path, &std::path::Path) -> AcpOptions,
) -> (
    Client,
    tokio::task::JoinHandle<()>,
    tempfile::TempDir,
    std::path::PathBuf,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::write(ws.join("README.md"), "hello\n").expect("write");
    let options = prepare(dir.path(), &ws);
    let path = dir.path().join("script.json");
    // `{dir}` in the script stands for the test's folder (its real path).
    let real = std::fs::canonicalize(dir.path()).expect("canonical");
    let text = script
        .to_string()
        .replace("{dir}", &real.display().to_string());
    std::fs::write(&path, text).expect("write");
    let model =
        build_model(&format!("scripted:{}", path.display()), &Config::default()).expect("model");
    let kernel = Kernel::builder()
        .workspace(&ws)
        .store_dir(dir.path().join("store"))
        .model(model)
        .build()
        .expect("kernel");
    let (client_side, agent_side) = tokio::io::duplex(1 << 20);
    let (agent_in, agent_out) = tokio::io::split(agent_side);
    let server = tokio::spawn(serve(kernel, agent_in, agent_out, options));
    let (r, w) = tokio::io::split(client_side);
    let c = Client {
        to_agent: w,
        from_agent: BufReader::new(r).lines(),
        seen: Vec::new(),
    };
    (c, server, dir, ws)
}

impl Client {
    pub async fn raw(&mut self, bytes: &[u8]) {
        self.to_agent.write_all(bytes).await.expect("write");
    }

    /// Sends a request and waits for its answer.
    pub async fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.until(|v| v["id"] == id && v.get("method").is_none())
            .await
    }
}

/// The `sessionId` of an answer to `session/new` or `session/fork`.
pub fn session_id(answer: &Value) -> String {
    answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no sessionId in {answer}"))
        .to_owned()
}

impl Client {
    /// `session/new` in `ws` with `servers` as its `mcpServers`; returns its id.
    pub async fn new_session(&mut self, id: u64, ws: &std::path::Path, servers: Value) -> String {
        let answer = self
            .call(id, "session/new", json!({"cwd": ws, "mcpServers": servers}))
            .await;
        session_id(&answer)
    }
}
