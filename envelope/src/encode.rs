//! The envelope encoder behind [`crate::codec::encode_into`].
//!
//! It writes the same bytes as `serde_json` serializing an [`Envelope`] (compact
//! form, the same escapes, the same key order), only faster:
//!
//! - the envelope's keys are written as constant byte strings;
//! - integers are formatted straight into the output buffer (`itoa`), without an
//!   intermediate `String`;
//! - strings are copied whole when they need no escape, found eight bytes at a time
//!   (SWAR) instead of one lookup per byte;
//! - the payloads of the events sent most often (text deltas, tool calls) and
//!   `serde_json::Value` trees are written by hand; every other payload goes through
//!   its derived `Serialize` into the same buffer.
//!
//! Equality with `serde_json` (driving the envelope's own `Serialize`, which stays the
//! reference) is checked by a property test over random envelopes
//! (`envelope/tests/encode.rs`) and asserted by the envelope benchmark.

use serde_json::Value;

use crate::envelope::{Envelope, Meta, Source};
use crate::events::{
    AssistantDelta, AssistantFinal, AssistantMessage, AssistantThoughtSummary, Event,
    ToolCallCompleted, ToolCallProgress, ToolCallStarted,
};
use crate::types::PermissionLevel;

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// A mask with the high bit set in the bytes of `x` that JSON needs escaped (control
/// characters, `"` and `\`). Bits above the first flagged byte may be spurious (a
/// borrow travels upwards); the lowest flagged byte is always exact.
#[inline(always)]
fn escape_mask(x: u64) -> u64 {
    let control = x.wrapping_sub(ONES * 0x20) & !x;
    let q = x ^ (ONES * u64::from(b'"'));
    let quote = q.wrapping_sub(ONES) & !q;
    let b = x ^ (ONES * u64::from(b'\\'));
    let backslash = b.wrapping_sub(ONES) & !b;
    (control | quote | backslash) & HIGH
}

/// Bytes that JSON needs escaped: control characters, `"` and `\`.
static NEEDS_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

#[inline(always)]
fn word_at(bytes: &[u8], i: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[i..i + 8]);
    u64::from_le_bytes(word)
}

