//! Small enums of command payloads.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// What `request.send` does when the session is busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WhenBusy {
    /// Wait in the queue (the default).
    #[default]
    Queue,
    /// Join the running request at its next model call.
    Steer,
    /// Refuse with `request.rejected` (SESSION_BUSY).
    Reject,
}

/// A review decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReviewDecision {
    /// Approve.
    #[default]
    Approved,
    /// Reject.
    Rejected,
}
