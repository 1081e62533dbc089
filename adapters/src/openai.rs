//! The OpenAI-compatible Chat Completions provider (OpenAI, Ollama, vLLM, llama.cpp,
//! LM Studio, OpenRouter, …), streaming over server-sent events.

use std::collections::BTreeMap;

use keel_envelope::types::Usage;
use keel_kernel::model::{FinishReason, ModelEvent, ModelRequest, ToolCallRequest};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use serde_json::{json, Value};

use crate::convert::{normalize_history, parse_arguments};
use crate::error::{classify_stream_error, malformed, Failure};
use crate::http::Decoder;
use crate::messages::{convert_message, is_empty_assistant};
use crate::provider::{HttpModel, Wire};
use crate::sse::SseEvent;

/// The default base URL.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
const PROVIDER: &str = "OpenAI";

/// OpenAI's Chat Completions wire format, streamed (the marker of [`OpenAiModel`]).
#[derive(Debug, Clone, Copy)]
pub struct ChatCompletions;

/// A model behind an OpenAI-compatible `/chat/completions` endpoint.
pub type OpenAiModel = HttpModel<ChatCompletions>;

impl Wire for ChatCompletions {
    const PROVIDER: &'static str = "openai";
    const LABEL: &'static str = PROVIDER;
    const PATH: &'static str = "/chat/completions";
    const MODELS_PATH: &'static str = "/models";
    const DEFAULT_BASE_URL: &'static str = OPENAI_DEFAULT_BASE_URL;

    fn body(model: &OpenAiModel, request: &ModelRequest) -> Vec<u8> {
        model.request_bytes(request)
    }

    fn add_headers(headers: &mut HeaderMap, api_key: Option<&str>) {
        if let Some(v) = api_key.and_then(|k| HeaderValue::from_str(&format!("Bearer {k}")).ok()) {
            headers.insert(AUTHORIZATION, v);
        }
    }

    fn decoder() -> Box<dyn Decoder> {
        Box::<OpenAiDecoder>::default()
    }
}

impl OpenAiModel {
    /// The bytes of the body sent for `request`: the serialisation of
    /// [`request_body`](Self::request_body), written from the cached encoding of the
    /// history's messages plus what is new (see [`crate::fragments`]).
    pub fn request_bytes(&self, request: &ModelRequest) -> Vec<u8> {
        crate::bodies::openai_body(
            &self.cache,
            &self.settings.model,
            request,
            self.cache.tools_bytes(&request.tools, || {
                self.tools_value(request)
                    .map(|v| v.to_string().into_bytes())
            }),
            self.max_entry(request),
        )
    }

    fn tools_value(&self, request: &ModelRequest) -> Option<Value> {
        if request.tools.is_empty() {
            return None;
        }
        Some(
            request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "type": "function",
                        "function": {
                            "name": t.name,
                            "description": t.description,
                            "parameters": t.parameters,
                        }
                    })
                })
                .collect(),
        )
    }

    /// The output cap's key and value. Every call carries a cap: a local server
    /// otherwise generates until its context is full.
    fn max_entry(&self, request: &ModelRequest) -> (&'static str, u32) {
        let max = self.max_output_tokens(request);
        let reasoning = ["o1", "o3", "o4", "gpt-5"]
            .iter()
            .any(|p| self.settings.model.starts_with(p));
        let key = if reasoning {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        (key, max)
    }

    /// The JSON body sent for `request`, encoded whole: the reference for
    /// [`request_bytes`](Self::request_bytes), which sends the same bytes.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut messages = Vec::new();
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": request.system}));
        }
        for m in normalize_history(&request.messages) {
            if is_empty_assistant(&m) {
                continue;
            }
            messages.push(convert_message(&m));
        }
        let mut body = json!({
            "model": self.settings.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if let Some(tools) = self.tools_value(request) {
            body["tools"] = tools;
        }
        let (key, max) = self.max_entry(request);
        body[key] = json!(max);
        body
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Debug, Default)]
struct OpenAiDecoder {
    calls: BTreeMap<u64, PartialCall>,
    finish: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

impl OpenAiDecoder {
    /// Some servers omit `index`: a delta with a new id starts a new call, one
    /// with a known id continues it, one without id continues the last call.
    fn index_without_position(&self, id: Option<&str>) -> u64 {
        let next = self.calls.keys().next_back().map_or(0, |k| k + 1);
        match id.filter(|s| !s.is_empty()) {
            Some(id) => self
                .calls
                .iter()
                .find(|(_, c)| c.id == id)
                .map_or(next, |(k, _)| *k),
            None => next.saturating_sub(1),
        }
    }

