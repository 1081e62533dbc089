//! Hooks: code that runs at fixed points of a session and may change what happens
//! there, as Claude Code users know them.
//!
//! | point | when | may |
//! |---|---|---|
//! | `SessionStart` | a session starts or is resumed | add context to the system prompt |
//! | `UserPromptSubmit` | a request begins, before the model sees the prompt | add context, or block the request (`PROMPT_BLOCKED`) |
//! | `PreToolUse` | a tool call decoded, before the permission gate | deny it (`TOOL_PERMISSION_DENIED`), or rewrite its arguments (decoded and gated again) |
//! | `PostToolUse` | a tool call ran (completed or failed) | add a note to the result the model reads |
//! | `Stop` | a request ends (not when interrupted) | after a finished answer: ask the model to go on |
//!
//! Two kinds of hooks implement the same [`Hooks`] trait: the command hooks of the
//! configuration ([`HooksConfig`]: a shell command that reads one JSON object on stdin
//! and answers with its exit code and stdout, see `command.rs`), and a Rust host's
//! own ([`crate::KernelBuilder::hooks`]). Every hook has a time limit; a hook that
//! fails, times out or answers something unreadable is reported as a `warning`
//! (`HOOK_FAILED`) and changes nothing. Hooks run one after the other, in order: the
//! command hooks of the configuration, then the host's. A hook can only make a call
//! stricter: its "allow" leaves the decision to the gate.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_envelope::types::{PermissionMode, StopReason};
use keel_envelope::{ErrorCode, ErrorPayload};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

mod command;

pub use command::{compile_matcher, CommandHook};

/// The key of the `SessionStart` hooks' context in a session's stored `extensions`.
pub(crate) const CONTEXT_KEY: &str = "sessionStartContext";

/// A point where hooks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum HookEvent {
    /// Before the permission gate decides a tool call.
    PreToolUse,
    /// After a tool call ran.
    PostToolUse,
    /// When a request begins.
    UserPromptSubmit,
    /// When a request ends.
    Stop,
    /// When a session starts or is resumed.
    SessionStart,
}

impl HookEvent {
    /// Every point, in documentation order.
    pub const ALL: [HookEvent; 5] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SessionStart,
    ];

    /// The name (`PreToolUse`, …), as in the configuration and the hook's input.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SessionStart => "SessionStart",
        }
    }

    /// Whether a `matcher` (on the tool name) applies to this point.
    pub fn takes_matcher(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PostToolUse)
    }
}

/// One command hook of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandHookConfig {
    /// The command line, run by `/bin/sh -c` in the workspace.
    pub command: String,
    /// A regular expression that the whole tool name must match (`PreToolUse`,
    /// `PostToolUse` only); `None`, `""` or `"*"` match every tool.
    pub matcher: Option<String>,
    /// The time limit of this hook (default: [`HooksConfig::timeout`]).
    pub timeout: Option<Duration>,
}

/// The command hooks of a kernel, by point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HooksConfig {
    /// `[[hooks.PreToolUse]]`.
    pub pre_tool_use: Vec<CommandHookConfig>,
    /// `[[hooks.PostToolUse]]`.
    pub post_tool_use: Vec<CommandHookConfig>,
    /// `[[hooks.UserPromptSubmit]]`.
    pub user_prompt_submit: Vec<CommandHookConfig>,
    /// `[[hooks.Stop]]`.
    pub stop: Vec<CommandHookConfig>,
    /// `[[hooks.SessionStart]]`.
    pub session_start: Vec<CommandHookConfig>,
    /// The time limit of a hook without its own (also of a Rust host's hooks).
    pub timeout: Duration,
}

/// The default time limit of a hook.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

impl Default for HooksConfig {
    fn default() -> Self {
        Self {
            pre_tool_use: Vec::new(),
            post_tool_use: Vec::new(),
            user_prompt_submit: Vec::new(),
            stop: Vec::new(),
            session_start: Vec::new(),
            timeout: DEFAULT_HOOK_TIMEOUT,
        }
    }
}

impl HooksConfig {
    /// The hooks of one point.
    pub fn of(&self, event: HookEvent) -> &[CommandHookConfig] {
        match event {
            HookEvent::PreToolUse => &self.pre_tool_use,
            HookEvent::PostToolUse => &self.post_tool_use,
            HookEvent::UserPromptSubmit => &self.user_prompt_submit,
            HookEvent::Stop => &self.stop,
            HookEvent::SessionStart => &self.session_start,
        }
    }

    /// The hooks of one point, to add to.
    pub fn of_mut(&mut self, event: HookEvent) -> &mut Vec<CommandHookConfig> {
        match event {
            HookEvent::PreToolUse => &mut self.pre_tool_use,
            HookEvent::PostToolUse => &mut self.post_tool_use,
            HookEvent::UserPromptSubmit => &mut self.user_prompt_submit,
            HookEvent::Stop => &mut self.stop,
            HookEvent::SessionStart => &mut self.session_start,
        }
    }

    /// Whether no hook is configured.
    pub fn is_empty(&self) -> bool {
        HookEvent::ALL.iter().all(|e| self.of(*e).is_empty())
    }
}