/// The index of the first byte that needs an escape.
#[inline(always)]
fn find_escape(bytes: &[u8]) -> Option<usize> {
    let n = bytes.len();
    if n < 8 {
        return bytes.iter().position(|b| NEEDS_ESCAPE[usize::from(*b)]);
    }
    let mut i = 0;
    while i + 8 <= n {
        let mask = escape_mask(word_at(bytes, i));
        if mask != 0 {
            return Some(i + (mask.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    if i < n {
        // The last eight bytes, overlapping bytes already found clean: those cannot be
        // flagged, so the lowest flag is in the unchecked tail.
        let mask = escape_mask(word_at(bytes, n - 8));
        if mask != 0 {
            return Some(n - 8 + (mask.trailing_zeros() / 8) as usize);
        }
    }
    None
}

/// Writes the escape of one byte that needs it, exactly as `serde_json` does.
#[inline]
fn write_escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x0c => b'f',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

/// Writes `s` as a JSON string, quotes included.
#[inline]
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    match find_escape(bytes) {
        None => out.extend_from_slice(bytes),
        Some(first) => write_escaped(out, bytes, first),
    }
    out.push(b'"');
}

/// Writes the contents of a string whose first byte needing an escape is at `first`.
#[inline(never)]
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8], first: usize) {
    out.extend_from_slice(&bytes[..first]);
    write_escape(out, bytes[first]);
    let mut start = first + 1;
    while let Some(i) = bytes.get(start..).and_then(find_escape) {
        out.extend_from_slice(&bytes[start..start + i]);
        write_escape(out, bytes[start + i]);
        start += i + 1;
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
}

#[inline]
fn write_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

fn write_bool(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

fn source_json(source: &Source) -> Option<&'static [u8]> {
    Some(match source {
        Source::Runtime => b"\"runtime\"",
        Source::Tool => b"\"tool\"",
        Source::Bridge => b"\"bridge\"",
        Source::Host => b"\"host\"",
        Source::Renderer => b"\"renderer\"",
        Source::DesktopMain => b"\"desktop-main\"",
        Source::CliRuntime => b"\"cli-runtime\"",
        _ => return None,
    })
}

fn permission_json(level: &PermissionLevel) -> Option<&'static [u8]> {
    Some(match level {
        PermissionLevel::Read => b"\"read\"",
        PermissionLevel::Write => b"\"write\"",
        PermissionLevel::Execute => b"\"execute\"",
        PermissionLevel::Elevated => b"\"elevated\"",
        _ => return None,
    })
}

/// Writes a wire enum: a known value as its constant bytes, an unknown one (kept
/// from a later 1.x) escaped like any string.
fn write_wire(out: &mut Vec<u8>, known: Option<&'static [u8]>, raw: &str) {
    match known {
        Some(bytes) => out.extend_from_slice(bytes),
        None => write_str(out, raw),
    }
}

/// Writes a JSON value as `serde_json` serializes it (map entries in map order).
pub(crate) fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => write_bool(out, *b),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                write_u64(out, u);
            } else if let Some(i) = n.as_i64() {
                out.extend_from_slice(itoa::Buffer::new().format(i).as_bytes());
            } else {
                // Floats keep serde_json's own formatting.
                let start = out.len();
                if serde_json::to_writer(&mut *out, n).is_err() {
                    out.truncate(start);
                    out.extend_from_slice(b"null");
                }
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            let mut first = true;
            for item in items {
                if !first {
                    out.push(b',');
                }
                first = false;
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            let mut first = true;
            for (k, item) in map {
                if !first {
                    out.push(b',');
                }
                first = false;
                write_str(out, k);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

fn write_meta(out: &mut Vec<u8>, meta: &Meta) {
    // Destructured so that a new field cannot be forgotten here.
    let Meta {
        reply_to,
        duration_ms,
        trace_id,
        model,
        permission_level,
        replay,
    } = meta;
    out.push(b'{');
    let mut first = true;
    let mut key = |out: &mut Vec<u8>, key: &[u8]| {
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(key);
    };
    if let Some(v) = reply_to {
        key(out, b"\"replyTo\":");
        write_str(out, v);
    }
    if let Some(v) = duration_ms {
        key(out, b"\"durationMs\":");
        write_u64(out, *v);
    }
    if let Some(v) = trace_id {
        key(out, b"\"traceId\":");
        write_str(out, v);
    }
    if let Some(v) = model {
        key(out, b"\"model\":");
        write_str(out, v);
    }
    if let Some(v) = permission_level {
        key(out, b"\"permissionLevel\":");
        write_wire(out, permission_json(v), v.as_str());
    }
    if let Some(v) = replay {
        key(out, b"\"replay\":");
        write_bool(out, *v);
    }
    out.push(b'}');
}

fn write_text_payload(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b"{\"text\":");
    write_str(out, text);
    out.push(b'}');
}

struct PayloadRef<'a>(&'a Event);

impl serde::Serialize for PayloadRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize_payload(s)
    }
}

fn write_payload(out: &mut Vec<u8>, event: &Event) {
    match event {
        Event::AssistantDelta(AssistantDelta { text })
        | Event::AssistantMessage(AssistantMessage { text })
        | Event::AssistantThoughtSummary(AssistantThoughtSummary { text })
        | Event::AssistantFinal(AssistantFinal { text }) => write_text_payload(out, text),
        Event::ToolCallCompleted(ToolCallCompleted {
            tool_call_id,
            tool_name,
            result,
            duration_ms,
        }) => {
            out.extend_from_slice(b"{\"toolCallId\":");
            write_str(out, tool_call_id);
            out.extend_from_slice(b",\"toolName\":");
            write_str(out, tool_name);
            out.extend_from_slice(b",\"result\":");
            write_value(out, result);
            out.extend_from_slice(b",\"durationMs\":");
            write_u64(out, *duration_ms);
            out.push(b'}');
        }
        Event::ToolCallStarted(ToolCallStarted {
            tool_call_id,
            tool_name,
            arguments,
            permission_level,
        }) => {
            out.extend_from_slice(b"{\"toolCallId\":");
            write_str(out, tool_call_id);
            out.extend_from_slice(b",\"toolName\":");
            write_str(out, tool_name);
            out.extend_from_slice(b",\"arguments\":");
            write_value(out, arguments);
            out.extend_from_slice(b",\"permissionLevel\":");
            write_wire(
                out,
                permission_json(permission_level),
                permission_level.as_str(),
            );
            out.push(b'}');
        }
        Event::ToolCallProgress(ToolCallProgress {
            tool_call_id,
            stream,
            chunk,
        }) => {
            out.extend_from_slice(b"{\"toolCallId\":");
            write_str(out, tool_call_id);
            out.extend_from_slice(b",\"stream\":");
            write_str(out, stream);
            out.extend_from_slice(b",\"chunk\":");
            write_str(out, chunk);
            out.push(b'}');
        }
        Event::Unknown { payload, .. } => write_value(out, payload),
        other => {
            // Serializing our own types into a Vec cannot fail: every map key is a
            // string. Should it ever, the payload becomes an empty object.
            let start = out.len();
            if serde_json::to_writer(&mut *out, &PayloadRef(other)).is_err() {
                out.truncate(start);
                out.extend_from_slice(b"{}");
            }
        }
    }
}

