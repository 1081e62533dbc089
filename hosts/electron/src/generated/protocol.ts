// Generated from the keel-envelope crate. Do not edit by hand.
// Regenerate: KEEL_UPDATE_GENERATED=1 cargo test -p keel-envelope generated

export const PROTOCOL_VERSION = "1.0";

/**
 * `activate_skill {name, file?}`: a skill's instructions, or one file of its folder.
 */
export type ActivateSkillArgs = { 
/**
 * The skill's name, as listed in the system prompt.
 */
name: string, 
/**
 * A file of the skill's folder (a path relative to it) to read instead of the
 * instructions.
 */
file?: string | null, };

/**
 * A folder a session may reach beside its workspace (`session.start
 * {additionalRoots}`), jailed like the workspace.
 */
export type AdditionalRoot = { 
/**
 * The folder (absolute, on the runtime's machine).
 */
path: string, 
/**
 * What the session may do there (default `read`).
 */
access?: RootAccess | null, };

/**
 * A person's answer to an approval request.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type ApprovalDecision = KnownApprovalDecision | (string & {});

/** The values of `ApprovalDecision` this version knows. */
export type KnownApprovalDecision = "allow_once" | "allow_session" | "allow_always_project" | "allow_always_global" | "deny";

/**
 * `approval.denied`.
 */
export type ApprovalDenied = { 
/**
 * The approval id.
 */
approvalId: string, 
/**
 * The call.
 */
toolCallId: string, 
/**
 * Why (`user`, or a rule).
 */
reason: string, };

/**
 * `approval.expired`: nobody answered in time, or the request was interrupted.
 */
export type ApprovalExpired = { 
/**
 * The approval id.
 */
approvalId: string, 
/**
 * The call.
 */
toolCallId: string, 
/**
 * `timeout` or `interrupted`.
 */
reason: string, };

/**
 * `approval.granted`.
 */
export type ApprovalGranted = { 
/**
 * The approval id.
 */
approvalId: string, 
/**
 * The call.
 */
toolCallId: string, 
/**
 * The decision taken.
 */
decision: ApprovalDecision, };

/**
 * `approval.requested`.
 */
export type ApprovalRequested = { 
/**
 * The approval id.
 */
approvalId: string, 
/**
 * The call it guards.
 */
toolCallId: string, 
/**
 * The tool.
 */
toolName: string, 
/**
 * The arguments.
 */
arguments: unknown, 
/**
 * What to show: the command for shell, a diff for edits and writes.
 */
preview: string, 
/**
 * The shell command, for shell and git calls.
 */
command: string | null, 
/**
 * Why approval is needed.
 */
reason: string, 
/**
 * E.g. `shell.execute`, `file.write`.
 */
actionType: string, 
/**
 * The risk.
 */
riskLevel: RiskLevel, 
/**
 * The permission level.
 */
permissionLevel: PermissionLevel, 
/**
 * E.g. `["process:spawn", "filesystem:workspace"]`.
 */
scope: Array<string>, 
/**
 * The decisions the host may send.
 */
decisions: Array<ApprovalDecision>, 
/**
 * When it expires (ms since the epoch), or null for never.
 */
expiresAt: number | null, };

/**
 * `approval.respond`.
 */
export type ApprovalRespond = { 
/**
 * The approval.
 */
approvalId: string, 
/**
 * The decision.
 */
decision: KnownApprovalDecision, };

/**
 * The always-allow and always-deny rules a host keeps and syncs (seed 000 §5.6). A
 * rule is a tool name (`edit_file`) or a tool with a pattern
 * (`run_shell(npm run test:*)`). A matching deny rule beats every allow rule and
 * session approval.
 */
export type ApprovalRules = { 
/**
 * Rules valid in every project.
 */
alwaysAllowGlobal: Array<string>, 
/**
 * Rules valid in this project.
 */
alwaysAllowProject: Array<string>, 
/**
 * Deny rules valid in every project (absent in protocol 1.0 peers: empty).
 */
alwaysDenyGlobal: Array<string>, 
/**
 * Deny rules valid in this project (absent in protocol 1.0 peers: empty).
 */
alwaysDenyProject: Array<string>, };

/**
 * `ask.answered`.
 */
export type AskAnswered = { 
/**
 * The ask id.
 */
askId: string, 
/**
 * The answer.
 */
answer: string, };

/**
 * `ask.expired`.
 */
export type AskExpired = { 
/**
 * The ask id.
 */
askId: string, 
/**
 * `timeout` or `interrupted`.
 */
reason: string, };

/**
 * `ask.requested`: the model asks the user a question.
 */
export type AskRequested = { 
/**
 * The ask id.
 */
askId: string, 
/**
 * The call.
 */
toolCallId: string, 
/**
 * The question.
 */
question: string, 
/**
 * Suggested answers (may be empty).
 */
candidates: Array<string>, 
/**
 * When it expires, or null.
 */
expiresAt: number | null, };

/**
 * `ask.respond`.
 */
export type AskRespond = { 
/**
 * The question.
 */
askId: string, 
/**
 * The answer.
 */
answer: string, };

/**
 * `ask_user {question, candidates?}`.
 */
export type AskUserArgs = { 
/**
 * The question.
 */
question: string, 
/**
 * Suggested answers.
 */
candidates: Array<string>, };

/**
 * `assistant.delta`: a streamed piece of text.
 */
export type AssistantDelta = { 
/**
 * The new text.
 */
text: string, };

/**
 * `assistant.final`: the request's final answer.
 */
export type AssistantFinal = { 
/**
 * The text.
 */
text: string, };

/**
 * `assistant.message`: a whole message (non-streaming fallback).
 */
export type AssistantMessage = { 
/**
 * The text.
 */
text: string, };

/**
 * `assistant.thought-summary`: a short summary of the model's thinking.
 */
export type AssistantThoughtSummary = { 
/**
 * The new text.
 */
text: string, };

/**
 * The discriminator of [`AuthMessage`]: always `auth`.
 */
export type AuthKind = "auth";

/**
 * `{"type": "auth", "token": "keel_…"}`: the first text message of a WebSocket client
 * that could not send `Authorization: Bearer …` with the upgrade. Its `Debug` form
 * never shows the token.
 */
export type AuthMessage = { 
/**
 * Always `auth`.
 */
type: AuthKind, 
/**
 * The token, as `keel serve token create` printed it.
 */
token: string, };

/**
 * `background.get` / `background.stopped` / `background.exited`.
 */
export type BackgroundEvent = { 
/**
 * The task.
 */
task: BackgroundTask, };

/**
 * `background.get`.
 */
export type BackgroundGetCmd = { 
/**
 * The task.
 */
taskId: string, };

/**
 * `background.history`.
 */
export type BackgroundHistory = { 
/**
 * The task id.
 */
taskId: string, 
/**
 * Its output lines, oldest first.
 */
lines: Array<string>, };

/**
 * `background.history`.
 */
export type BackgroundHistoryCmd = { 
/**
 * The task.
 */
taskId: string, };

/**
 * `background.list`.
 */
export type BackgroundList = { 
/**
 * The tasks.
 */
tasks: Array<BackgroundTask>, };

/**
 * `background.list`.
 */
export type BackgroundListCmd = Record<string, never>;

/**
 * Where a background task stands.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type BackgroundStatus = KnownBackgroundStatus | (string & {});

/** The values of `BackgroundStatus` this version knows. */
export type KnownBackgroundStatus = "running" | "exited" | "stopped";

/**
 * `background.stop`.
 */
export type BackgroundStopCmd = { 
/**
 * The task.
 */
taskId: string, };

/**
 * A background shell task.
 */
export type BackgroundTask = { 
/**
 * The task id.
 */
taskId: string, 
/**
 * The session that owns it.
 */
sessionId: string, 
/**
 * The command line.
 */
command: string, 
/**
 * Where it stands.
 */
status: BackgroundStatus, 
/**
 * Exit code once exited.
 */
exitCode: number | null, 
/**
 * Started, ms since the epoch.
 */
startedAt: number, 
/**
 * Ended.
 */
endedAt: number | null, 
/**
 * The last lines of output.
 */
outputTail: string, };

/**
 * Which limit a figure is about (the key of [`BudgetLimits`]).
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type BudgetLimit = KnownBudgetLimit | (string & {});

/** The values of `BudgetLimit` this version knows. */
export type KnownBudgetLimit = "modelCalls" | "tokens" | "costUsd" | "wallTimeSecs" | "toolCalls";

/**
 * Limits of one scope (a request, or a whole session). Every field is optional.
 */
export type BudgetLimits = { 
/**
 * Model calls.
 */
modelCalls?: number | null, 
/**
 * Input plus output tokens, summed over the model calls.
 */
tokens?: number | null, 
/**
 * Estimated cost in US dollars (needs the model's price in the configuration).
 */
costUsd?: number | null, 
/**
 * Wall time in seconds while a request runs.
 */
wallTimeSecs?: number | null, 
/**
 * Calls per tool, by tool name; `"*"` applies to each tool not named.
 */
toolCalls?: { [key in string]?: number } | null, };

/**
 * Which budget a figure belongs to.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type BudgetScope = KnownBudgetScope | (string & {});

/** The values of `BudgetScope` this version knows. */
export type KnownBudgetScope = "request" | "session";

/**
 * How much of one limit is used: the payload of `budget.warning`, and the
 * `budget` of `session.completed` when a limit stopped the request.
 */
export type BudgetStatus = { 
/**
 * The request's or the session's budget.
 */
scope: BudgetScope, 
/**
 * Which limit.
 */
limit: BudgetLimit, 
/**
 * The tool, for `toolCalls`.
 */
toolName?: string | null, 
/**
 * Used so far (model calls, tokens, US dollars, seconds or tool calls).
 */
used: number, 
/**
 * The limit, in the same unit.
 */
max: number, };

/**
 * `request.cancel_queued`.
 */
export type CancelQueued = { 
/**
 * The queued request.
 */
queuedRequestId: string, };

/**
 * A checklist item of a review.
 */
export type ChecklistItem = { 
/**
 * Item id within the review.
 */
id: string, 
/**
 * What to check.
 */
title: string, 
/**
 * Whether it is done.
 */
done: boolean, 
/**
 * An optional note.
 */
note: string | null, };

/**
 * A checklist change in `review.submit`.
 */
export type ChecklistUpdate = { 
/**
 * The item.
 */
id: string, 
/**
 * Done or not.
 */
done: boolean, 
/**
 * A note.
 */
note?: string | null, };

/**
 * One checkpoint: the workspace as it was just before a request or a tool call.
 */
export type CheckpointEntry = { 
/**
 * The checkpoint's id.
 */
checkpointId: string, 
/**
 * The request it was taken in (before it started, or before one of its tool calls).
 */
requestId: string, 
/**
 * The tool call it was taken before; absent for the checkpoint before the request.
 */
toolCallId: string | null, 
/**
 * The tool of that call.
 */
toolName: string | null, 
/**
 * When it was taken, ms since the epoch.
 */
createdAt: number, 
/**
 * Files changed after it, up to the next checkpoint (for the last one: up to now).
 * Rewinding to this checkpoint undoes at least these changes.
 */
filesChanged: Array<CheckpointFileChange>, 
/**
 * Taken by a rewind (its `requestId` is the rewind's) just before it restored
 * files: the checkpoint it went back to. Rewinding to this one undoes the
 * rewind. Absent for the checkpoints of requests and tool calls.
 */
beforeRewindTo?: string | null, };

/**
 * A file changed after a checkpoint.
 */
export type CheckpointFileChange = { 
/**
 * Relative to the workspace, `/`-separated.
 */
path: string, 
/**
 * How it changed.
 */
change: FileChangeKind, };

/**
 * `checkpoint.list`: the answer to `checkpoint.list`.
 */
export type CheckpointList = { 
/**
 * Oldest first.
 */
checkpoints: Array<CheckpointEntry>, 
/**
 * Why the session takes no checkpoints, when it does not (a store without a
 * directory, a workspace over the file limit, an earlier failure).
 */
disabledReason: string | null, };

