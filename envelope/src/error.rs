//! Error codes and the structured error payload carried by `error` and `warning`
//! events, `request.rejected` and failed tool calls.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

crate::wire::wire_enum! {
    /// A stable error code. Hosts pattern-match on these; new codes may be added in
    /// a minor version, so hosts must treat an unknown code as a generic error (in
    /// Rust it decodes to `ErrorCode::Unknown` with the code as sent).
    pub enum ErrorCode {
        /// The session id names no session known to the runtime or its store.
        SessionNotFound = "SESSION_NOT_FOUND",
        /// The command could not be understood: bad JSON, a missing or mistyped field,
        /// an unknown type, a line over the size limit.
        RequestInvalid = "REQUEST_INVALID",
        /// The tool named by the model or the host is not registered.
        ToolNotRegistered = "TOOL_NOT_REGISTERED",
        /// The permission gate refused the tool call.
        ToolPermissionDenied = "TOOL_PERMISSION_DENIED",
        /// The session is in plan mode and the call needs an approved plan.
        PlanApprovalRequired = "PLAN_APPROVAL_REQUIRED",
        /// The plan was rejected.
        PlanRejected = "PLAN_REJECTED",
        /// A tool ran and failed.
        ToolExecutionFailed = "TOOL_EXECUTION_FAILED",
        /// An MCP server could not be reached: it failed to start, died, or stopped
        /// answering (details `server`, `reason`).
        McpServerUnavailable = "MCP_SERVER_UNAVAILABLE",
        /// The session store could not be written or read.
        SessionPersistenceFailed = "SESSION_PERSISTENCE_FAILED",
        /// Context compaction failed; the runtime fell back to truncation.
        ContextCompactionFailed = "CONTEXT_COMPACTION_FAILED",
        /// A bug in the runtime. Always worth a report.
        RuntimeInternalError = "RUNTIME_INTERNAL_ERROR",
        /// The peer speaks another major protocol version.
        VersionMismatch = "VERSION_MISMATCH",
        /// The approval id is unknown or was already resolved.
        ApprovalNotFound = "APPROVAL_NOT_FOUND",
        /// The plan id is unknown or not awaiting approval.
        PlanNotFound = "PLAN_NOT_FOUND",
        /// The ask id is unknown or was already answered.
        AskNotFound = "ASK_NOT_FOUND",
        /// The session is busy and the request asked to be rejected rather than queued.
        SessionBusy = "SESSION_BUSY",
        /// The queued request id is unknown (it may already be running).
        QueuedRequestNotFound = "QUEUED_REQUEST_NOT_FOUND",
        /// A blocking review is pending; no request runs until it is resolved.
        ReviewBlocking = "REVIEW_BLOCKING",
        /// No review is active, or the review is already resolved.
        ReviewNotFound = "REVIEW_NOT_FOUND",
        /// The patch id is unknown or was already resolved.
        PatchNotFound = "PATCH_NOT_FOUND",
        /// A file changed since the patch was proposed.
        PatchConflict = "PATCH_CONFLICT",
        /// A task-graph node depends on a node that does not exist.
        InvalidDependency = "INVALID_DEPENDENCY",
        /// A task-graph node id is used twice.
        DuplicateNode = "DUPLICATE_NODE",
        /// The task graph would contain a cycle.
        CycleDetected = "CYCLE_DETECTED",
        /// The task graph or node does not exist.
        GraphNotFound = "GRAPH_NOT_FOUND",
        /// The sub-agent id is unknown.
        SubAgentNotFound = "SUB_AGENT_NOT_FOUND",
        /// The background task id is unknown.
        BackgroundTaskNotFound = "BACKGROUND_TASK_NOT_FOUND",
        /// The model provider refused or failed the call.
        ModelError = "MODEL_ERROR",
        /// The requested model is not configured or cannot be used now.
        ModelUnavailable = "MODEL_UNAVAILABLE",
        /// The request was interrupted.
        Interrupted = "INTERRUPTED",
        /// The request reached its maximum number of model turns.
        MaxTurnsExceeded = "MAX_TURNS_EXCEEDED",
        /// A path argument leaves the workspace or is otherwise not allowed.
        PathOutsideWorkspace = "PATH_OUTSIDE_WORKSPACE",
        /// A tool's arguments do not match its schema.
        ToolArgumentsInvalid = "TOOL_ARGUMENTS_INVALID",
        /// Two tools were registered under one name (a builder error; the message names
        /// both registrations).
        ToolNameConflict = "TOOL_NAME_CONFLICT",
        /// A shell command must run in an OS sandbox and none can run on this machine.
        SandboxUnavailable = "SANDBOX_UNAVAILABLE",
        /// No checkpoint was taken before the named request or tool call (unknown id, or
        /// checkpoints are off for the session).
        CheckpointNotFound = "CHECKPOINT_NOT_FOUND",
        /// A limit of the request's or the session's budget was reached (other than the
        /// request's model calls, which keep `MAX_TURNS_EXCEEDED`).
        BudgetExceeded = "BUDGET_EXCEEDED",
        /// A hook failed, timed out or answered something unreadable; its answer was
        /// ignored (a `warning`).
        HookFailed = "HOOK_FAILED",
        /// A skill or custom command was left out: bad front matter or name, a
        /// duplicate, too large, a link out of the workspace, an untrusted project, a
        /// built-in command's name (a `warning` naming the file).
        SkillSkipped = "SKILL_SKIPPED",
        /// A `UserPromptSubmit` hook blocked the prompt; the request ended without a model
        /// call.
        PromptBlocked = "PROMPT_BLOCKED",
        /// A cost limit is set but the model has no price in the configuration, so its
        /// calls are not counted (a `warning`).
        PriceUnknown = "PRICE_UNKNOWN",
        /// The runtime already has its maximum number of open sessions
        /// (`details.limit`); close one, or raise the limit.
        SessionLimitReached = "SESSION_LIMIT_REACHED",
        /// A tool call ran past its time limit (an MCP call, or a host tool the host did
        /// not answer); details `limitMs`.
        ToolTimeout = "TOOL_TIMEOUT",
        /// The host-tool call id is unknown or the call is already finished (answered,
        /// timed out or interrupted).
        HostToolCallNotFound = "HOST_TOOL_CALL_NOT_FOUND",
        /// The connection's token does not allow this command: its role is too low
        /// (`details.role`, `details.required`), or it is bound to another session.
        RoleForbidden = "ROLE_FORBIDDEN",
        /// The session is served by another node that holds its lease (a store shared
        /// by several nodes): `details.owner` names it, `details.epoch` is its lease's
        /// fencing epoch and `details.remainingMs` how long the lease has left.
        /// Retryable: try again on that node, or here once the lease has run out.
        SessionOwnedElsewhere = "SESSION_OWNED_ELSEWHERE",
        /// An isolated workspace could not be made: the workspace is not in a git
        /// repository, the repository has no commit, git is missing or failed
        /// (`details.reason`).
        WorktreeUnavailable = "WORKTREE_UNAVAILABLE",
        /// No worktree the runtime keeps has this path or session.
        WorktreeNotFound = "WORKTREE_NOT_FOUND",
        /// The worktree has uncommitted changes and the removal was not forced
        /// (`details.changes` names some of them).
        WorktreeDirty = "WORKTREE_DIRTY",
        /// The session's workspace does not exist on this node (`details.workspace`): it
        /// was made on another machine, or removed. `session.resume {materializeTo}`
        /// makes it again from the session's newest checkpoint
        /// (`details.checkpoints`: how many this node has of the session).
        WorkspaceMissing = "WORKSPACE_MISSING",
    }
}

