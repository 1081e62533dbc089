//! One representative value for every event type and every command type.
//!
//! The `match`es below are exhaustive on purpose: adding an event or command type
//! without a sample here stops this test binary from compiling.

use std::collections::BTreeMap;

use keel_envelope::budget::{BudgetLimit, BudgetLimits, BudgetScope, BudgetStatus, SessionBudget};
use keel_envelope::commands::{
    self, ChecklistUpdate, CommandPayload, NewTaskNode, NodeUpdates, ProposedFile, ReviewDecision,
    WhenBusy,
};
use keel_envelope::error::{ErrorCategory, ErrorHint, Severity};
use keel_envelope::events::{self as ev, EventType};
use keel_envelope::ext::{
    BackgroundStatus, BackgroundTask, ChecklistItem, GraphStatus, NodeStatus, Patch, PatchFile,
    PatchOp, PatchStats, PatchStatus, ReviewComment, ReviewState, ReviewStatus, SubAgentInfo,
    SubAgentStatus, TaskGraph, TaskNode,
};
use keel_envelope::tools::DiffStats;
use keel_envelope::types::{
    ApprovalDecision, ApprovalRules, Cursor, HistoryMessage, HistoryToolCall, HistoryToolResult,
    ModelInfo, PermissionLevel, PermissionMode, Plan, PlanStatus, PlanStep, RiskLevel, Role,
    SessionInfo, SessionState, StepStatus, StopReason, Telemetry, TurnStopReason, Usage,
};
use keel_envelope::{
    Command, CommandType, Envelope, ErrorCode, ErrorPayload, Event, Meta, Sequencer, Source,
};
use serde_json::json;

mod rewind_samples;

/// The fixed instant every sample uses (ms since the epoch).
pub const T0: u64 = 1_775_600_000_000;
/// The session of every sample.
pub const SESSION: &str = "sess_0001";

fn s(v: &str) -> String {
    v.to_owned()
}

pub fn session_info() -> SessionInfo {
    SessionInfo::new(
        s(SESSION),
        s("/home/dev/project"),
        T0,
        T0 + 5_000,
        SessionState::Idle,
        PermissionMode::Ask,
        s("scripted:demo"),
        2,
    )
    .title(s("Fix the failing test"))
    .last_message(s("The test passes now: the parser kept a stale index."))
    .additional_roots(extra_roots())
}

/// A session's extra roots: a library it may change, documentation it only reads.
pub fn extra_roots() -> Vec<keel_envelope::worktree::AdditionalRoot> {
    use keel_envelope::worktree::{AdditionalRoot, RootAccess};
    vec![
        AdditionalRoot::new("/home/dev/shared-lib", RootAccess::Write),
        AdditionalRoot::new("/home/dev/docs", RootAccess::Read),
    ]
}

fn steps() -> Vec<PlanStep> {
    vec![
        PlanStep::new(s("s1"), s("Read the relevant files"), StepStatus::Completed),
        PlanStep::new(
            s("s2"),
            s("Change the registration logic"),
            StepStatus::InProgress,
        ),
        PlanStep::new(s("s3"), s("Add tests"), StepStatus::Pending),
    ]
}

fn plan() -> Plan {
    Plan::new(s("plan_0001"), PlanStatus::AwaitingApproval, steps())
        .summary(s("Fix the parser and add a test"))
}

fn rules() -> ApprovalRules {
    ApprovalRules::new(
        vec![s("read_file")],
        vec![s("run_shell(cargo test:*)")],
        vec![s("run_shell(rm -rf *)")],
        vec![s("git(push*)")],
    )
}

fn usage(i: u64, o: u64) -> Usage {
    Usage::new(i, o, i / 2)
}

pub fn error_payload(code: ErrorCode) -> ErrorPayload {
    ErrorPayload::new(code, "the current mode does not allow writes")
        .with_detail("toolName", "edit_file")
        .category(ErrorCategory::Runtime)
        .severity(Severity::Error)
}

fn review() -> ReviewState {
    ReviewState::new(
        s("rev_0001"),
        ReviewStatus::Pending,
        s("Check the migration before it runs"),
        s("host"),
        T0,
        true,
        vec![ReviewComment::new(
            s("c1"),
            s("host"),
            s("Looks right so far"),
            T0 + 1,
        )],
        vec![ChecklistItem::new(s("k1"), s("Tests pass"), false)],
    )
}