/**
 * `checkpoint.list`.
 */
export type CheckpointListCmd = Record<string, never>;

/**
 * `commands.list`: the answer to `commands.list`.
 */
export type CommandsList = { 
/**
 * The session's custom commands, by name.
 */
commands: Array<CustomCommandInfo>, };

/**
 * `commands.list`: the session's custom slash commands.
 */
export type CommandsListCmd = Record<string, never>;

/**
 * `context.compaction.completed`.
 */
export type CompactionCompleted = { 
/**
 * Estimated tokens before.
 */
tokensBefore: number, 
/**
 * Estimated tokens after.
 */
tokensAfter: number, 
/**
 * Messages folded into the summary.
 */
messagesCompacted: number, 
/**
 * Whether the model summary failed and plain truncation was used.
 */
fallback: boolean, };

/**
 * `context.compaction.started`.
 */
export type CompactionStarted = { 
/**
 * `auto` or `manual`.
 */
trigger: string, 
/**
 * Estimated tokens before.
 */
tokensBefore: number, };

/**
 * `context.compact`.
 */
export type ContextCompact = Record<string, never>;

/**
 * A position in a session's event log: the request and the sequence within it.
 */
export type Cursor = { 
/**
 * The request id of the last event the host has.
 */
requestId: string, 
/**
 * Its sequence.
 */
sequence: number, };

/**
 * A custom slash command of a session, as `commands.list` shows it.
 */
export type CustomCommandInfo = { 
/**
 * Its name: the host offers it as `/NAME`.
 */
name: string, 
/**
 * Its front matter's `description`.
 */
description?: string | null, 
/**
 * Its front matter's `argument-hint`.
 */
argumentHint?: string | null, 
/**
 * Where it was found: `project` or `user`.
 */
source: string, 
/**
 * Its file.
 */
path: string, 
/**
 * The prompt template (`$ARGUMENTS`, `$1` … `$9` are filled in by the host).
 */
template: string, };

/**
 * What the gate decided.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type Decision = KnownDecision | (string & {});

/** The values of `Decision` this version knows. */
export type KnownDecision = "allow" | "ask" | "deny";

/**
 * Lines added and removed.
 */
export type DiffStats = { 
/**
 * Lines added.
 */
added: number, 
/**
 * Lines removed.
 */
removed: number, };

/**
 * One entry of a listing.
 */
export type DirEntry = { 
/**
 * Path relative to the workspace root, `/`-separated (absolute in an extra root).
 */
path: string, 
/**
 * What it is.
 */
kind: EntryKind, 
/**
 * Size in bytes (files only; 0 otherwise).
 */
size: number, 
/**
 * Depth below the listed directory (1 = direct child).
 */
depth: number, };

/**
 * One exact replacement.
 */
export type Edit = { 
/**
 * The text to find; must match exactly once unless `replaceAll`.
 */
oldText: string, 
/**
 * The replacement.
 */
newText: string, 
/**
 * Replace every occurrence.
 */
replaceAll?: boolean | null, };

/**
 * `edit_file {path, edits}`.
 */
export type EditFileArgs = { 
/**
 * The file to edit: relative to the workspace root, or absolute (also in one of the
 * session's `write` extra roots).
 */
path: string, 
/**
 * The replacements, applied in order; all or none.
 */
edits: Array<Edit>, };

/**
 * The kind of a directory entry.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type EntryKind = KnownEntryKind | (string & {});

/** The values of `EntryKind` this version knows. */
export type KnownEntryKind = "file" | "dir" | "symlink" | "other";

/**
 * Where an error belongs, so a desktop host can choose where to show it (seed 000 §4.10).
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type ErrorCategory = KnownErrorCategory | (string & {});

/** The values of `ErrorCategory` this version knows. */
export type KnownErrorCategory = "bridge" | "runtime" | "business";

/**
 * A stable error code. Hosts pattern-match on these; new codes may be added in
 * a minor version, so hosts must treat an unknown code as a generic error (in
 * Rust it decodes to `ErrorCode::Unknown` with the code as sent).
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type ErrorCode = KnownErrorCode | (string & {});

/** The values of `ErrorCode` this version knows. */
export type KnownErrorCode = "SESSION_NOT_FOUND" | "REQUEST_INVALID" | "TOOL_NOT_REGISTERED" | "TOOL_PERMISSION_DENIED" | "PLAN_APPROVAL_REQUIRED" | "PLAN_REJECTED" | "TOOL_EXECUTION_FAILED" | "MCP_SERVER_UNAVAILABLE" | "SESSION_PERSISTENCE_FAILED" | "CONTEXT_COMPACTION_FAILED" | "RUNTIME_INTERNAL_ERROR" | "VERSION_MISMATCH" | "APPROVAL_NOT_FOUND" | "PLAN_NOT_FOUND" | "ASK_NOT_FOUND" | "SESSION_BUSY" | "QUEUED_REQUEST_NOT_FOUND" | "REVIEW_BLOCKING" | "REVIEW_NOT_FOUND" | "PATCH_NOT_FOUND" | "PATCH_CONFLICT" | "INVALID_DEPENDENCY" | "DUPLICATE_NODE" | "CYCLE_DETECTED" | "GRAPH_NOT_FOUND" | "SUB_AGENT_NOT_FOUND" | "BACKGROUND_TASK_NOT_FOUND" | "MODEL_ERROR" | "MODEL_UNAVAILABLE" | "INTERRUPTED" | "MAX_TURNS_EXCEEDED" | "PATH_OUTSIDE_WORKSPACE" | "TOOL_ARGUMENTS_INVALID" | "TOOL_NAME_CONFLICT" | "SANDBOX_UNAVAILABLE" | "CHECKPOINT_NOT_FOUND" | "BUDGET_EXCEEDED" | "HOOK_FAILED" | "SKILL_SKIPPED" | "PROMPT_BLOCKED" | "PRICE_UNKNOWN" | "SESSION_LIMIT_REACHED" | "TOOL_TIMEOUT" | "HOST_TOOL_CALL_NOT_FOUND" | "ROLE_FORBIDDEN" | "SESSION_OWNED_ELSEWHERE" | "WORKTREE_UNAVAILABLE" | "WORKTREE_NOT_FOUND" | "WORKTREE_DIRTY" | "WORKSPACE_MISSING";

/**
 * What the user can do about an error (seed 000 §4.10).
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type ErrorHint = KnownErrorHint | (string & {});

/** The values of `ErrorHint` this version knows. */
export type KnownErrorHint = "check_llm_config" | "network" | "quota_exceeded";

/**
 * The structured error payload `{code, message, retryable, details, category?, severity?, hint?}`.
 */
export type ErrorPayload = { 
/**
 * The stable code.
 */
code: ErrorCode, 
/**
 * One sentence a person can read.
 */
message: string, 
/**
 * Whether retrying the same thing may succeed.
 */
retryable: boolean, 
/**
 * Machine-readable details (e.g. `{"field": "payload.mode"}`); always an object.
 */
details: Record<string, unknown>, 
/**
 * Where the error belongs.
 */
category?: ErrorCategory | null, 
/**
 * How serious it is.
 */
severity?: Severity | null, 
/**
 * What the user can do about it.
 */
hint?: ErrorHint | null, };

/**
 * How a file changed after a checkpoint.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type FileChangeKind = KnownFileChangeKind | (string & {});

/** The values of `FileChangeKind` this version knows. */
export type KnownFileChangeKind = "created" | "modified" | "deleted";

/**
 * The result of `edit_file` and `write_file`.
 */
export type FileChangeResult = { 
/**
 * The file changed.
 */
path: string, 
/**
 * Whether the file was created.
 */
created: boolean, 
/**
 * Unified diff of the change.
 */
diff: string, 
/**
 * Lines added and removed.
 */
stats: DiffStats, 
/**
 * Number of replacements made (edit_file).
 */
replacements: number, };

/**
 * A file another session of the same workspace changed.
 */
export type ForeignFileChange = { 
/**
 * The other session.
 */
sessionId: string, 
/**
 * Relative to the workspace, `/`-separated.
 */
path: string, 
/**
 * How it changed (the last change that session recorded).
 */
change: FileChangeKind, };

/**
 * `git {command, args?}`.
 */
export type GitArgs = { 
/**
 * The git subcommand (`status`, `diff`, `log`, `commit`, …).
 */
command: string, 
/**
 * Further arguments.
 */
args?: Array<string> | null, };

/**
 * Where a task graph stands.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type GraphStatus = KnownGraphStatus | (string & {});

/** The values of `GraphStatus` this version knows. */
export type KnownGraphStatus = "active" | "completed" | "failed";

/**
 * `harness.status`.
 */
export type HarnessStatus = { 
/**
 * Open sessions.
 */
sessions: Array<SessionInfo>, 
/**
 * Background tasks.
 */
backgroundTasks: Array<BackgroundTask>, 
/**
 * Running sub-agents.
 */
subAgents: Array<SubAgentInfo>, };

/**
 * `harness.status`.
 */
export type HarnessStatusCmd = Record<string, never>;

/**
 * A message of conversation history, as loaded by `session.load_history` (seed 000 §5.5).
 */
export type HistoryMessage = { 
/**
 * Who spoke.
 */
role: Role, 
/**
 * The text.
 */
content: string, 
/**
 * Tool calls made in this message (assistant).
 */
toolCalls?: Array<HistoryToolCall> | null, 
/**
 * Tool results (tool).
 */
toolResults?: Array<HistoryToolResult> | null, };

/**
 * A tool call inside a history message.
 */
export type HistoryToolCall = { 
/**
 * The call id.
 */
id: string, 
/**
 * The tool name.
 */
name: string, 
/**
 * The arguments.
 */
arguments: unknown, };

/**
 * A tool result inside a history message.
 */
export type HistoryToolResult = { 
/**
 * The id of the call this answers.
 */
toolCallId: string, 
/**
 * The result as the model saw it.
 */
content: string, 
/**
 * Whether the call failed or was refused.
 */
isError: boolean, };

/**
 * Whether a host tool asks for approval.
 */
export type HostToolApproval = "always" | "never";

/**
 * The error a host answers a host-tool call with.
 */
export type HostToolError = { 
/**
 * What went wrong (the model reads it).
 */
message: string, };

/**
 * `host-tool.requested`: the model called a host tool and the gate allowed it; the
 * kernel waits for `host-tool.respond`.
 */
export type HostToolRequested = { 
/**
 * The call (as in `tool.call.started`).
 */
toolCallId: string, 
/**
 * The host tool.
 */
toolName: string, 
/**
 * The model's arguments.
 */
arguments: unknown, 
/**
 * When the call times out (ms since the epoch; null: never).
 */
expiresAt: number | null, };

/**
 * `host-tool.respond`: the host's answer to `host-tool.requested`, a result or an
 * error.
 */
export type HostToolRespond = { 
/**
 * The call (`toolCallId` of `host-tool.requested`).
 */
toolCallId: string, 
/**
 * The result (any JSON; a string is given to the model as is).
 */
result: unknown, 
/**
 * Or the error, `{message}`.
 */
error?: HostToolError | null, };

/**
 * `host-tool.responded`: the host's answer was taken (on the request's stream,
 * `meta.replyTo` = the `host-tool.respond`); `tool.call.completed` or `failed`
 * follows.
 */
export type HostToolResponded = { 
/**
 * The call.
 */
toolCallId: string, 
/**
 * The host tool.
 */
toolName: string, 
/**
 * Whether the host answered with an error.
 */
isError: boolean, };

/**
 * A tool the host app defines (`hostTools` of `session.start`,
 * `session.set_host_tools`). The kernel offers it to the model like its own tools;
 * when the model calls it and the gate allows the call, the host runs it
 * (`host-tool.requested` → `host-tool.respond`).
 */
