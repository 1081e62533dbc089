//! The decoded command, and the session it names.

use serde::Serialize;

use super::CommandPayload;
use crate::error::ErrorCategory;
use crate::{CommandType, ErrorCode, ErrorPayload};

/// A decoded command. Build one with [`Command::new`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Command {
    /// The protocol version the host spoke.
    pub version: String,
    /// Host-chosen request id; every answer carries it (see docs/protocol.md).
    pub request_id: String,
    /// The session, for session commands.
    pub session_id: Option<String>,
    /// Type and payload.
    pub payload: CommandPayload,
}

impl Command {
    /// A command at the current protocol version.
    pub fn new(
        request_id: impl Into<String>,
        session_id: Option<String>,
        payload: CommandPayload,
    ) -> Self {
        Self {
            version: crate::PROTOCOL_VERSION.to_owned(),
            request_id: request_id.into(),
            session_id,
            payload,
        }
    }

    /// The command's type.
    pub fn command_type(&self) -> CommandType {
        self.payload.command_type()
    }
}

impl Serialize for Command {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        struct P<'a>(&'a CommandPayload);
        impl Serialize for P<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.0.serialize_payload(s)
            }
        }
        let mut st = s.serialize_struct("Command", 5)?;
        st.serialize_field("version", &self.version)?;
        st.serialize_field("type", self.command_type().as_str())?;
        st.serialize_field("requestId", &self.request_id)?;
        st.serialize_field("sessionId", &self.session_id)?;
        st.serialize_field("payload", &P(&self.payload))?;
        st.end()
    }
}

impl CommandPayload {
    /// The session this payload names, for the commands that name one in their
    /// payload (`session.resume`, `session.watch`, `session.unwatch`,
    /// `session.delete`); `None` for the others. Empty when it was left out.
    pub fn named_session(&self) -> Option<&str> {
        match self {
            CommandPayload::SessionResume(p) => Some(&p.session_id),
            CommandPayload::SessionWatch(p) => Some(&p.session_id),
            CommandPayload::SessionUnwatch(p) => Some(&p.session_id),
            CommandPayload::SessionDelete(p) => Some(&p.session_id),
            _ => None,
        }
    }

    fn named_session_mut(&mut self) -> Option<&mut String> {
        match self {
            CommandPayload::SessionResume(p) => Some(&mut p.session_id),
            CommandPayload::SessionWatch(p) => Some(&mut p.session_id),
            CommandPayload::SessionUnwatch(p) => Some(&mut p.session_id),
            CommandPayload::SessionDelete(p) => Some(&mut p.session_id),
            _ => None,
        }
    }
}

impl Command {
    /// For a command whose payload names a session: takes the envelope's
    /// `sessionId` when the payload's is left out (or empty), and refuses the command
    /// when both are given and differ (`REQUEST_INVALID`, `details.reason`
    /// `invalid_value`, naming both), or when neither is (`missing_field`). Other
    /// commands are left as they are. The codec calls this on every command it
    /// decodes; the kernel on every command it executes.
    pub fn settle_session(&mut self) -> Result<(), ErrorPayload> {
        let ty = self.command_type();
        let envelope = self.session_id.as_deref().filter(|s| !s.is_empty());
        let Some(named) = self.payload.named_session_mut() else {
            return Ok(());
        };
        let refuse = |reason: &str, message: String| {
            ErrorPayload::new(ErrorCode::RequestInvalid, message)
                .category(ErrorCategory::Bridge)
                .with_detail("reason", reason)
                .with_detail("field", "payload.sessionId")
        };
        match envelope {
            Some(e) if named.is_empty() => {
                *named = e.to_owned();
                Ok(())
            }
            Some(e) if named != e => Err(refuse(
                "invalid_value",
                format!(
                    "command `{}` names two sessions: {e:?} in the envelope's `sessionId` and {named:?} in `payload.sessionId`; give one, or the same in both",
                    ty.as_str()
                ),
            )
            .with_detail("envelopeSessionId", e)
            .with_detail("payloadSessionId", named.clone())),
            None if named.is_empty() => Err(refuse(
                "missing_field",
                format!(
                    "command `{}` needs a session: field `payload.sessionId` or the envelope's `sessionId`",
                    ty.as_str()
                ),
            )),
            _ => Ok(()),
        }
    }
}
