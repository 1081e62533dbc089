//! The unified envelope (seed 002 §5.2) and the per-request sequence rule.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::events::Event;
use crate::types::PermissionLevel;

crate::wire::wire_enum! {
    /// Who produced an event.
    pub enum Source {
        /// The kernel (agent loop, sessions, gate).
        Runtime = "runtime",
        /// A tool's own output (`tool.call.progress`).
        Tool = "tool",
        /// A host transport (the bridge's `runtime.ready`, decode errors).
        Bridge = "bridge",
        /// A host (commands).
        Host = "host",
        /// A renderer (seed 002 §5.2).
        Renderer = "renderer",
        /// A desktop main process (seed 002 §5.2).
        DesktopMain = "desktop-main",
        /// A CLI runtime (seed 002 §5.2).
        CliRuntime = "cli-runtime",
    }
}

/// Optional extras of an envelope. Unknown fields are ignored on decode.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
pub struct Meta {
    /// The requestId of the command this event answers, when that command's own
    /// requestId differs from the stream the event belongs to (see docs/protocol.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Duration of the operation this event closes, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// A trace id for correlating logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The model in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The permission level involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_level: Option<PermissionLevel>,
    /// For replayed events: true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<bool>,
}

impl Meta {
    /// Whether every field is empty.
    pub fn is_empty(&self) -> bool {
        *self == Meta::default()
    }
}

/// One event on the wire:
/// `{version, sessionId, requestId, eventId, type, timestamp, source, sequence, payload, meta}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// Protocol version, `1.0`.
    pub version: String,
    /// The session; null only for runtime-level events (`runtime.ready`, `runtime.stopped`,
    /// errors about lines that name no session).
    pub session_id: Option<String>,
    /// The request stream this event belongs to.
    pub request_id: String,
    /// Unique event id (`evt_…`).
    pub event_id: String,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// Who produced it.
    pub source: Source,
    /// Position in the request's stream: 1, 2, 3, … with no gaps.
    pub sequence: u64,
    /// Type and payload.
    pub event: Event,
    /// Extras; omitted when empty.
    pub meta: Option<Meta>,
}

impl Envelope {
    /// An envelope at the current protocol version without meta.
    pub fn new(
        session_id: Option<String>,
        request_id: String,
        event_id: String,
        timestamp: u64,
        source: Source,
        sequence: u64,
        event: Event,
    ) -> Self {
        Self {
            version: crate::PROTOCOL_VERSION.to_owned(),
            session_id,
            request_id,
            event_id,
            timestamp,
            source,
            sequence,
            event,
            meta: None,
        }
    }

    /// The dotted type name.
    pub fn type_name(&self) -> &str {
        self.event.type_name()
    }

    /// Sets meta (dropped when empty).
    pub fn with_meta(mut self, meta: Meta) -> Self {
        self.meta = if meta.is_empty() { None } else { Some(meta) };
        self
    }

    /// The `meta.replyTo` value, if any.
    pub fn reply_to(&self) -> Option<&str> {
        self.meta.as_ref().and_then(|m| m.reply_to.as_deref())
    }
}

struct PayloadRef<'a>(&'a Event);

impl Serialize for PayloadRef<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize_payload(s)
    }
}

impl Serialize for Envelope {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = if self.meta.is_some() { 10 } else { 9 };
        let mut st = s.serialize_struct("Envelope", n)?;
        st.serialize_field("version", &self.version)?;
        st.serialize_field("sessionId", &self.session_id)?;
        st.serialize_field("requestId", &self.request_id)?;
        st.serialize_field("eventId", &self.event_id)?;
        st.serialize_field("type", self.event.type_name())?;
        st.serialize_field("timestamp", &self.timestamp)?;
        st.serialize_field("source", &self.source)?;
        st.serialize_field("sequence", &self.sequence)?;
        st.serialize_field("payload", &PayloadRef(&self.event))?;
        if let Some(meta) = &self.meta {
            st.serialize_field("meta", meta)?;
        }
        st.end()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEnvelope {
    version: String,
    session_id: Option<String>,
    request_id: String,
    event_id: String,
    #[serde(rename = "type")]
    ty: String,
    timestamp: u64,
    source: Source,
    sequence: u64,
    payload: Box<serde_json::value::RawValue>,
    #[serde(default)]
    meta: Option<Meta>,
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawEnvelope::deserialize(d)?;
        if !raw.payload.get().trim_start().starts_with('{') {
            return Err(serde::de::Error::custom("payload must be an object"));
        }
        let event = Event::from_parts(&raw.ty, &raw.payload).map_err(serde::de::Error::custom)?;
        Ok(Envelope {
            version: raw.version,
            session_id: raw.session_id,
            request_id: raw.request_id,
            event_id: raw.event_id,
            timestamp: raw.timestamp,
            source: raw.source,
            sequence: raw.sequence,
            event,
            meta: raw.meta,
        })
    }
}

/// Owns the sequence rule: per requestId, sequences start at 1 and grow by exactly 1.
#[derive(Debug, Default, Clone)]
pub struct Sequencer {
    next: HashMap<String, u64>,
}

impl Sequencer {
    /// An empty sequencer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The sequence for the next event of `request_id`.
    pub fn next(&mut self, request_id: &str) -> u64 {
        if let Some(n) = self.next.get_mut(request_id) {
            *n += 1;
            *n
        } else {
            self.next.insert(request_id.to_owned(), 1);
            1
        }
    }

    /// The last sequence handed out for `request_id` (0 if none).
    pub fn last(&self, request_id: &str) -> u64 {
        self.next.get(request_id).copied().unwrap_or(0)
    }

    /// Restores the last sequence of a request (used when resuming from a log).
    pub fn restore(&mut self, request_id: &str, last: u64) {
        let entry = self.next.entry(request_id.to_owned()).or_insert(0);
        *entry = (*entry).max(last);
    }
}

/// A gap or reordering found by [`SequenceChecker`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceGap {
    /// The request.
    pub request_id: String,
    /// The sequence that was expected.
    pub expected: u64,
    /// The sequence that arrived.
    pub got: u64,
}

/// The host side of the sequence rule: feed it every envelope, it reports gaps.
#[derive(Debug, Default, Clone)]
pub struct SequenceChecker {
    last: HashMap<String, u64>,
}

impl SequenceChecker {
    /// An empty checker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks one envelope; `Err` when its sequence is not the expected one.
    pub fn check(&mut self, env: &Envelope) -> Result<(), SequenceGap> {
        let last = self.last.entry(env.request_id.clone()).or_insert(0);
        let expected = *last + 1;
        if env.sequence == expected {
            *last = expected;
            Ok(())
        } else {
            if env.sequence > *last {
                *last = env.sequence;
            }
            Err(SequenceGap {
                request_id: env.request_id.clone(),
                expected,
                got: env.sequence,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequencer_is_contiguous_per_request() {
        let mut s = Sequencer::new();
        assert_eq!(s.next("a"), 1);
        assert_eq!(s.next("a"), 2);
        assert_eq!(s.next("b"), 1);
        assert_eq!(s.next("a"), 3);
        assert_eq!(s.last("a"), 3);
        s.restore("c", 7);
        assert_eq!(s.next("c"), 8);
    }
}