export type HostToolSpec = { 
/**
 * The tool name: letters, digits, `_` and `-`, at most 64 characters, unique among
 * the session's tools.
 */
name: string, 
/**
 * What it does, for the model.
 */
description: string, 
/**
 * The JSON Schema of its arguments (an object schema).
 */
inputSchema: Record<string, unknown>, 
/**
 * Its permission level: `read` runs without approval (also in plan mode); the
 * others ask in `ask` mode and are refused in plan mode.
 */
level: KnownPermissionLevel, 
/**
 * Overrides whether it asks (default: `never` for `read`, else `always`).
 */
approval?: HostToolApproval | null, };

/**
 * Where a session works.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type Isolation = KnownIsolation | (string & {});

/** The values of `Isolation` this version knows. */
export type KnownIsolation = "none" | "worktree";

/**
 * `list_dir {path, depth?}`.
 */
export type ListDirArgs = { 
/**
 * Directory relative to the workspace root (`.` for the root), or absolute (also
 * in one of the session's extra roots).
 */
path: string, 
/**
 * How deep to go (1 = the directory's own entries).
 */
depth?: number | null, };

/**
 * The result of `list_dir`.
 */
export type ListDirResult = { 
/**
 * The directory listed.
 */
path: string, 
/**
 * The entries, sorted by path.
 */
entries: Array<DirEntry>, 
/**
 * Whether entries were left out (entry cap reached).
 */
truncated: boolean, };

/**
 * `session.load_history`.
 */
export type LoadHistory = { 
/**
 * Messages, oldest first.
 */
messages: Array<HistoryMessage>, };

/**
 * What `session.resume {materializeTo}` made of a workspace missing on this node.
 */
export type MaterializedWorkspace = { 
/**
 * The session's workspace now (canonical).
 */
workspace: string, 
/**
 * The workspace the session had, which does not exist on this node.
 */
previousWorkspace: string, 
/**
 * The checkpoint the files come from (the session's newest).
 */
checkpointId: string, 
/**
 * Files and links written.
 */
restored: number, 
/**
 * Files the checkpoints did not keep (binary, larger than the size limit,
 * unreadable when taken, or content no longer available), which are not there.
 */
missing: Array<NotRestorableFile>, };

/**
 * `mcp.list`: the answer to `mcp.list`.
 */
export type McpList = { 
/**
 * The session's servers, configured ones first, in name order.
 */
servers: Array<McpServerInfo>, };

/**
 * `mcp.list`: the session's MCP servers, their state and tools.
 */
export type McpListCmd = Record<string, never>;

/**
 * One MCP server of a session, in `mcp.list`.
 */
export type McpServerInfo = { 
/**
 * The server's name.
 */
name: string, 
/**
 * `stdio` or `http`.
 */
transport: string, 
/**
 * How the gate treats its tools.
 */
trust: McpTrust, 
/**
 * Where it came from: `config` or `session`.
 */
origin: string, 
/**
 * Its state.
 */
state: McpServerState, 
/**
 * Why it failed (only when `failed`).
 */
reason?: string | null, 
/**
 * Its tools (empty until it is ready; kept while a server that died can be
 * restarted by the next call).
 */
tools: Array<McpToolInfo>, };

/**
 * How a session reaches an MCP server: `{name, command, args, env}` (stdio) or
 * `{name, url, headers}` (streamable HTTP), as in ACP's `session/new`. `type` may say
 * `"stdio"` or `"http"`; `"sse"` (the legacy transport) is refused.
 */
export type McpServerSpec = { 
/**
 * The server's name; its tools appear to the model as `mcp__NAME__TOOL`.
 */
name: string, 
/**
 * `"stdio"`, `"http"` (default: `http` with `url`, `stdio` with `command`).
 */
type?: string | null, 
/**
 * The program of a stdio server.
 */
command?: string | null, 
/**
 * Its arguments.
 */
args?: Array<string> | null, 
/**
 * Extra environment variables (the runtime's environment is inherited).
 */
env?: Array<NameValue> | null, 
/**
 * The endpoint of a streamable HTTP server.
 */
url?: string | null, 
/**
 * HTTP headers sent with every request (e.g. `Authorization`).
 */
headers?: Array<NameValue> | null, 
/**
 * How the gate treats its tools (default `ask`).
 */
trust?: KnownMcpTrust | null, };

/**
 * The state of an MCP server of a session.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type McpServerState = KnownMcpServerState | (string & {});

/** The values of `McpServerState` this version knows. */
export type KnownMcpServerState = "starting" | "ready" | "failed";

/**
 * One tool of an MCP server, as offered to the model.
 */
export type McpToolInfo = { 
/**
 * The name the model sees, `mcp__SERVER__TOOL`.
 */
name: string, 
/**
 * The tool's name on the server.
 */
tool: string, 
/**
 * Its description.
 */
description: string, };

/**
 * How an MCP server's tools are treated by the permission gate.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type McpTrust = KnownMcpTrust | (string & {});

/** The values of `McpTrust` this version knows. */
export type KnownMcpTrust = "ask" | "read";

/**
 * Optional extras of an envelope. Unknown fields are ignored on decode.
 */
export type Meta = { 
/**
 * The requestId of the command this event answers, when that command's own
 * requestId differs from the stream the event belongs to (see docs/protocol.md).
 */
replyTo?: string | null, 
/**
 * Duration of the operation this event closes, in ms.
 */
durationMs?: number | null, 
/**
 * A trace id for correlating logs.
 */
traceId?: string | null, 
/**
 * The model in use.
 */
model?: string | null, 
/**
 * The permission level involved.
 */
permissionLevel?: PermissionLevel | null, 
/**
 * For replayed events: true.
 */
replay?: boolean | null, };

/**
 * A model a host may offer (seed 000 §4.1 `availableLLMs`).
 */
export type ModelInfo = { 
/**
 * The selection string, `provider:model`.
 */
id: string, 
/**
 * A label for menus.
 */
displayName: string, 
/**
 * The provider (`openai`, `anthropic`, `scripted`, …).
 */
provider: string, 
/**
 * Whether it is the default.
 */
isCurrent: boolean, };

/**
 * A `{name, value}` pair: an environment variable of a stdio server, or an HTTP
 * header (the shape ACP's `session/new` uses).
 */
export type NameValue = { 
/**
 * The name.
 */
name: string, 
/**
 * The value.
 */
value: string, };

/**
 * A node in `task-graph.create` / `add-node`.
 */
export type NewTaskNode = { 
/**
 * Unique id.
 */
id: string, 
/**
 * What the task is.
 */
title: string, 
/**
 * More detail.
 */
description?: string | null, 
/**
 * Dependencies.
 */
dependsOn: Array<string>, 
/**
 * Free-form data.
 */
metadata: Record<string, unknown> | null, };

/**
 * The status of a task-graph node.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type NodeStatus = KnownNodeStatus | (string & {});

/** The values of `NodeStatus` this version knows. */
export type KnownNodeStatus = "pending" | "ready" | "running" | "completed" | "failed" | "skipped";

/**
 * Changes in `task-graph.update-node`.
 */
export type NodeUpdates = { 
/**
 * New status.
 */
status?: KnownNodeStatus | null, 
/**
 * New title.
 */
title?: string | null, 
/**
 * A result.
 */
result: unknown, 
/**
 * An error.
 */
error: unknown, 
/**
 * Metadata to merge.
 */
metadata: Record<string, unknown> | null, };

/**
 * A file a rewind could not put back.
 */
export type NotRestorableFile = { 
/**
 * Relative to the workspace, `/`-separated.
 */
path: string, 
/**
 * Why (larger than the size limit, binary, a directory holding ignored files, …).
 */
reason: string, };

/**
 * A proposed change set (seed 002 §8).
 */
export type Patch = { 
/**
 * The patch id.
 */
patchId: string, 
/**
 * Where it stands.
 */
status: PatchStatus, 
/**
 * `tool` when a tool proposed it, `host` when the host did, `sub-agent` when it
 * brings back the changes of a sub-agent that worked in a worktree of its own.
 */
origin: string, 
/**
 * Why it was proposed.
 */
reason: string | null, 
/**
 * The request that proposed it.
 */
requestId: string | null, 
/**
 * When, ms since the epoch.
 */
proposedAt: number, 
/**
 * When it was applied or rejected.
 */
resolvedAt: number | null, 
/**
 * Who resolved it.
 */
resolvedBy: string | null, 
/**
 * The files.
 */
files: Array<PatchFile>, 
/**
 * Totals.
 */
stats: PatchStats, };

/**
 * `patch.apply`.
 */
export type PatchApply = { 
/**
 * The patch.
 */
patchId: string, };

/**
 * `patch.proposed` / `patch.applied` / `patch.rejected`.
 */
export type PatchEvent = { 
/**
 * The patch.
 */
patch: Patch, };

/**
 * One file of a patch.
 */
export type PatchFile = { 
/**
 * Position in the patch.
 */
index: number, 
/**
 * Path relative to the workspace root.
 */
path: string, 
/**
 * What happens to it.
 */
op: PatchOp, 
/**
 * Content before (null for create).
 */
before: string | null, 
/**
 * Content after (null for delete).
 */
after: string | null, 
/**
 * Unified diff.
 */
diff: string, 
/**
 * Lines added and removed.
 */
stats: DiffStats, };

/**
 * What happens to a file in a patch.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type PatchOp = KnownPatchOp | (string & {});

/** The values of `PatchOp` this version knows. */
export type KnownPatchOp = "create" | "modify" | "delete";

/**
 * `patch.propose` (from a host).
 */
export type PatchPropose = { 
/**
 * Files with their new content (null content deletes).
 */
files: Array<ProposedFile>, 
/**
 * Why.
 */
reason?: string | null, };

/**
 * `patch.reject`.
 */
export type PatchReject = { 
/**
 * The patch.
 */
patchId: string, 
/**
 * Why.
 */
reason?: string | null, };

/**
 * Totals of a patch.
 */
export type PatchStats = { 
/**
 * Files touched.
 */
fileCount: number, 
/**
 * Lines added.
 */
added: number, 
/**
 * Lines removed.
 */
removed: number, };

/**
 * Where a patch stands.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type PatchStatus = KnownPatchStatus | (string & {});

/** The values of `PatchStatus` this version knows. */
export type KnownPatchStatus = "pending" | "applied" | "rejected";

/**
 * `patch.summary`.
 */
export type PatchSummary = { 
/**
 * Pending patches.
 */
pending: Array<Patch>, 
/**
 * Resolved patches, oldest first.
 */
history: Array<Patch>, 
/**
 * Totals over pending patches.
 */
totals: PatchStats, };

/**
 * `patch.summary`.
 */
export type PatchSummaryCmd = Record<string, never>;

/**
 * A tool's permission level (seed 002 §6.2).
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type PermissionLevel = KnownPermissionLevel | (string & {});

/** The values of `PermissionLevel` this version knows. */
export type KnownPermissionLevel = "read" | "write" | "execute" | "elevated";

/**
 * A session's permission mode.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type PermissionMode = KnownPermissionMode | (string & {});

/** The values of `PermissionMode` this version knows. */
export type KnownPermissionMode = "ask" | "auto-edit" | "auto" | "plan";

/**
 * A plan as the session holds it.
 */
export type Plan = { 
/**
 * The plan id (`plan_…`).
 */
planId: string, 
/**
 * Where it stands.
 */
status: PlanStatus, 
/**
 * Optional summary written by the model.
 */
summary: string | null, 
/**
 * The steps, in order.
 */
steps: Array<PlanStep>, };

/**
 * `plan.approval_required`.
 */
export type PlanApprovalRequired = { 
/**
 * The plan id.
 */
planId: string, 
/**
 * The proposed steps.
 */
steps: Array<PlanStep>, 
/**
 * The model's summary.
 */
summary: string | null, };

/**
 * `plan.approve`.
 */
export type PlanApprove = { 
/**
 * The plan.
 */
planId: string, 
/**
 * The mode to continue in (default `ask`).
 */
mode?: KnownPermissionMode | null, };

/**
 * `plan.approved`.
 */
export type PlanApproved = { 
/**
 * The plan id.
 */
planId: string, 
/**
 * The mode the session continues in.
 */
mode: PermissionMode, };

/**
 * `plan.reject`.
 */