fn patch() -> Patch {
    Patch::new(s("patch_0001"), PatchStatus::Pending, s("tool"), T0, vec![PatchFile::new(0, s("src/lib.rs"), PatchOp::Modify, s("--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n-let n = len - 1;\n+let n = len;\n"), DiffStats {
                added: 1,
                removed: 1,
            }).before(s("let n = len - 1;\n")).after(s("let n = len;\n"))], PatchStats::new(1, 1, 1)).reason(s("Fix the off-by-one")).request_id(s("req_0001"))
}

fn node(id: &str, status: NodeStatus, deps: &[&str]) -> TaskNode {
    let mut metadata = serde_json::Map::new();
    metadata.insert(s("owner"), json!("agent"));
    TaskNode::new(
        s(id),
        format!("Task {id}"),
        status,
        deps.iter().map(|d| s(d)).collect::<Vec<_>>(),
        metadata,
        T0,
        T0 + 10,
        serde_json::Value::Null,
        serde_json::Value::Null,
    )
    .started_at(T0 + 5)
}

fn graph() -> TaskGraph {
    let mut nodes = BTreeMap::new();
    nodes.insert(s("a"), node("a", NodeStatus::Completed, &[]));
    nodes.insert(s("b"), node("b", NodeStatus::Ready, &["a"]));
    TaskGraph::new(
        s("graph_0001"),
        GraphStatus::Active,
        vec![s("a"), s("b")],
        nodes,
        T0,
        T0 + 10,
    )
    .title(s("Release"))
}

fn sub_agent() -> SubAgentInfo {
    SubAgentInfo::new(
        s("sub_0001"),
        s(SESSION),
        s("req_0001"),
        s("Find every caller of parse()"),
        vec![s("read_file"), s("search_files")],
        SubAgentStatus::Running,
        usage(1200, 80),
        2,
        T0,
    )
}

fn background() -> BackgroundTask {
    BackgroundTask::new(
        s("bg_0001"),
        s(SESSION),
        s("npm run dev"),
        BackgroundStatus::Running,
        T0,
        s("ready on port 5173\n"),
    )
}

/// A representative `tool.call.completed` with a structured result.
pub fn tool_call_completed() -> ev::ToolCallCompleted {
    ev::ToolCallCompleted::new(
        s("tool_0001"),
        s("read_file"),
        // Keys in sorted order: the wire keeps a map's order when a dependency turns

        // on `serde_json`'s `preserve_order`, and sorts it otherwise.
        json!({
            "content": "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
            "lineCount": 3,
            "path": "src/lib.rs",
            "sizeBytes": 48,
            "startLine": 1,
            "totalLines": 3,
            "truncated": false
        }),
        3,
    )
}

/// A representative value of `t`.
fn telemetry() -> Telemetry {
    Telemetry::new(1830, 2, 1, 2400, 160, 1024, 2560, 200_000)
}

