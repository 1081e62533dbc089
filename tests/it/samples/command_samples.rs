//! Sample command payloads, one of every command type.

use keel_envelope::host::{McpServerSpec, McpTrust, NameValue};

use super::*;

/// A representative payload of `t`.
pub fn sample_command_payload(t: CommandType) -> CommandPayload {
    use commands as c;
    match t {
        CommandType::RuntimeShutdown => CommandPayload::RuntimeShutdown(c::RuntimeShutdown::new()),
        CommandType::SessionStart => CommandPayload::SessionStart(
            c::SessionStart::new()
                .workspace_path(s("/home/dev/project"))
                .permission_mode(PermissionMode::Ask)
                .model(s("scripted:demo"))
                .title(s("Fix the failing test"))
                .budget(
                    SessionBudget::new()
                        .request(BudgetLimits::new().model_calls(200).wall_time_secs(1800))
                        .session(BudgetLimits::new().cost_usd(5.0)),
                )
                .max_output_tokens(8192)
                .mcp_servers(vec![
                    McpServerSpec::new(s("files"))
                        .command(s("npx"))
                        .args(vec![
                            s("-y"),
                            s("@modelcontextprotocol/server-filesystem"),
                            s("."),
                        ])
                        .env(vec![NameValue::new(s("LOG_LEVEL"), s("warn"))])
                        .trust(McpTrust::Read),
                    McpServerSpec::new(s("tickets"))
                        .transport(s("http"))
                        .url(s("https://tickets.example.com/mcp"))
                        .headers(vec![NameValue::new(s("Authorization"), s("Bearer t0ken"))]),
                ])
                .host_tools(vec![host_samples::open_ticket()])
                .isolation(keel_envelope::worktree::Isolation::Worktree)
                .base_ref(s("main"))
                .additional_roots(super::extra_roots()),
        ),
        CommandType::SessionResume => CommandPayload::SessionResume(
            c::SessionResume::new(s(SESSION)).after_sequence(Cursor::new(s("req_0001"), 12)),
        ),
        CommandType::SessionClose => CommandPayload::SessionClose(c::SessionClose::new()),
        CommandType::SessionList => CommandPayload::SessionList(c::SessionListCmd::new()),
        CommandType::SessionState => CommandPayload::SessionState(c::SessionStateCmd::new()),
        CommandType::CheckpointList => CommandPayload::CheckpointList(c::CheckpointListCmd::new()),
        CommandType::SessionRewind => CommandPayload::SessionRewind(
            c::SessionRewind::new()
                .to_request_id(s("req_0002"))
                .files(true)
                .conversation(true),
        ),
        CommandType::SessionFork => CommandPayload::SessionFork(
            c::SessionFork::new()
                .at_request_id(s("req_0002"))
                .files(false),
        ),
        CommandType::RequestSide => {
            CommandPayload::RequestSide(c::RequestSide::new(s("Which file holds the parser?")))
        }
        CommandType::SessionSetMode => {
            CommandPayload::SessionSetMode(c::SetMode::new(PermissionMode::Plan))
        }
        CommandType::SessionSetModel => {
            CommandPayload::SessionSetModel(c::SetModel::new(s("anthropic:claude-sonnet")))
        }
        CommandType::SessionSetRules => CommandPayload::SessionSetRules(
            c::SetRules::new()
                .always_allow_global(vec![s("read_file")])
                .always_allow_project(vec![s("run_shell(cargo test:*)")])
                .always_deny_global(vec![s("run_shell(rm -rf *)")])
                .always_deny_project(vec![s("git(push*)")])
                .deny(vec![s("run_shell(curl *)")]),
        ),
        CommandType::SessionSetTitle => {
            CommandPayload::SessionSetTitle(c::SetTitle::new(s("Fix the failing parser test")))
        }
        CommandType::SessionDelete => {
            CommandPayload::SessionDelete(c::SessionDelete::new(s(SESSION)))
        }
        CommandType::SessionLoadHistory => {
            CommandPayload::SessionLoadHistory(c::LoadHistory::new(vec![
                HistoryMessage::new(Role::User, s("Read src/lib.rs")),
                HistoryMessage::new(Role::Assistant, s("")).tool_calls(vec![HistoryToolCall::new(
                    s("call_1"),
                    s("read_file"),
                    json!({ "path": "src/lib.rs" }),
                )]),
                HistoryMessage::new(Role::Tool, s("")).tool_results(vec![HistoryToolResult::new(
                    s("call_1"),
                    s("pub fn add() {}"),
                    false,
                )]),
            ]))
        }
        CommandType::RequestSend => CommandPayload::RequestSend(
            c::RequestSend::new(s("Why does the test fail?"))
                .when_busy(WhenBusy::Queue)
                .patch_preview(false)
                .budget(
                    BudgetLimits::new()
                        .tokens(200_000)
                        .tool_calls(BTreeMap::from([(s("run_shell"), 50)])),
                )
                .max_output_tokens(4096)
                .traceparent(s("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")),
        ),
        CommandType::RequestInterrupt => {
            CommandPayload::RequestInterrupt(c::RequestInterrupt::new())
        }
        CommandType::RequestCancelQueued => {
            CommandPayload::RequestCancelQueued(c::CancelQueued::new(s("req_0003")))
        }
        CommandType::ApprovalRespond => CommandPayload::ApprovalRespond(c::ApprovalRespond::new(
            s("appr_0001"),
            ApprovalDecision::AllowSession,
        )),
        CommandType::PlanApprove => CommandPayload::PlanApprove(
            c::PlanApprove::new(s("plan_0001")).mode(PermissionMode::AutoEdit),
        ),
        CommandType::PlanReject => CommandPayload::PlanReject(
            c::PlanReject::new(s("plan_0001")).feedback(s("Do not touch the public API")),
        ),
        CommandType::AskRespond => {
            CommandPayload::AskRespond(c::AskRespond::new(s("ask_0001"), s("sqlite")))
        }
        CommandType::ContextCompact => CommandPayload::ContextCompact(c::ContextCompact::new()),
        CommandType::ReviewEnter => CommandPayload::ReviewEnter(
            c::ReviewEnter::new(s("Check the migration before it runs"))
                .blocking(true)
                .checklist(vec![s("Tests pass")]),
        ),
        CommandType::ReviewSubmit => CommandPayload::ReviewSubmit(
            c::ReviewSubmit::new()
                .comment(s("Looks right so far"))
                .checklist_item(ChecklistUpdate::new(s("k1")).done(true)),
        ),
        CommandType::ReviewResolve => CommandPayload::ReviewResolve(
            c::ReviewResolve::new(ReviewDecision::Approved).summary(s("Ship it")),
        ),
        CommandType::ReviewStatus => CommandPayload::ReviewStatus(c::ReviewStatusCmd::new()),
        CommandType::PatchPropose => CommandPayload::PatchPropose(
            c::PatchPropose::new(vec![
                ProposedFile::new(s("src/lib.rs"))
                    .content(s("pub fn add(a: i32, b: i32) -> i32 { a + b }\n")),
                ProposedFile::new(s("src/old.rs")),
            ])
            .reason(s("Simplify")),
        ),
        CommandType::PatchApply => CommandPayload::PatchApply(c::PatchApply::new(s("patch_0001"))),
        CommandType::PatchReject => CommandPayload::PatchReject(
            c::PatchReject::new(s("patch_0001")).reason(s("Wrong file")),
        ),
        CommandType::PatchSummary => CommandPayload::PatchSummary(c::PatchSummaryCmd::new()),
        CommandType::TaskGraphCreate => CommandPayload::TaskGraphCreate(
            c::TaskGraphCreate::new(vec![
                NewTaskNode::new(s("a"), s("Build")).depends_on(vec![]),
                NewTaskNode::new(s("b"), s("Test"))
                    .description(s("Run the whole suite"))
                    .depends_on(vec![s("a")]),
            ])
            .title(s("Release")),
        ),
        CommandType::TaskGraphAddNode => {
            CommandPayload::TaskGraphAddNode(c::TaskGraphAddNode::new(
                NewTaskNode::new(s("c"), s("Publish"))
                    .depends_on(vec![s("b")])
                    .metadata(serde_json::Map::from_iter([(s("owner"), json!("host"))])),
            ))
        }
        CommandType::TaskGraphUpdateNode => {
            CommandPayload::TaskGraphUpdateNode(c::TaskGraphUpdateNode::new(
                s("b"),
                NodeUpdates::new()
                    .status(NodeStatus::Completed)
                    .result(json!({ "passed": 42 })),
            ))
        }
        CommandType::TaskGraphAdvance => {
            CommandPayload::TaskGraphAdvance(c::TaskGraphAdvance::new())
        }
        CommandType::TaskGraphState => CommandPayload::TaskGraphState(c::TaskGraphStateCmd::new()),
        CommandType::SubAgentList => CommandPayload::SubAgentList(c::SubAgentListCmd::new()),
        CommandType::SubAgentGet => {
            CommandPayload::SubAgentGet(c::SubAgentGetCmd::new(s("sub_0001")))
        }
        CommandType::HarnessStatus => CommandPayload::HarnessStatus(c::HarnessStatusCmd::new()),
        CommandType::BackgroundList => CommandPayload::BackgroundList(c::BackgroundListCmd::new()),
        CommandType::BackgroundGet => {
            CommandPayload::BackgroundGet(c::BackgroundGetCmd::new(s("bg_0001")))
        }
        CommandType::BackgroundHistory => {
            CommandPayload::BackgroundHistory(c::BackgroundHistoryCmd::new(s("bg_0001")))
        }
        CommandType::BackgroundStop => {
            CommandPayload::BackgroundStop(c::BackgroundStopCmd::new(s("bg_0001")))
        }
        CommandType::SessionWatch => CommandPayload::SessionWatch(
            c::SessionWatch::new(s(SESSION)).after_sequence(Cursor::new(s("req_0001"), 12)),
        ),
        CommandType::SessionUnwatch => {
            CommandPayload::SessionUnwatch(c::SessionUnwatch::new(s(SESSION)))
        }
        CommandType::SessionSetHostTools => {
            CommandPayload::SessionSetHostTools(c::SetHostTools::new(vec![
                host_samples::open_ticket(),
            ]))
        }
        CommandType::HostToolRespond => CommandPayload::HostToolRespond(
            c::HostToolRespond::new(s("tool_0004"))
                .result(json!({ "title": "Login fails on Safari", "status": "open" })),
        ),
        CommandType::McpList => CommandPayload::McpList(c::McpListCmd::new()),
        CommandType::SkillsList => CommandPayload::SkillsList(c::SkillsListCmd::new()),
        CommandType::CommandsList => CommandPayload::CommandsList(c::CommandsListCmd::new()),
        CommandType::WorktreeList => CommandPayload::WorktreeList(c::WorktreeListCmd::new()),
        CommandType::WorktreeRemove => CommandPayload::WorktreeRemove(
            c::WorktreeRemove::new()
                .session_id(s("sess_0002"))
                .force(false),
        ),
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
