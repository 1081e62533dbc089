//! A tool call cut by the output cap in the middle of its arguments
//! (`finish_reason: "length"`, `{"task": "create_sub_`) must not poison the session:
//! every later body sent to the server carries well-formed arguments, as llama-server
//! requires (it answers malformed ones with `500 Failed to parse tool call arguments
//! as JSON`). Checked in every body the loopback server received, through the bridge,
//! against a server that refuses malformed arguments as llama-server does (and, for
//! the Anthropic format, as the Messages API does), before and after the session is
//! resumed from the store in a new process (its history replayed).
#![allow(clippy::unwrap_used)]

use keel_testsupport::bridge::{command, Bridge, Setup};
use keel_testsupport::model_server::{anthropic, openai, FakeResponse, FakeServer};
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

/// Every `tool_use.input` of every message of a Messages request body.
fn inputs_of(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_use")
        .map(|b| b["input"].clone())
        .collect()
}

/// A Messages stream whose one tool use stops at `input` with `stop_reason:
/// "max_tokens"`, its block never closed.
fn cut_tool_use(input: &str) -> String {
    anthropic::sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_cut", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "usage": {"input_tokens": 20, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_cut", "name": "spawn_sub_agent", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": input}}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": null}, "usage": {"output_tokens": 256}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

/// Runs a request that gets `cut`, a second one, then resumes the session in a new
/// bridge and runs a third (the history replayed from the store). Every request must
/// end with `end_turn` except the cut one; returns the bodies the server received.
fn cut_then_two_more(server: &FakeServer, env: &[(&str, &str)], model: &str) -> Vec<Value> {
    let root = tempfile::tempdir().unwrap();
    let (ws, home) = (root.path().join("ws"), root.path().join("home"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let setup = Setup {
        env,
        ..Setup::new(env!("CARGO_BIN_EXE_keel"), &home, &ws, model)
    };
    let mut b = Bridge::start(setup);
    let s = b.start_session("s", r#"{"permissionMode":"auto"}"#);
    b.request(&s, "r1", r#"{"message":"Plan it."}"#);
    let r1 = b.until_on("r1", "session.completed");
    assert!(
        r1.iter().any(|e| e.type_name() == "tool.call.skipped"),
        "{:?}",
        r1.iter().map(|e| e.type_name()).collect::<Vec<_>>()
    );
    b.request(&s, "r2", r#"{"message":"Go on."}"#);
    let r2 = b.until_on("r2", "session.completed");
    assert_eq!(stop_reason(&r2), "end_turn", "{r2:?}");
    b.stop();
    // A new process: the session's history comes back from the store.
    let mut b = Bridge::start(setup);
    b.send(&command(
        "session.resume",
        "rs",
        None,
        json!({"sessionId": s}),
    ));
    b.until_on("rs", "session.resumed");
    b.request(&s, "r3", r#"{"message":"And now?"}"#);
    let r3 = b.until_on("r3", "session.completed");
    assert_eq!(stop_reason(&r3), "end_turn", "{r3:?}");
    b.stop();
    server
        .requests()
        .iter()
        .map(|r| r.json().unwrap())
        .collect()
}

fn stop_reason(events: &[keel_envelope::Envelope]) -> String {
    let last = serde_json::to_value(events.last().unwrap()).unwrap();
    last["payload"]["stopReason"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn a_call_cut_mid_arguments_leaves_only_well_formed_arguments_in_the_history() {
    let rt = keel_testsupport::runtime();
    let server = rt
        .block_on(FakeServer::start([
            FakeResponse::sse(cut_call(r#"{"task": "create_sub_"#)),
            FakeResponse::sse(openai::text_stream(&["That call was cut."])),
            FakeResponse::sse(openai::text_stream(&["Next answer."])),
            FakeResponse::sse(openai::text_stream(&["After the resume."])),
        ]))
        .unwrap();
    // llama-server's answer to malformed arguments in the history.
    server.refuse(openai::refuse_malformed_arguments);
    let url = format!("{}/v1", server.base_url());
    let bodies = cut_then_two_more(
        &server,
        &[("OPENAI_BASE_URL", &url)],
        "openai:qwen2.5-coder:7b",
    );
    assert_eq!(bodies.len(), 4, "no request refused, none retried");
    let mut seen = 0;
    for (i, body) in bodies.iter().enumerate() {
        for args in arguments_of(body) {
            seen += 1;
            let parsed: Result<Value, _> = serde_json::from_str(&args);
            assert!(
                parsed.as_ref().is_ok_and(Value::is_object),
                "request {i} carries malformed arguments {args:?}, which llama-server refuses"
            );
        }
    }
    assert_eq!(
        seen, 3,
        "the cut call is in the history of the three later requests"
    );
    // The model is told what happened, in the call's result, after the resume too.
    for body in &bodies[1..] {
        let result = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].to_string())
            .unwrap();
        assert!(result.contains("create_sub_"), "{result}");
    }
}

#[test]
fn a_tool_use_cut_mid_input_leaves_only_objects_in_the_anthropic_history() {
    let rt = keel_testsupport::runtime();
    let server = rt
        .block_on(FakeServer::start([
            FakeResponse::sse(cut_tool_use(r#"{"task": "create_sub_"#)),
            FakeResponse::sse(anthropic::text_stream(&["That call was cut."])),
            FakeResponse::sse(anthropic::text_stream(&["Next answer."])),
            FakeResponse::sse(anthropic::text_stream(&["After the resume."])),
        ]))
        .unwrap();
    // The Messages API's answer to an input that is not an object.
    server.refuse(anthropic::refuse_malformed_input);
    let url = server.base_url();
    let bodies = cut_then_two_more(
        &server,
        &[("ANTHROPIC_BASE_URL", &url), ("ANTHROPIC_API_KEY", "k")],
        "anthropic:claude-sonnet-4-5",
    );
    assert_eq!(bodies.len(), 4, "no request refused, none retried");
    let inputs: Vec<Value> = bodies.iter().flat_map(inputs_of).collect();
    assert_eq!(inputs, [json!({}), json!({}), json!({})]);
    for body in &bodies[1..] {
        let result = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .find(|b| b["type"] == "tool_result")
            .map(|b| b["content"].to_string())
            .unwrap();
        assert!(result.contains("create_sub_"), "{result}");
    }
}