export type PlanReject = { 
/**
 * The plan.
 */
planId: string, 
/**
 * Feedback for the model.
 */
feedback?: string | null, };

/**
 * `plan.rejected`.
 */
export type PlanRejected = { 
/**
 * The plan id.
 */
planId: string, 
/**
 * Feedback passed to the model.
 */
feedback: string | null, };

/**
 * `plan.started`.
 */
export type PlanStarted = { 
/**
 * The plan id.
 */
planId: string, };

/**
 * Where a plan stands.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type PlanStatus = KnownPlanStatus | (string & {});

/** The values of `PlanStatus` this version knows. */
export type KnownPlanStatus = "drafting" | "awaiting_approval" | "approved" | "rejected";

/**
 * One step of a plan.
 */
export type PlanStep = { 
/**
 * Stable id within the plan, e.g. `s1`.
 */
id: string, 
/**
 * What the step does.
 */
title: string, 
/**
 * Where it stands.
 */
status: StepStatus, };

/**
 * One step as the model writes it: every field optional (ids default to `s1`, `s2`, …).
 */
export type PlanStepArg = { 
/**
 * Stable id within the plan.
 */
id?: string | null, 
/**
 * What the step does.
 */
title?: string | null, 
/**
 * Where it stands.
 */
status?: KnownStepStatus | null, };

/**
 * `plan.updated`.
 */
export type PlanUpdated = { 
/**
 * The plan id.
 */
planId: string, 
/**
 * Every step with its status.
 */
steps: Array<PlanStep>, };

/**
 * The permission gate's verdict on one call, as printed by `keel policy check`.
 */
export type PolicyVerdict = { 
/**
 * Allow, ask or deny.
 */
decision: Decision, 
/**
 * The permission level of this call.
 */
level: PermissionLevel, 
/**
 * The risk shown to the approver.
 */
riskLevel: RiskLevel, 
/**
 * Why, in words a person can read.
 */
reason: string, 
/**
 * The approval action type, e.g. `shell.execute`, `file.write`.
 */
actionType: string, 
/**
 * The approval scope, e.g. `["process:spawn", "filesystem:workspace"]`.
 */
scope: Array<string>, };

/**
 * `propose_plan {summary?, steps}`.
 */
export type ProposePlanArgs = { 
/**
 * One paragraph on what the plan achieves.
 */
summary?: string | null, 
/**
 * The ordered steps (at least one).
 */
steps: Array<PlanStepArg>, };

/**
 * A file in `patch.propose`.
 */
export type ProposedFile = { 
/**
 * Path relative to the workspace.
 */
path: string, 
/**
 * The new content; null deletes the file.
 */
content?: string | null, };

/**
 * `read_file {path, offset?, limit?}`.
 */
export type ReadFileArgs = { 
/**
 * Path relative to the workspace root, or absolute (inside the workspace or one of
 * the session's extra roots, which are named by absolute path).
 */
path: string, 
/**
 * First line to return, 1-based.
 */
offset?: number | null, 
/**
 * Maximum number of lines to return.
 */
limit?: number | null, };

/**
 * The result of `read_file`.
 */
export type ReadFileResult = { 
/**
 * The path as given, normalised relative to the workspace (absolute in an extra
 * root).
 */
path: string, 
/**
 * The text returned.
 */
content: string, 
/**
 * First line returned, 1-based.
 */
startLine: number, 
/**
 * Number of lines returned.
 */
lineCount: number, 
/**
 * Total number of lines in the file.
 */
totalLines: number, 
/**
 * Size of the file in bytes.
 */
sizeBytes: number, 
/**
 * Whether lines were left out (by `limit` or by the size cap).
 */
truncated: boolean, };

/**
 * `request.accepted`: the request starts running now.
 */
export type RequestAccepted = { 
/**
 * The user's message.
 */
message: string, 
/**
 * Whether it had waited in the queue.
 */
fromQueue: boolean, };

/**
 * `request.cancelled`: a queued request was removed.
 */
export type RequestCancelled = { 
/**
 * The removed request.
 */
queuedRequestId: string, };

/**
 * `request.interrupt`.
 */
export type RequestInterrupt = Record<string, never>;

/**
 * `request.queued`.
 */
export type RequestQueued = { 
/**
 * 1-based position in the queue.
 */
position: number, };

/**
 * `request.send`.
 */
export type RequestSend = { 
/**
 * The user's message.
 */
message: string, 
/**
 * Local image paths.
 */
images?: Array<string> | null, 
/**
 * What to do when busy.
 */
whenBusy?: WhenBusy | null, 
/**
 * Propose edits as patches instead of writing them (this request only).
 */
patchPreview?: boolean | null, 
/**
 * Limits of this request, over the session's (key by key).
 */
budget?: BudgetLimits | null, 
/**
 * Cap on the output tokens of each model call of this request.
 */
maxOutputTokens?: number | null, 
/**
 * A W3C `traceparent`: the request's spans join that trace (docs/protocol.md).
 */
traceparent?: string | null, 
/**
 * The W3C `tracestate` that goes with `traceparent`.
 */
tracestate?: string | null, };

/**
 * `request.side`: a question answered from the conversation so far, without tools,
 * beside a running request; it does not enter the history.
 */
export type RequestSide = { 
/**
 * The question.
 */
message: string, };

/**
 * `request.steered`: the message joined the running request.
 */
export type RequestSteered = { 
/**
 * The running request it joined.
 */
targetRequestId: string, };

/**
 * A review comment.
 */
export type ReviewComment = { 
/**
 * Comment id within the review.
 */
id: string, 
/**
 * Who wrote it.
 */
author: string, 
/**
 * The text.
 */
content: string, 
/**
 * When, ms since the epoch.
 */
createdAt: number, };

/**
 * A review decision.
 */
export type ReviewDecision = "approved" | "rejected";

/**
 * `review.enter`.
 */
export type ReviewEnter = { 
/**
 * Why.
 */
reason: string, 
/**
 * Whether requests are refused while pending.
 */
blocking: boolean, 
/**
 * Checklist titles.
 */
checklist?: Array<string> | null, };

/**
 * `review.requested` / `review.updated` / `review.resolved`.
 */
export type ReviewEvent = { 
/**
 * The review.
 */
review: ReviewState, };

/**
 * `review.resolve`.
 */
export type ReviewResolve = { 
/**
 * The decision.
 */
decision: ReviewDecision, 
/**
 * A summary.
 */
summary?: string | null, };

/**
 * The review state of a session (seed 002 §8).
 */
export type ReviewState = { 
/**
 * The review id.
 */
reviewId: string, 
/**
 * Where it stands.
 */
status: ReviewStatus, 
/**
 * Why the review was requested.
 */
reason: string, 
/**
 * Who requested it.
 */
requestedBy: string, 
/**
 * When, ms since the epoch.
 */
requestedAt: number, 
/**
 * Who resolved it.
 */
resolvedBy: string | null, 
/**
 * When it was resolved.
 */
resolvedAt: number | null, 
/**
 * The decision, once resolved.
 */
decision: ReviewStatus | null, 
/**
 * Whether requests are refused while it is pending.
 */
blocking: boolean, 
/**
 * Comments, oldest first.
 */
comments: Array<ReviewComment>, 
/**
 * The checklist.
 */
checklist: Array<ChecklistItem>, 
/**
 * A closing summary.
 */
summary: string | null, };

/**
 * `review.state`: the answer to `review.status`.
 */
export type ReviewStateEvent = { 
/**
 * The review, or null.
 */
review: ReviewState | null, 
/**
 * Whether requests are blocked now.
 */
blocking: boolean, };

/**
 * Where a review stands.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type ReviewStatus = KnownReviewStatus | (string & {});

/** The values of `ReviewStatus` this version knows. */
export type KnownReviewStatus = "pending" | "approved" | "rejected";

/**
 * `review.status`.
 */
export type ReviewStatusCmd = Record<string, never>;

/**
 * `review.submit`.
 */
export type ReviewSubmit = { 
/**
 * A comment.
 */
comment?: string | null, 
/**
 * A checklist item update `{id, done, note?}`.
 */
checklistItem?: ChecklistUpdate | null, };

/**
 * What a rewind did to a file.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type RewindAction = KnownRewindAction | (string & {});

/** The values of `RewindAction` this version knows. */
export type KnownRewindAction = "removed" | "recreated" | "reverted";

/**
 * A file a rewind put back.
 */
export type RewoundFile = { 
/**
 * Relative to the workspace, `/`-separated.
 */
path: string, 
/**
 * What was done.
 */
action: RewindAction, };

/**
 * A risk level shown to the person approving.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type RiskLevel = KnownRiskLevel | (string & {});

/** The values of `RiskLevel` this version knows. */
export type KnownRiskLevel = "low" | "medium" | "high";

/**
 * The role of a history message.
 */
export type Role = "system" | "user" | "assistant" | "tool";

/**
 * What a session may do in an extra root.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type RootAccess = KnownRootAccess | (string & {});

/** The values of `RootAccess` this version knows. */
export type KnownRootAccess = "read" | "write";

/**
 * `run_shell {command, cwd?, timeoutMs?, background?}`.
 */
export type RunShellArgs = { 
/**
 * The command line, run by `sh -c`.
 */
command: string, 
/**
 * Working directory inside the workspace (default: the root).
 */
cwd?: string | null, 
/**
 * Time limit (default 120 000 ms).
 */
timeoutMs?: number | null, 
/**
 * Start as a background task and return at once.
 */
background?: boolean | null, };

/**
 * The result of `run_shell`.
 */
export type RunShellResult = { 
/**
 * Exit code, or null when killed by a signal.
 */
exitCode: number | null, 
/**
 * Captured standard output (capped).
 */
stdout: string, 
/**
 * Captured standard error (capped).
 */
stderr: string, 
/**
 * Whether the time limit killed it.
 */
timedOut: boolean, 
/**
 * Whether output was cut at the cap.
 */
truncated: boolean, 
/**
 * Wall time.
 */
durationMs: number, 
/**
 * Whether it ran inside an OS sandbox (`sandbox` is not `none`).
 */
sandboxed: boolean, 
/**
 * Which OS sandbox it ran in.
 */
sandbox: SandboxKind, };

/**
 * `runtime.ready`: the first line a bridge writes (seed 000 §4.1).
 */
export type RuntimeReady = { 
/**
 * The protocol version, e.g. `1.0`.
 */
protocolVersion: string, 
/**
 * The Keel version.
 */
keelVersion: string, 
/**
 * The bridge's process id.
 */
pid: number, 
/**
 * The default workspace, if one was given.
 */
workspace: string | null, 
/**
 * Models a host may offer.
 */
availableModels: Array<ModelInfo>, 
/**
 * The permission modes.
 */
permissionModes: Array<PermissionMode>, 
/**
 * Feature names (`approvals`, `plan`, `resume`, `queue`, …).
 */
capabilities: Array<string>, };

/**
 * `runtime.shutdown`: interrupt everything, flush, close sessions, exit 0.
 */
export type RuntimeShutdown = Record<string, never>;

/**
 * `runtime.stopped`: the last line before the process exits.
 */
export type RuntimeStopped = { 
/**
 * Why (`shutdown`, `eof`, `too_slow`, …).
 */
reason: string, 
/**
 * For a daemon connection cut off as too slow: per watched session, the last
 * event it was sent, to watch again from (`session.watch {afterSequence}`).
 */
resumeFrom?: Array<SessionCursor> | null, };

/**
 * The OS sandbox a shell command ran in.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type SandboxKind = KnownSandboxKind | (string & {});

/** The values of `SandboxKind` this version knows. */
export type KnownSandboxKind = "bubblewrap" | "landlock" | "none";

/**
 * `search_files {query, path?, mode, glob?, caseSensitive?, regex?, contextLines?, maxResults?}`.
 */
