//! Sample command payloads, one of every command type.

use keel_envelope::host::{McpServerSpec, McpTrust, NameValue};

use super::*;

/// A representative payload of `t`.
pub fn sample_command_payload(t: CommandType) -> CommandPayload {
    use commands as c;
    match t {
        CommandType::RuntimeShutdown => CommandPayload::RuntimeShutdown(c::RuntimeShutdown {}),
        CommandType::SessionStart => CommandPayload::SessionStart(c::SessionStart {
            workspace_path: Some(s("/home/dev/project")),
            permission_mode: Some(PermissionMode::Ask),
            model: Some(s("scripted:demo")),
            title: Some(s("Fix the failing test")),
            record: None,
            budget: Some(SessionBudget {
                request: Some(BudgetLimits {
                    model_calls: Some(200),
                    wall_time_secs: Some(1800),
                    ..BudgetLimits::default()
                }),
                session: Some(BudgetLimits {
                    cost_usd: Some(5.0),
                    ..BudgetLimits::default()
                }),
            }),
            max_output_tokens: Some(8192),
            mcp_servers: Some(vec![
                McpServerSpec {
                    name: s("files"),
                    transport: None,
                    command: Some(s("npx")),
                    args: Some(vec![
                        s("-y"),
                        s("@modelcontextprotocol/server-filesystem"),
                        s("."),
                    ]),
                    env: Some(vec![NameValue {
                        name: s("LOG_LEVEL"),
                        value: s("warn"),
                    }]),
                    url: None,
                    headers: None,
                    trust: Some(McpTrust::Read),
                },
                McpServerSpec {
                    name: s("tickets"),
                    transport: Some(s("http")),
                    command: None,
                    args: None,
                    env: None,
                    url: Some(s("https://tickets.example.com/mcp")),
                    headers: Some(vec![NameValue {
                        name: s("Authorization"),
                        value: s("Bearer t0ken"),
                    }]),
                    trust: None,
                },
            ]),
            host_tools: Some(vec![host_samples::open_ticket()]),
            isolation: Some(keel_envelope::worktree::Isolation::Worktree),
            base_ref: Some(s("main")),
            additional_roots: Some(super::extra_roots()),
        }),
        CommandType::SessionResume => CommandPayload::SessionResume(c::SessionResume {
            session_id: s(SESSION),
            after_sequence: Some(Cursor {
                request_id: s("req_0001"),
                sequence: 12,
            }),
            mcp_servers: None,
            additional_roots: None,
            materialize_to: None,
        }),
        CommandType::SessionClose => CommandPayload::SessionClose(c::SessionClose {}),
        CommandType::SessionList => CommandPayload::SessionList(c::SessionListCmd {}),
        CommandType::SessionState => CommandPayload::SessionState(c::SessionStateCmd {}),
        CommandType::CheckpointList => CommandPayload::CheckpointList(c::CheckpointListCmd {}),
        CommandType::SessionRewind => CommandPayload::SessionRewind(c::SessionRewind {
            to_request_id: Some(s("req_0002")),
            to_tool_call_id: None,
            files: Some(true),
            conversation: Some(true),
        }),
        CommandType::SessionFork => CommandPayload::SessionFork(c::SessionFork {
            at_request_id: Some(s("req_0002")),
            files: Some(false),
            isolation: None,
            additional_roots: None,
        }),
        CommandType::RequestSide => CommandPayload::RequestSide(c::RequestSide {
            message: s("Which file holds the parser?"),
        }),
        CommandType::SessionSetMode => CommandPayload::SessionSetMode(c::SetMode {
            mode: PermissionMode::Plan,
        }),
        CommandType::SessionSetModel => CommandPayload::SessionSetModel(c::SetModel {
            model: s("anthropic:claude-sonnet"),
        }),
        CommandType::SessionSetRules => CommandPayload::SessionSetRules(c::SetRules {
            always_allow_global: vec![s("read_file")],
            always_allow_project: vec![s("run_shell(cargo test:*)")],
            always_deny_global: vec![s("run_shell(rm -rf *)")],
            always_deny_project: vec![s("git(push*)")],
            deny: Some(vec![s("run_shell(curl *)")]),
        }),
        CommandType::SessionSetTitle => CommandPayload::SessionSetTitle(c::SetTitle {
            title: s("Fix the failing parser test"),
        }),
        CommandType::SessionDelete => CommandPayload::SessionDelete(c::SessionDelete {
            session_id: s(SESSION),
        }),
        CommandType::SessionLoadHistory => CommandPayload::SessionLoadHistory(c::LoadHistory {
            messages: vec![
                HistoryMessage {
                    role: Role::User,
                    content: s("Read src/lib.rs"),
                    tool_calls: None,
                    tool_results: None,
                },
                HistoryMessage {
                    role: Role::Assistant,
                    content: s(""),
                    tool_calls: Some(vec![HistoryToolCall {
                        id: s("call_1"),
                        name: s("read_file"),
                        arguments: json!({ "path": "src/lib.rs" }),
                    }]),
                    tool_results: None,
                },
                HistoryMessage {
                    role: Role::Tool,
                    content: s(""),
                    tool_calls: None,
                    tool_results: Some(vec![HistoryToolResult {
                        tool_call_id: s("call_1"),
                        content: s("pub fn add() {}"),
                        is_error: false,
                    }]),
                },
            ],
        }),
        CommandType::RequestSend => CommandPayload::RequestSend(c::RequestSend {
            message: s("Why does the test fail?"),
            images: None,
            when_busy: Some(WhenBusy::Queue),
            patch_preview: Some(false),
            budget: Some(BudgetLimits {
                tokens: Some(200_000),
                tool_calls: Some(BTreeMap::from([(s("run_shell"), 50)])),
                ..BudgetLimits::default()
            }),
            max_output_tokens: Some(4096),
            traceparent: Some(s("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")),
            tracestate: None,
        }),
        CommandType::RequestInterrupt => CommandPayload::RequestInterrupt(c::RequestInterrupt {}),
        CommandType::RequestCancelQueued => CommandPayload::RequestCancelQueued(c::CancelQueued {
            queued_request_id: s("req_0003"),
        }),
        CommandType::ApprovalRespond => CommandPayload::ApprovalRespond(c::ApprovalRespond {
            approval_id: s("appr_0001"),
            decision: ApprovalDecision::AllowSession,
        }),
        CommandType::PlanApprove => CommandPayload::PlanApprove(c::PlanApprove {
            plan_id: s("plan_0001"),
            mode: Some(PermissionMode::AutoEdit),
        }),
        CommandType::PlanReject => CommandPayload::PlanReject(c::PlanReject {
            plan_id: s("plan_0001"),
            feedback: Some(s("Do not touch the public API")),
        }),
        CommandType::AskRespond => CommandPayload::AskRespond(c::AskRespond {
            ask_id: s("ask_0001"),
            answer: s("sqlite"),
        }),
        CommandType::ContextCompact => CommandPayload::ContextCompact(c::ContextCompact {}),
        CommandType::ReviewEnter => CommandPayload::ReviewEnter(c::ReviewEnter {
            reason: s("Check the migration before it runs"),
            blocking: true,
            checklist: Some(vec![s("Tests pass")]),
        }),
        CommandType::ReviewSubmit => CommandPayload::ReviewSubmit(c::ReviewSubmit {
            comment: Some(s("Looks right so far")),
            checklist_item: Some(ChecklistUpdate {
                id: s("k1"),
                done: true,
                note: None,
            }),
        }),
        CommandType::ReviewResolve => CommandPayload::ReviewResolve(c::ReviewResolve {
            decision: ReviewDecision::Approved,
            summary: Some(s("Ship it")),
        }),
        CommandType::ReviewStatus => CommandPayload::ReviewStatus(c::ReviewStatusCmd {}),
        CommandType::PatchPropose => CommandPayload::PatchPropose(c::PatchPropose {
            files: vec![
                ProposedFile {
                    path: s("src/lib.rs"),
                    content: Some(s("pub fn add(a: i32, b: i32) -> i32 { a + b }\n")),
                },
                ProposedFile {
                    path: s("src/old.rs"),
                    content: None,
                },
            ],
            reason: Some(s("Simplify")),
        }),
        CommandType::PatchApply => CommandPayload::PatchApply(c::PatchApply {
            patch_id: s("patch_0001"),
        }),
        CommandType::PatchReject => CommandPayload::PatchReject(c::PatchReject {
            patch_id: s("patch_0001"),
            reason: Some(s("Wrong file")),
        }),
        CommandType::PatchSummary => CommandPayload::PatchSummary(c::PatchSummaryCmd {}),
        CommandType::TaskGraphCreate => CommandPayload::TaskGraphCreate(c::TaskGraphCreate {
            title: Some(s("Release")),
            description: None,
            nodes: vec![
                NewTaskNode {
                    id: s("a"),
                    title: s("Build"),
                    description: None,
                    depends_on: vec![],
                    metadata: None,
                },
                NewTaskNode {
                    id: s("b"),
                    title: s("Test"),
                    description: Some(s("Run the whole suite")),
                    depends_on: vec![s("a")],
                    metadata: None,
                },
            ],
        }),
        CommandType::TaskGraphAddNode => CommandPayload::TaskGraphAddNode(c::TaskGraphAddNode {
            node: NewTaskNode {
                id: s("c"),
                title: s("Publish"),
                description: None,
                depends_on: vec![s("b")],
                metadata: Some(serde_json::Map::from_iter([(s("owner"), json!("host"))])),
            },
        }),
        CommandType::TaskGraphUpdateNode => {
            CommandPayload::TaskGraphUpdateNode(c::TaskGraphUpdateNode {
                node_id: s("b"),
                updates: NodeUpdates {
                    status: Some(NodeStatus::Completed),
                    title: None,
                    result: Some(json!({ "passed": 42 })),
                    error: None,
                    metadata: None,
                },
            })
        }
        CommandType::TaskGraphAdvance => CommandPayload::TaskGraphAdvance(c::TaskGraphAdvance {}),
        CommandType::TaskGraphState => CommandPayload::TaskGraphState(c::TaskGraphStateCmd {}),
        CommandType::SubAgentList => CommandPayload::SubAgentList(c::SubAgentListCmd {}),
        CommandType::SubAgentGet => CommandPayload::SubAgentGet(c::SubAgentGetCmd {
            sub_agent_id: s("sub_0001"),
        }),
        CommandType::HarnessStatus => CommandPayload::HarnessStatus(c::HarnessStatusCmd {}),
        CommandType::BackgroundList => CommandPayload::BackgroundList(c::BackgroundListCmd {}),
        CommandType::BackgroundGet => CommandPayload::BackgroundGet(c::BackgroundGetCmd {
            task_id: s("bg_0001"),
        }),
        CommandType::BackgroundHistory => {
            CommandPayload::BackgroundHistory(c::BackgroundHistoryCmd {
                task_id: s("bg_0001"),
            })
        }
        CommandType::BackgroundStop => CommandPayload::BackgroundStop(c::BackgroundStopCmd {
            task_id: s("bg_0001"),
        }),
        CommandType::SessionWatch => CommandPayload::SessionWatch(c::SessionWatch {
            session_id: s(SESSION),
            after_sequence: Some(Cursor {
                request_id: s("req_0001"),
                sequence: 12,
            }),
        }),
        CommandType::SessionUnwatch => CommandPayload::SessionUnwatch(c::SessionUnwatch {
            session_id: s(SESSION),
        }),
        CommandType::SessionSetHostTools => CommandPayload::SessionSetHostTools(c::SetHostTools {
            tools: vec![host_samples::open_ticket()],
        }),
        CommandType::HostToolRespond => CommandPayload::HostToolRespond(c::HostToolRespond {
            tool_call_id: s("tool_0004"),
            result: Some(json!({ "title": "Login fails on Safari", "status": "open" })),
            error: None,
        }),
        CommandType::McpList => CommandPayload::McpList(c::McpListCmd {}),
        CommandType::SkillsList => CommandPayload::SkillsList(c::SkillsListCmd {}),
        CommandType::CommandsList => CommandPayload::CommandsList(c::CommandsListCmd {}),
        CommandType::WorktreeList => CommandPayload::WorktreeList(c::WorktreeListCmd {}),
        CommandType::WorktreeRemove => CommandPayload::WorktreeRemove(c::WorktreeRemove {
            path: None,
            session_id: Some(s("sess_0002")),
            force: Some(false),
        }),
        other => panic!("no sample command for {other:?}"),
    }
}

/// A sample command of `t`, with a session when `t` needs one.
pub fn sample_command(t: CommandType) -> Command {
    let session = t.needs_session().then(|| s(SESSION));
    let index = CommandType::ALL.iter().position(|c| *c == t).unwrap_or(0);
    Command::new(
        format!("req_c{:03}", index + 1),
        session,
        sample_command_payload(t),
    )
}
