//! The closed set of event types and their typed payloads.
//!
//! Type names are dotted lowercase (`tool.call.started`). The set may grow in a minor
//! version; a consumer must ignore types it does not know (decoding yields
//! [`Event::Unknown`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::error::ErrorPayload;
use crate::ext::{BackgroundTask, Patch, ReviewState, SubAgentInfo, TaskGraph, TaskNode};
use crate::types::{
    ApprovalDecision, ApprovalRules, Cursor, ModelInfo, PermissionLevel, PermissionMode, Plan,
    PlanStep, RiskLevel, SessionInfo, SessionState, StopReason, Telemetry, Usage,
};

macro_rules! payloads {
    ($( $(#[$doc:meta])* pub struct $name:ident { $( $(#[$fdoc:meta])* pub $field:ident : $ty:ty ),* $(,)? } )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
            #[serde(rename_all = "camelCase")]
            pub struct $name { $( $(#[$fdoc])* pub $field: $ty, )* }
        )*
    };
}

payloads! {
    /// `runtime.ready`: the first line a bridge writes (seed 000 §4.1).
    pub struct RuntimeReady {
        /// The protocol version, e.g. `1.0`.
        pub protocol_version: String,
        /// The Keel version.
        pub keel_version: String,
        /// The bridge's process id.
        pub pid: u32,
        /// The default workspace, if one was given.
        pub workspace: Option<String>,
        /// Models a host may offer.
        pub available_models: Vec<ModelInfo>,
        /// The permission modes.
        pub permission_modes: Vec<PermissionMode>,
        /// Feature names (`approvals`, `plan`, `resume`, `queue`, …).
        pub capabilities: Vec<String>,
    }

    /// `runtime.stopped`: the last line before the process exits.
    pub struct RuntimeStopped {
        /// Why (`shutdown`, `eof`).
        pub reason: String,
    }

    /// `session.started`.
    pub struct SessionStarted {
        /// The new session id.
        pub session_id: String,
        /// The workspace root.
        pub workspace: String,
        /// The permission mode.
        pub permission_mode: PermissionMode,
        /// The model, `provider:model`.
        pub model: String,
        /// The title, if given.
        pub title: Option<String>,
        /// Creation time.
        pub created_at: u64,
    }

    /// `session.resumed`.
    pub struct SessionResumed {
        /// The session.
        pub session: SessionInfo,
        /// A short summary (first user message, counts).
        pub summary: String,
        /// Messages of history restored.
        pub message_count: u32,
        /// The plan, if any.
        pub plan: Option<Plan>,
        /// The always-allow rules in force.
        pub rules: ApprovalRules,
        /// The last event in the log before this one.
        pub last_cursor: Option<Cursor>,
        /// Events replayed after this one (with `afterSequence`).
        pub replayed: u32,
    }

    /// `session.interrupted`: the request was cancelled, or the interrupt found nothing to do.
    pub struct SessionInterrupted {
        /// The request that was cancelled (null when the session was idle).
        pub interrupted_request_id: Option<String>,
        /// Why (`user`, `shutdown`, `parent`).
        pub reason: String,
        /// Whether a request was running.
        pub was_running: bool,
    }

    /// `session.completed`: a request ended.
    pub struct SessionCompleted {
        /// Why it ended.
        pub stop_reason: StopReason,
        /// The final text, if any.
        pub final_text: Option<String>,
        /// Figures.
        pub telemetry: Telemetry,
    }

    /// `session.closed`.
    pub struct SessionClosed {
        /// Why (`requested`, `shutdown`).
        pub reason: String,
    }

    /// `session.list`: the answer to the `session.list` command.
    pub struct SessionList {
        /// Sessions, most recently updated first.
        pub sessions: Vec<SessionInfo>,
    }

    /// `session.state`: the answer to `session.state`.
    pub struct SessionStateSnapshot {
        /// The session.
        pub session: SessionInfo,
        /// The running request.
        pub active_request_id: Option<String>,
        /// Queued request ids, in order.
        pub queued_request_ids: Vec<String>,
        /// Approval ids awaiting an answer.
        pub pending_approval_ids: Vec<String>,
        /// The plan.
        pub plan: Option<Plan>,
        /// The rules.
        pub rules: ApprovalRules,
        /// Total usage.
        pub usage: Usage,
        /// Messages in history.
        pub message_count: u32,
        /// What the session is doing.
        pub state: SessionState,
    }

    /// `session.mode_changed`.
    pub struct SessionModeChanged {
        /// The new mode.
        pub mode: PermissionMode,
        /// The mode before.
        pub previous_mode: PermissionMode,
    }

    /// `session.model_changed` (seed 000 `llm_changed`).
    pub struct SessionModelChanged {
        /// The new model.
        pub model: String,
        /// The model before.
        pub previous_model: String,
    }

    /// `session.rules_updated`: rules changed, by `session.set_rules` or by an
    /// `allow_always_*` approval (the host should persist them).
    pub struct SessionRulesUpdated {
        /// The rules now in force.
        pub rules: ApprovalRules,
        /// `host` or `approval`.
        pub source: String,
    }

    /// `session.history_loaded`.
    pub struct SessionHistoryLoaded {
        /// Messages now in history.
        pub message_count: u32,
    }

    /// `request.accepted`: the request starts running now.
    pub struct RequestAccepted {
        /// The user's message.
        pub message: String,
        /// Whether it had waited in the queue.
        pub from_queue: bool,
    }

    /// `request.queued`.
    pub struct RequestQueued {
        /// 1-based position in the queue.
        pub position: u32,
    }

    /// `request.steered`: the message joined the running request.
    pub struct RequestSteered {
        /// The running request it joined.
        pub target_request_id: String,
    }

    /// `request.cancelled`: a queued request was removed.
    pub struct RequestCancelled {
        /// The removed request.
        pub queued_request_id: String,
    }

    /// `assistant.message`: a whole message (non-streaming fallback).
    pub struct AssistantMessage {
        /// The text.
        pub text: String,
    }

    /// `assistant.delta`: a streamed piece of text.
    pub struct AssistantDelta {
        /// The new text.
        pub text: String,
    }

    /// `assistant.thought-summary`: a short summary of the model's thinking.
    pub struct AssistantThoughtSummary {
        /// The new text.
        pub text: String,
    }

    /// `assistant.final`: the request's final answer.
    pub struct AssistantFinal {
        /// The text.
        pub text: String,
    }

    /// `plan.started`.
    pub struct PlanStarted {
        /// The plan id.
        pub plan_id: String,
    }

    /// `plan.updated`.
    pub struct PlanUpdated {
        /// The plan id.
        pub plan_id: String,
        /// Every step with its status.
        pub steps: Vec<PlanStep>,
    }

    /// `plan.approval_required`.
    pub struct PlanApprovalRequired {
        /// The plan id.
        pub plan_id: String,
        /// The proposed steps.
        pub steps: Vec<PlanStep>,
        /// The model's summary.
        pub summary: Option<String>,
    }

    /// `plan.approved`.
    pub struct PlanApproved {
        /// The plan id.
        pub plan_id: String,
        /// The mode the session continues in.
        pub mode: PermissionMode,
    }

    /// `plan.rejected`.
    pub struct PlanRejected {
        /// The plan id.
        pub plan_id: String,
        /// Feedback passed to the model.
        pub feedback: Option<String>,
    }

    /// `tool.call.started`.
    pub struct ToolCallStarted {
        /// The call id.
        pub tool_call_id: String,
        /// The tool.
        pub tool_name: String,
        /// The arguments.
        #[ts(type = "unknown")]
        pub arguments: serde_json::Value,
        /// The permission level.
        pub permission_level: PermissionLevel,
    }

    /// `tool.call.progress`: streamed output.
    pub struct ToolCallProgress {
        /// The call id.
        pub tool_call_id: String,
        /// `stdout`, `stderr` or `info`.
        pub stream: String,
        /// The chunk.
        pub chunk: String,
    }

    /// `tool.call.completed`.
    pub struct ToolCallCompleted {
        /// The call id.
        pub tool_call_id: String,
        /// The tool.
        pub tool_name: String,
        /// The structured result (see the tool's documented result type).
        #[ts(type = "unknown")]
        pub result: serde_json::Value,
        /// Wall time.
        pub duration_ms: u64,
    }

    /// `tool.call.failed`.
    pub struct ToolCallFailed {
        /// The call id.
        pub tool_call_id: String,
        /// The tool.
        pub tool_name: String,
        /// What went wrong.
        pub error: ErrorPayload,
        /// Wall time.
        pub duration_ms: u64,
    }

    /// `tool.call.skipped`: refused by the gate, denied or cancelled before running.
    pub struct ToolCallSkipped {
        /// The call id.
        pub tool_call_id: String,
        /// The tool.
        pub tool_name: String,
        /// Why, as a stable code (`TOOL_PERMISSION_DENIED`, `PLAN_APPROVAL_REQUIRED`, …).
        pub error: ErrorPayload,
    }

    /// `approval.requested`.
    pub struct ApprovalRequested {
        /// The approval id.
        pub approval_id: String,
        /// The call it guards.
        pub tool_call_id: String,
        /// The tool.
        pub tool_name: String,
        /// The arguments.
        #[ts(type = "unknown")]
        pub arguments: serde_json::Value,
        /// What to show: the command for shell, a diff for edits and writes.
        pub preview: String,
        /// The shell command, for shell and git calls.
        pub command: Option<String>,
        /// Why approval is needed.
        pub reason: String,
        /// E.g. `shell.execute`, `file.write`.
        pub action_type: String,
        /// The risk.
        pub risk_level: RiskLevel,
        /// The permission level.
        pub permission_level: PermissionLevel,
        /// E.g. `["process:spawn", "filesystem:workspace"]`.
        pub scope: Vec<String>,
        /// The decisions the host may send.
        pub decisions: Vec<ApprovalDecision>,
        /// When it expires (ms since the epoch), or null for never.
        pub expires_at: Option<u64>,
    }

    /// `approval.granted`.
    pub struct ApprovalGranted {
        /// The approval id.
        pub approval_id: String,
        /// The call.
        pub tool_call_id: String,
        /// The decision taken.
        pub decision: ApprovalDecision,
    }

    /// `approval.denied`.
    pub struct ApprovalDenied {
        /// The approval id.
        pub approval_id: String,
        /// The call.
        pub tool_call_id: String,
        /// Why (`user`, or a rule).
        pub reason: String,
    }

    /// `approval.expired`: nobody answered in time, or the request was interrupted.
    pub struct ApprovalExpired {
        /// The approval id.
        pub approval_id: String,
        /// The call.
        pub tool_call_id: String,
        /// `timeout` or `interrupted`.
        pub reason: String,
    }

    /// `ask.requested`: the model asks the user a question.
    pub struct AskRequested {
        /// The ask id.
        pub ask_id: String,
        /// The call.
        pub tool_call_id: String,
        /// The question.
        pub question: String,
        /// Suggested answers (may be empty).
        pub candidates: Vec<String>,
        /// When it expires, or null.
        pub expires_at: Option<u64>,
    }

    /// `ask.answered`.
    pub struct AskAnswered {
        /// The ask id.
        pub ask_id: String,
        /// The answer.
        pub answer: String,
    }

    /// `ask.expired`.
    pub struct AskExpired {
        /// The ask id.
        pub ask_id: String,
        /// `timeout` or `interrupted`.
        pub reason: String,
    }

    /// `context.compaction.started`.
    pub struct CompactionStarted {
        /// `auto` or `manual`.
        pub trigger: String,
        /// Estimated tokens before.
        pub tokens_before: u64,
    }

    /// `context.compaction.completed`.
    pub struct CompactionCompleted {
        /// Estimated tokens before.
        pub tokens_before: u64,
        /// Estimated tokens after.
        pub tokens_after: u64,
        /// Messages folded into the summary.
        pub messages_compacted: u32,
        /// Whether the model summary failed and plain truncation was used.
        pub fallback: bool,
    }

    /// `usage.updated`: after each model call.
    pub struct UsageUpdated {
        /// This call's usage.
        pub last: Usage,
        /// The request's total.
        pub request: Usage,
        /// The session's total.
        pub session: Usage,
        /// Estimated tokens in context.
        pub context_tokens: u64,
        /// The model's context window.
        pub context_window: u64,
    }

    /// `review.requested` / `review.updated` / `review.resolved`.
    pub struct ReviewEvent {
        /// The review.
        pub review: ReviewState,
    }

    /// `review.state`: the answer to `review.status`.
    pub struct ReviewStateEvent {
        /// The review, or null.
        pub review: Option<ReviewState>,
        /// Whether requests are blocked now.
        pub blocking: bool,
    }

    /// `patch.proposed` / `patch.applied` / `patch.rejected`.
    pub struct PatchEvent {
        /// The patch.
        pub patch: Patch,
    }

    /// `patch.summary`.
    pub struct PatchSummary {
        /// Pending patches.
        pub pending: Vec<Patch>,
        /// Resolved patches, oldest first.
        pub history: Vec<Patch>,
        /// Totals over pending patches.
        pub totals: crate::ext::PatchStats,
    }

    /// `task-graph.created` / `task-graph.updated` / `task-graph.completed` / `task-graph.state`.
    pub struct TaskGraphEvent {
        /// The graph (null in `task-graph.state` when there is none).
        pub graph: Option<TaskGraph>,
    }

    /// `task-graph.node.added` / `node.updated` / `node.completed` / `node.failed`.
    pub struct TaskGraphNodeEvent {
        /// The graph id.
        pub graph_id: String,
        /// The node.
        pub node: TaskNode,
    }

    /// `task-graph.advanced`.
    pub struct TaskGraphAdvanced {
        /// The graph id.
        pub graph_id: String,
        /// Nodes promoted to ready.
        pub became_ready: Vec<String>,
        /// The graph after the advance.
        pub graph: TaskGraph,
    }

    /// `sub-agent.started` / `sub-agent.completed` / `sub-agent.failed`.
    pub struct SubAgentEvent {
        /// The session that spawned it.
        pub parent_session_id: String,
        /// The sub-agent.
        pub sub_agent_id: String,
        /// Its snapshot.
        pub sub_agent: SubAgentInfo,
    }

    /// `sub-agent.progress`.
    pub struct SubAgentProgress {
        /// The session that spawned it.
        pub parent_session_id: String,
        /// The sub-agent.
        pub sub_agent_id: String,
        /// What it is doing.
        pub message: String,
    }

    /// `sub-agent.list`.
    pub struct SubAgentList {
        /// Running sub-agents.
        pub active: Vec<SubAgentInfo>,
        /// The last finished ones (at most 100), newest first.
        pub recent: Vec<SubAgentInfo>,
    }

    /// `sub-agent.get`.
    pub struct SubAgentGet {
        /// The sub-agent.
        pub sub_agent: SubAgentInfo,
    }

    /// `harness.status`.
    pub struct HarnessStatus {
        /// Open sessions.
        pub sessions: Vec<SessionInfo>,
        /// Background tasks.
        pub background_tasks: Vec<BackgroundTask>,
        /// Running sub-agents.
        pub sub_agents: Vec<SubAgentInfo>,
    }

    /// `background.list`.
    pub struct BackgroundList {
        /// The tasks.
        pub tasks: Vec<BackgroundTask>,
    }

    /// `background.get` / `background.stopped`.
    pub struct BackgroundEvent {
        /// The task.
        pub task: BackgroundTask,
    }

    /// `background.history`.
    pub struct BackgroundHistory {
        /// The task id.
        pub task_id: String,
        /// Its output lines, oldest first.
        pub lines: Vec<String>,
    }
}

/// Defines [`Event`], [`EventType`] and their wire names from one list.
macro_rules! define_events {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal => $payload:ty ),* $(,)?) => {
        /// An event: its type and typed payload.
        #[derive(Debug, Clone, PartialEq)]
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
    /// A request ended.
    SessionCompleted = "session.completed" => SessionCompleted,
    /// A session was closed.
    SessionClosed = "session.closed" => SessionClosed,
    /// The answer to `session.list`.
    SessionList = "session.list" => SessionList,
    /// The answer to `session.state`.
    SessionState = "session.state" => SessionStateSnapshot,
    /// The permission mode changed.
    SessionModeChanged = "session.mode_changed" => SessionModeChanged,
    /// The model changed.
    SessionModelChanged = "session.model_changed" => SessionModelChanged,
    /// The always-allow or always-deny rules changed.
    SessionRulesUpdated = "session.rules_updated" => SessionRulesUpdated,
    /// History was loaded.
    SessionHistoryLoaded = "session.history_loaded" => SessionHistoryLoaded,
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
}
