//! The Anthropic Messages provider, streaming over server-sent events.

use std::collections::BTreeMap;

use keel_envelope::types::Usage;
use keel_kernel::model::{FinishReason, Message, ModelEvent, ModelRequest, ToolCallRequest};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Value};

use crate::convert::{normalize_history, parse_arguments};
use crate::error::{classify_stream_error, malformed, Failure};
use crate::http::Decoder;
use crate::messages::blocks_of;
use crate::provider::{HttpModel, Wire};
use crate::sse::SseEvent;

/// The default base URL.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
const PROVIDER: &str = "Anthropic";

/// Anthropic's Messages wire format, streamed (the marker of [`AnthropicModel`]).
#[derive(Debug, Clone, Copy)]
pub struct MessagesApi;

/// A Claude model behind the Messages API (`/v1/messages`), with the key sent as
/// `x-api-key`.
pub type AnthropicModel = HttpModel<MessagesApi>;

impl Wire for MessagesApi {
    const PROVIDER: &'static str = "anthropic";
    const LABEL: &'static str = PROVIDER;
    const PATH: &'static str = "/v1/messages";
    const MODELS_PATH: &'static str = "/v1/models";
    const DEFAULT_BASE_URL: &'static str = ANTHROPIC_DEFAULT_BASE_URL;

    fn body(model: &AnthropicModel, request: &ModelRequest) -> Vec<u8> {
        model.request_bytes(request)
    }

    fn add_headers(headers: &mut HeaderMap, api_key: Option<&str>) {
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(v) = api_key.and_then(|k| HeaderValue::from_str(k).ok()) {
            headers.insert(HeaderName::from_static("x-api-key"), v);
        }
    }

    fn decoder() -> Box<dyn Decoder> {
        Box::<AnthropicDecoder>::default()
    }
}

impl AnthropicModel {
    /// The bytes of the body sent for `request`: the serialisation of
    /// [`request_body`](Self::request_body), written from the cached encoding of the
    /// history's messages plus what is new (see [`crate::fragments`]).
    pub fn request_bytes(&self, request: &ModelRequest) -> Vec<u8> {
        crate::bodies::anthropic_body(
            &self.cache,
            &self.settings.model,
            self.max_output_tokens(request),
            request,
            self.cache.tools_bytes(&request.tools, || {
                tools_value(request).map(|v| v.to_string().into_bytes())
            }),
        )
    }

    /// The JSON body sent for `request`, encoded whole: the reference for
    /// [`request_bytes`](Self::request_bytes), which sends the same bytes.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut body = json!({
            "model": self.settings.model,
            "max_tokens": self.max_output_tokens(request),
            "stream": true,
            "messages": convert_messages(&request.messages),
        });
        if !request.system.is_empty() {
            body["system"] = json!(request.system);
        }
        if let Some(tools) = tools_value(request) {
            body["tools"] = tools;
        }
        body
    }
}

fn tools_value(request: &ModelRequest) -> Option<Value> {
    if request.tools.is_empty() {
        return None;
    }
    Some(
        request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters,
                })
            })
            .collect(),
    )
}

