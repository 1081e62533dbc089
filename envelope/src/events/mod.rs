//! The closed set of event types and their typed payloads.
//!
//! Type names are dotted lowercase (`tool.call.started`). The set may grow in a minor
//! version; a consumer must ignore types it does not know (decoding yields
//! [`Event::Unknown`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::budget::BudgetStatus;
use crate::error::ErrorPayload;
use crate::ext::{BackgroundTask, Patch, ReviewState, SubAgentInfo, TaskGraph, TaskNode};
use crate::types::{
    ApprovalDecision, ApprovalRules, Cursor, ModelInfo, PermissionLevel, PermissionMode, Plan,
    PlanStep, RiskLevel, SessionCursor, SessionInfo, SessionState, StopReason, Telemetry,
    TurnStopReason, Usage,
};
use crate::worktree::{AdditionalRoot, WorktreeInfo};

/// Defines event payload structs: each is `#[non_exhaustive]`, with `new(…)` and
/// setters (see `crate::wire::growable`).
macro_rules! payloads {
    ($( $(#[$doc:meta])* pub struct $name:ident { $($body:tt)* } )*) => {
        $(
            crate::wire::growable! {
                $(#[$doc])*
                #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
                #[serde(rename_all = "camelCase")]
                pub struct $name { $($body)* }
            }
        )*
    };
}

mod base;
mod ext;
mod host;
mod rewind;
mod worktree;

pub use self::base::*;
pub use self::ext::*;
pub use self::host::*;
pub use self::rewind::*;
pub use self::worktree::*;

/// Defines [`Event`], [`EventType`] and their wire names from one list.
macro_rules! define_events {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal => $payload:ty ),* $(,)?) => {
        /// An event: its type and typed payload.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum Event {
            $( $(#[$doc])* $variant($payload), )*
            /// A type this version does not know (a newer peer); consumers ignore it.
            Unknown {
                /// The wire type name.
                event_type: String,
                /// The raw payload.
                payload: serde_json::Value,
            },
        }

        /// The type of an event, without its payload.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum EventType {
            $( $(#[$doc])* $variant, )*
        }

        impl EventType {
            /// Every known event type, in documentation order.
            pub const ALL: &'static [EventType] = &[$(EventType::$variant,)*];

            /// The dotted wire name.
            pub fn as_str(self) -> &'static str {
                match self { $(EventType::$variant => $name,)* }
            }

            /// Parses a wire name.
            pub fn from_name(name: &str) -> Option<Self> {
                match name { $($name => Some(EventType::$variant),)* _ => None }
            }

            /// The Rust name of the payload type (for documentation and TypeScript).
            pub fn payload_type_name(self) -> &'static str {
                match self { $(EventType::$variant => stringify!($payload),)* }
            }
        }

        impl Event {
            /// The event's type, or `None` for [`Event::Unknown`].
            pub fn event_type(&self) -> Option<EventType> {
                match self { $(Event::$variant(_) => Some(EventType::$variant),)* Event::Unknown { .. } => None }
            }

            /// The dotted wire name.
            pub fn type_name(&self) -> &str {
                match self { $(Event::$variant(_) => $name,)* Event::Unknown { event_type, .. } => event_type }
            }

            /// Serializes the payload alone.
            pub(crate) fn serialize_payload<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self { $(Event::$variant(p) => p.serialize(s),)* Event::Unknown { payload, .. } => payload.serialize(s) }
            }

            /// Builds an event from its wire name and payload. Unknown names give
            /// [`Event::Unknown`]; a payload that does not fit the type is an error.
            pub fn from_parts(name: &str, payload: &serde_json::value::RawValue) -> Result<Self, serde_json::Error> {
                match name {
                    $($name => serde_json::from_str::<$payload>(payload.get()).map(Event::$variant),)*
                    _ => Ok(Event::Unknown {
                        event_type: name.to_owned(),
                        payload: serde_json::from_str(payload.get())?,
                    }),
                }
            }

            /// The payload as a JSON value.
            pub fn payload_value(&self) -> serde_json::Value {
                match self {
                    $(Event::$variant(p) => serde_json::to_value(p).unwrap_or(serde_json::Value::Null),)*
                    Event::Unknown { payload, .. } => payload.clone(),
                }
            }
        }

        /// The payload schema of every event type, keyed by wire name.
        pub(crate) fn payload_schemas(generator: &mut schemars::SchemaGenerator) -> Vec<(&'static str, schemars::Schema)> {
            vec![$(($name, generator.subschema_for::<$payload>()),)*]
        }

        /// Visits every payload type for TypeScript generation.
        pub(crate) fn visit_payloads(v: &mut impl ts_rs::TypeVisitor) {
            $(v.visit::<$payload>();)*
        }
    };
}

