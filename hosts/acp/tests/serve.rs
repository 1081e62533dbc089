//! `serve` in process: a prompt with a tool call, a permission rejected for the
//! session, and the end of input.

mod support;

use serde_json::{json, Value};

use support::{start, GUARD};

#[tokio::test(flavor = "multi_thread")]
async fn prompt_tool_call_and_session_deny() {
    let (mut c, server, _dir, ws) = start(
        json!({"turns": [
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
            {"text": "It says hello."},
            {"toolCalls": [{"name": "run_shell", "arguments": {"command": "touch x"}}]},
            {"whenLastToolResultContains": "did not approve", "text": "Not run."},
            {"toolCalls": [{"name": "run_shell", "arguments": {"command": "FOO=1 touch  x"}}]},
            {"whenLastToolResultContains": "run_shell(touch x)", "text": "Not run again."}
        ]}),
        None,
    );
    let sid = c.new_session(1, &ws, json!([])).await;

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

    // Rejected for the session: a session deny rule on the canonical command, so the
    // same command spelled differently is denied without asking.
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

#[tokio::test(flavor = "multi_thread")]
async fn framing_errors_are_answered_and_reading_goes_on() {
    let (mut c, server, _dir, _ws) = start(json!({"turns": []}), Some(1024));
    // Over the limit: consumed, answered -32600 with a null id.
    let mut long = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":"{}"}}"#,
        "a".repeat(5000)
    );
    long.push('\n');
    c.raw(long.as_bytes()).await;
    let e = c.until(|_| true).await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    // Not UTF-8, not JSON, a batch, a blank line: each answered (the blank one ignored).
    c.raw(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"\xff\"}\n")
        .await;
    let e = c.until(|_| true).await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32700))
    );
    c.raw(b"\n   \n[]\n").await;
    let e = c.until(|_| true).await;
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (Value::Null, json!(-32600))
    );
    let init = c.call(3, "initialize", json!({"protocolVersion": 1})).await;
    assert_eq!(init["result"]["protocolVersion"], 1);
    let caps = &init["result"]["agentCapabilities"]["sessionCapabilities"];
    assert_eq!(
        caps,
        &json!({"list": {}, "delete": {}, "close": {}, "resume": {}, "fork": {}, "additionalDirectories": {}})
    );
    drop(c);
    tokio::time::timeout(GUARD, server)
        .await
        .expect("serve returns at the end of input")
        .expect("serve");
}

#[tokio::test(flavor = "multi_thread")]
async fn config_options_titles_and_delete() {
    let (mut c, server, _dir, ws) = start(
        json!({"turns": [{"text": "Read it."}, {"text": "Again."}]}),
        None,
    );
    let new = c
        .call(1, "session/new", json!({"cwd": ws, "mcpServers": []}))
        .await;
    let sid = support::session_id(&new);
    let opts = &new["result"]["configOptions"];
    assert_eq!(opts[0]["id"], "mode");
    assert_eq!(opts[0]["currentValue"], "ask");
    assert_eq!(opts[1]["id"], "model");
    assert_eq!(opts[1]["category"], "model");
    let model = opts[1]["currentValue"].as_str().expect("model").to_owned();
    assert!(model.starts_with("scripted:"), "{model}");

    let set = c
        .call(
            2,
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "mode", "value": "plan"}),
        )
        .await;
    assert_eq!(set["result"]["configOptions"][0]["currentValue"], "plan");
    let same = c
        .call(
            3,
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "model", "value": model}),
        )
        .await;
    assert_eq!(
        same["result"]["configOptions"][1]["currentValue"],
        model.as_str()
    );
    for (id, params, code) in [
        (
            4,
            json!({"sessionId": sid, "configId": "mode", "value": "yolo"}),
            -32602,
        ),
        (
            5,
            json!({"sessionId": sid, "configId": "model", "value": "openai:elsewhere"}),
            -32602,
        ),
        (
            6,
            json!({"sessionId": sid, "configId": "speed", "value": "fast"}),
            -32602,
        ),
        (
            7,
            json!({"sessionId": sid, "configId": "mode", "type": "boolean", "value": true}),
            -32602,
        ),
        (8, json!({"sessionId": sid, "configId": "mode"}), -32602),
        (
            9,
            json!({"sessionId": "sess_nope", "configId": "mode", "value": "ask"}),
            -32002,
        ),
    ] {
        let e = c
            .call(id, "session/set_config_option", params.clone())
            .await;
        assert_eq!(e["error"]["code"], code, "{params} -> {e}");
    }

    // The first prompt titles the session before it is answered.
    let done = c
        .call(10, "session/prompt", json!({"sessionId": sid, "prompt": [{"type": "text", "text": "Summarise the README\nplease"}]}))
        .await;
    assert_eq!(done["result"]["stopReason"], "end_turn");
    let infos: Vec<&Value> = c
        .seen
        .iter()
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "session_info_update")
        .collect();
    assert_eq!(infos.len(), 1);
    assert_eq!(
        infos[0]["params"]["update"]["title"],
        "Summarise the README"
    );
    let list = c.call(11, "session/list", json!({})).await;
    assert_eq!(
        list["result"]["sessions"][0]["title"],
        "Summarise the README"
    );

    let deleted = c
        .call(12, "session/delete", json!({"sessionId": sid}))
        .await;
    assert_eq!(deleted["result"], json!({}));
    let list = c.call(13, "session/list", json!({})).await;
    assert_eq!(list["result"]["sessions"], json!([]));
    for (id, method, params) in [
        (14, "session/delete", json!({"sessionId": sid})),
        (15, "session/delete", json!({"sessionId": "../store"})),
        (
            16,
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}),
        ),
        (
            17,
            "session/load",
            json!({"sessionId": sid, "cwd": ws, "mcpServers": []}),
        ),
    ] {
        let e = c.call(id, method, params).await;
        assert_eq!(e["error"]["code"], -32002, "{method}: {e}");
    }
    let e = c.call(18, "session/delete", json!({})).await;
    assert_eq!(e["error"]["code"], -32602);
    drop(c);
    tokio::time::timeout(GUARD, server)
        .await
        .expect("serve returns at the end of input")
        .expect("serve");
}
