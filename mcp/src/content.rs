//! What a tool call returned: the text the model reads, and a summary for events
//! (images and other binary content by type and size, never their bytes).

use serde_json::{json, Value};

/// One content block of a result, summarised.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentSummary {
    /// Text.
    Text(String),
    /// An image: its MIME type and decoded size in bytes.
    Image {
        /// e.g. `image/png`.
        mime_type: String,
        /// Size of the decoded data.
        bytes: usize,
    },
    /// Audio: its MIME type and decoded size in bytes.
    Audio {
        /// e.g. `audio/wav`.
        mime_type: String,
        /// Size of the decoded data.
        bytes: usize,
    },
    /// An embedded resource or a resource link: its URI and text, if it has some.
    Resource {
        /// The resource's URI.
        uri: String,
        /// Its text (a text resource), else none.
        text: Option<String>,
    },
    /// A block of a type this client does not know.
    Other(String),
}

/// The result of a call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    /// The content blocks, in order.
    pub content: Vec<ContentSummary>,
    /// The structured result, if the tool gave one.
    pub structured: Option<Value>,
    /// Whether the tool reported an error (`isError`).
    pub is_error: bool,
}

/// The most text of one result kept for the model and for events (as the shell's
/// output cap): a server cannot push more than this into the history per call.
pub const RESULT_CAP: usize = 256 * 1024;