define_events! {
    /// The bridge is up; the first line on stdout.
    RuntimeReady = "runtime.ready" => RuntimeReady,
    /// The process is about to exit.
    RuntimeStopped = "runtime.stopped" => RuntimeStopped,
    /// A session was created.
    SessionStarted = "session.started" => SessionStarted,
    /// A session was restored from the store.
    SessionResumed = "session.resumed" => SessionResumed,
    /// A request was interrupted (or an interrupt found the session idle).
    SessionInterrupted = "session.interrupted" => SessionInterrupted,
    /// Another node took the session over.
    SessionOwnerChanged = "session.owner_changed" => SessionOwnerChanged,
    /// A request ended.
    SessionCompleted = "session.completed" => SessionCompleted,
    /// A session was closed.
    SessionClosed = "session.closed" => SessionClosed,
    /// The answer to `session.list`.
    SessionList = "session.list" => SessionList,
    /// The answer to `session.state`.
    SessionState = "session.state" => SessionStateSnapshot,
    /// The answer to `checkpoint.list`.
    CheckpointList = "checkpoint.list" => CheckpointList,
    /// Files and/or conversation were rewound.
    SessionRewound = "session.rewound" => SessionRewound,
    /// A session was forked.
    SessionForked = "session.forked" => SessionForked,
    /// The answer to a side question.
    SideAnswered = "side.answered" => SideAnswered,
    /// The permission mode changed.
    SessionModeChanged = "session.mode_changed" => SessionModeChanged,
    /// The model changed.
    SessionModelChanged = "session.model_changed" => SessionModelChanged,
    /// The always-allow or always-deny rules changed.
    SessionRulesUpdated = "session.rules_updated" => SessionRulesUpdated,
    /// History was loaded.
    SessionHistoryLoaded = "session.history_loaded" => SessionHistoryLoaded,
    /// The session's title changed (set by the host, or generated).
    SessionTitleChanged = "session.title_changed" => SessionTitleChanged,
    /// A session and its stored files were deleted.
    SessionDeleted = "session.deleted" => SessionDeleted,
    /// A request started running.
    RequestAccepted = "request.accepted" => RequestAccepted,
    /// A request was refused; the payload says why.
    RequestRejected = "request.rejected" => ErrorPayload,
    /// A request waits in the queue.
    RequestQueued = "request.queued" => RequestQueued,
    /// A message joined the running request.
    RequestSteered = "request.steered" => RequestSteered,
    /// A queued request was removed.
    RequestCancelled = "request.cancelled" => RequestCancelled,
    /// A whole assistant message.
    AssistantMessage = "assistant.message" => AssistantMessage,
    /// Streamed assistant text.
    AssistantDelta = "assistant.delta" => AssistantDelta,
    /// Streamed thought summary.
    AssistantThoughtSummary = "assistant.thought-summary" => AssistantThoughtSummary,
    /// The final answer of a request.
    AssistantFinal = "assistant.final" => AssistantFinal,
    /// The model started a plan.
    PlanStarted = "plan.started" => PlanStarted,
    /// The plan's steps changed.
    PlanUpdated = "plan.updated" => PlanUpdated,
    /// The plan waits for approval.
    PlanApprovalRequired = "plan.approval_required" => PlanApprovalRequired,
    /// The plan was approved.
    PlanApproved = "plan.approved" => PlanApproved,
    /// The plan was rejected.
    PlanRejected = "plan.rejected" => PlanRejected,
    /// A tool call started.
    ToolCallStarted = "tool.call.started" => ToolCallStarted,
    /// A tool call streamed output.
    ToolCallProgress = "tool.call.progress" => ToolCallProgress,
    /// A tool call succeeded.
    ToolCallCompleted = "tool.call.completed" => ToolCallCompleted,
    /// A tool call failed.
    ToolCallFailed = "tool.call.failed" => ToolCallFailed,
    /// A tool call did not run.
    ToolCallSkipped = "tool.call.skipped" => ToolCallSkipped,
    /// A tool call waits for approval.
    ApprovalRequested = "approval.requested" => ApprovalRequested,
    /// The approval was granted.
    ApprovalGranted = "approval.granted" => ApprovalGranted,
    /// The approval was denied.
    ApprovalDenied = "approval.denied" => ApprovalDenied,
    /// The approval expired or was released by an interrupt (counts as deny).
    ApprovalExpired = "approval.expired" => ApprovalExpired,
    /// The model asks the user.
    AskRequested = "ask.requested" => AskRequested,
    /// The user answered.
    AskAnswered = "ask.answered" => AskAnswered,
    /// Nobody answered in time, or the request was interrupted.
    AskExpired = "ask.expired" => AskExpired,
    /// Compaction started.
    CompactionStarted = "context.compaction.started" => CompactionStarted,
    /// Compaction finished.
    CompactionCompleted = "context.compaction.completed" => CompactionCompleted,
    /// Token usage after a model call.
    UsageUpdated = "usage.updated" => UsageUpdated,
    /// A model call of the request begins.
    TurnStarted = "turn.started" => TurnStarted,
    /// A model call and its tool calls are done.
    TurnCompleted = "turn.completed" => TurnCompleted,
    /// A limit of the request's or the session's budget is 80 % used.
    BudgetWarning = "budget.warning" => BudgetStatus,
    /// Something degraded; the work goes on.
    Warning = "warning" => ErrorPayload,
    /// Something failed.
    Error = "error" => ErrorPayload,
    /// A review was requested.
    ReviewRequested = "review.requested" => ReviewEvent,
    /// A review got a comment or checklist change.
    ReviewUpdated = "review.updated" => ReviewEvent,
    /// A review was resolved.
    ReviewResolved = "review.resolved" => ReviewEvent,
    /// The answer to `review.status`.
    ReviewState = "review.state" => ReviewStateEvent,
    /// A patch was proposed.
    PatchProposed = "patch.proposed" => PatchEvent,
    /// A patch was written.
    PatchApplied = "patch.applied" => PatchEvent,
    /// A patch was dropped.
    PatchRejected = "patch.rejected" => PatchEvent,
    /// The answer to `patch.summary`.
    PatchSummary = "patch.summary" => PatchSummary,
    /// A task graph was created.
    TaskGraphCreated = "task-graph.created" => TaskGraphEvent,
    /// A task graph changed.
    TaskGraphUpdated = "task-graph.updated" => TaskGraphEvent,
    /// A node was added.
    TaskGraphNodeAdded = "task-graph.node.added" => TaskGraphNodeEvent,
    /// A node changed.
    TaskGraphNodeUpdated = "task-graph.node.updated" => TaskGraphNodeEvent,
    /// A node completed.
    TaskGraphNodeCompleted = "task-graph.node.completed" => TaskGraphNodeEvent,
    /// A node failed.
    TaskGraphNodeFailed = "task-graph.node.failed" => TaskGraphNodeEvent,
    /// Nodes were promoted to ready.
    TaskGraphAdvanced = "task-graph.advanced" => TaskGraphAdvanced,
    /// Every node is terminal.
    TaskGraphCompleted = "task-graph.completed" => TaskGraphEvent,
    /// The answer to `task-graph.state`.
    TaskGraphState = "task-graph.state" => TaskGraphEvent,
    /// A sub-agent started.
    SubAgentStarted = "sub-agent.started" => SubAgentEvent,
    /// A sub-agent made progress.
    SubAgentProgress = "sub-agent.progress" => SubAgentProgress,
    /// A sub-agent finished.
    SubAgentCompleted = "sub-agent.completed" => SubAgentEvent,
    /// A sub-agent failed.
    SubAgentFailed = "sub-agent.failed" => SubAgentEvent,
    /// The answer to `sub-agent.list`.
    SubAgentList = "sub-agent.list" => SubAgentList,
    /// The answer to `sub-agent.get`.
    SubAgentGet = "sub-agent.get" => SubAgentGet,
    /// The answer to `harness.status`.
    HarnessStatus = "harness.status" => HarnessStatus,
    /// The answer to `background.list`.
    BackgroundList = "background.list" => BackgroundList,
    /// The answer to `background.get`.
    BackgroundGet = "background.get" => BackgroundEvent,
    /// The answer to `background.history`.
    BackgroundHistory = "background.history" => BackgroundHistory,
    /// A background task was stopped.
    BackgroundStopped = "background.stopped" => BackgroundEvent,
    /// The answer to `session.watch`: the session's events follow.
    SessionWatched = "session.watched" => SessionWatched,
    /// The answer to `session.unwatch`.
    SessionUnwatched = "session.unwatched" => SessionUnwatched,
    /// A background task ended by itself (it exited, or reached its time limit).
    BackgroundExited = "background.exited" => BackgroundEvent,
    /// The answer to `mcp.list`.
    McpList = "mcp.list" => McpList,
    /// The answer to `skills.list`.
    SkillsList = "skills.list" => SkillsList,
    /// The answer to `commands.list`.
    CommandsList = "commands.list" => CommandsList,
    /// The host's tools were replaced.
    SessionHostToolsUpdated = "session.host_tools_updated" => SessionHostToolsUpdated,
    /// The answer to `worktree.list`.
    WorktreeList = "worktree.list" => WorktreeList,
    /// A worktree was removed (`worktree.remove`, or with its session's `session.delete`).
    WorktreeRemoved = "worktree.removed" => WorktreeRemoved,
    /// A host tool is to be run by the host.
    HostToolRequested = "host-tool.requested" => HostToolRequested,
    /// The host answered a host-tool call.
    HostToolResponded = "host-tool.responded" => HostToolResponded,
}
