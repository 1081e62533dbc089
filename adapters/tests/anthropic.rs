//! The Anthropic provider against a local fake server.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use keel_envelope::error::ErrorHint;
use keel_envelope::types::Usage;
use keel_kernel::model::{
    FinishReason, Message, ModelEvent, ModelRequest, ToolCallRequest, ToolDef,
};
use keel_testsupport::model_server::{
    anthropic, split_bytes, FakeResponse, FakeServer, Gate, Part,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn request() -> ModelRequest {
    ModelRequest {
        system: "You are Keel.".into(),
        messages: vec![Message::User {
            text: "Which files?".into(),
            images: vec![],
        }]
        .into(),
        tools: vec![ToolDef {
            name: "list_dir".into(),
            description: "Lists a directory.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]
        .into(),
        max_output_tokens: Some(1024),
    }
}

#[tokio::test]
async fn streams_text_and_sends_the_right_request() {
    let server = FakeServer::start([FakeResponse::sse(anthropic::text_stream(&[
        "Bonjour ",
        "à ",
        "tous — ",
        "✓",
    ]))])
    .await
    .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(0));
    assert_eq!(model.id(), "anthropic:claude-sonnet-4-5");
    assert_eq!(model.context_window(), 200_000);
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "Bonjour à tous — ✓");
    let n = items.len();
    assert_eq!(
        items[n - 2..],
        [
            Ok(ModelEvent::Usage(Usage::new(25, 15, 0))),
            Ok(ModelEvent::Finished(FinishReason::EndTurn)),
        ]
    );
    let r = &server.requests()[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    let body = r.json().unwrap();
    assert_eq!(
        body,
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "stream": true,
            "system": "You are Keel.",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Which files?"}]}],
            "tools": [{"name": "list_dir", "description": "Lists a directory.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        })
    );
}

#[tokio::test]
async fn several_tool_uses_and_grouped_results() {
    let server = FakeServer::start([
        FakeResponse::sse(anthropic::tool_use_stream(
            "I'll look.",
            &[
                ("toolu_01A", "list_dir", r#"{"path": "src"}"#),
                ("toolu_01B", "list_dir", r#"{"path": "tësts"}"#),
            ],
        )),
        FakeResponse::sse(anthropic::text_stream(&["Two folders."])),
    ])
    .await
    .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(0));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "I'll look.");
    let calls: Vec<ToolCallRequest> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ToolCall(c)) => Some(c.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ToolCallRequest {
                id: "toolu_01A".into(),
                name: "list_dir".into(),
                arguments: json!({"path": "src"})
            },
            ToolCallRequest {
                id: "toolu_01B".into(),
                name: "list_dir".into(),
                arguments: json!({"path": "tësts"})
            },
        ]
    );
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Finished(FinishReason::ToolUse)))
    );

    let mut req = request();
    req.messages.push(Message::Assistant {
        text: "I'll look.".into(),
        tool_calls: calls,
    });
    req.messages.push(Message::Tool {
        tool_call_id: "toolu_01A".into(),
        name: "list_dir".into(),
        content: "main.rs".into(),
        is_error: false,
    });
    req.messages.push(Message::Tool {
        tool_call_id: "toolu_01B".into(),
        name: "list_dir".into(),
        content: "no such directory".into(),
        is_error: true,
    });
    let items = collect(model.stream(req, CancellationToken::new())).await;
    assert_eq!(text_of(&items), "Two folders.");
    let body = server.requests()[1].json().unwrap();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Which files?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "I'll look."},
                {"type": "tool_use", "id": "toolu_01A", "name": "list_dir", "input": {"path": "src"}},
                {"type": "tool_use", "id": "toolu_01B", "name": "list_dir", "input": {"path": "tësts"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "main.rs"},
                {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "no such directory", "is_error": true},
            ]},
        ])
    );
}

