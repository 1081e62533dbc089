//! Keel envelopes to ACP `session/update` payloads. Pure translation: no decisions.

use std::collections::HashMap;
use std::path::PathBuf;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, CurrentModeUpdate, Meta, Plan, PlanEntry, PlanEntryPriority,
    PlanEntryStatus, SessionInfoUpdate, SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, UsageUpdate,
};
use keel_envelope::types::StepStatus;
use keel_envelope::{Envelope, Event};
use serde_json::{json, Value};

use crate::tools::{
    preview_contents, result_contents, text_content, tool_kind, tool_locations, tool_title,
};

/// The envelope fields carried in every update's `_meta.keel`: `eventId`,
/// `requestId`, `sequence`, `type`, and `replay: true` for replayed envelopes.
pub fn meta_of(env: &Envelope, replay: bool) -> Meta {
    let mut keel = serde_json::Map::new();
    keel.insert("eventId".into(), json!(env.event_id));
    keel.insert("requestId".into(), json!(env.request_id));
    keel.insert("sequence".into(), json!(env.sequence));
    keel.insert("type".into(), json!(env.type_name()));
    if replay {
        keel.insert("replay".into(), json!(true));
    }
    let mut meta = Meta::new();
    meta.insert("keel".into(), Value::Object(keel));
    meta
}

/// Sets the `_meta` of any update.
pub fn with_meta(update: SessionUpdate, meta: Meta) -> SessionUpdate {
    match update {
        SessionUpdate::UserMessageChunk(c) => SessionUpdate::UserMessageChunk(c.meta(meta)),
        SessionUpdate::AgentMessageChunk(c) => SessionUpdate::AgentMessageChunk(c.meta(meta)),
        SessionUpdate::AgentThoughtChunk(c) => SessionUpdate::AgentThoughtChunk(c.meta(meta)),
        SessionUpdate::ToolCall(c) => SessionUpdate::ToolCall(c.meta(meta)),
        SessionUpdate::ToolCallUpdate(c) => SessionUpdate::ToolCallUpdate(c.meta(meta)),
        SessionUpdate::Plan(p) => SessionUpdate::Plan(p.meta(meta)),
        SessionUpdate::CurrentModeUpdate(m) => SessionUpdate::CurrentModeUpdate(m.meta(meta)),
        SessionUpdate::ConfigOptionUpdate(c) => SessionUpdate::ConfigOptionUpdate(c.meta(meta)),
        SessionUpdate::SessionInfoUpdate(i) => SessionUpdate::SessionInfoUpdate(i.meta(meta)),
        SessionUpdate::UsageUpdate(u) => SessionUpdate::UsageUpdate(u.meta(meta)),
        other => other,
    }
}

fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text.to_owned()))
}

fn plan(steps: &[keel_envelope::types::PlanStep]) -> SessionUpdate {
    let entries = steps
        .iter()
        .map(|s| {
            PlanEntry::new(
                s.title.clone(),
                PlanEntryPriority::Medium,
                match s.status {
                    StepStatus::Pending => PlanEntryStatus::Pending,
                    StepStatus::InProgress => PlanEntryStatus::InProgress,
                    StepStatus::Completed => PlanEntryStatus::Completed,
                    _ => PlanEntryStatus::Pending,
                },
            )
        })
        .collect();
    SessionUpdate::Plan(Plan::new(entries))
}

/// Per-session translation state: which calls the client already knows.
#[derive(Debug)]
pub struct Translator {
    workspace: PathBuf,
    calls: HashMap<String, (String, Value)>,
}

impl Translator {
    /// A translator for a session rooted at `workspace`.
    pub fn new(workspace: PathBuf) -> Self {
        Self {
            workspace,
            calls: HashMap::new(),
        }
    }

