//! `serve` in process: a prompt with a tool call, a permission rejected for the
//! session, and the end of input.

use std::time::Duration;

use keel_acp::{serve, AcpOptions};
use keel_adapters::{build_model, Config};
use keel_kernel::Kernel;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const GUARD: Duration = Duration::from_secs(20);

struct Client {
    to_agent: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    from_agent: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    seen: Vec<Value>,
}

impl Client {
    async fn send(&mut self, v: Value) {
        let mut line = v.to_string();
        line.push('\n');
        self.to_agent
            .write_all(line.as_bytes())
            .await
            .expect("write");
    }

    /// Reads messages until one satisfies `done`; returns it.
    async fn until(&mut self, done: impl Fn(&Value) -> bool) -> Value {
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

#[tokio::test(flavor = "multi_thread")]
async fn prompt_tool_call_and_session_deny() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::write(ws.join("README.md"), "hello\n").expect("write");
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
            {"text": "It says hello."},
            {"toolCalls": [{"name": "run_shell", "arguments": {"command": "touch x"}}]},
            {"whenLastToolResultContains": "did not approve", "text": "Not run."},
            {"toolCalls": [{"name": "run_shell", "arguments": {"command": "touch x"}}]},
            {"whenLastToolResultContains": "did not approve", "text": "Not run again."}
        ]})
        .to_string(),
    )
    .expect("write");
    let model = build_model(
        &format!("scripted:{}", script.display()),
        &Config::default(),
    )
    .expect("model");
    let store = dir.path().join("store");
    let kernel = Kernel::builder()
        .workspace(&ws)
        .store_dir(&store)
        .model(model)
        .build()
        .expect("kernel");
    let (client_side, agent_side) = tokio::io::duplex(1 << 20);
    let (agent_in, agent_out) = tokio::io::split(agent_side);
    let server = tokio::spawn(serve(
        kernel,
        agent_in,
        agent_out,
        AcpOptions {
            max_line_bytes: None,
        },
    ));
    let (r, w) = tokio::io::split(client_side);
    let mut c = Client {
        to_agent: w,
        from_agent: BufReader::new(r).lines(),
        seen: Vec::new(),
    };

    c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": ws, "mcpServers": []}}))
        .await;
    let new = c.until(|v| v["id"] == 1).await;
    let sid = new["result"]["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_owned();

    c.send(json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "read"}]}}))
        .await;
    let done = c.until(|v| v["id"] == 2).await;
    assert_eq!(done["result"]["stopReason"], "end_turn");
    let updates: Vec<&Value> = c
        .seen
        .iter()
        .filter(|v| v["method"] == "session/update")
        .map(|v| &v["params"]["update"])
        .collect();
    let call = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .expect("a tool_call");
    assert_eq!(call["kind"], "read");
    assert!(updates
        .iter()
        .any(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed"));

    // Rejected for the session: the second identical command is denied without asking.
    for (id, expect) in [(3, "Not run."), (4, "Not run again.")] {
        c.send(json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "build"}]}}))
            .await;
        let msg = c
            .until(|v| v["id"] == id || v["method"] == "session/request_permission")
            .await;
        let end = if msg["method"] == "session/request_permission" {
            assert_eq!(id, 3, "only the first call asks");
            let kinds: Vec<&str> = msg["params"]["options"]
                .as_array()
                .expect("options")
                .iter()
                .filter_map(|o| o["kind"].as_str())
                .collect();
            assert_eq!(
                kinds,
                ["allow_once", "allow_always", "reject_once", "reject_always"]
            );
            c.send(json!({"jsonrpc": "2.0", "id": msg["id"], "result": {"outcome": {"outcome": "selected", "optionId": "deny_always"}}}))
                .await;
            c.until(|v| v["id"] == id).await
        } else {
            msg
        };
        assert_eq!(end["result"]["stopReason"], "end_turn");
        let text: String = c
            .seen
            .iter()
            .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|v| v["params"]["update"]["content"]["text"].as_str())
            .collect();
        assert!(text.ends_with(expect), "{text}");
    }
    assert!(!ws.join("x").exists());

    drop(c);
    tokio::time::timeout(GUARD, server)
        .await
        .expect("serve returns at the end of input")
        .expect("serve");
}
