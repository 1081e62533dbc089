//! A corpus of cut streams, for both wire formats, through a loopback server:
//!
//! - a tool call whose arguments the output cap cuts at every character boundary
//!   (`finish_reason: "length"`, `stop_reason: "max_tokens"`, with and without the
//!   block's `content_block_stop`), its arguments in fragments of three characters;
//! - a whole stream (text, a tool call, the end) whose connection closes at every byte
//!   offset, framing and JSON alike.
//!
//! None may panic or hang, every stream ends with `Finished` or an error, a tool call
//! always carries an object (the parsed arguments, `{}`, or `{"__invalid_json": the
//! text}` for the kernel to quote), and the next call's history carries only
//! well-formed arguments: its body is accepted by a server that refuses malformed
//! ones as llama-server (500) and the Messages API (400) do.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use keel_adapters::{AnthropicModel, HttpOptions, OpenAiModel, RetryPolicy};
use keel_kernel::model::{
    FinishReason, Message, Model, ModelEvent, ModelRequest, ToolCallRequest, ToolDef,
};
use keel_testsupport::model_server::{
    anthropic, openai, split_bytes, FakeResponse, FakeServer, Part,
};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// Arguments with escapes, non-ASCII text, nesting and every JSON type.
const ARGUMENTS: &str = r#"{"task": "create_sub_agent «ünï» \"q\" \\ 🎉", "files": ["a.txt", "b/c.rs"], "depth": 2, "opts": {"dry": true, "note": null, "ratio": -1.5e3}}"#;

#[derive(Clone, Copy, Debug)]
enum Wire {
    OpenAi,
    Anthropic,
}

fn no_retries() -> HttpOptions {
    HttpOptions {
        retry: RetryPolicy {
            max_retries: 0,
            base_delay_ms: 1,
            max_delay_ms: 1,
        },
        ..HttpOptions::default()
    }
}

/// The two models of one server (the server refuses malformed histories).
struct Models {
    server: FakeServer,
    openai: OpenAiModel,
    anthropic: AnthropicModel,
}

impl Models {
    async fn start() -> Self {
        let server = FakeServer::start([]).await.unwrap();
        server.refuse(|r| {
            if r.path.ends_with("/chat/completions") {
                openai::refuse_malformed_arguments(r)
            } else {
                anthropic::refuse_malformed_input(r)
            }
        });
        let base = server.base_url();
        let openai =
            OpenAiModel::new("gpt-4o-mini", format!("{base}/v1"), None, no_retries()).unwrap();
        let anthropic =
            AnthropicModel::new("claude-sonnet-4-5", base, Some("k".into()), no_retries()).unwrap();
        Self {
            server,
            openai,
            anthropic,
        }
    }

    fn model(&self, wire: Wire) -> &dyn Model {
        match wire {
            Wire::OpenAi => &self.openai,
            Wire::Anthropic => &self.anthropic,
        }
    }

    /// The items of one call answered with `response`.
    async fn call(&self, wire: Wire, response: FakeResponse) -> Vec<Item> {
        self.server.push(response);
        collect(
            self.model(wire)
                .stream(request(Vec::new()), CancellationToken::new()),
        )
        .await
    }

    /// Sends the history that `items` leave (their text and tool calls, each call
    /// answered) and checks that the body is well-formed and accepted.
    async fn follow_up(&self, wire: Wire, items: &[Item], context: &str) {
        let calls: Vec<ToolCallRequest> = items
            .iter()
            .filter_map(|i| match i {
                Ok(ModelEvent::ToolCall(c)) => Some(c.clone()),
                _ => None,
            })
            .collect();
        let mut history = vec![Message::Assistant {
            text: text_of(items),
            tool_calls: calls.clone(),
        }];
        for c in &calls {
            history.push(Message::Tool {
                tool_call_id: c.id.clone(),
                name: c.name.clone(),
                content: "the arguments were cut; the call did not run".into(),
                is_error: true,
            });
        }
        let next = request(history);
        let body = match wire {
            Wire::OpenAi => {
                let body = self.openai.request_body(&next);
                let bytes: Value =
                    serde_json::from_slice(&self.openai.request_bytes(&next)).unwrap();
                assert_eq!(bytes, body, "{context}: the cached body differs");
                body
            }
            Wire::Anthropic => {
                let body = self.anthropic.request_body(&next);
                let bytes: Value =
                    serde_json::from_slice(&self.anthropic.request_bytes(&next)).unwrap();
                assert_eq!(bytes, body, "{context}: the cached body differs");
                body
            }
        };
        for args in sent_arguments(&body) {
            assert!(args.is_object(), "{context}: the history carries {args:?}");
        }
        self.server
            .push(FakeResponse::sse_parts(vec![Part::text(match wire {
                Wire::OpenAi => openai::text_stream(&["ok"]),
                Wire::Anthropic => anthropic::text_stream(&["ok"]),
            })]));
        let answered = collect(self.model(wire).stream(next, CancellationToken::new())).await;
        assert_eq!(
            text_of(&answered),
            "ok",
            "{context}: the server refused the history: {answered:?}"
        );
    }
}

