//! Vocabulary shared by events and commands: permission levels and modes, approval
//! decisions, plan steps, usage, sessions, models and history messages.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

crate::wire::wire_enum! {
    /// A tool's permission level (seed 002 §6.2).
    #[derive(PartialOrd, Ord)]
    pub enum PermissionLevel {
        /// Reads only: no file changes, no processes, no network.
        Read = "read",
        /// Changes files in the workspace; runs no commands.
        Write = "write",
        /// Runs local commands or scripts.
        Execute = "execute",
        /// Needs extra approval: leaves the sandbox, downloads, rewrites git history,
        /// touches paths outside the workspace.
        Elevated = "elevated",
    }
}

crate::wire::wire_enum! {
    /// A risk level shown to the person approving.
    #[derive(PartialOrd, Ord)]
    pub enum RiskLevel {
        /// Harmless.
        Low = "low",
        /// Changes something that can be undone.
        Medium = "medium",
        /// Destructive, irreversible or reaching outside the workspace.
        High = "high",
    }
}

crate::wire::wire_enum! {
    /// A session's permission mode.
    pub enum PermissionMode {
        /// Reads are allowed; everything else asks. The default.
        Ask = "ask",
        /// Edits and writes inside the workspace are allowed; shell and git writes ask.
        AutoEdit = "auto-edit",
        /// No approvals (seed 000's yolo mode); the default-deny list still denies.
        Auto = "auto",
        /// Only read tools and read-only git run until a plan is approved.
        Plan = "plan",
    }
}

// Declared by `wire_enum!`, which takes no `#[default]`.
#[allow(clippy::derivable_impls)]
impl Default for PermissionMode {
    fn default() -> Self {
        PermissionMode::Ask
    }
}

crate::wire::wire_enum! {
    /// A person's answer to an approval request.
    pub enum ApprovalDecision {
        /// Run this call only.
        AllowOnce = "allow_once",
        /// Run this call and the same call (same canonical key) for the rest of the session.
        AllowSession = "allow_session",
        /// Run it and remember the rule for this project (reported to the host to persist).
        AllowAlwaysProject = "allow_always_project",
        /// Run it and remember the rule everywhere (reported to the host to persist).
        AllowAlwaysGlobal = "allow_always_global",
        /// Do not run it; the model is told it was denied.
        Deny = "deny",
    }
}

impl ApprovalDecision {
    /// Whether the decision lets the call run.
    pub fn allows(&self) -> bool {
        !matches!(self, ApprovalDecision::Deny)
    }
}

crate::wire::wire_enum! {
    /// The status of a plan step.
    pub enum StepStatus {
        /// Not started.
        Pending = "pending",
        /// Being worked on (at most one step at a time).
        InProgress = "in_progress",
        /// Done.
        Completed = "completed",
    }
}

crate::wire::growable! {
    /// One step of a plan.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct PlanStep {
        /// Stable id within the plan, e.g. `s1`.
        pub id: String,
        /// What the step does.
        pub title: String,
        /// Where it stands.
        pub status: StepStatus,
    }
}

crate::wire::wire_enum! {
    /// Where a plan stands.
    pub enum PlanStatus {
        /// Being drafted by the model.
        Drafting = "drafting",
        /// Proposed and waiting for the host's approval.
        AwaitingApproval = "awaiting_approval",
        /// Approved; being executed.
        Approved = "approved",
        /// Rejected; the session stays in plan mode.
        Rejected = "rejected",
    }
}

crate::wire::growable! {
    /// A plan as the session holds it.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct Plan {
        /// The plan id (`plan_…`).
        pub plan_id: String,
        /// Where it stands.
        pub status: PlanStatus,
        /// Optional summary written by the model.
        pub summary: Option<String>,
        /// The steps, in order.
        pub steps: Vec<PlanStep>,
    }
}

crate::wire::growable! {
    /// Token usage.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct Usage {
        /// Prompt tokens.
        pub input_tokens: u64,
        /// Completion tokens.
        pub output_tokens: u64,
        /// Prompt tokens served from the provider's cache.
        pub cached_input_tokens: u64,
    }
}

impl Usage {
    /// Adds another usage to this one.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
    }
}

crate::wire::wire_enum! {
    /// What a session is doing.
    pub enum SessionState {
        /// Nothing is running.
        Idle = "idle",
        /// A request is running.
        Running = "running",
        /// A request waits for an approval, a plan decision or an answer.
        WaitingApproval = "waiting_approval",
        /// The session is closed.
        Closed = "closed",
    }
}

crate::wire::growable! {
    /// A session as listed by `session.list`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct SessionInfo {
        /// The session id.
        pub session_id: String,
        /// A title, if one was given.
        pub title: Option<String>,
        /// The workspace root (absolute).
        pub workspace: String,
        /// Creation time, ms since the epoch.
        pub created_at: u64,
        /// Last activity, ms since the epoch.
        pub updated_at: u64,
        /// What it is doing.
        pub state: SessionState,
        /// The permission mode.
        pub permission_mode: PermissionMode,
        /// The model, as `provider:model`.
        pub model: String,
        /// Requests sent in the session (those still in its conversation after a rewind).
        #[serde(default)]
        pub request_count: u32,
        /// The first line of the conversation's last message (user or assistant text), cut
        /// at 120 characters; `None` while the conversation is empty.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub last_message: Option<String>,
        /// The extra roots the session may reach (canonical paths, with their access);
        /// absent when it has none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub additional_roots: Option<Vec<crate::worktree::AdditionalRoot>>,
    }
}

