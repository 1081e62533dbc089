//! Payloads of the core events: runtime, sessions, requests, assistant output, plans,
//! tool calls, approvals, questions, compaction, usage and turns.

use super::*;

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
        /// Why (`shutdown`, `eof`, `too_slow`, …).
        pub reason: String,
        /// For a daemon connection cut off as too slow: per watched session, the last
        /// event it was sent, to watch again from (`session.watch {afterSequence}`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub resume_from: Option<Vec<SessionCursor>>,
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
        /// The worktree the session works in (`isolation: "worktree"`); `workspace`
        /// is in it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub worktree: Option<WorktreeInfo>,
        /// The extra roots the session may reach (canonical paths).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub additional_roots: Option<Vec<AdditionalRoot>>,
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
        /// The workspace was made from the session's newest checkpoint
        /// (`session.resume {materializeTo}`): where, from what, and what is missing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub materialized: Option<MaterializedWorkspace>,
    }

    /// What `session.resume {materializeTo}` made of a workspace missing on this node.
    pub struct MaterializedWorkspace {
        /// The session's workspace now (canonical).
        pub workspace: String,
        /// The workspace the session had, which does not exist on this node.
        pub previous_workspace: String,
        /// The checkpoint the files come from (the session's newest).
        pub checkpoint_id: String,
        /// Files and links written.
        pub restored: u32,
        /// Files the checkpoints did not keep (binary, larger than the size limit,
        /// unreadable when taken, or content no longer available), which are not there.
        pub missing: Vec<NotRestorableFile>,
    }

    /// `session.watched`: the answer to `session.watch`; the connection now receives the
    /// session's events.
    pub struct SessionWatched {
        /// The session.
        pub session: SessionInfo,
        /// The running request, if any.
        pub active_request_id: Option<String>,
        /// The last event in the log when the watch began.
        pub last_cursor: Option<Cursor>,
        /// Replayed events that follow this one (`meta.replay: true`): those logged after
        /// `afterSequence`, then the still-pending approval, plan and question prompts
        /// of the running request that were not among them.
        pub replayed: u32,
    }

    /// `session.unwatched`: the answer to `session.unwatch`.
    pub struct SessionUnwatched {
        /// The session no longer watched.
        pub session_id: String,
    }

    /// `session.interrupted`: the request was cancelled, or the interrupt found nothing to do.
    pub struct SessionInterrupted {
        /// The request that was cancelled (null when the session was idle).
        pub interrupted_request_id: Option<String>,
        /// Why (`user`, `shutdown`, `parent`, `restart`, `lease_lost`, `owner_lost`).
        pub reason: String,
        /// Whether a request was running.
        pub was_running: bool,
    }

    /// `session.owner_changed`: another node took the session over (its previous
    /// owner's lease had run out). Logged, so every watcher on every node sees it.
    pub struct SessionOwnerChanged {
        /// The node whose lease ran out.
        pub previous_owner: String,
        /// The node that serves the session now.
        pub owner: String,
        /// The new lease's fencing epoch (higher than every one before it).
        pub epoch: u64,
    }

    /// `session.completed`: a request ended.
    pub struct SessionCompleted {
        /// Why it ended.
        pub stop_reason: StopReason,
        /// The final text, if any.
        pub final_text: Option<String>,
        /// Figures.
        pub telemetry: Telemetry,
        /// The limit that stopped the request (with `stopReason: "max_turns"`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub budget: Option<BudgetStatus>,
    }

    /// `session.closed`.
    pub struct SessionClosed {
        /// Why (`requested`, `shutdown`, `deleted`).
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

    /// `session.title_changed`: answers `session.set_title`, or reports the title the
    /// kernel generated after a request (see docs/protocol.md).
    pub struct SessionTitleChanged {
        /// The new title.
        pub title: String,
        /// The title before, if there was one.
        pub previous_title: Option<String>,
        /// `host` (`session.set_title`) or `generated`.
        pub source: String,
    }

    /// `session.deleted`: answers `session.delete`; the session's stored files are gone.
    pub struct SessionDeleted {
        /// The deleted session.
        pub session_id: String,
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

    /// `turn.started`: one model call of the request begins (seed 000 `turn_start`).
    pub struct TurnStarted {
        /// 1-based index of the model call within the request.
        pub index: u32,
    }

    /// `turn.completed`: a model call and the tool calls it asked for are done (seed
    /// 000 `turn_end`). The request's last turn also carries the request's telemetry.
    pub struct TurnCompleted {
        /// 1-based index of the model call within the request.
        pub index: u32,
        /// Why the model call ended.
        pub stop_reason: TurnStopReason,
        /// Tool calls the model asked for in this turn.
        pub tool_calls: u32,
        /// This model call's token usage.
        pub usage: Usage,
        /// Wall time of the turn: the model call and its tool calls.
        pub elapsed_ms: u64,
        /// The request's figures; set on the request's last turn only.
        pub telemetry: Option<Telemetry>,
    }
}
