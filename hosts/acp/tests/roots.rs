//! ACP's `additionalDirectories`: announced in `sessionCapabilities`, given to
//! `session/new` they are the session's extra roots (write access: the tools read
//! and write there by absolute path), reported by `session/list`, and replaced by
//! `session/load`'s and `session/fork`'s own list (empty: none), as ACP says; bad ones are refused.

mod support;

use serde_json::{json, Value};

use support::start_with;

fn listed_dirs(listed: &Value, sid: &str) -> Vec<String> {
    let s = listed["result"]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["sessionId"] == sid)
        .unwrap_or_else(|| panic!("{sid} not listed: {listed}"));
    s["additionalDirectories"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|d| d.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn additional_directories_are_the_sessions_extra_roots() {
    let (mut c, agent, dir, ws) = start_with(
        json!({"turns": [
            {"toolCalls": [{"name": "read_file", "arguments": {"path": "{dir}/extra/notes.txt"}}]},
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "{dir}/extra/out.txt", "content": "from the agent\n"}}]},
            {"text": "Done."}
        ]}),
        |dir, _| {
            std::fs::create_dir_all(dir.join("extra")).expect("mkdir");
            std::fs::write(dir.join("extra/notes.txt"), "the notes\n").expect("write");
            std::fs::write(dir.join("file.txt"), "x").expect("write");
            keel_acp::AcpOptions::default()
        },
    );
    let extra = std::fs::canonicalize(dir.path().join("extra")).expect("canonical");
    let init = c
        .call(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    assert!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"]
            .is_object(),
        "{init}"
    );
    let answer = c
        .call(
            2,
            "session/new",
            json!({"cwd": ws, "additionalDirectories": [extra], "mcpServers": []}),
        )
        .await;
    let sid = support::session_id(&answer);
    c.send(json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "use the notes"}]}}))
        .await;
    // The read runs without asking; the write asks like one in the workspace.
    let asked = c
        .until(|v| v["id"] == 3 || v["method"] == "session/request_permission")
        .await;
    assert_eq!(asked["method"], "session/request_permission", "{asked}");
    c.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}))
        .await;
    let end = c.until(|v| v["id"] == 3).await;
    assert_eq!(end["result"]["stopReason"], "end_turn", "{end}");
    let read = c
        .seen
        .iter()
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .any(|v| v.to_string().contains("the notes"));
    assert!(read, "the read in the extra root reached the client");
    assert_eq!(
        std::fs::read_to_string(extra.join("out.txt")).expect("written"),
        "from the agent\n"
    );
    let extra_text = extra.display().to_string();
    let listed = c.call(4, "session/list", json!({})).await;
    assert_eq!(
        listed_dirs(&listed, &sid),
        std::slice::from_ref(&extra_text)
    );

    // `session/load` with no directories: none from now on (ACP: the list given is the
    // whole list); with them again: back.
    let loaded = c
        .call(
            5,
            "session/load",
            json!({"sessionId": sid, "cwd": ws, "mcpServers": []}),
        )
        .await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let listed = c.call(6, "session/list", json!({})).await;
    assert!(listed_dirs(&listed, &sid).is_empty(), "{listed}");
    let loaded = c
        .call(
            7,
            "session/load",
            json!({"sessionId": sid, "cwd": ws, "additionalDirectories": [extra], "mcpServers": []}),
        )
        .await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let listed = c.call(8, "session/list", json!({})).await;
    assert_eq!(
        listed_dirs(&listed, &sid),
        std::slice::from_ref(&extra_text)
    );

    // A fork gets the request's list (none given: none).
    for (id, dirs, want) in [
        (20, json!([extra]), vec![extra_text.clone()]),
        (21, json!([]), vec![]),
    ] {
        let forked = c
            .call(
                id,
                "session/fork",
                json!({"sessionId": sid, "cwd": ws, "additionalDirectories": dirs, "mcpServers": []}),
            )
            .await;
        let child = support::session_id(&forked);
        let listed = c.call(id + 10, "session/list", json!({})).await;
        assert_eq!(listed_dirs(&listed, &child), want, "{forked}");
    }

    // Bad directories are refused as invalid params, naming the entry.
    for (id, bad) in [
        (9, json!(["relative/dir"])),
        (10, json!([dir.path().join("missing")])),
        (11, json!([dir.path().join("file.txt")])),
        (12, json!([extra, extra])),
        (13, json!([ws])),
    ] {
        let e = c
            .call(
                id,
                "session/new",
                json!({"cwd": ws, "additionalDirectories": bad, "mcpServers": []}),
            )
            .await;
        assert_eq!(e["error"]["code"], -32602, "{bad}: {e}");
        assert_eq!(e["error"]["data"]["code"], "REQUEST_INVALID", "{e}");
        assert!(
            e["error"]["data"]["details"]["field"]
                .as_str()
                .is_some_and(|f| f.starts_with("payload.additionalRoots[")),
            "{e}"
        );
    }
    drop(c);
    let _ = tokio::time::timeout(support::GUARD, agent).await;
}
