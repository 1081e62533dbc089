//! Provider-neutral history functions shared by the providers: repairing tool-call
//! pairing, tool-call id mapping, arguments and images.

use base64::Engine as _;
use keel_kernel::model::{Message, ToolCallRequest};

/// The text of a synthesised result for a tool call that has none in the history
/// (for example a call interrupted before it ran).
pub const MISSING_TOOL_RESULT: &str = "No result was recorded for this tool call.";

/// Makes any neutral history acceptable to providers that require every tool call
/// to be answered right after the assistant message that made it:
/// - results that follow their call are kept (in the order given);
/// - a call without a result gets an error result saying so;
/// - a result that answers no preceding call becomes a user message with its text.
pub fn normalize_history(messages: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut i = 0;
    while i < messages.len() {
        match &messages[i] {
            Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
                out.push(messages[i].clone());
                let mut open: Vec<&ToolCallRequest> = tool_calls.iter().collect();
                let mut orphans = Vec::new();
                i += 1;
                while let Some(Message::Tool { tool_call_id, .. }) = messages.get(i) {
                    match open.iter().position(|c| &c.id == tool_call_id) {
                        Some(pos) => {
                            open.remove(pos);
                            out.push(messages[i].clone());
                        }
                        None => orphans.push(orphan_result(&messages[i])),
                    }
                    i += 1;
                }
                for call in open {
                    out.push(Message::Tool {
                        tool_call_id: call.id.clone(),
                        name: call.name.clone(),
                        content: MISSING_TOOL_RESULT.to_owned(),
                        is_error: true,
                    });
                }
                out.extend(orphans);
            }
            Message::Tool { .. } => {
                out.push(orphan_result(&messages[i]));
                i += 1;
            }
            other => {
                out.push(other.clone());
                i += 1;
            }
        }
    }
    out
}

fn orphan_result(m: &Message) -> Message {
    match m {
        Message::Tool {
            tool_call_id,
            name,
            content,
            is_error,
        } => Message::User {
            text: format!(
                "[{} of tool {name} (call {tool_call_id})]\n{content}",
                if *is_error { "Error result" } else { "Result" }
            ),
            images: Vec::new(),
        },
        other => other.clone(),
    }
}

/// FNV-1a, 64 bits: a stable hash for deriving ids.
pub(crate) fn stable_hash(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A tool-call id acceptable to Anthropic (`^[a-zA-Z0-9_-]+$`, at most 64
/// characters). Valid ids are kept; others are mapped deterministically (the same
/// input always gives the same output, and distinct inputs stay distinct).
pub fn anthropic_tool_id(id: &str) -> String {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !id.is_empty() && id.len() <= 64 && id.chars().all(valid) {
        return id.to_owned();
    }
    let cleaned: String = id
        .chars()
        .map(|c| if valid(c) { c } else { '_' })
        .take(40)
        .collect();
    format!("{cleaned}_{:016x}", stable_hash(id))
}

/// A tool-call id acceptable to OpenAI-compatible servers (at most 40 characters).
pub fn openai_tool_id(id: &str) -> String {
    if !id.is_empty() && id.len() <= 40 && !id.chars().any(char::is_control) {
        return id.to_owned();
    }
    format!("call_{:016x}", stable_hash(id))
}

/// The raw text of arguments the model sent as invalid JSON, if that is what they are.
pub(crate) fn invalid_json_text(arguments: &serde_json::Value) -> Option<&str> {
    let obj = arguments.as_object()?;
    if obj.len() != 1 {
        return None;
    }
    obj.get("__invalid_json")?.as_str()
}

/// Parses assembled tool-call arguments: empty → `{}`, a JSON object → itself,
/// anything else → `{"__invalid_json": text}`.
pub(crate) fn parse_arguments(text: &str) -> serde_json::Value {
    if text.trim().is_empty() {
        return serde_json::json!({});
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => serde_json::json!({ "__invalid_json": text }),
    }
}

/// An image read from disk: media type and base64 data.
pub(crate) struct ImageData {
    pub media_type: &'static str,
    pub base64: String,
}

/// Reads a local image. `None` when the file cannot be read or its type is unknown.
pub(crate) fn load_image(path: &str) -> Option<ImageData> {
    let lower = path.to_ascii_lowercase();
    let media_type = if lower.ends_with(".png") {
        "image/png"
    } else if lower.ends_with(".jpg") || lower.ends_with(".jpeg") {
        "image/jpeg"
    } else if lower.ends_with(".gif") {
        "image/gif"
    } else if lower.ends_with(".webp") {
        "image/webp"
    } else {
        return None;
    };
    let bytes = std::fs::read(path).ok()?;
    Some(ImageData {
        media_type,
        base64: base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

/// The note sent in place of an image that could not be read.
pub(crate) fn missing_image_note(path: &str) -> String {
    format!("[image not available: {path}]")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: id.into(),
            name: "read_file".into(),
            arguments: json!({}),
        }
    }
    fn result(id: &str) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: "read_file".into(),
            content: format!("r-{id}"),
            is_error: false,
        }
    }
    fn user(t: &str) -> Message {
        Message::User {
            text: t.into(),
            images: vec![],
        }
    }

    #[test]
    fn complete_history_is_unchanged() {
        let h = vec![
            user("hi"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("a"), call("b")],
            },
            result("b"),
            result("a"),
            Message::Assistant {
                text: "done".into(),
                tool_calls: vec![],
            },
        ];
        assert_eq!(normalize_history(&h), h);
    }

    #[test]
    fn missing_results_are_filled_and_orphans_become_user_text() {
        let h = vec![
            user("hi"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("a"), call("b")],
            },
            result("a"),
            result("zzz"),
            user("next"),
            result("lost"),
        ];
        let n = normalize_history(&h);
        assert_eq!(n.len(), 7);
        assert_eq!(n[2], result("a"));
        match &n[3] {
            Message::Tool {
                tool_call_id,
                is_error,
                content,
                ..
            } => {
                assert_eq!(tool_call_id, "b");
                assert!(*is_error);
                assert_eq!(content, MISSING_TOOL_RESULT);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&n[4], Message::User { text, .. } if text.contains("r-zzz")));
        assert_eq!(n[5], user("next"));
        assert!(matches!(&n[6], Message::User { text, .. } if text.contains("call lost")));
    }

    #[test]
    fn tool_ids_are_mapped_consistently() {
        assert_eq!(anthropic_tool_id("call_abc123"), "call_abc123");
        assert_eq!(anthropic_tool_id("toolu_01A-b"), "toolu_01A-b");
        let a = anthropic_tool_id("fc.1:2");
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        assert_eq!(a, anthropic_tool_id("fc.1:2"));
        assert_ne!(a, anthropic_tool_id("fc:1.2"));
        assert!(!anthropic_tool_id("").is_empty());
        assert_eq!(openai_tool_id("toolu_01XYZ"), "toolu_01XYZ");
        let long = "x".repeat(80);
        assert!(openai_tool_id(&long).len() <= 40);
    }

    #[test]
    fn arguments_are_parsed_or_flagged() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("{\"a\":1}"), json!({"a":1}));
        let bad = parse_arguments("{\"a\":");
        assert_eq!(invalid_json_text(&bad), Some("{\"a\":"));
        assert_eq!(parse_arguments("[1]"), json!({"__invalid_json": "[1]"}));
    }
}