#[tokio::test]
async fn thinking_blocks_become_thoughts() {
    let text = anthropic::sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "usage": {"input_tokens": 7, "cache_read_input_tokens": 3, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Considering…"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "abc"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Yes."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 9}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    let server = FakeServer::start([FakeResponse::sse(text)]).await.unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(0));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(
        items,
        vec![
            Ok(ModelEvent::ThoughtDelta("Considering…".into())),
            Ok(ModelEvent::TextDelta("Yes.".into())),
            Ok(ModelEvent::Usage(Usage::new(10, 9, 3))),
            Ok(ModelEvent::Finished(FinishReason::MaxTokens)),
        ]
    );
}

#[tokio::test]
async fn the_first_delta_arrives_while_the_server_still_holds_the_response() {
    let gate = Gate::new();
    let full = anthropic::text_stream(&["early", " late"]);
    let split = full.find(" late").unwrap();
    let split = full[..split].rfind("event:").unwrap();
    let mut parts = split_bytes(&full[..split], 11);
    parts.push(Part::Wait(gate.clone()));
    parts.extend(split_bytes(&full[split..], 11));
    let server = FakeServer::start([FakeResponse::sse_parts(parts)])
        .await
        .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(0));
    let mut stream = model.stream(request(), CancellationToken::new());
    assert_eq!(
        next(&mut stream).await,
        Some(Ok(ModelEvent::TextDelta("early".into())))
    );
    gate.open();
    let rest = collect(stream).await;
    assert_eq!(text_of(&rest), " late");
    assert_eq!(
        rest.last(),
        Some(&Ok(ModelEvent::Finished(FinishReason::EndTurn)))
    );
}

#[tokio::test]
async fn cancelling_a_stalled_stream_closes_the_connection() {
    let full = anthropic::text_stream(&["partial"]);
    let cut = full.find("content_block_stop").unwrap();
    let cut = full[..cut].rfind("event:").unwrap();
    let server = FakeServer::start([FakeResponse::sse_parts(vec![
        Part::text(&full[..cut]),
        Part::Stall,
    ])])
    .await
    .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(3));
    let cancel = CancellationToken::new();
    let mut stream = model.stream(request(), cancel.clone());
    assert_eq!(
        next(&mut stream).await,
        Some(Ok(ModelEvent::TextDelta("partial".into())))
    );
    // Cancel while the consumer waits on the stalled stream.
    let waiter = tokio::spawn(async move { next(&mut stream).await });
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    cancel.cancel();
    assert_eq!(waiter.await.unwrap(), None);
    tokio::time::timeout(GUARD, server.wait_for_disconnects(1))
        .await
        .expect("the server never saw the connection close");
}

#[tokio::test]
async fn overloaded_is_retried_then_succeeds() {
    let server = FakeServer::start([
        FakeResponse::json(
            529,
            &anthropic::error_body("overloaded_error", "Overloaded"),
        ),
        FakeResponse::sse(anthropic::text_stream(&["fine"])),
    ])
    .await
    .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(2));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    match &items[0] {
        Ok(ModelEvent::Retrying {
            attempt: 1, error, ..
        }) => {
            assert_eq!(error.hint, Some(ErrorHint::QuotaExceeded));
            assert!(error.message.contains("Overloaded"));
            assert_eq!(error.details["status"], 529);
        }
        other => panic!("expected Retrying, got {other:?}"),
    }
    assert_eq!(text_of(&items), "fine");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn rate_limit_error_with_retry_after() {
    let server = FakeServer::start([
        FakeResponse::json(
            429,
            &anthropic::error_body(
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
        )
        .header("retry-after", "0"),
        FakeResponse::sse(anthropic::text_stream(&["ok"])),
    ])
    .await
    .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(2));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    match &items[0] {
        Ok(ModelEvent::Retrying {
            delay_ms: 0, error, ..
        }) => {
            assert_eq!(error.hint, Some(ErrorHint::QuotaExceeded));
            assert!(error.message.contains("per-minute rate limit"));
        }
        other => panic!("expected Retrying, got {other:?}"),
    }
    assert_eq!(text_of(&items), "ok");
}

