//! The model port: what the kernel needs from a language model. Providers in
//! `keel-adapters` (and a host's own models) implement [`Model`].
//!
//! A call is a stream of [`ModelEvent`]s. The stream must stop promptly when the
//! cancellation token fires (dropping any HTTP connection), must never panic, and
//! reports failures as a final `Err(ModelError)` item.

use std::pin::Pin;

use futures::Stream;
use keel_envelope::types::Usage;
use keel_envelope::ErrorPayload;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use crate::base::history::History;

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The tool name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema (draft-07 subset, inlined) of its arguments.
    pub parameters: serde_json::Value,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The provider's call id (kept to pair results with calls).
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments (a JSON object; a model that sent unparsable JSON gets
    /// `{"__invalid_json": "<text>"}` so the kernel can report the error to it).
    pub arguments: serde_json::Value,
}

/// One message of the conversation, provider-neutral.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// A user turn.
    User {
        /// The text.
        text: String,
        /// Local image paths (providers that cannot take images ignore them).
        #[serde(default)]
        images: Vec<String>,
    },
    /// An assistant turn: text and/or tool calls.
    Assistant {
        /// The text (may be empty).
        text: String,
        /// Tool calls made in this turn.
        #[serde(default)]
        tool_calls: Vec<ToolCallRequest>,
    },
    /// The result of one tool call.
    Tool {
        /// The call this answers.
        tool_call_id: String,
        /// The tool name.
        name: String,
        /// The result as text (JSON for structured results).
        content: String,
        /// Whether the call failed or was refused.
        is_error: bool,
    },
}

/// One model call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRequest {
    /// The system prompt (includes AGENTS.md instructions).
    pub system: String,
    /// The conversation, oldest first: shared with the session (cloning a request
    /// copies no message), each message with its id (see [`History`]).
    pub messages: History,
    /// Tools the model may call: shared with the session's view of its tools (cloning
    /// a request copies no schema).
    pub tools: std::sync::Arc<[ToolDef]>,
    /// Cap on output tokens, if any.
    pub max_output_tokens: Option<u32>,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The answer is complete.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output-token cap was hit.
    MaxTokens,
    /// The model refused (content filter, safety).
    Refusal,
}

/// One item of a model stream.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A piece of answer text.
    TextDelta(String),
    /// A piece of thought summary (never the raw reasoning).
    ThoughtDelta(String),
    /// A complete tool call (arguments fully assembled).
    ToolCall(ToolCallRequest),
    /// Token usage for this call (may come more than once; the last one wins).
    Usage(Usage),
    /// A retryable failure; the adapter waits `delay_ms` and tries again. The kernel
    /// turns this into a `warning` event.
    Retrying {
        /// 1-based attempt that failed.
        attempt: u32,
        /// Wait before the next attempt.
        delay_ms: u64,
        /// What failed.
        error: ErrorPayload,
    },
    /// The call finished.
    Finished(FinishReason),
}

/// A failed model call: the structured error (code `MODEL_ERROR` or
/// `MODEL_UNAVAILABLE`, with `hint` and `retryable` filled in).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelError(pub ErrorPayload);

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for ModelError {}

/// The stream a model call returns.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send + 'static>>;

/// A language model.
pub trait Model: Send + Sync + std::fmt::Debug {
    /// The selection string, `provider:model`.
    fn id(&self) -> String;

    /// The context window in tokens (used for compaction thresholds).
    fn context_window(&self) -> u64;

    /// Starts a call. The stream ends after `Finished` or an `Err`; it must end
    /// promptly once `cancel` fires.
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream;
}