    fn finalize(&mut self, out: &mut Vec<ModelEvent>) {
        let calls = std::mem::take(&mut self.calls);
        let has_calls = !calls.is_empty();
        for (index, call) in calls {
            out.push(ModelEvent::ToolCall(ToolCallRequest {
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: parse_arguments(&call.arguments),
            }));
        }
        if let Some(u) = self.usage.take() {
            out.push(ModelEvent::Usage(u));
        }
        let reason = match self.finish.as_deref() {
            Some("tool_calls" | "function_call") => FinishReason::ToolUse,
            Some("length") => FinishReason::MaxTokens,
            Some("content_filter") => FinishReason::Refusal,
            _ if has_calls => FinishReason::ToolUse,
            _ => FinishReason::EndTurn,
        };
        out.push(ModelEvent::Finished(reason));
        self.done = true;
    }
}

impl Decoder for OpenAiDecoder {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finalize(out);
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| malformed(PROVIDER, format!("bad JSON in an event ({e})")))?;
        if chunk.get("error").is_some_and(|e| !e.is_null()) {
            return Err(classify_stream_error(PROVIDER, &chunk));
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
            self.usage = Some(Usage::new(
                n(u.get("prompt_tokens")),
                n(u.get("completion_tokens")),
                n(u.pointer("/prompt_tokens_details/cached_tokens")),
            ));
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(());
        };
        for choice in choices {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.get("delta") {
                for key in ["reasoning_content", "reasoning"] {
                    if let Some(t) = str_field(delta, key).filter(|t| !t.is_empty()) {
                        out.push(ModelEvent::ThoughtDelta(t.to_owned()));
                    }
                }
                if let Some(t) = str_field(delta, "content").filter(|t| !t.is_empty()) {
                    out.push(ModelEvent::TextDelta(t.to_owned()));
                }
                if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                    for tc in calls {
                        let index = match tc.get("index").and_then(Value::as_u64) {
                            Some(i) => i,
                            None => self.index_without_position(str_field(tc, "id")),
                        };
                        let entry = self.calls.entry(index).or_default();
                        if let Some(id) = str_field(tc, "id").filter(|s| !s.is_empty()) {
                            if entry.id.is_empty() {
                                entry.id = id.to_owned();
                            }
                        }
                        if let Some(f) = tc.get("function") {
                            if let Some(name) = str_field(f, "name").filter(|s| !s.is_empty()) {
                                if entry.name.is_empty() {
                                    entry.name = name.to_owned();
                                }
                            }
                            match f.get("arguments") {
                                Some(Value::String(a)) => entry.arguments.push_str(a),
                                Some(v @ Value::Object(_)) => entry.arguments = v.to_string(),
                                _ => {}
                            }
                        }
                    }
                }
            }
            if let Some(reason) = str_field(choice, "finish_reason") {
                self.finish = Some(reason.to_owned());
            }
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::HttpOptions;
    use keel_kernel::model::Message;
    use keel_kernel::model::ToolDef;

    fn decode(events: &[&str]) -> Vec<Result<ModelEvent, String>> {
        let mut d = OpenAiDecoder::default();
        let mut all = Vec::new();
        for e in events {
            let mut out = Vec::new();
            let r = d.on_event(
                SseEvent {
                    event: None,
                    data: (*e).to_owned(),
                },
                &mut out,
            );
            all.extend(out.into_iter().map(Ok));
            if let Err(f) = r {
                all.push(Err(f.payload.message));
            }
        }
        all
    }