#[tokio::test]
async fn an_error_event_before_content_is_retried() {
    let first = anthropic::sse(&[
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
        (
            "error",
            anthropic::error_body("overloaded_error", "Overloaded"),
        ),
    ]);
    let server = FakeServer::start([
        FakeResponse::sse(first),
        FakeResponse::sse(anthropic::text_stream(&["recovered"])),
    ])
    .await
    .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(2));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert!(matches!(
        &items[0],
        Ok(ModelEvent::Retrying { attempt: 1, .. })
    ));
    assert_eq!(text_of(&items), "recovered");
}

#[tokio::test]
async fn an_error_event_after_content_is_final() {
    let full = anthropic::text_stream(&["half"]);
    let cut = full.find("event: content_block_stop").unwrap();
    let text = format!(
        "{}event: error\ndata: {}\n\n",
        &full[..cut],
        anthropic::error_body("api_error", "Internal server error")
    );
    let server = FakeServer::start([FakeResponse::sse(text)]).await.unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(2));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "half");
    let err = items.last().unwrap().clone().unwrap_err().0;
    assert!(err.message.contains("Internal server error"));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn authentication_errors_point_to_the_configuration() {
    let server = FakeServer::start([FakeResponse::json(
        401,
        &anthropic::error_body("authentication_error", "invalid x-api-key"),
    )])
    .await
    .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(3));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(items.len(), 1);
    let err = items[0].clone().unwrap_err().0;
    assert_eq!(err.hint, Some(ErrorHint::CheckLlmConfig));
    assert!(!err.retryable);
    assert!(err.message.contains("invalid x-api-key"));
    assert_eq!(err.details["providerType"], "authentication_error");
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_an_error() {
    let full = anthropic::tool_use_stream("", &[("toolu_1", "list_dir", r#"{"path": "."}"#)]);
    let cut = full.find("event: message_delta").unwrap();
    let mut parts = split_bytes(&full[..cut], 13);
    parts.push(Part::Cut);
    let server = FakeServer::start([FakeResponse::sse_parts(parts)])
        .await
        .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(2));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert!(matches!(&items[0], Ok(ModelEvent::ToolCall(c)) if c.id == "toolu_1"));
    let err = items.last().unwrap().clone().unwrap_err().0;
    assert_eq!(err.hint, Some(ErrorHint::Network));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn malformed_event_json_is_a_final_error() {
    let server = FakeServer::start([FakeResponse::sse(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1\n\n",
    )])
    .await
    .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(2));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(items.len(), 1);
    assert!(items[0]
        .clone()
        .unwrap_err()
        .0
        .message
        .contains("malformed"));
}

/// Without a cap from the request, `max_tokens` (required by the API) is the model's
/// default.
#[tokio::test]
async fn max_tokens_defaults_per_model() {
    let server = FakeServer::start([
        FakeResponse::sse(anthropic::text_stream(&["ok"])),
        FakeResponse::sse(anthropic::text_stream(&["ok"])),
    ])
    .await
    .unwrap();
    let model = anthropic_model(&server.base_url(), &fast_config(0));
    let uncapped = ModelRequest {
        max_output_tokens: None,
        ..request()
    };
    collect(model.stream(uncapped.clone(), CancellationToken::new())).await;
    let env = keel_config::EnvMap::from_pairs([
        ("ANTHROPIC_BASE_URL", server.base_url()),
        ("ANTHROPIC_API_KEY", "sk-ant-test".to_owned()),
    ]);
    let haiku = keel_adapters::build_model_with_env(
        "anthropic:claude-3-haiku-20240307",
        &fast_config(0),
        &env,
    )
    .unwrap();
    collect(haiku.stream(uncapped, CancellationToken::new())).await;
    let reqs = server.requests();
    assert_eq!(reqs[0].json().unwrap()["max_tokens"], 32_000);
    assert_eq!(reqs[1].json().unwrap()["max_tokens"], 4096);
}