/// A capacity that holds the whole line in the common cases.
pub(crate) fn size_hint(env: &Envelope) -> usize {
    let payload = match &env.event {
        Event::AssistantDelta(AssistantDelta { text })
        | Event::AssistantMessage(AssistantMessage { text })
        | Event::AssistantThoughtSummary(AssistantThoughtSummary { text })
        | Event::AssistantFinal(AssistantFinal { text }) => text.len() + 16,
        _ => 384,
    };
    // Keys, punctuation, numbers and the type name come to well under 192 bytes.
    192 + env.version.len()
        + env.session_id.as_deref().map_or(0, str::len)
        + env.request_id.len()
        + env.event_id.len()
        + payload
        + if env.meta.is_some() { 96 } else { 0 }
}

/// Appends an envelope as one JSON line (with newline) to `out`.
pub(crate) fn write_envelope(out: &mut Vec<u8>, env: &Envelope) {
    out.reserve(size_hint(env));
    out.extend_from_slice(b"{\"version\":");
    write_str(out, &env.version);
    out.extend_from_slice(b",\"sessionId\":");
    match &env.session_id {
        Some(id) => write_str(out, id),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"requestId\":");
    write_str(out, &env.request_id);
    out.extend_from_slice(b",\"eventId\":");
    write_str(out, &env.event_id);
    out.extend_from_slice(b",\"type\":");
    match env.event.event_type() {
        // Known wire names need no escape (checked by a test below).
        Some(ty) => {
            out.push(b'"');
            out.extend_from_slice(ty.as_str().as_bytes());
            out.push(b'"');
        }
        None => write_str(out, env.type_name()),
    }
    out.extend_from_slice(b",\"timestamp\":");
    write_u64(out, env.timestamp);
    out.extend_from_slice(b",\"source\":");
    write_wire(out, source_json(&env.source), env.source.as_str());
    out.extend_from_slice(b",\"sequence\":");
    write_u64(out, env.sequence);
    out.extend_from_slice(b",\"payload\":");
    write_payload(out, &env.event);
    if let Some(meta) = &env.meta {
        out.extend_from_slice(b",\"meta\":");
        write_meta(out, meta);
    }
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::events::EventType;

    fn serde_str(s: &str) -> Vec<u8> {
        serde_json::to_vec(s).unwrap()
    }

    fn fast_str(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        write_str(&mut out, s);
        out
    }

    #[test]
    fn every_byte_escapes_like_serde_json() {
        for b in 0u8..0x80 {
            let s = String::from(char::from(b));
            assert_eq!(fast_str(&s), serde_str(&s), "byte {b:#04x}");
            // At every position of a SWAR word and in the tail.
            for pos in 0..19 {
                let mut t = "a".repeat(19);
                t.replace_range(pos..=pos, &s);
                assert_eq!(fast_str(&t), serde_str(&t), "byte {b:#04x} at {pos}");
            }
        }
        for s in [
            "",
            "\u{2028}\u{2029}",
            "é\"\\\u{7f}\u{80}\u{ffff}😀\u{0}\u{1f}",
            "\u{1f}\u{1f}\u{1f}\u{1f}\u{1f}\u{1f}\u{1f}\u{1f}\"",
        ] {
            assert_eq!(fast_str(s), serde_str(s), "{s:?}");
        }
    }

    #[test]
    fn known_type_names_and_enums_need_no_escape() {
        for ty in EventType::ALL {
            assert!(find_escape(ty.as_str().as_bytes()).is_none(), "{ty:?}");
        }
        for source in Source::ALL {
            assert_eq!(
                source_json(source),
                Some(serde_json::to_vec(source).unwrap().as_slice()),
                "{source:?}"
            );
        }
        for level in PermissionLevel::ALL {
            assert_eq!(
                permission_json(level),
                Some(serde_json::to_vec(level).unwrap().as_slice()),
                "{level:?}"
            );
        }
        let unknown = Source::Unknown("new\"one".into());
        let mut out = Vec::new();
        write_wire(&mut out, source_json(&unknown), unknown.as_str());
        assert_eq!(out, serde_json::to_vec(&unknown).unwrap());
    }
}