crate::wire::wire_enum! {
    /// Where an error belongs, so a desktop host can choose where to show it (seed 000 §4.10).
    pub enum ErrorCategory {
        /// The transport or the bridge itself (protocol mismatch, bad lines): a toast.
        Bridge = "bridge",
        /// The model, a tool, the agent loop: inline in the conversation.
        Runtime = "runtime",
        /// A business rule (bad workspace, store failure, unknown session): a toast.
        Business = "business",
    }
}

crate::wire::wire_enum! {
    /// How serious an error is.
    pub enum Severity {
        /// The operation failed.
        Error = "error",
        /// Something degraded but the operation went on.
        Warning = "warning",
        /// For information only.
        Info = "info",
    }
}

crate::wire::wire_enum! {
    /// What the user can do about an error (seed 000 §4.10).
    pub enum ErrorHint {
        /// Authentication or configuration of the model provider is wrong (401/403).
        CheckLlmConfig = "check_llm_config",
        /// The network failed: timeout, DNS, connection refused.
        Network = "network",
        /// The provider's quota or rate limit was hit (429).
        QuotaExceeded = "quota_exceeded",
    }
}

/// The structured error payload `{code, message, retryable, details, category?, severity?, hint?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
#[non_exhaustive]
pub struct ErrorPayload {
    /// The stable code.
    pub code: ErrorCode,
    /// One sentence a person can read.
    pub message: String,
    /// Whether retrying the same thing may succeed.
    pub retryable: bool,
    /// Machine-readable details (e.g. `{"field": "payload.mode"}`); always an object.
    #[serde(default = "empty_object")]
    #[ts(type = "Record<string, unknown>")]
    pub details: serde_json::Value,
    /// Where the error belongs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<ErrorCategory>,
    /// How serious it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    /// What the user can do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<ErrorHint>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl ErrorPayload {
    /// A non-retryable error with empty details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retryable: false,
            details: empty_object(),
            category: None,
            severity: None,
            hint: None,
        }
    }

    /// Sets `details` (a non-object value is wrapped as `{"value": …}`).
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = match details {
            serde_json::Value::Object(_) => details,
            other => serde_json::json!({ "value": other }),
        };
        self
    }

    /// Adds one entry to `details`.
    pub fn with_detail(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        if let serde_json::Value::Object(map) = &mut self.details {
            map.insert(key.to_owned(), value.into());
        }
        self
    }

    /// Marks the error retryable or not.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }

    /// Sets the category.
    pub fn category(mut self, category: ErrorCategory) -> Self {
        self.category = Some(category);
        self
    }

    /// Sets the severity.
    pub fn severity(mut self, severity: Severity) -> Self {
        self.severity = Some(severity);
        self
    }

    /// Sets the hint.
    pub fn hint(mut self, hint: ErrorHint) -> Self {
        self.hint = Some(hint);
        self
    }
}

impl std::fmt::Display for ErrorPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorPayload {}