pub fn sample_event(t: EventType) -> Event {
    match t {
        EventType::RuntimeReady => Event::RuntimeReady(
            ev::RuntimeReady::new(
                s("1.0"),
                s("0.1.0"),
                4242,
                vec![ModelInfo::new(
                    s("scripted:demo"),
                    s("Scripted demo"),
                    s("scripted"),
                    true,
                )],
                PermissionMode::ALL.to_vec(),
                vec![s("approvals"), s("plan"), s("resume"), s("queue")],
            )
            .workspace(s("/home/dev/project")),
        ),
        EventType::RuntimeStopped => Event::RuntimeStopped(ev::RuntimeStopped::new(s("shutdown"))),
        EventType::SessionStarted => Event::SessionStarted(
            ev::SessionStarted::new(
                s(SESSION),
                s("/home/dev/.local/share/keel/worktrees/sess_0001"),
                PermissionMode::Ask,
                s("scripted:demo"),
                T0,
            )
            .worktree(rewind_samples::worktree())
            .additional_roots(extra_roots()),
        ),
        EventType::SessionResumed => Event::SessionResumed(
            ev::SessionResumed::new(
                session_info(),
                s("Fix the failing test (4 messages)"),
                4,
                rules(),
                0,
            )
            .plan(plan())
            .last_cursor(Cursor::new(s("req_0001"), 12)),
        ),
        EventType::SessionInterrupted => Event::SessionInterrupted(
            ev::SessionInterrupted::new(s("user"), true).interrupted_request_id(s("req_0001")),
        ),
        EventType::SessionOwnerChanged => {
            Event::SessionOwnerChanged(ev::SessionOwnerChanged::new(s("node-a"), s("node-b"), 4))
        }
        EventType::SessionCompleted => Event::SessionCompleted(
            ev::SessionCompleted::new(StopReason::EndTurn, telemetry())
                .final_text(s("The test passes now.")),
        ),
        EventType::SessionClosed => Event::SessionClosed(ev::SessionClosed::new(s("requested"))),
        EventType::SessionList => Event::SessionList(ev::SessionList::new(vec![session_info()])),
        EventType::SessionState => Event::SessionState(
            ev::SessionStateSnapshot::new(
                session_info(),
                vec![s("req_0003")],
                vec![s("appr_0001")],
                rules(),
                usage(2400, 160),
                6,
                SessionState::WaitingApproval,
            )
            .active_request_id(s("req_0002")),
        ),
        EventType::CheckpointList => rewind_samples::checkpoint_list(),
        EventType::SessionRewound => rewind_samples::session_rewound(),
        EventType::SessionForked => rewind_samples::session_forked(),
        EventType::SideAnswered => rewind_samples::side_answered(),
        EventType::SessionModeChanged => Event::SessionModeChanged(ev::SessionModeChanged::new(
            PermissionMode::AutoEdit,
            PermissionMode::Ask,
        )),
        EventType::SessionModelChanged => Event::SessionModelChanged(ev::SessionModelChanged::new(
            s("anthropic:claude-sonnet"),
            s("scripted:demo"),
        )),
        EventType::SessionRulesUpdated => {
            Event::SessionRulesUpdated(ev::SessionRulesUpdated::new(rules(), s("host")))
        }
        EventType::SessionHistoryLoaded => {
            Event::SessionHistoryLoaded(ev::SessionHistoryLoaded::new(4))
        }
        EventType::SessionTitleChanged => Event::SessionTitleChanged(
            ev::SessionTitleChanged::new(s("Fix the failing parser test"), s("host"))
                .previous_title(s("Fix the failing test")),
        ),
        EventType::SessionDeleted => Event::SessionDeleted(ev::SessionDeleted::new(s(SESSION))),
        EventType::RequestAccepted => Event::RequestAccepted(ev::RequestAccepted::new(
            s("Why does the test fail?"),
            false,
        )),
        EventType::RequestRejected => Event::RequestRejected(
            ErrorPayload::new(ErrorCode::SessionBusy, "the session is busy")
                .category(ErrorCategory::Business),
        ),
        EventType::RequestQueued => Event::RequestQueued(ev::RequestQueued::new(1)),
        EventType::RequestSteered => Event::RequestSteered(ev::RequestSteered::new(s("req_0001"))),
        EventType::RequestCancelled => {
            Event::RequestCancelled(ev::RequestCancelled::new(s("req_0003")))
        }
        EventType::AssistantMessage => {
            Event::AssistantMessage(ev::AssistantMessage::new(s("I will read the test first.")))
        }
        EventType::AssistantDelta => {
            Event::AssistantDelta(ev::AssistantDelta::new(s("I will read ")))
        }
        EventType::AssistantThoughtSummary => Event::AssistantThoughtSummary(
            ev::AssistantThoughtSummary::new(s("Looking for the failing assertion.")),
        ),
        EventType::AssistantFinal => {
            Event::AssistantFinal(ev::AssistantFinal::new(s("The test passes now.")))
        }
        EventType::PlanStarted => Event::PlanStarted(ev::PlanStarted::new(s("plan_0001"))),
        EventType::PlanUpdated => Event::PlanUpdated(ev::PlanUpdated::new(s("plan_0001"), steps())),
        EventType::PlanApprovalRequired => Event::PlanApprovalRequired(
            ev::PlanApprovalRequired::new(s("plan_0001"), steps())
                .summary(s("Fix the parser and add a test")),
        ),
        EventType::PlanApproved => Event::PlanApproved(ev::PlanApproved::new(
            s("plan_0001"),
            PermissionMode::AutoEdit,
        )),
        EventType::PlanRejected => Event::PlanRejected(
            ev::PlanRejected::new(s("plan_0001")).feedback(s("Do not touch the public API")),
        ),
        EventType::ToolCallStarted => Event::ToolCallStarted(ev::ToolCallStarted::new(
            s("tool_0001"),
            s("read_file"),
            json!({ "path": "src/lib.rs" }),
            PermissionLevel::Read,
        )),
        EventType::ToolCallProgress => Event::ToolCallProgress(ev::ToolCallProgress::new(
            s("tool_0002"),
            s("stdout"),
            s("running 3 tests\n"),
        )),
        EventType::ToolCallCompleted => Event::ToolCallCompleted(tool_call_completed()),
        EventType::ToolCallFailed => Event::ToolCallFailed(ev::ToolCallFailed::new(
            s("tool_0002"),
            s("run_shell"),
            ErrorPayload::new(ErrorCode::ToolExecutionFailed, "exit code 101")
                .with_detail("exitCode", 101),
            2100,
        )),
        EventType::ToolCallSkipped => Event::ToolCallSkipped(ev::ToolCallSkipped::new(
            s("tool_0003"),
            s("edit_file"),
            error_payload(ErrorCode::ToolPermissionDenied),
        )),
        EventType::ApprovalRequested => Event::ApprovalRequested(
            ev::ApprovalRequested::new(
                s("appr_0001"),
                s("tool_0002"),
                s("run_shell"),
                json!({ "command": "npm run test:jest" }),
                s("npm run test:jest"),
                s("about to run a shell command that may change workspace files"),
                s("shell.execute"),
                RiskLevel::High,
                PermissionLevel::Execute,
                vec![s("process:spawn"), s("filesystem:workspace")],
                ApprovalDecision::ALL.to_vec(),
            )
            .command(s("npm run test:jest"))
            .expires_at(T0 + 60_000),
        ),
        EventType::ApprovalGranted => Event::ApprovalGranted(ev::ApprovalGranted::new(
            s("appr_0001"),
            s("tool_0002"),
            ApprovalDecision::AllowOnce,
        )),
        EventType::ApprovalDenied => Event::ApprovalDenied(ev::ApprovalDenied::new(
            s("appr_0001"),
            s("tool_0002"),
            s("user"),
        )),
        EventType::ApprovalExpired => Event::ApprovalExpired(ev::ApprovalExpired::new(
            s("appr_0001"),
            s("tool_0002"),
            s("timeout"),
        )),
        EventType::AskRequested => Event::AskRequested(ev::AskRequested::new(
            s("ask_0001"),
            s("tool_0004"),
            s("Which database should the tests use?"),
            vec![s("sqlite"), s("postgres")],
        )),
        EventType::AskAnswered => {
            Event::AskAnswered(ev::AskAnswered::new(s("ask_0001"), s("sqlite")))
        }
        EventType::AskExpired => {
            Event::AskExpired(ev::AskExpired::new(s("ask_0001"), s("interrupted")))
        }
        EventType::CompactionStarted => {
            Event::CompactionStarted(ev::CompactionStarted::new(s("auto"), 180_000))
        }
        EventType::CompactionCompleted => {
            Event::CompactionCompleted(ev::CompactionCompleted::new(180_000, 24_000, 40, false))
        }
        EventType::UsageUpdated => Event::UsageUpdated(ev::UsageUpdated::new(
            usage(1200, 80),
            usage(2400, 160),
            usage(9600, 640),
            2560,
            200_000,
        )),
        EventType::TurnStarted => Event::TurnStarted(ev::TurnStarted::new(2)),
        EventType::TurnCompleted => Event::TurnCompleted(
            ev::TurnCompleted::new(2, TurnStopReason::EndTurn, 0, usage(1200, 80), 640)
                .telemetry(telemetry()),
        ),
        EventType::BudgetWarning => Event::BudgetWarning(BudgetStatus::new(
            BudgetScope::Request,
            BudgetLimit::Tokens,
            161_000.0,
            200_000.0,
        )),
        EventType::Warning => Event::Warning(
            ErrorPayload::new(
                ErrorCode::ContextCompactionFailed,
                "summary failed; truncated instead",
            )
            .severity(Severity::Warning)
            .retryable(true),
        ),
        EventType::Error => Event::Error(
            ErrorPayload::new(ErrorCode::ModelError, "the provider answered 429")
                .category(ErrorCategory::Runtime)
                .hint(ErrorHint::QuotaExceeded)
                .retryable(true),
        ),
        EventType::ReviewRequested => Event::ReviewRequested(ev::ReviewEvent::new(review())),
        EventType::ReviewUpdated => Event::ReviewUpdated(ev::ReviewEvent::new(review())),
        EventType::ReviewResolved => {
            let mut r = review();
            r.status = ReviewStatus::Approved;
            r.decision = Some(ReviewStatus::Approved);
            r.resolved_by = Some(s("host"));
            r.resolved_at = Some(T0 + 100);
            Event::ReviewResolved(ev::ReviewEvent::new(r))
        }
        EventType::ReviewState => {
            Event::ReviewState(ev::ReviewStateEvent::new(true).review(review()))
        }
        EventType::PatchProposed => Event::PatchProposed(ev::PatchEvent::new(patch())),
        EventType::PatchApplied => {
            let mut p = patch();
            p.status = PatchStatus::Applied;
            p.resolved_at = Some(T0 + 50);
            p.resolved_by = Some(s("host"));
            Event::PatchApplied(ev::PatchEvent::new(p))
        }
        EventType::PatchRejected => {
            let mut p = patch();
            p.status = PatchStatus::Rejected;
            Event::PatchRejected(ev::PatchEvent::new(p))
        }
        EventType::PatchSummary => Event::PatchSummary(ev::PatchSummary::new(
            vec![patch()],
            vec![],
            PatchStats::new(1, 1, 1),
        )),
        EventType::TaskGraphCreated => {
            Event::TaskGraphCreated(ev::TaskGraphEvent::new().graph(graph()))
        }
        EventType::TaskGraphUpdated => {
            Event::TaskGraphUpdated(ev::TaskGraphEvent::new().graph(graph()))
        }
        EventType::TaskGraphNodeAdded => Event::TaskGraphNodeAdded(ev::TaskGraphNodeEvent::new(
            s("graph_0001"),
            node("c", NodeStatus::Pending, &["b"]),
        )),
        EventType::TaskGraphNodeUpdated => Event::TaskGraphNodeUpdated(
            ev::TaskGraphNodeEvent::new(s("graph_0001"), node("b", NodeStatus::Running, &["a"])),
        ),
        EventType::TaskGraphNodeCompleted => {
            let mut n = node("b", NodeStatus::Completed, &["a"]);
            n.completed_at = Some(T0 + 20);
            n.result = json!({ "ok": true });
            Event::TaskGraphNodeCompleted(ev::TaskGraphNodeEvent::new(s("graph_0001"), n))
        }
        EventType::TaskGraphNodeFailed => {
            let mut n = node("b", NodeStatus::Failed, &["a"]);
            n.error = json!({ "message": "build failed" });
            Event::TaskGraphNodeFailed(ev::TaskGraphNodeEvent::new(s("graph_0001"), n))
        }
        EventType::TaskGraphAdvanced => Event::TaskGraphAdvanced(ev::TaskGraphAdvanced::new(
            s("graph_0001"),
            vec![s("b")],
            graph(),
        )),
        EventType::TaskGraphCompleted => {
            let mut g = graph();
            g.status = GraphStatus::Completed;
            g.completed_at = Some(T0 + 99);
            Event::TaskGraphCompleted(ev::TaskGraphEvent::new().graph(g))
        }
        EventType::TaskGraphState => Event::TaskGraphState(ev::TaskGraphEvent::new()),
        EventType::SubAgentStarted => Event::SubAgentStarted(ev::SubAgentEvent::new(
            s(SESSION),
            s("sub_0001"),
            sub_agent(),
        )),
        EventType::SubAgentProgress => Event::SubAgentProgress(ev::SubAgentProgress::new(
            s(SESSION),
            s("sub_0001"),
            s("searching src/"),
        )),
        EventType::SubAgentCompleted => {
            let mut a = sub_agent();
            a.status = SubAgentStatus::Completed;
            a.summary = Some(s("3 callers, all in src/parse.rs"));
            a.finished_at = Some(T0 + 900);
            Event::SubAgentCompleted(ev::SubAgentEvent::new(s(SESSION), s("sub_0001"), a))
        }
        EventType::SubAgentFailed => {
            let mut a = sub_agent();
            a.status = SubAgentStatus::Failed;
            a.error = Some(ErrorPayload::new(ErrorCode::Interrupted, "cancelled"));
            a.finished_at = Some(T0 + 900);
            Event::SubAgentFailed(ev::SubAgentEvent::new(s(SESSION), s("sub_0001"), a))
        }
        EventType::SubAgentList => {
            Event::SubAgentList(ev::SubAgentList::new(vec![sub_agent()], vec![]))
        }
        EventType::SubAgentGet => Event::SubAgentGet(ev::SubAgentGet::new(sub_agent())),
        EventType::HarnessStatus => Event::HarnessStatus(ev::HarnessStatus::new(
            vec![session_info()],
            vec![background()],
            vec![sub_agent()],
        )),
        EventType::BackgroundList => {
            Event::BackgroundList(ev::BackgroundList::new(vec![background()]))
        }
        EventType::BackgroundGet => Event::BackgroundGet(ev::BackgroundEvent::new(background())),
        EventType::BackgroundHistory => Event::BackgroundHistory(ev::BackgroundHistory::new(
            s("bg_0001"),
            vec![s("> vite"), s("ready on port 5173")],
        )),
        EventType::BackgroundStopped => {
            let mut b = background();
            b.status = BackgroundStatus::Stopped;
            b.ended_at = Some(T0 + 3_000);
            Event::BackgroundStopped(ev::BackgroundEvent::new(b))
        }
        EventType::SessionWatched => Event::SessionWatched(
            ev::SessionWatched::new(session_info(), 2)
                .active_request_id(s("req_0001"))
                .last_cursor(Cursor::new(s("req_0001"), 14)),
        ),
        EventType::SessionUnwatched => {
            Event::SessionUnwatched(ev::SessionUnwatched::new(s(SESSION)))
        }
        EventType::McpList
        | EventType::SkillsList
        | EventType::CommandsList
        | EventType::SessionHostToolsUpdated
        | EventType::HostToolRequested
        | EventType::HostToolResponded => host_samples::sample_host_event(t),
        EventType::WorktreeList | EventType::WorktreeRemoved => rewind_samples::worktree_event(t),
        EventType::BackgroundExited => {
            let mut b = background();
            b.status = BackgroundStatus::Exited;
            b.exit_code = Some(0);
            b.ended_at = Some(T0 + 4_000);
            Event::BackgroundExited(ev::BackgroundEvent::new(b))
        }
        other => panic!("no sample event for {other:?}"),
    }
}