export type SearchFilesArgs = { 
/**
 * What to look for.
 */
query: string, 
/**
 * Where to look (default: the workspace root; an extra root by its absolute path).
 */
path?: string | null, 
/**
 * Content or name search.
 */
mode?: SearchMode | null, 
/**
 * Only files matching this glob.
 */
glob?: string | null, 
/**
 * Case-sensitive matching (default: smart case).
 */
caseSensitive?: boolean | null, 
/**
 * Treat the query as a regular expression (default: literal).
 */
regex?: boolean | null, 
/**
 * Lines of context around each match.
 */
contextLines?: number | null, 
/**
 * At most this many results.
 */
maxResults?: number | null, };

/**
 * The result of `search_files`.
 */
export type SearchFilesResult = { 
/**
 * The hits, in path then line order.
 */
matches: Array<SearchMatch>, 
/**
 * Whether hits were left out (`maxResults` reached).
 */
truncated: boolean, 
/**
 * Number of files searched.
 */
filesSearched: number, };

/**
 * One search hit.
 */
export type SearchMatch = { 
/**
 * Path relative to the workspace root (absolute in an extra root).
 */
path: string, 
/**
 * 1-based line number (content mode; null in name mode).
 */
line: number | null, 
/**
 * The matching line or name, possibly with context lines.
 */
snippet: string, };

/**
 * How `search_files` matches.
 */
export type SearchMode = "content" | "name";

/**
 * The budget of `session.start`: limits for each of its requests and for the whole
 * session.
 */
export type SessionBudget = { 
/**
 * Limits of each request of the session.
 */
request?: BudgetLimits | null, 
/**
 * Limits of the whole session (summed over its requests).
 */
session?: BudgetLimits | null, };

/**
 * `session.close`.
 */
export type SessionClose = Record<string, never>;

/**
 * `session.closed`.
 */
export type SessionClosed = { 
/**
 * Why (`requested`, `shutdown`, `deleted`).
 */
reason: string, };

/**
 * `session.completed`: a request ended.
 */
export type SessionCompleted = { 
/**
 * Why it ended.
 */
stopReason: StopReason, 
/**
 * The final text, if any.
 */
finalText: string | null, 
/**
 * Figures.
 */
telemetry: Telemetry, 
/**
 * The limit that stopped the request (with `stopReason: "max_turns"`).
 */
budget?: BudgetStatus | null, };

/**
 * Where a client stands in one session's log: the session and the last event of it
 * the client was sent (`runtime.stopped {resumeFrom}` of a connection cut off for
 * being too slow). `cursor` is null when none was sent; `session.watch` with this
 * cursor as `afterSequence` replays exactly what the client missed.
 */
export type SessionCursor = { 
/**
 * The session.
 */
sessionId: string, 
/**
 * The last event of the session the client was sent.
 */
cursor: Cursor | null, };

/**
 * `session.delete`: close the session if it is open, then remove its stored files.
 */
export type SessionDelete = { 
/**
 * The session (open or stored). Left out: the envelope's `sessionId`
 * (both given and different: refused).
 */
sessionId: string, };

/**
 * `session.deleted`: answers `session.delete`; the session's stored files are gone.
 */
export type SessionDeleted = { 
/**
 * The deleted session.
 */
sessionId: string, };

/**
 * `session.fork`: a new session from this one's history.
 */
export type SessionFork = { 
/**
 * Copy the history up to just before this request (default: all of it).
 */
atRequestId?: string | null, 
/**
 * Also restore the workspace to that point (default false).
 */
files?: boolean | null, 
/**
 * `worktree`: the fork works in a worktree of its own (default: the parent's tree).
 */
isolation?: Isolation | null, 
/**
 * The fork's extra roots (checked as `session.start`'s; `[]`: none). Left
 * out: the parent's (shared with it, also in a worktree of its own).
 */
additionalRoots?: Array<AdditionalRoot> | null, };

/**
 * `session.forked`: the answer to `session.fork`, first event of the new session's
 * log (its envelope carries the new session's id).
 */
export type SessionForked = { 
/**
 * The new session.
 */
sessionId: string, 
/**
 * The session it was forked from (unchanged).
 */
parentSessionId: string, 
/**
 * The history was copied up to just before this request; absent: all of it.
 */
atRequestId: string | null, 
/**
 * The other open sessions whose workspace the fork shares (the parent first,
 * then sessions started on the same folder, in this process or another): the
 * fork's edits and rewinds change their files. Absent when there is none.
 */
sharedWith?: Array<string> | null, 
/**
 * The fork's own worktree (`isolation: "worktree"`).
 */
worktree?: WorktreeInfo | null, };

/**
 * `session.history_loaded`.
 */
export type SessionHistoryLoaded = { 
/**
 * Messages now in history.
 */
messageCount: number, };

/**
 * `session.host_tools_updated`: the answer to `session.set_host_tools`.
 */
export type SessionHostToolsUpdated = { 
/**
 * The names of the session's host tools now.
 */
tools: Array<string>, };

/**
 * A session as listed by `session.list`.
 */
export type SessionInfo = { 
/**
 * The session id.
 */
sessionId: string, 
/**
 * A title, if one was given.
 */
title: string | null, 
/**
 * The workspace root (absolute).
 */
workspace: string, 
/**
 * Creation time, ms since the epoch.
 */
createdAt: number, 
/**
 * Last activity, ms since the epoch.
 */
updatedAt: number, 
/**
 * What it is doing.
 */
state: SessionState, 
/**
 * The permission mode.
 */
permissionMode: PermissionMode, 
/**
 * The model, as `provider:model`.
 */
model: string, 
/**
 * Requests sent in the session (those still in its conversation after a rewind).
 */
requestCount: number, 
/**
 * The first line of the conversation's last message (user or assistant text), cut
 * at 120 characters; `None` while the conversation is empty.
 */
lastMessage?: string | null, 
/**
 * The extra roots the session may reach (canonical paths, with their access);
 * absent when it has none.
 */
additionalRoots?: Array<AdditionalRoot> | null, };

/**
 * `session.interrupted`: the request was cancelled, or the interrupt found nothing to do.
 */
export type SessionInterrupted = { 
/**
 * The request that was cancelled (null when the session was idle).
 */
interruptedRequestId: string | null, 
/**
 * Why (`user`, `shutdown`, `parent`, `restart`, `lease_lost`, `owner_lost`).
 */
reason: string, 
/**
 * Whether a request was running.
 */
wasRunning: boolean, };

/**
 * `session.list`: the answer to the `session.list` command.
 */
export type SessionList = { 
/**
 * Sessions, most recently updated first.
 */
sessions: Array<SessionInfo>, };

/**
 * `session.list`.
 */
export type SessionListCmd = Record<string, never>;

/**
 * `session.mode_changed`.
 */
export type SessionModeChanged = { 
/**
 * The new mode.
 */
mode: PermissionMode, 
/**
 * The mode before.
 */
previousMode: PermissionMode, };

/**
 * `session.model_changed` (seed 000 `llm_changed`).
 */
export type SessionModelChanged = { 
/**
 * The new model.
 */
model: string, 
/**
 * The model before.
 */
previousModel: string, };

/**
 * `session.owner_changed`: another node took the session over (its previous
 * owner's lease had run out). Logged, so every watcher on every node sees it.
 */
export type SessionOwnerChanged = { 
/**
 * The node whose lease ran out.
 */
previousOwner: string, 
/**
 * The node that serves the session now.
 */
owner: string, 
/**
 * The new lease's fencing epoch (higher than every one before it).
 */
epoch: number, };

/**
 * `session.resume`.
 */
export type SessionResume = { 
/**
 * The session to restore. Left out: the envelope's `sessionId`
 * (both given and different: refused).
 */
sessionId: string, 
/**
 * Replay the events logged after this cursor.
 */
afterSequence?: Cursor | null, 
/**
 * MCP servers of the session, on top of the configured ones (started when
 * the session is opened from the store; an open session keeps its servers).
 */
mcpServers?: Array<McpServerSpec> | null, 
/**
 * The session's extra roots from now on, replacing those it kept (checked as
 * `session.start`'s; `[]`: none). Left out: it keeps its own. An open
 * session's roots change only while it is idle.
 */
additionalRoots?: Array<AdditionalRoot> | null, 
/**
 * When the session's workspace does not exist on this node: an absolute path
 * (absent, or an empty directory) to make it in from the session's newest
 * checkpoint; the session then works there (`session.resumed` says what was
 * made in `materialized`). Ignored when the workspace exists. Without it, a
 * missing workspace is refused with `WORKSPACE_MISSING`.
 */
materializeTo?: string | null, };

/**
 * `session.resumed`.
 */
export type SessionResumed = { 
/**
 * The session.
 */
session: SessionInfo, 
/**
 * A short summary (first user message, counts).
 */
summary: string, 
/**
 * Messages of history restored.
 */
messageCount: number, 
/**
 * The plan, if any.
 */
plan: Plan | null, 
/**
 * The always-allow rules in force.
 */
rules: ApprovalRules, 
/**
 * The last event in the log before this one.
 */
lastCursor: Cursor | null, 
/**
 * Events replayed after this one (with `afterSequence`).
 */
replayed: number, 
/**
 * The workspace was made from the session's newest checkpoint
 * (`session.resume {materializeTo}`): where, from what, and what is missing.
 */
materialized?: MaterializedWorkspace | null, };

/**
 * `session.rewind`: give exactly one of `toRequestId` and `toToolCallId` (refused
 * while a request runs).
 */
export type SessionRewind = { 
/**
 * Back to just before this request.
 */
toRequestId?: string | null, 
/**
 * Back to just before this tool call.
 */
toToolCallId?: string | null, 
/**
 * Restore the files (default true).
 */
files?: boolean | null, 
/**
 * Cut the conversation back (default true).
 */
conversation?: boolean | null, };

/**
 * `session.rewound`: the answer to `session.rewind`.
 */
export type SessionRewound = { 
/**
 * Files put back.
 */
files: Array<RewoundFile>, 
/**
 * Files left as they are, and why.
 */
notRestorable: Array<NotRestorableFile>, 
/**
 * Whether the conversation was cut back.
 */
conversationCut: boolean, 
/**
 * The checkpoint holding the files as they were just before the rewind:
 * rewinding to it (`toRequestId` or `toToolCallId`) undoes the rewind. Absent
 * when no file was rewound (`files: false`).
 */
undoCheckpointId?: string | null, 
/**
 * Other open sessions whose workspace is this one (a fork, or a session
 * started on the same folder, in this process or another): the rewind
 * changed their files too. Absent when there is none.
 */
sharedWith?: Array<string> | null, 
/**
 * Files that other sessions' checkpoints recorded as changed after the
 * checkpoint rewound to (a rewind of files puts them back too, so a host may
 * warn). Absent when there is none, and when no file was rewound.
 */
changedByOthers?: Array<ForeignFileChange> | null, };

/**
 * `session.rules_updated`: rules changed, by `session.set_rules` or by an
 * `allow_always_*` approval (the host should persist them).
 */
export type SessionRulesUpdated = { 
/**
 * The rules now in force.
 */
rules: ApprovalRules, 
/**
 * `host` or `approval`.
 */
source: string, };

/**
 * `session.start`.
 */
export type SessionStart = { 
/**
 * The workspace root (default: the runtime's workspace).
 */
workspacePath?: string | null, 
/**
 * The permission mode (default: configuration, else `ask`).
 */
permissionMode?: KnownPermissionMode | null, 
/**
 * The model, `provider:model` (default: configuration).
 */
model?: string | null, 
/**
 * A title.
 */
title?: string | null, 
/**
 * A file (path on the runtime's machine) where every model response of the
 * session is written in the scripted model's format, for an offline replay
 * with `scripted:<file>`.
 */
record?: string | null, 
/**
 * Limits of each request and of the whole session (default: configuration).
 */
budget?: SessionBudget | null, 
/**
 * Cap on the output tokens of each model call (default: configuration, else
 * the provider's default).
 */
maxOutputTokens?: number | null, 
/**
 * MCP servers of this session, on top of the configured ones.
 */
mcpServers?: Array<McpServerSpec> | null, 
/**
 * Tools the host runs (`host-tool.requested` → `host-tool.respond`).
 */
hostTools?: Array<HostToolSpec> | null, 
/**
 * Where the session works (default: configuration, else `none`).
 */
isolation?: Isolation | null, 
/**
 * With `isolation: "worktree"`: the commit the worktree starts at (default `HEAD`).
 */
baseRef?: string | null, 
/**
 * Folders the session may reach beside its workspace, jailed like it: each an
 * existing directory given by absolute path, none inside another or inside
 * the workspace, none holding the workspace. The file tools name paths there
 * by absolute path; writes only in `write` roots.
 */
additionalRoots?: Array<AdditionalRoot> | null, };

