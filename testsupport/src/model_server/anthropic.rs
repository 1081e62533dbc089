//! Builders for Anthropic Messages streams and errors.

use serde_json::{json, Value};

/// SSE text of `(event, data)` pairs.
pub fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

fn start() -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 25, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
        }}),
    )
}

fn end(stop_reason: &str, output_tokens: u64) -> [(&'static str, Value); 2] {
    [
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": output_tokens}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

/// A text answer in the given pieces, `end_turn`, usage 25/15.
pub fn text_stream(pieces: &[&str]) -> String {
    let mut ev = vec![
        start(),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    for p in pieces {
        ev.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}),
        ));
    }
    ev.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    ev.extend(end("end_turn", 15));
    sse(&ev)
}

/// Optional text then tool uses `(id, name, input JSON text)` with the input
/// split in two `input_json_delta`s, `tool_use`, usage 25/30.
pub fn tool_use_stream(text: &str, calls: &[(&str, &str, &str)]) -> String {
    let mut ev = vec![start()];
    let mut index = 0;
    if !text.is_empty() {
        ev.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        ev.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ));
        ev.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        index = 1;
    }
    for (id, name, input) in calls {
        let mut mid = input.len() / 2;
        while !input.is_char_boundary(mid) {
            mid -= 1;
        }
        ev.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for piece in ["", &input[..mid], &input[mid..]] {
            ev.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
        }
        ev.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    ev.extend(end("tool_use", 30));
    sse(&ev)
}

/// An error body shaped like Anthropic's.
pub fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// What the Messages API answers a request whose history holds a `tool_use` with an
/// `input` that is not an object (`400 invalid_request_error`), for
/// [`FakeServer::refuse`](super::FakeServer::refuse); `None` for a well-formed body.
pub fn refuse_malformed_input(request: &super::RecordedRequest) -> Option<super::FakeResponse> {
    let body = request.json()?;
    let bad = body["messages"]
        .as_array()?
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(move |(j, b)| (i, j, b))
        })
        .find(|(_, _, b)| b["type"] == "tool_use" && !b["input"].is_object());
    bad.map(|(i, j, _)| {
        super::FakeResponse::json(
            400,
            &error_body(
                "invalid_request_error",
                &format!(
                    "messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
                ),
            ),
        )
    })
}
