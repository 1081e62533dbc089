//! MCP servers a client gives in `session/new`, `session/load` and `session/fork`: started with the
//! session, their tools called through the permission flow; bad specifications
//! refused with `-32602`.

mod support;

use keel_mcp::testing::{serve_http, HttpServer};
use serde_json::{json, Value};

use support::{start, Client};

const SCRIPT: &str = r#"{"turns": [
    {"toolCalls": [{"name": "mcp__web__echo", "arguments": {"text": "from the client"}}]},
    {"whenLastToolResultContains": "from the client", "text": "The server echoed it."}
]}"#;

fn web(server: &HttpServer) -> Value {
    json!({"type": "http", "name": "web", "url": server.url(),
           "headers": [{"name": "Authorization", "value": "Bearer t0k"}]})
}

/// Sends a prompt, allows the one permission it asks, and returns the agent's text.
async fn prompt_allowing(c: &mut Client, id: u64, sid: &str) -> String {
    c.send(
        json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                  "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "echo"}]}}),
    )
    .await;
    let asked = c
        .until(|v| v["method"] == "session/request_permission" || v["id"] == id)
        .await;
    assert_eq!(asked["method"], "session/request_permission", "{asked}");
    assert!(
        asked["params"]["toolCall"]
            .to_string()
            .contains("mcp__web__echo"),
        "{asked}"
    );
    c.send(json!({"jsonrpc": "2.0", "id": asked["id"],
                  "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}))
        .await;
    let done = c
        .until(|v| v["id"] == id && v.get("method").is_none())
        .await;
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    c.seen
        .iter()
        .filter(|v| v["params"]["sessionId"] == sid)
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|v| v["params"]["update"]["content"]["text"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_from_session_new_is_started_and_its_tool_called() {
    let server = serve_http(Some("Bearer t0k")).await.expect("MCP server");
    let (mut c, agent, _dir, ws) = start(serde_json::from_str(SCRIPT).expect("script"), None);
    let init = c
        .call(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    let mcp = &init["result"]["agentCapabilities"]["mcpCapabilities"];
    assert_eq!(
        (mcp["http"].as_bool(), mcp["sse"].as_bool()),
        (Some(true), Some(false)),
        "{init}"
    );

    let new = c
        .call(
            2,
            "session/new",
            json!({"cwd": ws, "mcpServers": [web(&server)]}),
        )
        .await;
    let sid = support::session_id(&new);
    let text = prompt_allowing(&mut c, 3, &sid).await;
    assert!(text.ends_with("The server echoed it."), "{text}");
    assert!(server.journal.lines().contains(&"call echo".to_owned()));

    drop(c);
    let _ = tokio::time::timeout(support::GUARD, agent).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_loaded_session_gets_the_servers_of_session_load() {
    let server = serve_http(Some("Bearer t0k")).await.expect("MCP server");
    let (mut c, agent, _dir, ws) = start(serde_json::from_str(SCRIPT).expect("script"), None);
    let sid = c.new_session(1, &ws, json!([])).await;
    let closed = c.call(2, "session/close", json!({"sessionId": sid})).await;
    assert!(closed.get("error").is_none(), "{closed}");
    assert!(
        server.journal.lines().is_empty(),
        "no server before the load"
    );

    let loaded = c
        .call(
            3,
            "session/load",
            json!({"sessionId": sid, "cwd": ws, "mcpServers": [web(&server)]}),
        )
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let text = prompt_allowing(&mut c, 4, &sid).await;
    assert!(text.ends_with("The server echoed it."), "{text}");
    assert!(server.journal.lines().contains(&"call echo".to_owned()));

    drop(c);
    let _ = tokio::time::timeout(support::GUARD, agent).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_server_specifications_are_refused_and_a_dead_one_does_not_stop_the_session() {
    let (mut c, agent, _dir, ws) = start(json!({"turns": []}), None);
    // The legacy SSE transport is not announced, so it is refused.
    let sse = c
        .call(
            1,
            "session/new",
            json!({"cwd": ws, "mcpServers": [
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}]}),
        )
        .await;
    assert_eq!(sse["error"]["code"], -32602, "{sse}");
    assert!(
        sse["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("SSE")),
        "{sse}"
    );
    // No name; an environment variable name with `=`; an HTTP URL that is not one.
    for (id, server) in [
        (
            2,
            json!({"name": " ", "command": "/bin/true", "args": [], "env": []}),
        ),
        (
            6,
            json!({"name": "e", "command": "/bin/true", "args": [], "env": [{"name": "A=B", "value": "x"}]}),
        ),
        (
            3,
            json!({"type": "http", "name": "rel", "url": "not a url", "headers": []}),
        ),
    ] {
        let bad = c
            .call(
                id,
                "session/new",
                json!({"cwd": ws, "mcpServers": [server]}),
            )
            .await;
        assert_eq!(bad["error"]["code"], -32602, "{bad}");
    }
    let listed = c.call(4, "session/list", json!({})).await;
    assert_eq!(
        listed["result"]["sessions"],
        json!([]),
        "no session was created: {listed}"
    );

    // A server that cannot start is the server's failure, not the session's.
    let dead = c
        .call(5, "session/new", json!({"cwd": ws, "mcpServers": [
            {"name": "gone", "command": "/nonexistent/keel-no-such-server", "args": [], "env": []}]}))
        .await;
    assert!(dead["result"]["sessionId"].is_string(), "{dead}");

    drop(c);
    let _ = tokio::time::timeout(support::GUARD, agent).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fork_gets_the_servers_of_session_fork() {
    let server = serve_http(Some("Bearer t0k")).await.expect("MCP server");
    let (mut c, agent, _dir, ws) = start(serde_json::from_str(SCRIPT).expect("script"), None);
    let parent = c.new_session(1, &ws, json!([])).await;
    // A server the fork cannot have is refused, and no fork is made.
    let sse = c
        .call(
            2,
            "session/fork",
            json!({"sessionId": parent, "cwd": ws, "mcpServers": [
            {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}]}),
        )
        .await;
    assert_eq!(sse["error"]["code"], -32602, "{sse}");

    let forked = c
        .call(
            3,
            "session/fork",
            json!({"sessionId": parent, "cwd": ws, "mcpServers": [web(&server)]}),
        )
        .await;
    let child = support::session_id(&forked);
    assert_ne!(child, parent);
    let text = prompt_allowing(&mut c, 4, &child).await;
    assert!(text.ends_with("The server echoed it."), "{text}");
    assert!(server.journal.lines().contains(&"call echo".to_owned()));

    drop(c);
    let _ = tokio::time::timeout(support::GUARD, agent).await;
}