/**
 * `session.started`.
 */
export type SessionStarted = { 
/**
 * The new session id.
 */
sessionId: string, 
/**
 * The workspace root.
 */
workspace: string, 
/**
 * The permission mode.
 */
permissionMode: PermissionMode, 
/**
 * The model, `provider:model`.
 */
model: string, 
/**
 * The title, if given.
 */
title: string | null, 
/**
 * Creation time.
 */
createdAt: number, 
/**
 * The worktree the session works in (`isolation: "worktree"`); `workspace`
 * is in it.
 */
worktree?: WorktreeInfo | null, 
/**
 * The extra roots the session may reach (canonical paths).
 */
additionalRoots?: Array<AdditionalRoot> | null, };

/**
 * What a session is doing.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type SessionState = KnownSessionState | (string & {});

/** The values of `SessionState` this version knows. */
export type KnownSessionState = "idle" | "running" | "waiting_approval" | "closed";

/**
 * `session.state`.
 */
export type SessionStateCmd = Record<string, never>;

/**
 * `session.state`: the answer to `session.state`.
 */
export type SessionStateSnapshot = { 
/**
 * The session.
 */
session: SessionInfo, 
/**
 * The running request.
 */
activeRequestId: string | null, 
/**
 * Queued request ids, in order.
 */
queuedRequestIds: Array<string>, 
/**
 * Approval ids awaiting an answer.
 */
pendingApprovalIds: Array<string>, 
/**
 * The plan.
 */
plan: Plan | null, 
/**
 * The rules.
 */
rules: ApprovalRules, 
/**
 * Total usage.
 */
usage: Usage, 
/**
 * Messages in history.
 */
messageCount: number, 
/**
 * What the session is doing.
 */
state: SessionState, };

/**
 * `session.title_changed`: answers `session.set_title`, or reports the title the
 * kernel generated after a request (see docs/protocol.md).
 */
export type SessionTitleChanged = { 
/**
 * The new title.
 */
title: string, 
/**
 * The title before, if there was one.
 */
previousTitle: string | null, 
/**
 * `host` (`session.set_title`) or `generated`.
 */
source: string, };

/**
 * `session.unwatch`: stop streaming a session's events to this connection.
 */
export type SessionUnwatch = { 
/**
 * The session to stop watching. Left out: the envelope's `sessionId`
 * (both given and different: refused).
 */
sessionId: string, };

/**
 * `session.unwatched`: the answer to `session.unwatch`.
 */
export type SessionUnwatched = { 
/**
 * The session no longer watched.
 */
sessionId: string, };

/**
 * `session.watch`: stream a session's events to this connection (replaying the
 * events logged after `afterSequence` first).
 */
export type SessionWatch = { 
/**
 * The session to watch (it must be open). Left out: the envelope's `sessionId`
 * (both given and different: refused).
 */
sessionId: string, 
/**
 * Replay the events logged after this cursor, then go on live.
 */
afterSequence?: Cursor | null, };

/**
 * `session.watched`: the answer to `session.watch`; the connection now receives the
 * session's events.
 */
export type SessionWatched = { 
/**
 * The session.
 */
session: SessionInfo, 
/**
 * The running request, if any.
 */
activeRequestId: string | null, 
/**
 * The last event in the log when the watch began.
 */
lastCursor: Cursor | null, 
/**
 * Replayed events that follow this one (`meta.replay: true`): those logged after
 * `afterSequence`, then the still-pending approval, plan and question prompts
 * of the running request that were not among them.
 */
replayed: number, };

/**
 * `session.set_host_tools` (only while idle): replaces the session's host tools.
 */
export type SetHostTools = { 
/**
 * The tools (empty: none).
 */
tools: Array<HostToolSpec>, };

/**
 * `session.set_mode`.
 */
export type SetMode = { 
/**
 * The new mode.
 */
mode: KnownPermissionMode, };

/**
 * `session.set_model` (only while idle).
 */
export type SetModel = { 
/**
 * The model, `provider:model`.
 */
model: string, };

/**
 * `session.set_rules`.
 */
export type SetRules = { 
/**
 * Rules valid everywhere.
 */
alwaysAllowGlobal: Array<string>, 
/**
 * Rules valid in this project.
 */
alwaysAllowProject: Array<string>, 
/**
 * Deny rules valid everywhere.
 */
alwaysDenyGlobal: Array<string>, 
/**
 * Deny rules valid in this project.
 */
alwaysDenyProject: Array<string>, 
/**
 * Deny rules for this session only (kept with the session, not with the
 * host's rules). Absent: the session's deny rules stay as they are.
 */
deny?: Array<string> | null, };

/**
 * `session.set_title`.
 */
export type SetTitle = { 
/**
 * The new title: 1 to 200 characters after trimming, no control characters.
 */
title: string, };

/**
 * How serious an error is.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type Severity = KnownSeverity | (string & {});

/** The values of `Severity` this version knows. */
export type KnownSeverity = "error" | "warning" | "info";

/**
 * `side.answered`: the answer to `request.side`, on the side request's own stream.
 */
export type SideAnswered = { 
/**
 * The model's answer.
 */
text: string, };

/**
 * A skill of a session, as `skills.list` shows it.
 */
export type SkillInfo = { 
/**
 * Its name (what `activate_skill` and `/skill:NAME` take).
 */
name: string, 
/**
 * What it does and when to use it.
 */
description: string, 
/**
 * Where it was found: `project`, `user` or `config`.
 */
source: string, 
/**
 * Its `SKILL.md`.
 */
path: string, };

/**
 * `skills.list`: the answer to `skills.list`.
 */
export type SkillsList = { 
/**
 * The session's skills, in the order their names won (project, user,
 * configured folders), by name within a folder.
 */
skills: Array<SkillInfo>, };

/**
 * `skills.list`: the session's Agent Skills.
 */
export type SkillsListCmd = Record<string, never>;

/**
 * Who produced an event.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type Source = KnownSource | (string & {});

/** The values of `Source` this version knows. */
export type KnownSource = "runtime" | "tool" | "bridge" | "host" | "renderer" | "desktop-main" | "cli-runtime";

/**
 * `spawn_sub_agent {task, tools?, isolation?}`.
 */
export type SpawnSubAgentArgs = { 
/**
 * The self-contained task.
 */
task: string, 
/**
 * The tools it may use (a subset of the caller's; default: all registered tools).
 */
tools?: Array<string> | null, 
/**
 * Where it works: `"none"`, in your workspace; `"worktree"`, in a git worktree
 * of its own holding your files as they are, its changes coming back to you as
 * a patch for the user to apply or reject. Default: the runtime's configuration.
 */
isolation?: KnownIsolation | null, };

/**
 * The status of a plan step.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type StepStatus = KnownStepStatus | (string & {});

/** The values of `StepStatus` this version knows. */
export type KnownStepStatus = "pending" | "in_progress" | "completed";

/**
 * Why a request ended.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type StopReason = KnownStopReason | (string & {});

/** The values of `StopReason` this version knows. */
export type KnownStopReason = "end_turn" | "max_tokens" | "max_turns" | "refusal" | "error" | "interrupted";

/**
 * `sub-agent.started` / `sub-agent.completed` / `sub-agent.failed`.
 */
export type SubAgentEvent = { 
/**
 * The session that spawned it.
 */
parentSessionId: string, 
/**
 * The sub-agent.
 */
subAgentId: string, 
/**
 * Its snapshot.
 */
subAgent: SubAgentInfo, };

/**
 * `sub-agent.get`.
 */
export type SubAgentGet = { 
/**
 * The sub-agent.
 */
subAgent: SubAgentInfo, };

/**
 * `sub-agent.get`.
 */
export type SubAgentGetCmd = { 
/**
 * The sub-agent.
 */
subAgentId: string, };

/**
 * A sub-agent snapshot.
 */
export type SubAgentInfo = { 
/**
 * The sub-agent id.
 */
subAgentId: string, 
/**
 * The session that spawned it.
 */
parentSessionId: string, 
/**
 * The parent's request.
 */
parentRequestId: string, 
/**
 * The task it was given.
 */
task: string, 
/**
 * Tools it may use (a subset of the parent's).
 */
tools: Array<string>, 
/**
 * Where it stands.
 */
status: SubAgentStatus, 
/**
 * The summary returned to the parent.
 */
summary: string | null, 
/**
 * The error, if it failed.
 */
error: ErrorPayload | null, 
/**
 * Tokens used.
 */
usage: Usage, 
/**
 * Model turns taken.
 */
turns: number, 
/**
 * Started, ms since the epoch.
 */
startedAt: number, 
/**
 * Finished.
 */
finishedAt: number | null, 
/**
 * The worktree it works in (`spawn_sub_agent {isolation: "worktree"}`; absent
 * otherwise). Removed when it ends: a finished sub-agent's is history.
 */
worktree?: WorktreeInfo | null, 
/**
 * The patch proposing its changes (a sub-agent in a worktree that changed
 * files; absent otherwise).
 */
patchId?: string | null, };

/**
 * `sub-agent.list`.
 */
export type SubAgentList = { 
/**
 * Running sub-agents.
 */
active: Array<SubAgentInfo>, 
/**
 * The last finished ones (at most 100), newest first.
 */
recent: Array<SubAgentInfo>, };

/**
 * `sub-agent.list`.
 */
export type SubAgentListCmd = Record<string, never>;

/**
 * `sub-agent.progress`.
 */
export type SubAgentProgress = { 
/**
 * The session that spawned it.
 */
parentSessionId: string, 
/**
 * The sub-agent.
 */
subAgentId: string, 
/**
 * What it is doing.
 */
message: string, };

/**
 * Where a sub-agent stands.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type SubAgentStatus = KnownSubAgentStatus | (string & {});

/** The values of `SubAgentStatus` this version knows. */
export type KnownSubAgentStatus = "running" | "completed" | "failed";

/**
 * A persistent task DAG (seed 002 §12.5).
 */
export type TaskGraph = { 
/**
 * The graph id.
 */
graphId: string, 
/**
 * A title.
 */
title: string | null, 
/**
 * A description.
 */
description: string | null, 
/**
 * Where it stands.
 */
status: GraphStatus, 
/**
 * A topological order of the node ids.
 */
order: Array<string>, 
/**
 * The nodes by id.
 */
nodes: { [key in string]?: TaskNode }, 
/**
 * Created, ms since the epoch.
 */
createdAt: number, 
/**
 * Last change.
 */
updatedAt: number, 
/**
 * When it reached a terminal status.
 */
completedAt: number | null, };

/**
 * The `task_graph` tool's action.
 */
export type TaskGraphAction = "create" | "add_node" | "update_node" | "advance" | "state";

/**
 * `task-graph.add-node`.
 */
export type TaskGraphAddNode = { 
/**
 * The node.
 */
node: NewTaskNode, };

/**
 * `task-graph.advance`.
 */
export type TaskGraphAdvance = Record<string, never>;

/**
 * `task-graph.advanced`.
 */
export type TaskGraphAdvanced = { 
/**
 * The graph id.
 */
graphId: string, 
/**
 * Nodes promoted to ready.
 */
becameReady: Array<string>, 
/**
 * The graph after the advance.
 */
graph: TaskGraph, };

/**
 * `task_graph {action, …}`.
 */
