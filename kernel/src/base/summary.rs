//! The small per-session summary `session.list` reads: what a listing shows (title,
//! times, request count, the last message's first line) without the history, so that
//! listing thousands of stored sessions reads a few hundred bytes each rather than
//! whole conversations.

use keel_envelope::types::{PermissionMode, SessionInfo, SessionState};
use keel_envelope::worktree::AdditionalRoot;
use serde::{Deserialize, Serialize};

use crate::base::model::Message;
use crate::base::store::PersistedSession;

/// The key of a session's extra roots in its stored `extensions` (the session
/// layer keeps them there).
pub const ROOTS_KEY: &str = "additionalRoots";

/// The longest `lastMessage`, in characters.
pub const LAST_MESSAGE_CHARS: usize = 120;

/// What the store keeps beside a session's state for listings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// The session id.
    pub session_id: String,
    /// The title.
    pub title: Option<String>,
    /// The workspace root.
    pub workspace: String,
    /// The model, `provider:model`.
    pub model: String,
    /// The permission mode.
    pub mode: PermissionMode,
    /// Created, ms since the epoch.
    pub created_at: u64,
    /// Last activity.
    pub updated_at: u64,
    /// Whether the session was closed.
    #[serde(default)]
    pub closed: bool,
    /// Requests in the conversation.
    #[serde(default)]
    pub request_count: u32,
    /// The first line of the last message.
    #[serde(default)]
    pub last_message: Option<String>,
    /// The extra roots (`extensions.additionalRoots` of the state); absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_roots: Option<Vec<AdditionalRoot>>,
}

impl SessionSummary {
    /// The summary of a session's state.
    pub fn of(state: &PersistedSession) -> Self {
        Self {
            session_id: state.session_id.clone(),
            title: state.title.clone(),
            workspace: state.workspace.clone(),
            model: state.model.clone(),
            mode: state.mode.clone(),
            created_at: state.created_at,
            updated_at: state.updated_at,
            closed: state.closed,
            request_count: request_count(state),
            last_message: last_message(&state.history),
            additional_roots: state
                .extensions
                .get(ROOTS_KEY)
                .and_then(|v| serde_json::from_value::<Vec<AdditionalRoot>>(v.clone()).ok())
                .filter(|v| !v.is_empty()),
        }
    }

    /// As listed by `session.list` for a session that is not in memory.
    pub fn info(&self) -> SessionInfo {
        SessionInfo::new(
            self.session_id.clone(),
            self.workspace.clone(),
            self.created_at,
            self.updated_at,
            if self.closed {
                SessionState::Closed
            } else {
                SessionState::Idle
            },
            self.mode.clone(),
            self.model.clone(),
            self.request_count,
        )
        .title(self.title.clone())
        .last_message(self.last_message.clone())
        .additional_roots(self.additional_roots.clone())
    }
}

/// Requests whose start is still in the conversation.
pub fn request_count(state: &PersistedSession) -> u32 {
    u32::try_from(state.request_marks.len()).unwrap_or(u32::MAX)
}

/// The first non-empty line of the last message with text, cut at
/// [`LAST_MESSAGE_CHARS`] characters (an ellipsis marks the cut).
pub fn last_message(history: &[Message]) -> Option<String> {
    history.iter().rev().find_map(|m| {
        let text = match m {
            Message::User { text, .. } | Message::Assistant { text, .. } => text,
            Message::Tool { .. } => return None,
        };
        let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
        let mut out: String = line.chars().take(LAST_MESSAGE_CHARS).collect();
        if line.chars().count() > LAST_MESSAGE_CHARS {
            out.push('…');
        }
        Some(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(t: &str) -> Message {
        Message::User {
            text: t.into(),
            images: vec![],
        }
    }

    #[test]
    fn last_message_is_the_first_line_of_the_last_text() {
        let h = vec![
            user("first"),
            Message::Assistant {
                text: "\n  Done: the tests pass.\nMore details".into(),
                tool_calls: vec![],
            },
            Message::Tool {
                tool_call_id: "c".into(),
                name: "read_file".into(),
                content: "x".into(),
                is_error: false,
            },
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![],
            },
        ];
        assert_eq!(last_message(&h).as_deref(), Some("Done: the tests pass."));
        assert_eq!(last_message(&[]), None);
        let long = "é".repeat(300);
        let cut = last_message(&[user(&long)]).unwrap_or_default();
        assert_eq!(cut.chars().count(), LAST_MESSAGE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }
}
