//! One history message in each provider's wire format: what both the whole body
//! (`request_body`) and the body written from cached fragments (`bodies.rs`) are made
//! of.

use keel_kernel::model::Message;
use serde_json::{json, Value};

use crate::convert::{
    anthropic_tool_id, invalid_json_text, load_image, missing_image_note, openai_tool_id,
};

/// An assistant message with neither text nor tool calls (not sent).
pub(crate) fn is_empty_assistant(m: &Message) -> bool {
    matches!(m, Message::Assistant { text, tool_calls } if text.is_empty() && tool_calls.is_empty())
}

/// One history message as an OpenAI wire message.
pub(crate) fn convert_message(m: &Message) -> Value {
    match m {
        Message::User { text, images } if images.is_empty() => {
            json!({"role": "user", "content": text})
        }
        Message::User { text, images } => {
            let mut parts = vec![json!({"type": "text", "text": text})];
            for path in images {
                match load_image(path) {
                    Some(img) => parts.push(json!({
                        "type": "image_url",
                        "image_url": {"url": format!("data:{};base64,{}", img.media_type, img.base64)}
                    })),
                    None => parts.push(json!({"type": "text", "text": missing_image_note(path)})),
                }
            }
            json!({"role": "user", "content": parts})
        }
        Message::Assistant { text, tool_calls } => {
            let mut msg = json!({"role": "assistant"});
            msg["content"] = if text.is_empty() && !tool_calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            if !tool_calls.is_empty() {
                msg["tool_calls"] = tool_calls
                    .iter()
                    .map(|c| {
                        // Arguments the model sent as invalid JSON (a stream cut in the
                        // middle of them) go back as `{}`: servers refuse malformed ones
                        // (llama-server: HTTP 500), and the call's result quotes them.
                        // Anything but an object (a script's, a stored history's) goes
                        // back as `{}` too, as in the Anthropic body.
                        let arguments = if invalid_json_text(&c.arguments).is_some()
                            || !c.arguments.is_object()
                        {
                            "{}".to_owned()
                        } else {
                            c.arguments.to_string()
                        };
                        json!({
                            "id": openai_tool_id(&c.id),
                            "type": "function",
                            "function": {"name": c.name, "arguments": arguments},
                        })
                    })
                    .collect();
            }
            msg
        }
        Message::Tool {
            tool_call_id,
            content,
            is_error,
            ..
        } => {
            let content = if *is_error {
                format!("Error: {content}")
            } else {
                content.clone()
            };
            json!({"role": "tool", "tool_call_id": openai_tool_id(tool_call_id), "content": content})
        }
    }
}

/// The role and content blocks of one normalised history message (none for an
/// assistant message with only blank text).
pub(crate) fn blocks_of(m: Message) -> (&'static str, Vec<Value>) {
    match m {
        Message::User { text, images } => {
            let mut blocks = Vec::new();
            for path in &images {
                match load_image(path) {
                    Some(img) => blocks.push(json!({
                        "type": "image",
                        "source": {"type": "base64", "media_type": img.media_type, "data": img.base64}
                    })),
                    None => blocks.push(json!({"type": "text", "text": missing_image_note(path)})),
                }
            }
            if !text.is_empty() || blocks.is_empty() {
                let text = if text.is_empty() {
                    "(empty message)".to_owned()
                } else {
                    text
                };
                blocks.push(json!({"type": "text", "text": text}));
            }
            ("user", blocks)
        }
        Message::Assistant { text, tool_calls } => {
            let mut blocks = Vec::new();
            if !text.trim().is_empty() {
                blocks.push(json!({"type": "text", "text": text}));
            }
            for c in &tool_calls {
                let input = if invalid_json_text(&c.arguments).is_some() || !c.arguments.is_object()
                {
                    json!({})
                } else {
                    c.arguments.clone()
                };
                blocks.push(json!({
                    "type": "tool_use",
                    "id": anthropic_tool_id(&c.id),
                    "name": c.name,
                    "input": input,
                }));
            }
            ("assistant", blocks)
        }
        Message::Tool {
            tool_call_id,
            content,
            is_error,
            ..
        } => {
            let mut block = json!({
                "type": "tool_result",
                "tool_use_id": anthropic_tool_id(&tool_call_id),
                "content": content,
            });
            if is_error {
                block["is_error"] = json!(true);
            }
            ("user", vec![block])
        }
    }
}
