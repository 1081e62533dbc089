//! Commands (host → kernel). A command line has the envelope's shape:
//! `{version, type, requestId, sessionId?, payload}`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::budget::{BudgetLimits, SessionBudget};
use crate::host::{HostToolError, HostToolSpec, McpServerSpec};
use crate::types::{ApprovalDecision, Cursor, HistoryMessage, PermissionMode};
use crate::worktree::{AdditionalRoot, Isolation};

mod command;
mod ctors;
mod enums;

pub use enums::{ReviewDecision, WhenBusy};

pub use command::Command;

macro_rules! command_payloads {
    ($( $(#[$doc:meta])* pub struct $name:ident { $( $(#[$fdoc:meta])* pub $field:ident : $ty:ty ),* $(,)? } )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
            #[serde(rename_all = "camelCase")]
            #[ts(optional_fields = nullable)]
            #[non_exhaustive]
            pub struct $name { $( $(#[$fdoc])* pub $field: $ty, )* }

            impl $name {
                $(
                    #[doc = concat!("Sets `", stringify!($field), "` (an `Option` field takes the value itself or an `Option`).")]
                    #[must_use]
                    pub fn $field(mut self, value: impl Into<$ty>) -> Self {
                        self.$field = value.into();
                        self
                    }
                )*
            }
        )*
    };
}

mod worktree;
pub use worktree::{WorktreeListCmd, WorktreeRemove};

command_payloads! {
    /// `runtime.shutdown`: interrupt everything, flush, close sessions, exit 0.
    #[derive(Default)]
    pub struct RuntimeShutdown {}

    /// `session.start`.
    #[derive(Default)]
    pub struct SessionStart {
        /// The workspace root (default: the runtime's workspace).
        #[serde(default)]
        pub workspace_path: Option<String>,
        /// The permission mode (default: configuration, else `ask`).
        #[serde(default, deserialize_with = "crate::wire::strict::opt")]
        #[schemars(with = "Option<crate::wire::Known<PermissionMode>>")]
        #[ts(optional = nullable, type = "KnownPermissionMode | null")]
        pub permission_mode: Option<PermissionMode>,
        /// The model, `provider:model` (default: configuration).
        #[serde(default)]
        pub model: Option<String>,
        /// A title.
        #[serde(default)]
        pub title: Option<String>,
        /// A file (path on the runtime's machine) where every model response of the
        /// session is written in the scripted model's format, for an offline replay
        /// with `scripted:<file>`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub record: Option<String>,
        /// Limits of each request and of the whole session (default: configuration).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub budget: Option<SessionBudget>,
        /// Cap on the output tokens of each model call (default: configuration, else
        /// the provider's default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_output_tokens: Option<u32>,
        /// MCP servers of this session, on top of the configured ones.
        #[serde(default)]
        pub mcp_servers: Option<Vec<McpServerSpec>>,
        /// Tools the host runs (`host-tool.requested` → `host-tool.respond`).
        #[serde(default)]
        pub host_tools: Option<Vec<HostToolSpec>>,
        /// Where the session works (default: configuration, else `none`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub isolation: Option<Isolation>,
        /// With `isolation: "worktree"`: the commit the worktree starts at (default `HEAD`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub base_ref: Option<String>,
        /// Folders the session may reach beside its workspace, jailed like it: each an
        /// existing directory given by absolute path, none inside another or inside
        /// the workspace, none holding the workspace. The file tools name paths there
        /// by absolute path; writes only in `write` roots.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub additional_roots: Option<Vec<AdditionalRoot>>,
    }

    /// `session.resume`.
    #[derive(Default)]
    pub struct SessionResume {
        /// The session to restore. Left out: the envelope's `sessionId`
        /// (both given and different: refused).
        #[serde(default)]
        pub session_id: String,
        /// Replay the events logged after this cursor.
        #[serde(default)]
        pub after_sequence: Option<Cursor>,
        /// MCP servers of the session, on top of the configured ones (started when
        /// the session is opened from the store; an open session keeps its servers).
        #[serde(default)]
        pub mcp_servers: Option<Vec<McpServerSpec>>,
        /// The session's extra roots from now on, replacing those it kept (checked as
        /// `session.start`'s; `[]`: none). Left out: it keeps its own. An open
        /// session's roots change only while it is idle.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub additional_roots: Option<Vec<AdditionalRoot>>,
        /// When the session's workspace does not exist on this node: an absolute path
        /// (absent, or an empty directory) to make it in from the session's newest
        /// checkpoint; the session then works there (`session.resumed` says what was
        /// made in `materialized`). Ignored when the workspace exists. Without it, a
        /// missing workspace is refused with `WORKSPACE_MISSING`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub materialize_to: Option<String>,
    }

    /// `session.watch`: stream a session's events to this connection (replaying the
    /// events logged after `afterSequence` first).
    #[derive(Default)]
    pub struct SessionWatch {
        /// The session to watch (it must be open). Left out: the envelope's `sessionId`
        /// (both given and different: refused).
        #[serde(default)]
        pub session_id: String,
        /// Replay the events logged after this cursor, then go on live.
        #[serde(default)]
        pub after_sequence: Option<Cursor>,
    }

    /// `session.unwatch`: stop streaming a session's events to this connection.
    #[derive(Default)]
    pub struct SessionUnwatch {
        /// The session to stop watching. Left out: the envelope's `sessionId`
        /// (both given and different: refused).
        #[serde(default)]
        pub session_id: String,
    }

    /// `session.close`.
    #[derive(Default)]
    pub struct SessionClose {}

    /// `session.list`.
    #[derive(Default)]
    pub struct SessionListCmd {}

    /// `session.state`.
    #[derive(Default)]
    pub struct SessionStateCmd {}

    /// `checkpoint.list`.
    #[derive(Default)]
    pub struct CheckpointListCmd {}

    /// `session.rewind`: give exactly one of `toRequestId` and `toToolCallId` (refused
    /// while a request runs).
    #[derive(Default)]
    pub struct SessionRewind {
        /// Back to just before this request.
        #[serde(default)]
        pub to_request_id: Option<String>,
        /// Back to just before this tool call.
        #[serde(default)]
        pub to_tool_call_id: Option<String>,
        /// Restore the files (default true).
        #[serde(default)]
        pub files: Option<bool>,
        /// Cut the conversation back (default true).
        #[serde(default)]
        pub conversation: Option<bool>,
    }

    /// `session.fork`: a new session from this one's history.
    #[derive(Default)]
    pub struct SessionFork {
        /// Copy the history up to just before this request (default: all of it).
        #[serde(default)]
        pub at_request_id: Option<String>,
        /// Also restore the workspace to that point (default false).
        #[serde(default)]
        pub files: Option<bool>,
        /// `worktree`: the fork works in a worktree of its own (default: the parent's tree).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub isolation: Option<Isolation>,
        /// The fork's extra roots (checked as `session.start`'s; `[]`: none). Left
        /// out: the parent's (shared with it, also in a worktree of its own).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub additional_roots: Option<Vec<AdditionalRoot>>,
    }

    /// `request.side`: a question answered from the conversation so far, without tools,
    /// beside a running request; it does not enter the history.
    #[derive(Default)]
    pub struct RequestSide {
        /// The question.
        pub message: String,
    }

    /// `session.set_mode`.
    #[derive(Default)]
    pub struct SetMode {
        /// The new mode.
        #[serde(deserialize_with = "crate::wire::strict::one")]
        #[schemars(with = "crate::wire::Known<PermissionMode>")]
        #[ts(type = "KnownPermissionMode")]
        pub mode: PermissionMode,
    }

    /// `session.set_model` (only while idle).
    #[derive(Default)]
    pub struct SetModel {
        /// The model, `provider:model`.
        pub model: String,
    }

    /// `session.set_rules`.
    #[derive(Default)]
    pub struct SetRules {
        /// Rules valid everywhere.
        #[serde(default)]
        pub always_allow_global: Vec<String>,
        /// Rules valid in this project.
        #[serde(default)]
        pub always_allow_project: Vec<String>,
        /// Deny rules valid everywhere.
        #[serde(default)]
        pub always_deny_global: Vec<String>,
        /// Deny rules valid in this project.
        #[serde(default)]
        pub always_deny_project: Vec<String>,
        /// Deny rules for this session only (kept with the session, not with the
        /// host's rules). Absent: the session's deny rules stay as they are.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub deny: Option<Vec<String>>,
    }

    /// `session.set_title`.
    #[derive(Default)]
    pub struct SetTitle {
        /// The new title: 1 to 200 characters after trimming, no control characters.
        pub title: String,
    }

    /// `session.delete`: close the session if it is open, then remove its stored files.
    #[derive(Default)]
    pub struct SessionDelete {
        /// The session (open or stored). Left out: the envelope's `sessionId`
        /// (both given and different: refused).
        #[serde(default)]
        pub session_id: String,
    }

    /// `session.load_history`.
    #[derive(Default)]
    pub struct LoadHistory {
        /// Messages, oldest first.
        pub messages: Vec<HistoryMessage>,
    }

    /// `request.send`.
    #[derive(Default)]
    pub struct RequestSend {
        /// The user's message.
        pub message: String,
        /// Local image paths.
        #[serde(default)]
        pub images: Option<Vec<String>>,
        /// What to do when busy.
        #[serde(default)]
        pub when_busy: Option<WhenBusy>,
        /// Propose edits as patches instead of writing them (this request only).
        #[serde(default)]
        pub patch_preview: Option<bool>,
        /// Limits of this request, over the session's (key by key).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub budget: Option<BudgetLimits>,
        /// Cap on the output tokens of each model call of this request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_output_tokens: Option<u32>,
        /// A W3C `traceparent`: the request's spans join that trace (docs/protocol.md).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub traceparent: Option<String>,
        /// The W3C `tracestate` that goes with `traceparent`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tracestate: Option<String>,
    }

    /// `request.interrupt`.
    #[derive(Default)]
    pub struct RequestInterrupt {}

    /// `request.cancel_queued`.
    #[derive(Default)]
    pub struct CancelQueued {
        /// The queued request.
        pub queued_request_id: String,
    }

    /// `approval.respond`.
    pub struct ApprovalRespond {
        /// The approval.
        pub approval_id: String,
        /// The decision.
        #[serde(deserialize_with = "crate::wire::strict::one")]
        #[schemars(with = "crate::wire::Known<ApprovalDecision>")]
        #[ts(type = "KnownApprovalDecision")]
        pub decision: ApprovalDecision,
    }

    /// `plan.approve`.
    #[derive(Default)]
    pub struct PlanApprove {
        /// The plan.
        pub plan_id: String,
        /// The mode to continue in (default `ask`).
        #[serde(default, deserialize_with = "crate::wire::strict::opt")]
        #[schemars(with = "Option<crate::wire::Known<PermissionMode>>")]
        #[ts(optional = nullable, type = "KnownPermissionMode | null")]
        pub mode: Option<PermissionMode>,
    }

    /// `plan.reject`.
    #[derive(Default)]
    pub struct PlanReject {
        /// The plan.
        pub plan_id: String,
        /// Feedback for the model.
        #[serde(default)]
        pub feedback: Option<String>,
    }

    /// `ask.respond`.
    #[derive(Default)]
    pub struct AskRespond {
        /// The question.
        pub ask_id: String,
        /// The answer.
        pub answer: String,
    }

    /// `context.compact`.
    #[derive(Default)]
    pub struct ContextCompact {}

    /// `session.set_host_tools` (only while idle): replaces the session's host tools.
    #[derive(Default)]
    pub struct SetHostTools {
        /// The tools (empty: none).
        pub tools: Vec<HostToolSpec>,
    }

    /// `host-tool.respond`: the host's answer to `host-tool.requested`, a result or an
    /// error.
    #[derive(Default)]
    pub struct HostToolRespond {
        /// The call (`toolCallId` of `host-tool.requested`).
        pub tool_call_id: String,
        /// The result (any JSON; a string is given to the model as is).
        #[serde(default)]
        #[ts(type = "unknown")]
        pub result: Option<serde_json::Value>,
        /// Or the error, `{message}`.
        #[serde(default)]
        pub error: Option<HostToolError>,
    }

    /// `mcp.list`: the session's MCP servers, their state and tools.
    #[derive(Default)]
    pub struct McpListCmd {}

    /// `skills.list`: the session's Agent Skills.
    #[derive(Default)]
    pub struct SkillsListCmd {}

    /// `commands.list`: the session's custom slash commands.
    #[derive(Default)]
    pub struct CommandsListCmd {}

    /// `review.enter`.
    #[derive(Default)]
    pub struct ReviewEnter {
        /// Why.
        pub reason: String,
        /// Whether requests are refused while pending.
        #[serde(default)]
        pub blocking: bool,
        /// Checklist titles.
        #[serde(default)]
        pub checklist: Option<Vec<String>>,
    }

    /// `review.submit`.
    #[derive(Default)]
    pub struct ReviewSubmit {
        /// A comment.
        #[serde(default)]
        pub comment: Option<String>,
        /// A checklist item update `{id, done, note?}`.
        #[serde(default)]
        pub checklist_item: Option<ChecklistUpdate>,
    }

    /// `review.resolve`.
    #[derive(Default)]
    pub struct ReviewResolve {
        /// The decision.
        pub decision: ReviewDecision,
        /// A summary.
        #[serde(default)]
        pub summary: Option<String>,
    }

    /// `review.status`.
    #[derive(Default)]
    pub struct ReviewStatusCmd {}

    /// `patch.propose` (from a host).
    #[derive(Default)]
    pub struct PatchPropose {
        /// Files with their new content (null content deletes).
        pub files: Vec<ProposedFile>,
        /// Why.
        #[serde(default)]
        pub reason: Option<String>,
    }

    /// `patch.apply`.
    #[derive(Default)]
    pub struct PatchApply {
        /// The patch.
        pub patch_id: String,
    }

    /// `patch.reject`.
    #[derive(Default)]
    pub struct PatchReject {
        /// The patch.
        pub patch_id: String,
        /// Why.
        #[serde(default)]
        pub reason: Option<String>,
    }

    /// `patch.summary`.
    #[derive(Default)]
    pub struct PatchSummaryCmd {}

    /// `task-graph.create`.
    #[derive(Default)]
    pub struct TaskGraphCreate {
        /// A title.
        #[serde(default)]
        pub title: Option<String>,
        /// A description.
        #[serde(default)]
        pub description: Option<String>,
        /// The nodes.
        pub nodes: Vec<NewTaskNode>,
    }

    /// `task-graph.add-node`.
    #[derive(Default)]
    pub struct TaskGraphAddNode {
        /// The node.
        pub node: NewTaskNode,
    }

    /// `task-graph.update-node`.
    #[derive(Default)]
    pub struct TaskGraphUpdateNode {
        /// The node.
        pub node_id: String,
        /// The changes.
        pub updates: NodeUpdates,
    }

    /// `task-graph.advance`.
    #[derive(Default)]
    pub struct TaskGraphAdvance {}

    /// `task-graph.state`.
    #[derive(Default)]
    pub struct TaskGraphStateCmd {}

    /// `sub-agent.list`.
    #[derive(Default)]
    pub struct SubAgentListCmd {}

    /// `sub-agent.get`.
    #[derive(Default)]
    pub struct SubAgentGetCmd {
        /// The sub-agent.
        pub sub_agent_id: String,
    }

    /// `harness.status`.
    #[derive(Default)]
    pub struct HarnessStatusCmd {}

    /// `background.list`.
    #[derive(Default)]
    pub struct BackgroundListCmd {}

    /// `background.get`.
    #[derive(Default)]
    pub struct BackgroundGetCmd {
        /// The task.
        pub task_id: String,
    }

    /// `background.history`.
    #[derive(Default)]
    pub struct BackgroundHistoryCmd {
        /// The task.
        pub task_id: String,
    }

    /// `background.stop`.
    #[derive(Default)]
    pub struct BackgroundStopCmd {
        /// The task.
        pub task_id: String,
    }

    /// A checklist change in `review.submit`.
    #[derive(Default)]
    pub struct ChecklistUpdate {
        /// The item.
        pub id: String,
        /// Done or not.
        #[serde(default)]
        pub done: bool,
        /// A note.
        #[serde(default)]
        pub note: Option<String>,
    }

    /// A file in `patch.propose`.
    #[derive(Default)]
    pub struct ProposedFile {
        /// Path relative to the workspace.
        pub path: String,
        /// The new content; null deletes the file.
        #[serde(default)]
        pub content: Option<String>,
    }

    /// A node in `task-graph.create` / `add-node`.
    #[derive(Default)]
    pub struct NewTaskNode {
        /// Unique id.
        pub id: String,
        /// What the task is.
        pub title: String,
        /// More detail.
        #[serde(default)]
        pub description: Option<String>,
        /// Dependencies.
        #[serde(default)]
        pub depends_on: Vec<String>,
        /// Free-form data.
        #[serde(default)]
        #[ts(type = "Record<string, unknown> | null")]
        pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    }

    /// Changes in `task-graph.update-node`.
    #[derive(Default)]
    pub struct NodeUpdates {
        /// New status.
        #[serde(default, deserialize_with = "crate::wire::strict::opt")]
        #[schemars(with = "Option<crate::wire::Known<crate::ext::NodeStatus>>")]
        #[ts(optional = nullable, type = "KnownNodeStatus | null")]
        pub status: Option<crate::ext::NodeStatus>,
        /// New title.
        #[serde(default)]
        pub title: Option<String>,
        /// A result.
        #[serde(default)]
        #[ts(type = "unknown")]
        pub result: Option<serde_json::Value>,
        /// An error.
        #[serde(default)]
        #[ts(type = "unknown")]
        pub error: Option<serde_json::Value>,
        /// Metadata to merge.
        #[serde(default)]
        #[ts(type = "Record<string, unknown> | null")]
        pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    }
}

/// Defines [`CommandPayload`] and [`CommandType`] from one list.
macro_rules! define_commands {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal => $payload:ty, session: $needs:literal ),* $(,)?) => {
        /// A command's type and typed payload.
        // `session.start` is by far the largest payload; a command is decoded once
        // and moved a few times, so its size costs nothing worth a box.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        // One command at a time is decoded and executed; boxing `session.start` would
        // only change how hosts build it.
        #[allow(clippy::large_enum_variant)]
        pub enum CommandPayload {
            $( $(#[$doc])* $variant($payload), )*
        }

        /// The type of a command.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum CommandType {
            $( $(#[$doc])* $variant, )*
        }

        impl CommandType {
            /// Every command type, in documentation order.
            pub const ALL: &'static [CommandType] = &[$(CommandType::$variant,)*];

            /// The dotted wire name.
            pub fn as_str(self) -> &'static str {
                match self { $(CommandType::$variant => $name,)* }
            }

            /// Parses a wire name.
            pub fn from_name(name: &str) -> Option<Self> {
                match name { $($name => Some(CommandType::$variant),)* _ => None }
            }

            /// Whether the command needs `sessionId`.
            pub fn needs_session(self) -> bool {
                match self { $(CommandType::$variant => $needs,)* }
            }

            /// The Rust name of the payload type.
            pub fn payload_type_name(self) -> &'static str {
                match self { $(CommandType::$variant => stringify!($payload),)* }
            }
        }

        impl CommandPayload {
            /// The command's type.
            pub fn command_type(&self) -> CommandType {
                match self { $(CommandPayload::$variant(_) => CommandType::$variant,)* }
            }

            pub(crate) fn serialize_payload<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self { $(CommandPayload::$variant(p) => p.serialize(s),)* }
            }

            /// Decodes a payload for a known type, reporting the path of a bad field.
            pub(crate) fn decode(
                ty: CommandType,
                payload: &str,
            ) -> Result<Self, serde_path_to_error::Error<serde_json::Error>> {
                match ty {
                    $(CommandType::$variant => {
                        let de = &mut serde_json::Deserializer::from_str(payload);
                        serde_path_to_error::deserialize::<_, $payload>(de).map(CommandPayload::$variant)
                    })*
                }
            }
        }

        pub(crate) fn payload_schemas(generator: &mut schemars::SchemaGenerator) -> Vec<(&'static str, schemars::Schema)> {
            vec![$(($name, generator.subschema_for::<$payload>()),)*]
        }

        pub(crate) fn visit_payloads(v: &mut impl ts_rs::TypeVisitor) {
            $(v.visit::<$payload>();)*
        }
    };
}

define_commands! {
    /// Stop the runtime.
    RuntimeShutdown = "runtime.shutdown" => RuntimeShutdown, session: false,
    /// Create a session.
    SessionStart = "session.start" => SessionStart, session: false,
    /// Restore a session.
    SessionResume = "session.resume" => SessionResume, session: false,
    /// Close a session.
    SessionClose = "session.close" => SessionClose, session: true,
    /// List sessions.
    SessionList = "session.list" => SessionListCmd, session: false,
    /// Get a session's state.
    SessionState = "session.state" => SessionStateCmd, session: true,
    /// List a session's checkpoints.
    CheckpointList = "checkpoint.list" => CheckpointListCmd, session: true,
    /// Rewind files and/or conversation.
    SessionRewind = "session.rewind" => SessionRewind, session: true,
    /// Fork a session.
    SessionFork = "session.fork" => SessionFork, session: true,
    /// Ask a side question.
    RequestSide = "request.side" => RequestSide, session: true,
    /// Change the permission mode.
    SessionSetMode = "session.set_mode" => SetMode, session: true,
    /// Change the model.
    SessionSetModel = "session.set_model" => SetModel, session: true,
    /// Sync the always-allow and deny rules.
    SessionSetRules = "session.set_rules" => SetRules, session: true,
    /// Load history.
    SessionLoadHistory = "session.load_history" => LoadHistory, session: true,
    /// Set the session's title.
    SessionSetTitle = "session.set_title" => SetTitle, session: true,
    /// Delete a session and its stored files.
    SessionDelete = "session.delete" => SessionDelete, session: false,
    /// Send a user message.
    RequestSend = "request.send" => RequestSend, session: true,
    /// Interrupt the running request.
    RequestInterrupt = "request.interrupt" => RequestInterrupt, session: true,
    /// Remove a queued request.
    RequestCancelQueued = "request.cancel_queued" => CancelQueued, session: true,
    /// Answer an approval.
    ApprovalRespond = "approval.respond" => ApprovalRespond, session: true,
    /// Approve a plan.
    PlanApprove = "plan.approve" => PlanApprove, session: true,
    /// Reject a plan.
    PlanReject = "plan.reject" => PlanReject, session: true,
    /// Answer a question.
    AskRespond = "ask.respond" => AskRespond, session: true,
    /// Compact the context now.
    ContextCompact = "context.compact" => ContextCompact, session: true,
    /// Enter review mode.
    ReviewEnter = "review.enter" => ReviewEnter, session: true,
    /// Comment on the review.
    ReviewSubmit = "review.submit" => ReviewSubmit, session: true,
    /// Resolve the review.
    ReviewResolve = "review.resolve" => ReviewResolve, session: true,
    /// Get the review state.
    ReviewStatus = "review.status" => ReviewStatusCmd, session: true,
    /// Propose a patch.
    PatchPropose = "patch.propose" => PatchPropose, session: true,
    /// Apply a patch.
    PatchApply = "patch.apply" => PatchApply, session: true,
    /// Reject a patch.
    PatchReject = "patch.reject" => PatchReject, session: true,
    /// Summarise patches.
    PatchSummary = "patch.summary" => PatchSummaryCmd, session: true,
    /// Create the task graph.
    TaskGraphCreate = "task-graph.create" => TaskGraphCreate, session: true,
    /// Add a node.
    TaskGraphAddNode = "task-graph.add-node" => TaskGraphAddNode, session: true,
    /// Update a node.
    TaskGraphUpdateNode = "task-graph.update-node" => TaskGraphUpdateNode, session: true,
    /// Promote ready nodes.
    TaskGraphAdvance = "task-graph.advance" => TaskGraphAdvance, session: true,
    /// Get the graph.
    TaskGraphState = "task-graph.state" => TaskGraphStateCmd, session: true,
    /// List sub-agents.
    SubAgentList = "sub-agent.list" => SubAgentListCmd, session: true,
    /// Get a sub-agent.
    SubAgentGet = "sub-agent.get" => SubAgentGetCmd, session: true,
    /// Aggregate status.
    HarnessStatus = "harness.status" => HarnessStatusCmd, session: false,
    /// List background tasks.
    BackgroundList = "background.list" => BackgroundListCmd, session: true,
    /// Get a background task.
    BackgroundGet = "background.get" => BackgroundGetCmd, session: true,
    /// Get a background task's output.
    BackgroundHistory = "background.history" => BackgroundHistoryCmd, session: true,
    /// Stop a background task.
    BackgroundStop = "background.stop" => BackgroundStopCmd, session: true,
    /// Watch a session's events.
    SessionWatch = "session.watch" => SessionWatch, session: false,
    /// Stop watching a session.
    SessionUnwatch = "session.unwatch" => SessionUnwatch, session: false,
    /// Replace the host's tools.
    SessionSetHostTools = "session.set_host_tools" => SetHostTools, session: true,
    /// Answer a host-tool call.
    HostToolRespond = "host-tool.respond" => HostToolRespond, session: true,
    /// List the MCP servers.
    McpList = "mcp.list" => McpListCmd, session: true,
    /// List the session's skills.
    SkillsList = "skills.list" => SkillsListCmd, session: true,
    /// List the session's custom commands.
    CommandsList = "commands.list" => CommandsListCmd, session: true,
    /// List the worktrees the runtime keeps.
    WorktreeList = "worktree.list" => WorktreeListCmd, session: false,
    /// Remove a worktree.
    WorktreeRemove = "worktree.remove" => WorktreeRemove, session: false,
}