crate::wire::growable! {
    /// A model a host may offer (seed 000 §4.1 `availableLLMs`).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct ModelInfo {
        /// The selection string, `provider:model`.
        pub id: String,
        /// A label for menus.
        pub display_name: String,
        /// The provider (`openai`, `anthropic`, `scripted`, …).
        pub provider: String,
        /// Whether it is the default.
        pub is_current: bool,
    }
}

crate::wire::growable! {
    /// The always-allow and always-deny rules a host keeps and syncs (seed 000 §5.6). A
    /// rule is a tool name (`edit_file`) or a tool with a pattern
    /// (`run_shell(npm run test:*)`). A matching deny rule beats every allow rule and
    /// session approval.
    #[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct ApprovalRules {
        /// Rules valid in every project.
        pub always_allow_global: Vec<String>,
        /// Rules valid in this project.
        pub always_allow_project: Vec<String>,
        /// Deny rules valid in every project (absent in protocol 1.0 peers: empty).
        #[serde(default)]
        pub always_deny_global: Vec<String>,
        /// Deny rules valid in this project (absent in protocol 1.0 peers: empty).
        #[serde(default)]
        pub always_deny_project: Vec<String>,
    }
}

/// The role of a history message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Role {
    /// The system prompt.
    System,
    /// The user.
    User,
    /// The assistant.
    Assistant,
    /// A tool result.
    Tool,
}

crate::wire::growable! {
    /// A tool call inside a history message.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct HistoryToolCall {
        /// The call id.
        pub id: String,
        /// The tool name.
        pub name: String,
        /// The arguments.
        #[ts(type = "unknown")]
        pub arguments: serde_json::Value,
    }
}

crate::wire::growable! {
    /// A tool result inside a history message.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct HistoryToolResult {
        /// The id of the call this answers.
        pub tool_call_id: String,
        /// The result as the model saw it.
        pub content: String,
        /// Whether the call failed or was refused.
        #[serde(default)]
        pub is_error: bool,
    }
}

crate::wire::growable! {
    /// A message of conversation history, as loaded by `session.load_history` (seed 000 §5.5).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    #[ts(optional_fields = nullable)]
    pub struct HistoryMessage {
        /// Who spoke.
        pub role: Role,
        /// The text.
        pub content: String,
        /// Tool calls made in this message (assistant).
        #[serde(default)]
        pub tool_calls: Option<Vec<HistoryToolCall>>,
        /// Tool results (tool).
        #[serde(default)]
        pub tool_results: Option<Vec<HistoryToolResult>>,
    }
}

crate::wire::growable! {
    /// A position in a session's event log: the request and the sequence within it.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct Cursor {
        /// The request id of the last event the host has.
        pub request_id: String,
        /// Its sequence.
        pub sequence: u64,
    }
}

crate::wire::growable! {
    /// Where a client stands in one session's log: the session and the last event of it
    /// the client was sent (`runtime.stopped {resumeFrom}` of a connection cut off for
    /// being too slow). `cursor` is null when none was sent; `session.watch` with this
    /// cursor as `afterSequence` replays exactly what the client missed.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct SessionCursor {
        /// The session.
        pub session_id: String,
        /// The last event of the session the client was sent.
        pub cursor: Option<Cursor>,
    }
}

crate::wire::growable! {
    /// Figures reported when a request ends.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct Telemetry {
        /// Wall time of the request.
        pub elapsed_ms: u64,
        /// Model calls made.
        pub turns: u32,
        /// Tool calls made.
        pub tool_calls: u32,
        /// Prompt tokens over the request.
        pub input_tokens: u64,
        /// Completion tokens over the request.
        pub output_tokens: u64,
        /// Prompt tokens served from the provider's cache over the request.
        #[serde(default)]
        pub cached_input_tokens: u64,
        /// Estimated tokens of the context sent with the request's last model call.
        #[serde(default)]
        pub context_tokens: u64,
        /// The model's context window in tokens (0 when unknown).
        #[serde(default)]
        pub context_window: u64,
    }
}

crate::wire::wire_enum! {
    /// Why one model call (a turn) of a request ended.
    pub enum TurnStopReason {
        /// The model finished its answer; the request ends after this turn.
        EndTurn = "end_turn",
        /// The model asked for tools; their results go to the next turn.
        ToolUse = "tool_use",
        /// The model hit its output-token cap.
        MaxTokens = "max_tokens",
        /// The model refused.
        Refusal = "refusal",
        /// The model call failed (an `error` event follows).
        Error = "error",
        /// The request was interrupted during this turn.
        Interrupted = "interrupted",
    }
}

crate::wire::wire_enum! {
    /// Why a request ended.
    pub enum StopReason {
        /// The model finished its answer.
        EndTurn = "end_turn",
        /// The model's last answer was cut by the output cap (`maxOutputTokens`):
        /// `finalText` is what it wrote before the cut.
        MaxTokens = "max_tokens",
        /// The request hit its maximum number of model turns.
        MaxTurns = "max_turns",
        /// The model refused.
        Refusal = "refusal",
        /// The request failed (an `error` event precedes this).
        Error = "error",
        /// The request was interrupted.
        Interrupted = "interrupted",
    }
}