    #[test]
    fn assembles_tool_calls_by_index() {
        let ev = decode(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"list_dir","arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}},{"index":1,"function":{"arguments":"th\":\".\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            ev,
            vec![
                Ok(ModelEvent::ToolCall(ToolCallRequest {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "a.txt"})
                })),
                Ok(ModelEvent::ToolCall(ToolCallRequest {
                    id: "call_b".into(),
                    name: "list_dir".into(),
                    arguments: json!({"path": "."})
                })),
                Ok(ModelEvent::Finished(FinishReason::ToolUse)),
            ]
        );
    }

    #[test]
    fn tool_calls_without_index_are_told_apart_by_id() {
        let ev = decode(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"a","arguments":"{\"x\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_2","type":"function","function":{"name":"b","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            ev,
            vec![
                Ok(ModelEvent::ToolCall(ToolCallRequest {
                    id: "call_1".into(),
                    name: "a".into(),
                    arguments: json!({"x": 1})
                })),
                Ok(ModelEvent::ToolCall(ToolCallRequest {
                    id: "call_2".into(),
                    name: "b".into(),
                    arguments: json!({})
                })),
                Ok(ModelEvent::Finished(FinishReason::ToolUse)),
            ]
        );
    }

    #[test]
    fn finish_reasons_map() {
        for (reason, expected) in [
            ("stop", FinishReason::EndTurn),
            ("length", FinishReason::MaxTokens),
            ("content_filter", FinishReason::Refusal),
            ("tool_calls", FinishReason::ToolUse),
        ] {
            let chunk =
                format!(r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{reason}"}}]}}"#);
            let ev = decode(&[&chunk, "[DONE]"]);
            assert_eq!(ev, vec![Ok(ModelEvent::Finished(expected))], "{reason}");
        }
    }

    #[test]
    fn reasoning_usage_and_error_chunks() {
        let ev = decode(&[
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"thinking"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}"#,
            "[DONE]",
        ]);
        assert_eq!(
            ev,
            vec![
                Ok(ModelEvent::ThoughtDelta("thinking".into())),
                Ok(ModelEvent::TextDelta("hi".into())),
                Ok(ModelEvent::Usage(Usage::new(12, 3, 4))),
                Ok(ModelEvent::Finished(FinishReason::EndTurn)),
            ]
        );
        let ev = decode(&[r#"{"error":{"message":"upstream exploded","type":"server_error"}}"#]);
        assert!(matches!(&ev[0], Err(m) if m.contains("upstream exploded")));
        let ev = decode(&["{not json"]);
        assert!(matches!(&ev[0], Err(m) if m.contains("malformed")));
    }

    #[test]
    fn request_body_converts_history_and_tools() {
        let m = OpenAiModel::new("gpt-4o-mini", "http://x/v1/", None, HttpOptions::default())
            .expect("client");
        assert_eq!(m.url(), "http://x/v1/chat/completions");
        let req = ModelRequest {
            system: "be brief".into(),
            messages: vec![
                Message::User {
                    text: "read a".into(),
                    images: vec![],
                },
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![ToolCallRequest {
                        id: "toolu_01".into(),
                        name: "read_file".into(),
                        arguments: json!({"path": "a"}),
                    }],
                },
                Message::Tool {
                    tool_call_id: "toolu_01".into(),
                    name: "read_file".into(),
                    content: "A".into(),
                    is_error: false,
                },
            ]
            .into(),
            tools: vec![ToolDef {
                name: "read_file".into(),
                description: "Reads".into(),
                parameters: json!({"type": "object"}),
            }]
            .into(),
            max_output_tokens: Some(100),
        };
        let body = m.request_body(&req);
        assert_eq!(
            body,
            json!({
                "model": "gpt-4o-mini",
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 100,
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "read a"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "toolu_01", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "toolu_01", "content": "A"},
                ],
                "tools": [{"type": "function", "function": {"name": "read_file", "description": "Reads", "parameters": {"type": "object"}}}],
            })
        );
    }
}
