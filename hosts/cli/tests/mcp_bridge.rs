//! MCP servers and host tools end to end through `keel bridge`: the real binary, a
//! configured MCP server over streamable HTTP on loopback, a scripted model, and the
//! host answering `host-tool.requested` on stdin.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

struct Bridge {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    seen: Vec<Value>,
}

impl Bridge {
    fn start(
        workspace: &std::path::Path,
        home: &std::path::Path,
        script: &std::path::Path,
    ) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .args(["bridge", "--workspace"])
            .arg(workspace)
            .arg("--model")
            .arg(format!("scripted:{}", script.display()))
            .args(["--permission-mode", "auto"])
            .env("KEEL_HOME", home)
            .env_remove("KEEL_MODEL")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Bridge {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, line: Value) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Reads envelopes until one matches (every stdout line must be an envelope).
    fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no matching event; saw {:?}", self.types()));
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            assert!(v["type"].is_string() && v["sequence"].is_u64(), "{line}");
            self.seen.push(v.clone());
            if pred(&v) {
                return v;
            }
        }
    }

    fn types(&self) -> Vec<String> {
        self.seen
            .iter()
            .map(|v| v["type"].as_str().unwrap_or("").to_owned())
            .collect()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cmd(ty: &str, rid: &str, session: Option<&str>, payload: Value) -> Value {
    json!({"version": "1.0", "type": ty, "requestId": rid, "sessionId": session, "payload": payload})
}

#[test]
fn mcp_tools_and_host_tools_over_the_bridge() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(keel_mcp::testing::serve_http(None)).unwrap();
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("ws");
    let home = root.path().join("home");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[mcpServers.web]\nurl = \"{}\"\n\n[mcpServers.gone]\ncommand = \"/nonexistent/keel-no-such-server\"\n",
            server.url()
        ),
    )
    .unwrap();
    let script = root.path().join("script.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"toolCalls": [{"name": "mcp__web__add", "arguments": {"a": 2, "b": 40}}]},
            {"toolCalls": [{"name": "lookup_ticket", "arguments": {"id": "KEEL-7"}}]},
            {"whenLastToolResultContains": "Login fails", "text": "Ticket read."},
            {"text": "Something went wrong."}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut b = Bridge::start(&workspace, &home, &script);
    let ready = b.until(|v| v["type"] == "runtime.ready");
    let caps = ready["payload"]["capabilities"].as_array().unwrap();
    assert!(caps.contains(&json!("mcp")) && caps.contains(&json!("host_tools")));

    b.send(cmd(
        "session.start",
        "start",
        None,
        json!({"hostTools": [{
            "name": "lookup_ticket",
            "description": "Reads a ticket of the tracker.",
            "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            "level": "read"
        }]}),
    ));
    let started = b.until(|v| v["type"] == "session.started");
    let sid = started["sessionId"].as_str().unwrap().to_owned();
    // The configured server that cannot start: a warning on the start's stream.
    let warning = b.until(|v| v["type"] == "warning");
    assert_eq!(warning["requestId"], "start");
    assert_eq!(warning["payload"]["code"], "MCP_SERVER_UNAVAILABLE");
    assert_eq!(warning["payload"]["details"]["server"], "gone");

    // Servers start in the background: ask until none is starting.
    let mut list = Value::Null;
    for i in 0..200 {
        let rid = format!("list{i}");
        b.send(cmd("mcp.list", &rid, Some(&sid), json!({})));
        list = b.until(|v| v["requestId"] == rid.as_str());
        assert_eq!(list["type"], "mcp.list");
        let servers = list["payload"]["servers"].as_array().unwrap();
        if servers.iter().all(|s| s["state"] != "starting") {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let servers = list["payload"]["servers"].as_array().unwrap();
    assert_eq!(servers[0]["name"], "gone");
    assert_eq!(servers[0]["state"], "failed");
    assert_eq!(servers[1]["name"], "web");
    assert_eq!(servers[1]["state"], "ready");

    b.send(cmd(
        "request.send",
        "run",
        Some(&sid),
        json!({"message": "go"}),
    ));
    let done = b.until(|v| v["type"] == "tool.call.completed");
    assert_eq!(done["payload"]["toolName"], "mcp__web__add");
    assert_eq!(done["payload"]["result"]["message"], "42");
    assert_eq!(
        done["payload"]["result"]["structuredContent"],
        json!({"sum": 42.0})
    );
    let asked = b.until(|v| v["type"] == "host-tool.requested");
    assert_eq!(asked["requestId"], "run");
    assert_eq!(asked["payload"]["arguments"], json!({"id": "KEEL-7"}));
    let call = asked["payload"]["toolCallId"].as_str().unwrap().to_owned();

    // A bad answer is refused on its own stream; the call still waits.
    b.send(cmd(
        "host-tool.respond",
        "bad",
        Some(&sid),
        json!({"toolCallId": call, "result": 1, "error": {"message": "both"}}),
    ));
    let refused = b.until(|v| v["requestId"] == "bad");
    assert_eq!(refused["type"], "error");
    assert_eq!(refused["payload"]["code"], "REQUEST_INVALID");

    b.send(cmd(
        "host-tool.respond",
        "answer",
        Some(&sid),
        json!({"toolCallId": call, "result": {"title": "Login fails on Safari"}}),
    ));
    let responded = b.until(|v| v["type"] == "host-tool.responded");
    assert_eq!(responded["requestId"], "run");
    assert_eq!(responded["meta"]["replyTo"], "answer");
    let end = b.until(|v| v["requestId"] == "run" && v["type"] == "session.completed");
    assert_eq!(end["payload"]["finalText"], "Ticket read.");

    // An answer for the finished call is refused.
    b.send(cmd(
        "host-tool.respond",
        "late",
        Some(&sid),
        json!({"toolCallId": call, "result": "again"}),
    ));
    let late = b.until(|v| v["requestId"] == "late");
    assert_eq!(late["payload"]["code"], "HOST_TOOL_CALL_NOT_FOUND");

    b.send(cmd("runtime.shutdown", "bye", None, json!({})));
    b.until(|v| v["type"] == "runtime.stopped");
    assert!(server.journal.lines().contains(&"call add".to_owned()));
}