/// Cuts `s` to at most `max` bytes at a character boundary; says whether it cut.
fn cut(s: &mut String, max: usize) -> bool {
    if s.len() <= max {
        return false;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    true
}

/// Bytes of base64 data once decoded (padding aware; whitespace ignored).
fn decoded_len(data: &str) -> usize {
    let chars = data.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    let pad = data.bytes().rev().take_while(|b| *b == b'=').count();
    (chars / 4 * 3 + (chars % 4).saturating_sub(1)).saturating_sub(pad.min(2))
}

fn string(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn block(v: &Value) -> ContentSummary {
    match v.get("type").and_then(Value::as_str).unwrap_or_default() {
        "text" => ContentSummary::Text(string(v, "text")),
        "image" => ContentSummary::Image {
            mime_type: string(v, "mimeType"),
            bytes: decoded_len(&string(v, "data")),
        },
        "audio" => ContentSummary::Audio {
            mime_type: string(v, "mimeType"),
            bytes: decoded_len(&string(v, "data")),
        },
        "resource" => {
            let r = v.get("resource").cloned().unwrap_or(Value::Null);
            ContentSummary::Resource {
                uri: string(&r, "uri"),
                text: r.get("text").and_then(Value::as_str).map(str::to_owned),
            }
        }
        "resource_link" => ContentSummary::Resource {
            uri: string(v, "uri"),
            text: None,
        },
        other => ContentSummary::Other(other.to_owned()),
    }
}

impl CallOutput {
    /// Keeps at most `max` bytes of text over all the blocks (text and resource text,
    /// in order) and of the structured result; what is cut ends with a note naming the
    /// limit. Returns whether anything was cut.
    pub fn cap(&mut self, max: usize) -> bool {
        let mut left = max;
        let mut cut_any = false;
        for c in &mut self.content {
            let text = match c {
                ContentSummary::Text(t) => t,
                ContentSummary::Resource { text: Some(t), .. } => t,
                _ => continue,
            };
            let len = text.len();
            if cut(text, left) {
                text.push_str(&format!(
                    "\n[output truncated: the tool returned more than {max} bytes of text]"
                ));
                cut_any = true;
            }
            left = left.saturating_sub(len);
        }
        if let Some(s) = &self.structured {
            let len = serde_json::to_string(s).map(|j| j.len()).unwrap_or(0);
            if len > left {
                self.structured = Some(Value::String(format!(
                    "[structured content of {len} bytes dropped: over the limit of {max} bytes]"
                )));
                cut_any = true;
            }
        }
        cut_any
    }

    /// Reads a `CallToolResult` (by its JSON shape, the MCP specification's).
    pub fn from_result(result: &impl serde::Serialize) -> Self {
        let v = serde_json::to_value(result).unwrap_or(Value::Null);
        Self::from_json(&v)
    }

    /// Reads a `CallToolResult` from its JSON.
    pub fn from_json(v: &Value) -> Self {
        let content = v
            .get("content")
            .and_then(Value::as_array)
            .map(|blocks| blocks.iter().map(block).collect())
            .unwrap_or_default();
        CallOutput {
            content,
            structured: v.get("structuredContent").cloned(),
            is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
        }
    }

    /// The text the model reads: the text blocks in order; images, audio and binary
    /// resources as a bracketed note (the model port carries no images in tool
    /// results); the structured result as JSON when there is no text.
    pub fn text_for_model(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for c in &self.content {
            match c {
                ContentSummary::Text(t) => parts.push(t.clone()),
                ContentSummary::Image { mime_type, bytes } => parts.push(format!(
                    "[image: {mime_type}, {bytes} bytes; images returned by tools are not shown to the model]"
                )),
                ContentSummary::Audio { mime_type, bytes } => {
                    parts.push(format!("[audio: {mime_type}, {bytes} bytes]"))
                }
                ContentSummary::Resource { uri, text: Some(t) } => {
                    parts.push(format!("[resource {uri}]\n{t}"))
                }
                ContentSummary::Resource { uri, text: None } => {
                    parts.push(format!("[resource {uri}]"))
                }
                ContentSummary::Other(kind) => parts.push(format!("[{kind} content]")),
            }
        }
        let has_text = self
            .content
            .iter()
            .any(|c| matches!(c, ContentSummary::Text(_)));
        if !has_text {
            if let Some(s) = &self.structured {
                parts.push(serde_json::to_string(s).unwrap_or_default());
            }
        }
        if parts.is_empty() {
            return "(the tool returned no content)".to_owned();
        }
        parts.join("\n")
    }

    /// The content as JSON for events: `[{type: "text", text}, {type: "image",
    /// mimeType, bytes}, …]`.
    pub fn content_json(&self) -> Value {
        Value::Array(
            self.content
                .iter()
                .map(|c| match c {
                    ContentSummary::Text(t) => json!({"type": "text", "text": t}),
                    ContentSummary::Image { mime_type, bytes } => {
                        json!({"type": "image", "mimeType": mime_type, "bytes": bytes})
                    }
                    ContentSummary::Audio { mime_type, bytes } => {
                        json!({"type": "audio", "mimeType": mime_type, "bytes": bytes})
                    }
                    ContentSummary::Resource { uri, text } => {
                        json!({"type": "resource", "uri": uri, "text": text})
                    }
                    ContentSummary::Other(kind) => json!({"type": kind}),
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_capped_at_a_character_boundary_with_a_note() {
        let mut out = CallOutput::from_json(&json!({
            "content": [{"type": "text", "text": "é".repeat(10)}, {"type": "text", "text": "more"}],
            "structuredContent": {"big": "x".repeat(100)}
        }));
        assert!(out.cap(5));
        let ContentSummary::Text(first) = &out.content[0] else {
            panic!("{out:?}")
        };
        assert!(first.starts_with("éé\n[output truncated"), "{first}");
        let ContentSummary::Text(second) = &out.content[1] else {
            panic!("{out:?}")
        };
        assert!(second.starts_with("\n[output truncated"), "{second}");
        assert!(out
            .structured
            .as_ref()
            .and_then(Value::as_str)
            .is_some_and(|s| s.contains("dropped")));
        let mut small =
            CallOutput::from_json(&json!({"content": [{"type": "text", "text": "ok"}]}));
        assert!(!small.cap(RESULT_CAP));
        assert_eq!(small.text_for_model(), "ok");
    }

    #[test]
    fn base64_sizes() {
        assert_eq!(decoded_len(""), 0);
        assert_eq!(decoded_len("TQ=="), 1);
        assert_eq!(decoded_len("TWE="), 2);
        assert_eq!(decoded_len("TWFu"), 3);
        assert_eq!(decoded_len("TWFuTWFu"), 6);
    }

    #[test]
    fn text_images_and_structure() {
        let out = CallOutput::from_json(&json!({
            "content": [
                {"type": "text", "text": "a"},
                {"type": "image", "data": "TWFu", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///x", "text": "body"}},
                {"type": "hologram"}
            ],
            "isError": false
        }));
        assert_eq!(
            out.text_for_model(),
            "a\n[image: image/png, 3 bytes; images returned by tools are not shown to the model]\n[resource file:///x]\nbody\n[hologram content]"
        );
        assert_eq!(out.content_json()[1]["bytes"], 3);
        let out = CallOutput::from_json(&json!({"content": [], "structuredContent": {"sum": 3}}));
        assert_eq!(out.text_for_model(), "{\"sum\":3}");
        let out = CallOutput::from_json(&json!({}));
        assert_eq!(out.text_for_model(), "(the tool returned no content)");
        assert!(!out.is_error);
    }
}