/// What a hook is told: one JSON object on a command hook's stdin. The field names
/// follow Claude Code's (snake_case), so existing hook scripts read it unchanged.
#[derive(Debug, Clone, Serialize)]
pub struct HookInput {
    /// The point.
    pub hook_event_name: HookEvent,
    /// The session.
    pub session_id: String,
    /// The request (none for `SessionStart`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The workspace root, where a command hook runs.
    pub cwd: String,
    /// The session's permission mode.
    pub permission_mode: PermissionMode,
    /// `PreToolUse`, `PostToolUse`: the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// `PreToolUse`, `PostToolUse`: the arguments (after earlier hooks' rewrites).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_input: Option<serde_json::Value>,
    /// `PostToolUse`: the result the model reads (JSON when it is JSON, else text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_response: Option<serde_json::Value>,
    /// `PostToolUse`: whether the call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_error: Option<bool>,
    /// `UserPromptSubmit`: the user's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// `Stop`: why the request ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// `Stop`: the final answer, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// `Stop`: whether the request already went on because a `Stop` hook asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_hook_active: Option<bool>,
    /// `SessionStart`: `startup` or `resume`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Fires on interrupt (and when the session closes); a hook should stop then.
    #[serde(skip)]
    pub cancel: CancellationToken,
}

/// A `PreToolUse` answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolVerdict {
    /// No objection: the permission gate decides.
    Continue,
    /// Refuse the call; the reason is given to the model.
    Deny {
        /// Why.
        reason: String,
    },
    /// Run the call with these arguments instead (they are decoded and gated again).
    Rewrite {
        /// The new arguments (a JSON object).
        arguments: serde_json::Value,
    },
}

/// A `UserPromptSubmit` answer.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptVerdict {
    /// Go on, with optional context for the model.
    Continue {
        /// Text added after the prompt.
        context: Option<String>,
    },
    /// End the request before any model call.
    Block {
        /// Why (shown to the user).
        reason: String,
    },
}

/// A `Stop` answer.
#[derive(Debug, Clone, PartialEq)]
pub enum StopVerdict {
    /// Let the request end.
    Stop,
    /// Go on: the reason is given to the model as the next message (only after a
    /// finished answer; ignored when a limit, an error or a refusal ended the request).
    Continue {
        /// What the model should do.
        reason: String,
    },
}

/// Why a hook's answer was ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookFailure {
    /// The command could not start.
    Spawn,
    /// It exited with a status other than 0 and 2, was killed, or (a Rust hook)
    /// returned an error.
    Failed,
    /// It passed its time limit (everything it started was killed).
    Timeout,
    /// Its output could not be read: bad JSON, an unknown decision, a field of the
    /// wrong type.
    BadOutput,
}

impl HookFailure {
    /// The `details.reason` of the warning.
    pub fn as_str(self) -> &'static str {
        match self {
            HookFailure::Spawn => "spawn",
            HookFailure::Failed => "failed",
            HookFailure::Timeout => "timeout",
            HookFailure::BadOutput => "bad_output",
        }
    }
}

/// A hook that failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct HookError {
    /// What went wrong.
    pub reason: HookFailure,
    /// One sentence.
    pub message: String,
    /// A command's exit status.
    pub exit_code: Option<i32>,
    /// The end of a command's stderr.
    pub stderr: Option<String>,
}

impl HookError {
    /// A failure with a message (for Rust hooks).
    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            reason: HookFailure::Failed,
            message: message.into(),
            exit_code: None,
            stderr: None,
        }
    }
}

/// Hooks of a Rust host (and the configuration's command hooks). Every method has a
/// default that changes nothing; implement the points you need.
#[async_trait]
pub trait Hooks: Send + Sync + std::fmt::Debug {
    /// A name for warnings.
    fn name(&self) -> String {
        "host hooks".into()
    }

    /// Whether the hook runs at `event` (for `tool`, at the tool points).
    fn applies(&self, event: HookEvent, tool: Option<&str>) -> bool {
        let _ = (event, tool);
        true
    }

    /// The time limit (default: [`HooksConfig::timeout`]).
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// `SessionStart`: context for the system prompt.
    async fn session_start(&self, input: &HookInput) -> Result<Option<String>, HookError> {
        let _ = input;
        Ok(None)
    }

    /// `UserPromptSubmit`.
    async fn user_prompt_submit(&self, input: &HookInput) -> Result<PromptVerdict, HookError> {
        let _ = input;
        Ok(PromptVerdict::Continue { context: None })
    }

    /// `PreToolUse`.
    async fn pre_tool_use(&self, input: &HookInput) -> Result<ToolVerdict, HookError> {
        let _ = input;
        Ok(ToolVerdict::Continue)
    }

    /// `PostToolUse`: a note added to the result the model reads.
    async fn post_tool_use(&self, input: &HookInput) -> Result<Option<String>, HookError> {
        let _ = input;
        Ok(None)
    }

    /// `Stop`.
    async fn stop(&self, input: &HookInput) -> Result<StopVerdict, HookError> {
        let _ = input;
        Ok(StopVerdict::Stop)
    }
}

/// The hooks of a kernel: the configuration's command hooks, then the host's.
pub(crate) fn build(
    config: &HooksConfig,
    host: Vec<Arc<dyn Hooks>>,
) -> Result<Vec<Arc<dyn Hooks>>, ErrorPayload> {
    let mut out: Vec<Arc<dyn Hooks>> = Vec::new();
    for event in HookEvent::ALL {
        for (i, h) in config.of(event).iter().enumerate() {
            let hook = CommandHook::new(event, h, config.timeout).map_err(|why| {
                ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!("hook {}[{i}]: {why}", event.as_str()),
                )
                .with_detail("field", format!("hooks.{}[{i}]", event.as_str()))
            })?;
            out.push(Arc::new(hook));
        }
    }
    out.extend(host);
    Ok(out)
}

/// Sessions whose `SessionStart` hooks run, with the signal that they are done.
pub(crate) type Starting =
    std::sync::Mutex<std::collections::HashMap<String, tokio::sync::watch::Receiver<bool>>>;
