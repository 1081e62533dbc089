//! The providers' request bodies written from cached fragments (see
//! [`crate::fragments`]): the OpenAI Chat Completions and the Anthropic Messages
//! formats. Each produces the same bytes as serialising the provider's
//! `request_body` value, which stays the reference.

use keel_kernel::model::{Message, ModelRequest};
use serde_json::{json, Value};

use crate::convert::normalize_history;
use crate::fragments::{
    raw_object, segment_end, write_object, Closed, Encoded, Format, FragmentCache, Part,
};
use crate::messages::{blocks_of, convert_message, is_empty_assistant};

fn string(s: &str) -> Vec<u8> {
    Value::from(s).to_string().into_bytes()
}

/// OpenAI's Chat Completions messages: one wire message per (normalised) history
/// message; a segment's messages are final unless it may still grow.
pub(crate) struct OpenAiFormat;

impl Format for OpenAiFormat {
    fn encode(&self, messages: &[Message], _first: bool) -> Encoded {
        let mut out = Encoded::default();
        let mut i = 0;
        while i < messages.len() {
            let (end, growing) = segment_end(messages, i);
            let items: Vec<String> = normalize_history(&messages[i..end])
                .iter()
                .filter(|m| !is_empty_assistant(m))
                .map(|m| convert_message(m).to_string())
                .collect();
            if growing {
                out.open.extend(items);
            } else {
                out.closed.push(Closed { end, items });
            }
            i = end;
        }
        out
    }
}

/// The OpenAI body: `model`, `messages`, `stream`, `stream_options`, then `tools` when
/// present and the output cap.
pub(crate) fn openai_body(
    cache: &FragmentCache,
    model: &str,
    request: &ModelRequest,
    tools: Option<std::sync::Arc<Vec<u8>>>,
    max: (&str, u32),
) -> Vec<u8> {
    let lead = if request.system.is_empty() {
        Vec::new()
    } else {
        vec![json!({"role": "system", "content": request.system}).to_string()]
    };
    let messages = Part::Write(Box::new(|out: &mut Vec<u8>, after: usize| {
        cache.write_messages_array(&OpenAiFormat, &request.messages, &lead, out, after)
    }));
    let mut entries = vec![
        ("model", Part::Raw(string(model))),
        ("messages", messages),
        ("stream", Part::Raw(b"true".to_vec())),
        (
            "stream_options",
            Part::Raw(json!({"include_usage": true}).to_string().into_bytes()),
        ),
    ];
    if let Some(tools) = tools {
        entries.push(("tools", Part::Raw(tools.to_vec())));
    }
    let (key, max) = max;
    entries.push((key, Part::Raw(max.to_string().into_bytes())));
    write_object(cache.buffer(), entries)
}

/// A wire message of the Anthropic format.
fn anthropic_message(role: &str, blocks: &[String]) -> String {
    let mut content = Vec::with_capacity(blocks.iter().map(|b| b.len() + 1).sum::<usize>() + 2);
    content.push(b'[');
    for (i, b) in blocks.iter().enumerate() {
        if i > 0 {
            content.push(b',');
        }
        content.extend_from_slice(b.as_bytes());
    }
    content.push(b']');
    let bytes = raw_object(vec![("role", string(role)), ("content", content)]);
    String::from_utf8(bytes).unwrap_or_default()
}

/// Anthropic's Messages format: roles alternate, so neighbouring blocks of one role
/// share a wire message; a wire message is final once a block of the other role
/// follows it, and a checkpoint falls where that happens at the start of a segment.
pub(crate) struct AnthropicFormat;

impl Format for AnthropicFormat {
    fn encode(&self, messages: &[Message], first: bool) -> Encoded {
        let mut out = Encoded::default();
        let mut pending: Vec<String> = Vec::new();
        let mut cur: Option<(&'static str, Vec<String>)> = None;
        let mut any = !first;
        let mut i = 0;
        while i < messages.len() {
            let (end, _) = segment_end(messages, i);
            let mut first_block = true;
            for m in normalize_history(&messages[i..end]) {
                let (role, blocks) = blocks_of(m);
                for b in blocks {
                    let b = b.to_string();
                    match &mut cur {
                        Some((r, bs)) if *r == role => bs.push(b),
                        _ => {
                            if let Some((r, bs)) = cur.take() {
                                pending.push(anthropic_message(r, &bs));
                                if first_block {
                                    // Everything before this segment is final.
                                    out.closed.push(Closed {
                                        end: i,
                                        items: std::mem::take(&mut pending),
                                    });
                                }
                            }
                            if !any && role == "assistant" {
                                let note =
                                    json!({"type": "text", "text": "(conversation continued)"});
                                pending.push(anthropic_message("user", &[note.to_string()]));
                            }
                            any = true;
                            cur = Some((role, vec![b]));
                        }
                    }
                    first_block = false;
                }
            }
            i = end;
        }
        out.open = pending;
        if let Some((r, bs)) = cur {
            out.open.push(anthropic_message(r, &bs));
        }
        out
    }
}

/// The Anthropic body: `model`, `max_tokens`, `stream`, `messages`, then `system`
/// and `tools` when present.
pub(crate) fn anthropic_body(
    cache: &FragmentCache,
    model: &str,
    max_tokens: u32,
    request: &ModelRequest,
    tools: Option<std::sync::Arc<Vec<u8>>>,
) -> Vec<u8> {
    let messages = Part::Write(Box::new(|out: &mut Vec<u8>, after: usize| {
        cache.write_messages_array(&AnthropicFormat, &request.messages, &[], out, after)
    }));
    let mut entries = vec![
        ("model", Part::Raw(string(model))),
        ("max_tokens", Part::Raw(max_tokens.to_string().into_bytes())),
        ("stream", Part::Raw(b"true".to_vec())),
        ("messages", messages),
    ];
    if !request.system.is_empty() {
        entries.push(("system", Part::Raw(string(&request.system))));
    }
    if let Some(tools) = tools {
        entries.push(("tools", Part::Raw(tools.to_vec())));
    }
    write_object(cache.buffer(), entries)
}
