//! The daemon's remote transport (WebSocket) carries the same envelopes and commands
//! as every other; the one message of its own is `auth`, the first message of a
//! browser, which cannot set the `Authorization` header of the upgrade.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// The discriminator of [`AuthMessage`]: always `auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub enum AuthKind {
    /// `auth`.
    #[serde(rename = "auth")]
    Auth,
}

/// `{"type": "auth", "token": "keel_…"}`: the first text message of a WebSocket client
/// that could not send `Authorization: Bearer …` with the upgrade. Its `Debug` form
/// never shows the token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct AuthMessage {
    /// Always `auth`.
    #[serde(rename = "type")]
    pub kind: AuthKind,
    /// The token, as `keel serve token create` printed it.
    pub token: String,
}

impl AuthMessage {
    /// An `auth` message carrying `token`.
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            kind: AuthKind::Auth,
            token: token.into(),
        }
    }
}

impl std::fmt::Debug for AuthMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthMessage")
            .field("token", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_travels_as_type_and_token_and_its_debug_hides_the_token() {
        let m = AuthMessage::new("keel_secret");
        let json = serde_json::to_string(&m).unwrap_or_default();
        assert_eq!(json, r#"{"type":"auth","token":"keel_secret"}"#);
        let back: AuthMessage =
            serde_json::from_str(&json).unwrap_or_else(|_| AuthMessage::new(""));
        assert_eq!(back, m);
        assert!(!format!("{m:?}").contains("secret"));
        assert!(
            serde_json::from_str::<AuthMessage>(r#"{"type":"session.list","token":"x"}"#).is_err()
        );
    }
}
