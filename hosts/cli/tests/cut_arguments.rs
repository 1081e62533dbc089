//! A tool call cut by the output cap in the middle of its arguments
//! (`finish_reason: "length"`, `{"task": "create_sub_`) must not poison the session:
//! every later body sent to the server carries well-formed arguments, as llama-server
//! requires (it answers malformed ones with `500 Failed to parse tool call arguments
//! as JSON`). Checked in every body the loopback server received, through the bridge.
#![allow(clippy::unwrap_used)]

use keel_testsupport::bridge::{Bridge, Setup};
use keel_testsupport::model_server::{openai, FakeResponse, FakeServer};
use serde_json::{json, Value};

/// A stream whose one tool call stops at `args` with `finish_reason: "length"`.
fn cut_call(args: &str) -> String {
    openai::sse(&[
        openai::chunk(json!({"role": "assistant", "content": null}), None),
        openai::chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_cut", "type": "function", "function": {"name": "spawn_sub_agent", "arguments": ""}}]}),
            None,
        ),
        openai::chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": args}}]}),
            None,
        ),
        openai::chunk(json!({}), Some("length")),
        openai::usage_chunk(20, 256),
    ])
}

/// Every `function.arguments` of every assistant message of a request body.
fn arguments_of(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["function"]["arguments"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn a_call_cut_mid_arguments_leaves_only_well_formed_arguments_in_the_history() {
    let rt = keel_testsupport::runtime();
    let server = rt
        .block_on(FakeServer::start([
            FakeResponse::sse(cut_call(r#"{"task": "create_sub_"#)),
            FakeResponse::sse(openai::text_stream(&["That call was cut."])),
            FakeResponse::sse(openai::text_stream(&["Next answer."])),
        ]))
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let url = format!("{}/v1", server.base_url());
    let mut b = Bridge::start(Setup {
        env: &[("OPENAI_BASE_URL", &url)],
        ..Setup::new(
            env!("CARGO_BIN_EXE_keel"),
            &home,
            &ws,
            "openai:qwen2.5-coder:7b",
        )
    });
    let s = b.start_session("s", r#"{"permissionMode":"auto"}"#);
    b.request(&s, "r1", r#"{"message":"Plan it."}"#);
    let r1 = b.until_on("r1", "session.completed");
    assert!(
        r1.iter().any(|e| e.type_name() == "tool.call.skipped"),
        "{:?}",
        r1.iter().map(|e| e.type_name()).collect::<Vec<_>>()
    );
    b.request(&s, "r2", r#"{"message":"Go on."}"#);
    b.until_on("r2", "session.completed");
    b.stop();
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let mut seen = 0;
    for (i, r) in requests.iter().enumerate() {
        for args in arguments_of(&r.json().unwrap()) {
            seen += 1;
            let parsed: Result<Value, _> = serde_json::from_str(&args);
            assert!(
                parsed.as_ref().is_ok_and(Value::is_object),
                "request {i} carries malformed arguments {args:?}, which llama-server refuses"
            );
        }
    }
    assert_eq!(
        seen, 2,
        "the cut call is in the history of both later requests"
    );
    // The model is told what happened, in the call's result.
    let last = requests[2].json().unwrap();
    let result = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .unwrap();
    assert!(result.contains("create_sub_"), "{result}");
}