/// Converts a neutral history to Anthropic messages: roles alternate (adjacent
/// messages of one role are merged, so consecutive tool results form one user
/// message), the first message is a user message, and tool ids are sanitised.
fn convert_messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        match out.last_mut() {
            Some((r, existing)) if *r == role => existing.extend(blocks),
            _ => out.push((role, blocks)),
        }
    };
    for m in normalize_history(messages) {
        let (role, blocks) = blocks_of(m);
        push(role, blocks);
    }
    if out.first().is_some_and(|(r, _)| *r == "assistant") {
        out.insert(
            0,
            (
                "user",
                vec![json!({"type": "text", "text": "(conversation continued)"})],
            ),
        );
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

#[derive(Debug)]
enum Block {
    Text,
    Thinking,
    ToolUse {
        id: String,
        name: String,
        json: String,
        initial: Value,
    },
    Other,
}

#[derive(Debug, Default)]
struct AnthropicDecoder {
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<String>,
    saw_tool_call: bool,
    done: bool,
}

fn u64_at(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

impl AnthropicDecoder {
    fn read_usage(&mut self, u: &Value, from_start: bool) {
        let input = u64_at(u, "input_tokens");
        let read = u64_at(u, "cache_read_input_tokens");
        let created = u64_at(u, "cache_creation_input_tokens");
        if from_start || input.is_some() || read.is_some() {
            let (i, r, c) = (input.unwrap_or(0), read.unwrap_or(0), created.unwrap_or(0));
            if from_start || i + r + c > 0 {
                self.usage.input_tokens = i + r + c;
                self.usage.cached_input_tokens = r;
            }
        }
        if let Some(o) = u64_at(u, "output_tokens") {
            self.usage.output_tokens = o;
        }
    }

    fn close_block(&mut self, index: u64, out: &mut Vec<ModelEvent>) {
        if let Some(Block::ToolUse {
            id,
            name,
            json,
            initial,
        }) = self.blocks.remove(&index)
        {
            let arguments =
                if json.trim().is_empty() && initial.as_object().is_some_and(|o| !o.is_empty()) {
                    initial
                } else {
                    parse_arguments(&json)
                };
            self.saw_tool_call = true;
            out.push(ModelEvent::ToolCall(ToolCallRequest {
                id,
                name,
                arguments,
            }));
        }
    }
}

impl Decoder for AnthropicDecoder {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        if event.data.trim().is_empty() {
            return Ok(());
        }
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| malformed(PROVIDER, format!("bad JSON in an event ({e})")))?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(event.event)
            .unwrap_or_default();
        let index = u64_at(&data, "index").unwrap_or(0);
        match kind.as_str() {
            "message_start" => {
                if let Some(u) = data.pointer("/message/usage") {
                    self.read_usage(u, true);
                }
            }
            "content_block_start" => {
                let block = data.get("content_block").cloned().unwrap_or(Value::Null);
                let b = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = block
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(ModelEvent::TextDelta(t.to_owned()));
                        }
                        Block::Text
                    }
                    Some("thinking") => {
                        if let Some(t) = block
                            .get("thinking")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(ModelEvent::ThoughtDelta(t.to_owned()));
                        }
                        Block::Thinking
                    }
                    Some("tool_use") => Block::ToolUse {
                        id: block
                            .get("id")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        json: String::new(),
                        initial: block.get("input").cloned().unwrap_or(Value::Null),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, b);
            }
            "content_block_delta" => {
                let delta = data.get("delta").cloned().unwrap_or(Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if let Some(t) = delta
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(ModelEvent::TextDelta(t.to_owned()));
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(t) = delta
                            .get("thinking")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(ModelEvent::ThoughtDelta(t.to_owned()));
                        }
                    }
                    Some("input_json_delta") => {
                        let part = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        match self.blocks.get_mut(&index) {
                            Some(Block::ToolUse { json, .. }) => json.push_str(part),
                            _ => {
                                return Err(malformed(
                                    PROVIDER,
                                    format!("input_json_delta for block {index}, which is not a tool_use block"),
                                ))
                            }
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => self.close_block(index, out),
            "message_delta" => {
                if let Some(r) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_owned());
                }
                if let Some(u) = data.get("usage") {
                    self.read_usage(u, false);
                }
            }
            "message_stop" => {
                let open: Vec<u64> = self.blocks.keys().copied().collect();
                for i in open {
                    self.close_block(i, out);
                }
                out.push(ModelEvent::Usage(self.usage));
                let reason = match self.stop_reason.as_deref() {
                    Some("tool_use") => FinishReason::ToolUse,
                    Some("max_tokens" | "model_context_window_exceeded") => FinishReason::MaxTokens,
                    Some("refusal") => FinishReason::Refusal,
                    None if self.saw_tool_call => FinishReason::ToolUse,
                    _ => FinishReason::EndTurn,
                };
                out.push(ModelEvent::Finished(reason));
                self.done = true;
            }
            "error" => return Err(classify_stream_error(PROVIDER, &data)),
            _ => {}
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
    use crate::convert::anthropic_tool_id;

    fn decode(events: &[(&str, &str)]) -> Vec<Result<ModelEvent, String>> {
        let mut d = AnthropicDecoder::default();
        let mut all = Vec::new();
        for (name, data) in events {
            let mut out = Vec::new();
            let r = d.on_event(
                SseEvent {
                    event: Some((*name).to_owned()),
                    data: (*data).to_owned(),
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
    fn decodes_text_thinking_tools_and_usage() {
        let ev = decode(&[
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":20,"cache_read_input_tokens":5,"output_tokens":1}}}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            ),
            ("ping", r#"{"type":"ping"}"#),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Let me look."}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":1}"#,
            ),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01","name":"read_file","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":".txt\"}"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":2}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        assert_eq!(
            ev,
            vec![
                Ok(ModelEvent::ThoughtDelta("hmm".into())),
                Ok(ModelEvent::TextDelta("Let me look.".into())),
                Ok(ModelEvent::ToolCall(ToolCallRequest {
                    id: "toolu_01".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "a.txt"}),
                })),
                Ok(ModelEvent::Usage(Usage::new(25, 42, 5))),
                Ok(ModelEvent::Finished(FinishReason::ToolUse)),
            ]
        );
    }

    #[test]
    fn stop_reasons_and_errors() {
        for (reason, expected) in [
            ("end_turn", FinishReason::EndTurn),
            ("max_tokens", FinishReason::MaxTokens),
            ("refusal", FinishReason::Refusal),
            ("tool_use", FinishReason::ToolUse),
        ] {
            let delta = format!(
                r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}"}},"usage":{{"output_tokens":1}}}}"#
            );
            let ev = decode(&[
                ("message_delta", &delta),
                ("message_stop", r#"{"type":"message_stop"}"#),
            ]);
            assert_eq!(
                ev.last(),
                Some(&Ok(ModelEvent::Finished(expected))),
                "{reason}"
            );
        }
        let ev = decode(&[(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )]);
        assert!(matches!(&ev[0], Err(m) if m.contains("Overloaded")));
        let ev = decode(&[(
            "content_block_delta",
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
        )]);
        assert!(matches!(&ev[0], Err(m) if m.contains("malformed")));
    }

    #[test]
    fn history_is_grouped_and_ids_sanitised() {
        let msgs = vec![
            Message::User {
                text: "go".into(),
                images: vec![],
            },
            Message::Assistant {
                text: "ok".into(),
                tool_calls: vec![
                    ToolCallRequest {
                        id: "call.1".into(),
                        name: "a".into(),
                        arguments: json!({"x": 1}),
                    },
                    ToolCallRequest {
                        id: "call_2".into(),
                        name: "b".into(),
                        arguments: json!({"__invalid_json": "{"}),
                    },
                ],
            },
            Message::Tool {
                tool_call_id: "call.1".into(),
                name: "a".into(),
                content: "r1".into(),
                is_error: false,
            },
            Message::Tool {
                tool_call_id: "call_2".into(),
                name: "b".into(),
                content: "bad".into(),
                is_error: true,
            },
            Message::User {
                text: "more".into(),
                images: vec![],
            },
        ];
        let id1 = anthropic_tool_id("call.1");
        assert_eq!(
            Value::Array(convert_messages(&msgs)),
            json!([
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "tool_use", "id": id1, "name": "a", "input": {"x": 1}},
                    {"type": "tool_use", "id": "call_2", "name": "b", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": id1, "content": "r1"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "bad", "is_error": true},
                    {"type": "text", "text": "more"},
                ]},
            ])
        );
    }
}
