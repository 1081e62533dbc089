//! MCP servers and host tools end to end through `keel bridge`: the real binary, a
//! configured MCP server over streamable HTTP on loopback, a scripted model, and the
//! host answering `host-tool.requested` on stdin.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use keel_testsupport::bridge::{command, Bridge, Setup};
use serde_json::{json, Value};

const KEEL: &str = env!("CARGO_BIN_EXE_keel");

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
    let model = format!("scripted:{}", script.display());
    let mut b = Bridge::start(Setup {
        extra_args: &["--permission-mode", "auto"],
        ..Setup::new(KEEL, &home, &workspace, &model)
    });
    let ready = serde_json::to_value(b.ready()).unwrap();
    let caps = ready["payload"]["capabilities"].as_array().unwrap();
    assert!(caps.contains(&json!("mcp")) && caps.contains(&json!("host_tools")));

    b.send(&command(
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
    let started = b.until_json(|v| v["type"] == "session.started");
    let sid = started["sessionId"].as_str().unwrap().to_owned();
    // The configured server that cannot start: a warning on the start's stream.
    let warning = b.until_json(|v| v["type"] == "warning");
    assert_eq!(warning["requestId"], "start");
    assert_eq!(warning["payload"]["code"], "MCP_SERVER_UNAVAILABLE");
    assert_eq!(warning["payload"]["details"]["server"], "gone");

    // Servers start in the background: ask until none is starting.
    let mut list = Value::Null;
    for i in 0..200 {
        let rid = format!("list{i}");
        b.send(&command("mcp.list", &rid, Some(&sid), json!({})));
        list = b.until_json(|v| v["requestId"] == rid.as_str());
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

    b.send(&command(
        "request.send",
        "run",
        Some(&sid),
        json!({"message": "go"}),
    ));
    let done = b.until_json(|v| v["type"] == "tool.call.completed");
    assert_eq!(done["payload"]["toolName"], "mcp__web__add");
    assert_eq!(done["payload"]["result"]["message"], "42");
    assert_eq!(
        done["payload"]["result"]["structuredContent"],
        json!({"sum": 42.0})
    );
    let asked = b.until_json(|v| v["type"] == "host-tool.requested");
    assert_eq!(asked["requestId"], "run");
    assert_eq!(asked["payload"]["arguments"], json!({"id": "KEEL-7"}));
    let call = asked["payload"]["toolCallId"].as_str().unwrap().to_owned();

    // A bad answer is refused on its own stream; the call still waits.
    b.send(&command(
        "host-tool.respond",
        "bad",
        Some(&sid),
        json!({"toolCallId": call, "result": 1, "error": {"message": "both"}}),
    ));
    let refused = b.until_json(|v| v["requestId"] == "bad");
    assert_eq!(refused["type"], "error");
    assert_eq!(refused["payload"]["code"], "REQUEST_INVALID");

    b.send(&command(
        "host-tool.respond",
        "answer",
        Some(&sid),
        json!({"toolCallId": call, "result": {"title": "Login fails on Safari"}}),
    ));
    let responded = b.until_json(|v| v["type"] == "host-tool.responded");
    assert_eq!(responded["requestId"], "run");
    assert_eq!(responded["meta"]["replyTo"], "answer");
    let end = b.until_json(|v| v["requestId"] == "run" && v["type"] == "session.completed");
    assert_eq!(end["payload"]["finalText"], "Ticket read.");

    // An answer for the finished call is refused.
    b.send(&command(
        "host-tool.respond",
        "late",
        Some(&sid),
        json!({"toolCallId": call, "result": "again"}),
    ));
    let late = b.until_json(|v| v["requestId"] == "late");
    assert_eq!(late["payload"]["code"], "HOST_TOOL_CALL_NOT_FOUND");

    b.send(&command("runtime.shutdown", "bye", None, json!({})));
    b.until_json(|v| v["type"] == "runtime.stopped");
    assert!(server.journal.lines().contains(&"call add".to_owned()));
}