/// The request stream of the sample agent loop.
pub const LOOP_REQUEST: &str = "req_0001";

/// Sample envelopes of every event type, in `EventType::ALL` order, following the
/// requestId rule of docs/protocol.md, with contiguous sequences per request.
pub fn sample_envelopes() -> Vec<Envelope> {
    let mut seq = Sequencer::new();
    EventType::ALL
        .iter()
        .enumerate()
        .map(|(i, &t)| {
            let mut meta = Meta::default();
            let (session, request, source) = if t == EventType::RuntimeReady {
                (None, s("req_0000"), Source::Bridge)
            } else if let Some(c) = answered_command(t) {
                let cmd = sample_command(c);
                let session = match t {
                    EventType::SessionStarted
                    | EventType::SessionResumed
                    | EventType::SessionWatched
                    | EventType::SessionUnwatched => Some(s(SESSION)),
                    EventType::SessionForked => Some(s("sess_0002")),
                    _ => cmd.session_id.clone(),
                };
                (session, cmd.request_id, Source::Runtime)
            } else {
                if let Some(c) = replied_command(t) {
                    meta.reply_to = Some(sample_command(c).request_id);
                }
                let source = match t {
                    EventType::ToolCallProgress => Source::Tool,
                    _ => Source::Runtime,
                };
                (Some(s(SESSION)), s(LOOP_REQUEST), source)
            };
            match t {
                EventType::ToolCallCompleted => {
                    meta.duration_ms = Some(3);
                    meta.permission_level = Some(PermissionLevel::Read);
                }
                EventType::UsageUpdated => meta.model = Some(s("scripted:demo")),
                _ => {}
            }
            let sequence = seq.next(&request);
            Envelope::new(
                session,
                request,
                format!("evt_{:04}", i + 1),
                T0 + i as u64,
                source,
                sequence,
                sample_event(t),
            )
            .with_meta(meta)
        })
        .collect()
}

mod answers;
mod command_samples;
mod host_samples;

pub use self::answers::{answered_command, replied_command};
pub use self::command_samples::sample_command;