fn request(history: Vec<Message>) -> ModelRequest {
    let mut messages = vec![Message::User {
        text: "Plan it.".into(),
        images: vec![],
    }];
    let go_on = !history.is_empty();
    messages.extend(history);
    if go_on {
        messages.push(Message::User {
            text: "Go on.".into(),
            images: vec![],
        });
    }
    ModelRequest {
        system: "You are Keel.".into(),
        messages: messages.into(),
        tools: vec![ToolDef {
            name: "spawn_sub_agent".into(),
            description: "Spawns a sub-agent.".into(),
            parameters: json!({"type": "object"}),
        }]
        .into(),
        max_output_tokens: Some(64),
    }
}

/// Every tool call's arguments in a body as sent: OpenAI's `function.arguments`
/// parsed (`null` when it is not JSON), Anthropic's `tool_use.input`.
fn sent_arguments(body: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            let text = c["function"]["arguments"].as_str().unwrap_or("");
            out.push(serde_json::from_str(text).unwrap_or(Value::Null));
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_use" {
                out.push(b["input"].clone());
            }
        }
    }
    out
}

/// `text` in pieces of at most three characters.
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(3).map(|c| c.iter().collect()).collect()
}

/// An OpenAI stream whose call stops at `args`, cut by the cap.
fn openai_cut(args: &str) -> String {
    let mut chunks = vec![
        openai::chunk(json!({"role": "assistant", "content": null}), None),
        openai::chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_cut", "type": "function", "function": {"name": "spawn_sub_agent", "arguments": ""}}]}),
            None,
        ),
    ];
    for p in pieces(args) {
        chunks.push(openai::chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
            None,
        ));
    }
    chunks.push(openai::chunk(json!({}), Some("length")));
    chunks.push(openai::usage_chunk(20, 64));
    openai::sse(&chunks)
}

fn message_start() -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_cut", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null, "usage": {"input_tokens": 20, "output_tokens": 1}}}),
    )
}

/// An Anthropic stream whose tool use stops at `input`, cut by the cap; with or
/// without the block's `content_block_stop`.
fn anthropic_cut(input: &str, block_stop: bool) -> String {
    let mut events = vec![
        message_start(),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_cut", "name": "spawn_sub_agent", "input": {}}}),
        ),
    ];
    for p in pieces(input) {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}),
        ));
    }
    if block_stop {
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": null}, "usage": {"output_tokens": 64}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    anthropic::sse(&events)
}

/// What a call cut at `prefix` must carry: the parsed object, `{}` for nothing, or
/// the text for the kernel to quote.
fn expected_arguments(prefix: &str) -> Value {
    if prefix.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(prefix) {
        Ok(v) if v.is_object() => v,
        _ => json!({"__invalid_json": prefix}),
    }
}

#[tokio::test]
async fn arguments_cut_by_the_cap_at_every_character_leave_a_well_formed_history() {
    let models = Models::start().await;
    let cuts: Vec<usize> = (0..=ARGUMENTS.len())
        .filter(|i| ARGUMENTS.is_char_boundary(*i))
        .collect();
    for &cut in &cuts {
        let prefix = &ARGUMENTS[..cut];
        for (wire, sse) in [
            (Wire::OpenAi, openai_cut(prefix)),
            (Wire::Anthropic, anthropic_cut(prefix, true)),
            (Wire::Anthropic, anthropic_cut(prefix, false)),
        ] {
            let context = format!("{wire:?} cut at byte {cut} ({prefix:?})");
            // Chunks of 97 bytes: boundaries fall inside events, fewer writes than `sse`'s 7.
            let items = models
                .call(wire, FakeResponse::sse_parts(split_bytes(&sse, 97)))
                .await;
            let calls: Vec<&ToolCallRequest> = items
                .iter()
                .filter_map(|i| match i {
                    Ok(ModelEvent::ToolCall(c)) => Some(c),
                    _ => None,
                })
                .collect();
            assert_eq!(calls.len(), 1, "{context}: {items:?}");
            assert_eq!(calls[0].arguments, expected_arguments(prefix), "{context}");
            assert_eq!(
                items.last(),
                Some(&Ok(ModelEvent::Finished(FinishReason::MaxTokens))),
                "{context}"
            );
            models.follow_up(wire, &items, &context).await;
        }
    }
    // Each cut point: one cut call and one follow-up per stream.
    assert_eq!(models.server.requests().len(), cuts.len() * 3 * 2);
}

