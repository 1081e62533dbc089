//! What the kernel's telemetry spans say of its values: a model's provider and name,
//! a finish reason, an error's type, and the conversation in the shape of the GenAI
//! conventions' `gen_ai.input.messages` (content, recorded only with `logContent`).
//! The spans themselves are `keel_telemetry`'s; the layers above start them where the
//! work happens (a request, a model call, a tool call, an approval, a hook, an MCP
//! call).

use keel_envelope::ErrorPayload;
use serde_json::{json, Value};

use crate::base::model::{FinishReason, Message};

/// `provider:model` split into `gen_ai.provider.name` and `gen_ai.request.model`
/// (an id without `:` is all model).
pub(crate) fn provider_model(id: &str) -> (&str, &str) {
    match id.split_once(':') {
        Some((p, m)) => (p, m),
        None => ("", id),
    }
}

/// `gen_ai.response.finish_reasons`, in the words most providers use.
pub(crate) fn finish_reason(r: FinishReason) -> &'static str {
    match r {
        FinishReason::EndTurn => "stop",
        FinishReason::ToolUse => "tool_calls",
        FinishReason::MaxTokens => "length",
        FinishReason::Refusal => "content_filter",
    }
}

/// `error.type` of a failure: its stable code.
pub(crate) fn error_type(e: &ErrorPayload) -> &str {
    e.code.as_str()
}

/// A message in the conventions' shape: `{role, parts: [...]}`.
fn message_json(m: &Message) -> Value {
    match m {
        Message::User { text, .. } => {
            json!({"role": "user", "parts": [{"type": "text", "content": text}]})
        }
        Message::Assistant { text, tool_calls } => {
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(json!({"type": "text", "content": text}));
            }
            for c in tool_calls {
                parts.push(json!({
                    "type": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments,
                }));
            }
            json!({"role": "assistant", "parts": parts})
        }
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => json!({"role": "tool", "parts": [{
            "type": "tool_call_response", "id": tool_call_id, "response": content,
        }]}),
    }
}

/// The messages of a model call, as JSON text.
pub(crate) fn messages_json(messages: &[Message]) -> String {
    Value::Array(messages.iter().map(message_json).collect()).to_string()
}

/// The system instructions of a model call, as JSON text.
pub(crate) fn system_json(system: &str) -> String {
    json!([{"type": "text", "content": system}]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_messages_take_the_conventions_shape() {
        assert_eq!(provider_model("openai:gpt-4o"), ("openai", "gpt-4o"));
        assert_eq!(provider_model("x"), ("", "x"));
        assert_eq!(finish_reason(FinishReason::ToolUse), "tool_calls");
        let text = messages_json(&[Message::User {
            text: "hi".into(),
            images: Vec::new(),
        }]);
        let got: Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(
            got,
            json!([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
        );
    }
}
