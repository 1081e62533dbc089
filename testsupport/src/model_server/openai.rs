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

/// llama-server's `GET /props` body for a server whose slots hold `n_ctx` tokens
/// each (`-c` divided by `--parallel`), in the shape of its `default_generation_settings`.
pub fn llama_props(n_ctx: u64) -> Value {
    json!({
        "default_generation_settings": {
            "id": 0,
            "id_task": -1,
            "n_ctx": n_ctx,
            "speculative": false,
            "is_processing": false,
            "params": {"n_predict": -1, "seed": 4_294_967_295_u64, "temperature": 0.8, "top_k": 40, "top_p": 0.95},
        },
        "total_slots": 1,
        "model_path": "/models/qwen2.5-0.5b-instruct-q4_k_m.gguf",
        "chat_template": "{%- for message in messages %}{{ message.content }}{%- endfor %}",
        "modalities": {"vision": false, "audio": false},
        "build_info": "b5000-0000000",
    })
}

/// llama-server's `GET /v1/models` body: the one model it serves, listed by its file
/// path, with the context it was trained on in `meta.n_ctx_train`.
pub fn llama_models(path: &str, n_ctx_train: u64) -> Value {
    json!({
        "object": "list",
        "data": [{
            "id": path,
            "object": "model",
            "created": 1_700_000_000,
            "owned_by": "llamacpp",
            "meta": {"vocab_type": 2, "n_vocab": 151_936, "n_ctx_train": n_ctx_train, "n_embd": 896, "n_params": 494_032_768_u64, "size": 491_400_032_u64},
        }],
    })
}

/// What llama-server answers a chat request whose history holds a tool call with
/// arguments that are not a JSON text (`500 Failed to parse tool call arguments as
/// JSON`), for [`FakeServer::refuse`](super::FakeServer::refuse); `None` for a
/// well-formed body.
pub fn refuse_malformed_arguments(request: &super::RecordedRequest) -> Option<super::FakeResponse> {
    let body = request.json()?;
    let malformed = body["messages"]
        .as_array()?
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .any(|c| match c["function"]["arguments"].as_str() {
            Some(text) => serde_json::from_str::<Value>(text).is_err(),
            None => true,
        });
    malformed.then(|| {
        super::FakeResponse::json(
            500,
            &json!({"error": {
                "code": 500,
                "message": "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 23: syntax error while parsing value - invalid string: missing closing quote; last read: '\"create_sub_'",
                "type": "server_error",
            }}),
        )
    })
}
