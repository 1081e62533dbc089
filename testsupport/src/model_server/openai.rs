//! Builders for OpenAI Chat Completions streams and errors.

use serde_json::{json, Value};

/// One `chat.completion.chunk` with the given delta and finish reason.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
    })
}

/// The final usage chunk (`stream_options.include_usage`).
pub fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-4o-mini",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    })
}

/// SSE text of the given chunks followed by `data: [DONE]`.
pub fn sse(chunks: &[Value]) -> String {
    let mut s: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    s.push_str("data: [DONE]\n\n");
    s
}

/// A text answer in the given pieces, `finish_reason: stop`, usage 10/5.
pub fn text_stream(pieces: &[&str]) -> String {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    chunks.extend(pieces.iter().map(|p| chunk(json!({"content": p}), None)));
    chunks.push(chunk(json!({}), Some("stop")));
    chunks.push(usage_chunk(10, 5));
    sse(&chunks)
}

/// Tool calls `(id, name, arguments JSON text)`, each call's arguments split in
/// two deltas, `finish_reason: tool_calls`, usage 20/10.
pub fn tool_calls_stream(calls: &[(&str, &str, &str)]) -> String {
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}), None)];
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let mut mid = args.len() / 2;
        while !args.is_char_boundary(mid) {
            mid -= 1;
        }
        chunks.push(chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
        for piece in [&args[..mid], &args[mid..]] {
            chunks.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    chunks.push(chunk(json!({}), Some("tool_calls")));
    chunks.push(usage_chunk(20, 10));
    sse(&chunks)
}

/// An error body shaped like OpenAI's.
pub fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}