    /// A `tool_call` the first time a call is seen, a `tool_call_update` after.
    fn announce(
        &mut self,
        id: &str,
        name: &str,
        args: &Value,
        status: ToolCallStatus,
        content: Option<Vec<ToolCallContent>>,
        raw_output: Option<Value>,
    ) -> SessionUpdate {
        if self.calls.contains_key(id) {
            let fields = ToolCallUpdateFields::new()
                .status(status)
                .content(content)
                .raw_output(raw_output);
            return SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id.to_owned(), fields));
        }
        self.calls
            .insert(id.to_owned(), (name.to_owned(), args.clone()));
        let mut call = ToolCall::new(id.to_owned(), tool_title(name, args))
            .kind(tool_kind(name))
            .status(status)
            .raw_input(args.clone())
            .raw_output(raw_output)
            .locations(tool_locations(&self.workspace, name, args));
        if let Some(c) = content {
            call = call.content(c);
        }
        SessionUpdate::ToolCall(call)
    }

    fn args_of(&self, id: &str) -> Value {
        self.calls
            .get(id)
            .map(|(_, a)| a.clone())
            .unwrap_or(Value::Null)
    }

    /// The ACP updates for one envelope (none for events ACP has no place for).
    /// `replay`: the envelope comes from the stored log (user prompts are shown).
    pub fn translate(&mut self, env: &Envelope, replay: bool) -> Vec<SessionUpdate> {
        let updates = match &env.event {
            Event::RequestAccepted(p) if replay => {
                vec![SessionUpdate::UserMessageChunk(chunk(&p.message))]
            }
            Event::AssistantDelta(p) => vec![SessionUpdate::AgentMessageChunk(chunk(&p.text))],
            Event::AssistantMessage(p) => vec![SessionUpdate::AgentMessageChunk(chunk(&p.text))],
            Event::AssistantThoughtSummary(p) => {
                vec![SessionUpdate::AgentThoughtChunk(chunk(&p.text))]
            }
            Event::ApprovalRequested(a) => {
                let content = preview_contents(&self.workspace, a);
                vec![self.announce(
                    &a.tool_call_id,
                    &a.tool_name,
                    &a.arguments,
                    ToolCallStatus::Pending,
                    (!content.is_empty()).then_some(content),
                    None,
                )]
            }
            Event::ToolCallStarted(p) => vec![self.announce(
                &p.tool_call_id,
                &p.tool_name,
                &p.arguments,
                ToolCallStatus::InProgress,
                None,
                None,
            )],
            Event::ToolCallProgress(p) if self.calls.contains_key(&p.tool_call_id) => {
                let fields = ToolCallUpdateFields::new()
                    .status(ToolCallStatus::InProgress)
                    .content(vec![text_content(p.chunk.clone())]);
                vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    p.tool_call_id.clone(),
                    fields,
                ))]
            }
            Event::ToolCallCompleted(p) => {
                let args = self.args_of(&p.tool_call_id);
                let content = result_contents(&self.workspace, &p.tool_name, &args, &p.result);
                vec![self.announce(
                    &p.tool_call_id,
                    &p.tool_name,
                    &args,
                    ToolCallStatus::Completed,
                    Some(content),
                    Some(p.result.clone()),
                )]
            }
            Event::ToolCallFailed(keel_envelope::events::ToolCallFailed {
                tool_call_id,
                tool_name,
                error,
                ..
            })
            | Event::ToolCallSkipped(keel_envelope::events::ToolCallSkipped {
                tool_call_id,
                tool_name,
                error,
                ..
            }) => {
                let args = self.args_of(tool_call_id);
                vec![self.announce(
                    tool_call_id,
                    tool_name,
                    &args,
                    ToolCallStatus::Failed,
                    Some(vec![text_content(error.message.clone())]),
                    serde_json::to_value(error).ok(),
                )]
            }
            Event::PlanUpdated(p) => vec![plan(&p.steps)],
            Event::PlanApprovalRequired(p) => vec![plan(&p.steps)],
            Event::SessionModeChanged(p) => vec![SessionUpdate::CurrentModeUpdate(
                CurrentModeUpdate::new(p.mode.as_str().to_owned()),
            )],
            Event::SessionTitleChanged(p) => vec![SessionUpdate::SessionInfoUpdate(
                SessionInfoUpdate::new().title(p.title.clone()),
            )],
            Event::UsageUpdated(p) => vec![SessionUpdate::UsageUpdate(UsageUpdate::new(
                p.context_tokens,
                p.context_window,
            ))],
            _ => Vec::new(),
        };
        let meta = meta_of(env, replay);
        updates
            .into_iter()
            .map(|u| with_meta(u, meta.clone()))
            .collect()
    }
}

/// Formats milliseconds since the epoch as RFC 3339 (UTC).
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn every_update_carries_the_envelope_in_meta() {
        let env = Envelope::new(
            Some("sess_1".into()),
            "req_1".into(),
            "evt_9".into(),
            0,
            keel_envelope::Source::Runtime,
            3,
            Event::AssistantDelta(keel_envelope::events::AssistantDelta::new("Hi")),
        );
        let mut t = Translator::new(PathBuf::from("/w"));
        let ups = serde_json::to_value(t.translate(&env, true)).unwrap_or_default();
        assert_eq!(ups[0]["sessionUpdate"], "agent_message_chunk");
        assert_eq!(ups[0]["content"]["text"], "Hi");
        assert_eq!(
            ups[0]["_meta"]["keel"],
            json!({"eventId": "evt_9", "requestId": "req_1", "sequence": 3,
                   "type": "assistant.delta", "replay": true})
        );
    }
}
