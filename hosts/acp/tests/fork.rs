//! `session/fork`: announced as the unstable `sessionCapabilities.fork`, forks the whole
//! conversation into a new session that answers on its own; bad ids refused.

mod support;

use serde_json::json;

use support::start;

#[tokio::test(flavor = "multi_thread")]
async fn a_forked_session_has_the_parents_conversation_and_goes_on_alone() {
    let (mut c, agent, _dir, ws) = start(
        json!({"turns": [
            {"text": "First answer."},
            {"text": "Answer in the fork."}
        ]}),
        None,
    );
    let init = c
        .call(
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
    assert!(
        init["result"]["agentCapabilities"]["sessionCapabilities"]["fork"].is_object(),
        "{init}"
    );
    let parent = c.new_session(2, &ws, json!([])).await;
    let first = c
        .call(
            3,
            "session/prompt",
            json!({"sessionId": parent, "prompt": [{"type": "text", "text": "hello"}]}),
        )
        .await;
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");

    let forked = c
        .call(
            4,
            "session/fork",
            json!({"sessionId": parent, "cwd": ws, "mcpServers": []}),
        )
        .await;
    let child = support::session_id(&forked);
    assert_ne!(child, parent);
    assert_eq!(
        forked["result"]["modes"]["currentModeId"], "ask",
        "{forked}"
    );

    // The fork answers on its own id.
    let answer = c
        .call(
            5,
            "session/prompt",
            json!({"sessionId": child, "prompt": [{"type": "text", "text": "go on"}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let text: String = c
        .seen
        .iter()
        .filter(|v| v["params"]["sessionId"] == child)
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|v| v["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Answer in the fork.");
    // Both are listed.
    let listed = c.call(6, "session/list", json!({})).await;
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert!(
        ids.contains(&parent.as_str()) && ids.contains(&child.as_str()),
        "{listed}"
    );

    // A session that does not exist, and a missing id.
    let unknown = c
        .call(
            7,
            "session/fork",
            json!({"sessionId": "sess_nope", "cwd": ws, "mcpServers": []}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], -32002, "{unknown}");
    let missing = c.call(8, "session/fork", json!({"cwd": ws})).await;
    assert_eq!(missing["error"]["code"], -32602, "{missing}");

    drop(c);
    let _ = tokio::time::timeout(support::GUARD, agent).await;
}