export type TaskGraphArgs = { 
/**
 * What to do.
 */
action: TaskGraphAction, 
/**
 * `create`: the graph's title.
 */
title?: string | null, 
/**
 * `create`: the graph's description.
 */
description?: string | null, 
/**
 * `create`: the nodes.
 */
nodes?: Array<NewTaskNode> | null, 
/**
 * `add_node`: the node.
 */
node?: NewTaskNode | null, 
/**
 * `update_node`: which node.
 */
nodeId?: string | null, 
/**
 * `update_node`: the changes.
 */
updates?: NodeUpdates | null, };

/**
 * `task-graph.create`.
 */
export type TaskGraphCreate = { 
/**
 * A title.
 */
title?: string | null, 
/**
 * A description.
 */
description?: string | null, 
/**
 * The nodes.
 */
nodes: Array<NewTaskNode>, };

/**
 * `task-graph.created` / `task-graph.updated` / `task-graph.completed` / `task-graph.state`.
 */
export type TaskGraphEvent = { 
/**
 * The graph (null in `task-graph.state` when there is none).
 */
graph: TaskGraph | null, };

/**
 * `task-graph.node.added` / `node.updated` / `node.completed` / `node.failed`.
 */
export type TaskGraphNodeEvent = { 
/**
 * The graph id.
 */
graphId: string, 
/**
 * The node.
 */
node: TaskNode, };

/**
 * `task-graph.state`.
 */
export type TaskGraphStateCmd = Record<string, never>;

/**
 * `task-graph.update-node`.
 */
export type TaskGraphUpdateNode = { 
/**
 * The node.
 */
nodeId: string, 
/**
 * The changes.
 */
updates: NodeUpdates, };

/**
 * A task-graph node (seed 002 §12.5).
 */
export type TaskNode = { 
/**
 * Unique within the graph.
 */
id: string, 
/**
 * What the task is.
 */
title: string, 
/**
 * More detail.
 */
description: string | null, 
/**
 * Where it stands.
 */
status: NodeStatus, 
/**
 * Nodes that must complete first.
 */
dependsOn: Array<string>, 
/**
 * Free-form data.
 */
metadata: Record<string, unknown>, 
/**
 * Created, ms since the epoch.
 */
createdAt: number, 
/**
 * Last change, ms since the epoch.
 */
updatedAt: number, 
/**
 * When it started running.
 */
startedAt: number | null, 
/**
 * When it reached a terminal status.
 */
completedAt: number | null, 
/**
 * The result, once completed.
 */
result: unknown, 
/**
 * The error, once failed.
 */
error: unknown, };

/**
 * Figures reported when a request ends.
 */
export type Telemetry = { 
/**
 * Wall time of the request.
 */
elapsedMs: number, 
/**
 * Model calls made.
 */
turns: number, 
/**
 * Tool calls made.
 */
toolCalls: number, 
/**
 * Prompt tokens over the request.
 */
inputTokens: number, 
/**
 * Completion tokens over the request.
 */
outputTokens: number, 
/**
 * Prompt tokens served from the provider's cache over the request.
 */
cachedInputTokens: number, 
/**
 * Estimated tokens of the context sent with the request's last model call.
 */
contextTokens: number, 
/**
 * The model's context window in tokens (0 when unknown).
 */
contextWindow: number, };

/**
 * `tool.call.completed`.
 */
export type ToolCallCompleted = { 
/**
 * The call id.
 */
toolCallId: string, 
/**
 * The tool.
 */
toolName: string, 
/**
 * The structured result (see the tool's documented result type).
 */
result: unknown, 
/**
 * Wall time.
 */
durationMs: number, };

/**
 * `tool.call.failed`.
 */
export type ToolCallFailed = { 
/**
 * The call id.
 */
toolCallId: string, 
/**
 * The tool.
 */
toolName: string, 
/**
 * What went wrong.
 */
error: ErrorPayload, 
/**
 * Wall time.
 */
durationMs: number, };

/**
 * `tool.call.progress`: streamed output.
 */
export type ToolCallProgress = { 
/**
 * The call id.
 */
toolCallId: string, 
/**
 * `stdout`, `stderr` or `info`.
 */
stream: string, 
/**
 * The chunk.
 */
chunk: string, };

/**
 * `tool.call.skipped`: refused by the gate, denied or cancelled before running.
 */
export type ToolCallSkipped = { 
/**
 * The call id.
 */
toolCallId: string, 
/**
 * The tool.
 */
toolName: string, 
/**
 * Why, as a stable code (`TOOL_PERMISSION_DENIED`, `PLAN_APPROVAL_REQUIRED`, …).
 */
error: ErrorPayload, };

/**
 * `tool.call.started`.
 */
export type ToolCallStarted = { 
/**
 * The call id.
 */
toolCallId: string, 
/**
 * The tool.
 */
toolName: string, 
/**
 * The arguments.
 */
arguments: unknown, 
/**
 * The permission level.
 */
permissionLevel: PermissionLevel, };

/**
 * `turn.completed`: a model call and the tool calls it asked for are done (seed
 * 000 `turn_end`). The request's last turn also carries the request's telemetry.
 */
export type TurnCompleted = { 
/**
 * 1-based index of the model call within the request.
 */
index: number, 
/**
 * Why the model call ended.
 */
stopReason: TurnStopReason, 
/**
 * Tool calls the model asked for in this turn.
 */
toolCalls: number, 
/**
 * This model call's token usage.
 */
usage: Usage, 
/**
 * Wall time of the turn: the model call and its tool calls.
 */
elapsedMs: number, 
/**
 * The request's figures; set on the request's last turn only.
 */
telemetry: Telemetry | null, };

/**
 * `turn.started`: one model call of the request begins (seed 000 `turn_start`).
 */
export type TurnStarted = { 
/**
 * 1-based index of the model call within the request.
 */
index: number, };

/**
 * Why one model call (a turn) of a request ended.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type TurnStopReason = KnownTurnStopReason | (string & {});

/** The values of `TurnStopReason` this version knows. */
export type KnownTurnStopReason = "end_turn" | "tool_use" | "max_tokens" | "refusal" | "error" | "interrupted";

/**
 * `update_plan {steps}`: steps matched by id; unknown ids are added.
 */
export type UpdatePlanArgs = { 
/**
 * The steps whose status or title changes.
 */
steps: Array<PlanStepArg>, };

/**
 * Token usage.
 */
export type Usage = { 
/**
 * Prompt tokens.
 */
inputTokens: number, 
/**
 * Completion tokens.
 */
outputTokens: number, 
/**
 * Prompt tokens served from the provider's cache.
 */
cachedInputTokens: number, };

/**
 * `usage.updated`: after each model call.
 */
export type UsageUpdated = { 
/**
 * This call's usage.
 */
last: Usage, 
/**
 * The request's total.
 */
request: Usage, 
/**
 * The session's total.
 */
session: Usage, 
/**
 * Estimated tokens in context.
 */
contextTokens: number, 
/**
 * The model's context window.
 */
contextWindow: number, };

/**
 * What `request.send` does when the session is busy.
 */
export type WhenBusy = "queue" | "steer" | "reject";

/**
 * A git worktree the runtime made for a session (or a sub-agent).
 */
export type WorktreeInfo = { 
/**
 * The worktree's root folder (absolute, on the runtime's machine).
 */
path: string, 
/**
 * Its branch, `keel/<short id>`.
 */
branch: string, 
/**
 * The top folder of the repository it was made from.
 */
repository: string, 
/**
 * The commit it was made at (the `baseRef` given, else the repository's `HEAD`).
 */
baseCommit: string, 
/**
 * The session that owns it (a sub-agent's worktree names its parent session).
 */
sessionId?: string | null, 
/**
 * Where it stands.
 */
state: WorktreeState, 
/**
 * Whether it has uncommitted changes (tracked or untracked files); answered by
 * `worktree.list` only, absent elsewhere.
 */
dirty?: boolean | null, 
/**
 * When it was made, ms since the epoch.
 */
createdAt: number, };

/**
 * `worktree.list`: the answer to `worktree.list`, newest first.
 */
export type WorktreeList = { 
/**
 * The worktrees the runtime keeps, with `dirty` answered.
 */
worktrees: Array<WorktreeInfo>, };

/**
 * `worktree.list`: the worktrees the runtime keeps (of every session, open or
 * stored, and the leftovers of creations that did not finish).
 */
export type WorktreeListCmd = Record<string, never>;

/**
 * `worktree.remove`: removes a worktree by its folder or by the session owning
 * it; one with uncommitted changes is refused unless `force`.
 */
export type WorktreeRemove = { 
/**
 * The worktree's folder (as `worktree.list` names it).
 */
path?: string | null, 
/**
 * Or the session whose worktree it is.
 */
sessionId?: string | null, 
/**
 * Remove it even with uncommitted changes (they are lost).
 */
force?: boolean | null, };

/**
 * `worktree.removed`: a worktree's folder is gone (the answer to
 * `worktree.remove`; also sent before `session.deleted` when the session's
 * worktree goes with it).
 */
export type WorktreeRemoved = { 
/**
 * The worktree as it was.
 */
worktree: WorktreeInfo, 
/**
 * Whether its branch was kept: asked for by the configuration, or because
 * the branch has commits beyond the worktree's base (never deleted).
 */
branchKept: boolean, };

/**
 * Where a worktree the runtime keeps stands.
 *
 * Any other string is a value from a later 1.x that this version does not know: decoders keep it as it is (Rust: `Unknown`), and consumers treat it as unknown.
 */
export type WorktreeState = KnownWorktreeState | (string & {});

/** The values of `WorktreeState` this version knows. */
export type KnownWorktreeState = "ready" | "creating" | "missing";

/**
 * `write_file {path, content}`.
 */
export type WriteFileArgs = { 
/**
 * The file to create or overwrite: relative to the workspace root, or absolute
 * (also in one of the session's `write` extra roots).
 */
path: string, 
/**
 * The whole new content.
 */
content: string, };

/** Every event type and its payload. */
export interface EventPayloads {
  "runtime.ready": RuntimeReady;
  "runtime.stopped": RuntimeStopped;
  "session.started": SessionStarted;
  "session.resumed": SessionResumed;
  "session.interrupted": SessionInterrupted;
  "session.owner_changed": SessionOwnerChanged;
  "session.completed": SessionCompleted;
  "session.closed": SessionClosed;
  "session.list": SessionList;
  "session.state": SessionStateSnapshot;
  "checkpoint.list": CheckpointList;
  "session.rewound": SessionRewound;
  "session.forked": SessionForked;
  "side.answered": SideAnswered;
  "session.mode_changed": SessionModeChanged;
  "session.model_changed": SessionModelChanged;
  "session.rules_updated": SessionRulesUpdated;
  "session.history_loaded": SessionHistoryLoaded;
  "session.title_changed": SessionTitleChanged;
  "session.deleted": SessionDeleted;
  "request.accepted": RequestAccepted;
  "request.rejected": ErrorPayload;
  "request.queued": RequestQueued;
  "request.steered": RequestSteered;
  "request.cancelled": RequestCancelled;
  "assistant.message": AssistantMessage;
  "assistant.delta": AssistantDelta;
  "assistant.thought-summary": AssistantThoughtSummary;
  "assistant.final": AssistantFinal;
  "plan.started": PlanStarted;
  "plan.updated": PlanUpdated;
  "plan.approval_required": PlanApprovalRequired;
  "plan.approved": PlanApproved;
  "plan.rejected": PlanRejected;
  "tool.call.started": ToolCallStarted;
  "tool.call.progress": ToolCallProgress;
  "tool.call.completed": ToolCallCompleted;
  "tool.call.failed": ToolCallFailed;
  "tool.call.skipped": ToolCallSkipped;
  "approval.requested": ApprovalRequested;
  "approval.granted": ApprovalGranted;
  "approval.denied": ApprovalDenied;
  "approval.expired": ApprovalExpired;
  "ask.requested": AskRequested;
  "ask.answered": AskAnswered;
  "ask.expired": AskExpired;
  "context.compaction.started": CompactionStarted;
  "context.compaction.completed": CompactionCompleted;
  "usage.updated": UsageUpdated;
  "turn.started": TurnStarted;
  "turn.completed": TurnCompleted;
  "budget.warning": BudgetStatus;
  "warning": ErrorPayload;
  "error": ErrorPayload;
  "review.requested": ReviewEvent;
  "review.updated": ReviewEvent;
  "review.resolved": ReviewEvent;
  "review.state": ReviewStateEvent;
  "patch.proposed": PatchEvent;
  "patch.applied": PatchEvent;
  "patch.rejected": PatchEvent;
  "patch.summary": PatchSummary;
  "task-graph.created": TaskGraphEvent;
  "task-graph.updated": TaskGraphEvent;
  "task-graph.node.added": TaskGraphNodeEvent;
  "task-graph.node.updated": TaskGraphNodeEvent;
  "task-graph.node.completed": TaskGraphNodeEvent;
  "task-graph.node.failed": TaskGraphNodeEvent;
  "task-graph.advanced": TaskGraphAdvanced;
  "task-graph.completed": TaskGraphEvent;
  "task-graph.state": TaskGraphEvent;
  "sub-agent.started": SubAgentEvent;
  "sub-agent.progress": SubAgentProgress;
  "sub-agent.completed": SubAgentEvent;
  "sub-agent.failed": SubAgentEvent;
  "sub-agent.list": SubAgentList;
  "sub-agent.get": SubAgentGet;
  "harness.status": HarnessStatus;
  "background.list": BackgroundList;
  "background.get": BackgroundEvent;
  "background.history": BackgroundHistory;
  "background.stopped": BackgroundEvent;
  "session.watched": SessionWatched;
  "session.unwatched": SessionUnwatched;
  "background.exited": BackgroundEvent;
  "mcp.list": McpList;
  "skills.list": SkillsList;
  "commands.list": CommandsList;
  "session.host_tools_updated": SessionHostToolsUpdated;
  "worktree.list": WorktreeList;
  "worktree.removed": WorktreeRemoved;
  "host-tool.requested": HostToolRequested;
  "host-tool.responded": HostToolResponded;
}