/// The whole stream of an answer with text and a tool call.
fn whole_stream(wire: Wire) -> String {
    match wire {
        Wire::OpenAi => {
            let mut chunks = vec![openai::chunk(
                json!({"role": "assistant", "content": "Let me plan — «ok»."}),
                None,
            )];
            chunks.push(openai::chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "spawn_sub_agent", "arguments": &ARGUMENTS[..40]}}]}),
                None,
            ));
            chunks.push(openai::chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": &ARGUMENTS[40..]}}]}),
                Some("tool_calls"),
            ));
            openai::sse(&chunks)
        }
        Wire::Anthropic => {
            let events = vec![
                message_start(),
                (
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Let me plan — «ok»."}}),
                ),
                (
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ),
                (
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "spawn_sub_agent", "input": {}}}),
                ),
                (
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": &ARGUMENTS[..40]}}),
                ),
                (
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": &ARGUMENTS[40..]}}),
                ),
                (
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 1}),
                ),
                (
                    "message_delta",
                    json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 50}}),
                ),
                ("message_stop", json!({"type": "message_stop"})),
            ];
            anthropic::sse(&events)
        }
    }
}

#[tokio::test]
async fn a_stream_closed_at_every_byte_ends_cleanly_with_a_well_formed_history() {
    let models = Models::start().await;
    let full: Value = serde_json::from_str(ARGUMENTS).unwrap();
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let whole = whole_stream(wire).into_bytes();
        let mut complete = 0;
        for cut in 0..=whole.len() {
            let context = format!("{wire:?} closed after byte {cut} of {}", whole.len());
            let response =
                FakeResponse::sse_parts(vec![Part::Bytes(whole[..cut].to_vec()), Part::Cut]);
            let items = models.call(wire, response).await;
            // Text is a prefix of what was sent, never garbage.
            assert!(
                "Let me plan — «ok».".starts_with(&text_of(&items)),
                "{context}: {items:?}"
            );
            for i in &items {
                if let Ok(ModelEvent::ToolCall(c)) = i {
                    assert_eq!(c.arguments, full, "{context}: a call is whole or absent");
                }
            }
            match items.last() {
                Some(Ok(ModelEvent::Finished(_))) => complete += 1,
                Some(Err(e)) => assert!(
                    e.0.retryable || e.0.message.contains("malformed"),
                    "{context}: {e:?}"
                ),
                other => panic!("{context}: the stream ended with {other:?}"),
            }
            if items
                .iter()
                .any(|i| matches!(i, Ok(ModelEvent::ToolCall(_))))
            {
                models.follow_up(wire, &items, &context).await;
            }
        }
        // Only the cuts in the last event's final blank line, or after it, complete.
        assert!((1..=3).contains(&complete), "{wire:?}: {complete} complete");
    }
}

/// A history from elsewhere (a script, a stored session) may hold arguments that are
/// not an object: they go back as `{}` in both formats, as cut ones do.
#[tokio::test]
async fn arguments_that_are_not_an_object_go_back_as_an_empty_object() {
    let models = Models::start().await;
    for (i, arguments) in [
        json!(null),
        json!([1, 2]),
        json!("text"),
        json!(7),
        json!({"__invalid_json": "{\"a\": "}),
    ]
    .into_iter()
    .enumerate()
    {
        let call = ToolCallRequest {
            id: format!("call_{i}"),
            name: "spawn_sub_agent".into(),
            arguments: arguments.clone(),
        };
        let items = vec![
            Ok(ModelEvent::ToolCall(call)),
            Ok(ModelEvent::Finished(FinishReason::ToolUse)),
        ];
        for wire in [Wire::OpenAi, Wire::Anthropic] {
            let context = format!("{wire:?} with arguments {arguments}");
            models.follow_up(wire, &items, &context).await;
        }
        let history = request(vec![Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCallRequest {
                id: "c".into(),
                name: "n".into(),
                arguments,
            }],
        }]);
        assert_eq!(
            sent_arguments(&models.openai.request_body(&history)),
            [json!({})]
        );
        assert_eq!(
            sent_arguments(&models.anthropic.request_body(&history)),
            [json!({})]
        );
    }
}