export type EventTypeName = keyof EventPayloads;

export const EVENT_TYPES: readonly EventTypeName[] = [
  "runtime.ready",
  "runtime.stopped",
  "session.started",
  "session.resumed",
  "session.interrupted",
  "session.owner_changed",
  "session.completed",
  "session.closed",
  "session.list",
  "session.state",
  "checkpoint.list",
  "session.rewound",
  "session.forked",
  "side.answered",
  "session.mode_changed",
  "session.model_changed",
  "session.rules_updated",
  "session.history_loaded",
  "session.title_changed",
  "session.deleted",
  "request.accepted",
  "request.rejected",
  "request.queued",
  "request.steered",
  "request.cancelled",
  "assistant.message",
  "assistant.delta",
  "assistant.thought-summary",
  "assistant.final",
  "plan.started",
  "plan.updated",
  "plan.approval_required",
  "plan.approved",
  "plan.rejected",
  "tool.call.started",
  "tool.call.progress",
  "tool.call.completed",
  "tool.call.failed",
  "tool.call.skipped",
  "approval.requested",
  "approval.granted",
  "approval.denied",
  "approval.expired",
  "ask.requested",
  "ask.answered",
  "ask.expired",
  "context.compaction.started",
  "context.compaction.completed",
  "usage.updated",
  "turn.started",
  "turn.completed",
  "budget.warning",
  "warning",
  "error",
  "review.requested",
  "review.updated",
  "review.resolved",
  "review.state",
  "patch.proposed",
  "patch.applied",
  "patch.rejected",
  "patch.summary",
  "task-graph.created",
  "task-graph.updated",
  "task-graph.node.added",
  "task-graph.node.updated",
  "task-graph.node.completed",
  "task-graph.node.failed",
  "task-graph.advanced",
  "task-graph.completed",
  "task-graph.state",
  "sub-agent.started",
  "sub-agent.progress",
  "sub-agent.completed",
  "sub-agent.failed",
  "sub-agent.list",
  "sub-agent.get",
  "harness.status",
  "background.list",
  "background.get",
  "background.history",
  "background.stopped",
  "session.watched",
  "session.unwatched",
  "background.exited",
  "mcp.list",
  "skills.list",
  "commands.list",
  "session.host_tools_updated",
  "worktree.list",
  "worktree.removed",
  "host-tool.requested",
  "host-tool.responded",
];

/** The envelope fields common to every event. */
export interface EnvelopeBase {
  version: string;
  sessionId: string | null;
  requestId: string;
  eventId: string;
  timestamp: number;
  source: Source;
  sequence: number;
  meta?: Meta;
}

/** A known event: `type` narrows `payload`. */
export type KeelEvent = { [K in EventTypeName]: EnvelopeBase & { type: K; payload: EventPayloads[K] } }[EventTypeName];

/** An event of a type this version does not know; consumers must ignore it. */
export type UnknownEvent = EnvelopeBase & { type: string; payload: Record<string, unknown> };

/** Every command type and its payload. */
export interface CommandPayloads {
  "runtime.shutdown": RuntimeShutdown;
  "session.start": SessionStart;
  "session.resume": SessionResume;
  "session.close": SessionClose;
  "session.list": SessionListCmd;
  "session.state": SessionStateCmd;
  "checkpoint.list": CheckpointListCmd;
  "session.rewind": SessionRewind;
  "session.fork": SessionFork;
  "request.side": RequestSide;
  "session.set_mode": SetMode;
  "session.set_model": SetModel;
  "session.set_rules": SetRules;
  "session.load_history": LoadHistory;
  "session.set_title": SetTitle;
  "session.delete": SessionDelete;
  "request.send": RequestSend;
  "request.interrupt": RequestInterrupt;
  "request.cancel_queued": CancelQueued;
  "approval.respond": ApprovalRespond;
  "plan.approve": PlanApprove;
  "plan.reject": PlanReject;
  "ask.respond": AskRespond;
  "context.compact": ContextCompact;
  "review.enter": ReviewEnter;
  "review.submit": ReviewSubmit;
  "review.resolve": ReviewResolve;
  "review.status": ReviewStatusCmd;
  "patch.propose": PatchPropose;
  "patch.apply": PatchApply;
  "patch.reject": PatchReject;
  "patch.summary": PatchSummaryCmd;
  "task-graph.create": TaskGraphCreate;
  "task-graph.add-node": TaskGraphAddNode;
  "task-graph.update-node": TaskGraphUpdateNode;
  "task-graph.advance": TaskGraphAdvance;
  "task-graph.state": TaskGraphStateCmd;
  "sub-agent.list": SubAgentListCmd;
  "sub-agent.get": SubAgentGetCmd;
  "harness.status": HarnessStatusCmd;
  "background.list": BackgroundListCmd;
  "background.get": BackgroundGetCmd;
  "background.history": BackgroundHistoryCmd;
  "background.stop": BackgroundStopCmd;
  "session.watch": SessionWatch;
  "session.unwatch": SessionUnwatch;
  "session.set_host_tools": SetHostTools;
  "host-tool.respond": HostToolRespond;
  "mcp.list": McpListCmd;
  "skills.list": SkillsListCmd;
  "commands.list": CommandsListCmd;
  "worktree.list": WorktreeListCmd;
  "worktree.remove": WorktreeRemove;
}

export type CommandTypeName = keyof CommandPayloads;

export const COMMAND_TYPES: readonly CommandTypeName[] = [
  "runtime.shutdown",
  "session.start",
  "session.resume",
  "session.close",
  "session.list",
  "session.state",
  "checkpoint.list",
  "session.rewind",
  "session.fork",
  "request.side",
  "session.set_mode",
  "session.set_model",
  "session.set_rules",
  "session.load_history",
  "session.set_title",
  "session.delete",
  "request.send",
  "request.interrupt",
  "request.cancel_queued",
  "approval.respond",
  "plan.approve",
  "plan.reject",
  "ask.respond",
  "context.compact",
  "review.enter",
  "review.submit",
  "review.resolve",
  "review.status",
  "patch.propose",
  "patch.apply",
  "patch.reject",
  "patch.summary",
  "task-graph.create",
  "task-graph.add-node",
  "task-graph.update-node",
  "task-graph.advance",
  "task-graph.state",
  "sub-agent.list",
  "sub-agent.get",
  "harness.status",
  "background.list",
  "background.get",
  "background.history",
  "background.stop",
  "session.watch",
  "session.unwatch",
  "session.set_host_tools",
  "host-tool.respond",
  "mcp.list",
  "skills.list",
  "commands.list",
  "worktree.list",
  "worktree.remove",
];

/** Commands that need `sessionId`. */
export const SESSION_COMMANDS: readonly CommandTypeName[] = [
  "session.close",
  "session.state",
  "checkpoint.list",
  "session.rewind",
  "session.fork",
  "request.side",
  "session.set_mode",
  "session.set_model",
  "session.set_rules",
  "session.load_history",
  "session.set_title",
  "request.send",
  "request.interrupt",
  "request.cancel_queued",
  "approval.respond",
  "plan.approve",
  "plan.reject",
  "ask.respond",
  "context.compact",
  "review.enter",
  "review.submit",
  "review.resolve",
  "review.status",
  "patch.propose",
  "patch.apply",
  "patch.reject",
  "patch.summary",
  "task-graph.create",
  "task-graph.add-node",
  "task-graph.update-node",
  "task-graph.advance",
  "task-graph.state",
  "sub-agent.list",
  "sub-agent.get",
  "background.list",
  "background.get",
  "background.history",
  "background.stop",
  "session.set_host_tools",
  "host-tool.respond",
  "mcp.list",
  "skills.list",
  "commands.list",
];

/** A command line. */
export type KeelCommand = { [K in CommandTypeName]: { version: string; type: K; requestId: string; sessionId?: string | null; payload: CommandPayloads[K] } }[CommandTypeName];

export const ERROR_CODES: readonly ErrorCode[] = [
  "SESSION_NOT_FOUND",
  "REQUEST_INVALID",
  "TOOL_NOT_REGISTERED",
  "TOOL_PERMISSION_DENIED",
  "PLAN_APPROVAL_REQUIRED",
  "PLAN_REJECTED",
  "TOOL_EXECUTION_FAILED",
  "MCP_SERVER_UNAVAILABLE",
  "SESSION_PERSISTENCE_FAILED",
  "CONTEXT_COMPACTION_FAILED",
  "RUNTIME_INTERNAL_ERROR",
  "VERSION_MISMATCH",
  "APPROVAL_NOT_FOUND",
  "PLAN_NOT_FOUND",
  "ASK_NOT_FOUND",
  "SESSION_BUSY",
  "QUEUED_REQUEST_NOT_FOUND",
  "REVIEW_BLOCKING",
  "REVIEW_NOT_FOUND",
  "PATCH_NOT_FOUND",
  "PATCH_CONFLICT",
  "INVALID_DEPENDENCY",
  "DUPLICATE_NODE",
  "CYCLE_DETECTED",
  "GRAPH_NOT_FOUND",
  "SUB_AGENT_NOT_FOUND",
  "BACKGROUND_TASK_NOT_FOUND",
  "MODEL_ERROR",
  "MODEL_UNAVAILABLE",
  "INTERRUPTED",
  "MAX_TURNS_EXCEEDED",
  "PATH_OUTSIDE_WORKSPACE",
  "TOOL_ARGUMENTS_INVALID",
  "TOOL_NAME_CONFLICT",
  "SANDBOX_UNAVAILABLE",
  "CHECKPOINT_NOT_FOUND",
  "BUDGET_EXCEEDED",
  "HOOK_FAILED",
  "SKILL_SKIPPED",
  "PROMPT_BLOCKED",
  "PRICE_UNKNOWN",
  "SESSION_LIMIT_REACHED",
  "TOOL_TIMEOUT",
  "HOST_TOOL_CALL_NOT_FOUND",
  "ROLE_FORBIDDEN",
  "SESSION_OWNED_ELSEWHERE",
  "WORKTREE_UNAVAILABLE",
  "WORKTREE_NOT_FOUND",
  "WORKTREE_DIRTY",
  "WORKSPACE_MISSING",
];
