//! A request with a model call, tool calls (allowed after an approval, denied,
//! failed), a hook, and a sub-agent (started in a task of its own) that calls an MCP
//! server: the spans arrive with the right names, kinds, parents and attributes.

use keel_telemetry::semconv as sc;
use keel_telemetry::testing::Receiver;
use keel_telemetry::{
    AgentStart, ApprovalStart, ChatEnd, ChatStart, HookStart, McpStart, Parent, Recorder, RunEnd,
    ToolOutcome, ToolStart,
};
use tracing::Instrument;

use super::common::{finish, one, run, settings, start};

/// The work of one request, as the kernel will report it.
pub async fn a_request(rec: &Recorder) -> Option<String> {
    let req = rec.invoke_agent(AgentStart {
        agent_name: "keel",
        session_id: "sess_1",
        request_id: "req_1",
        provider: Some("openai"),
        model: Some("gpt-x"),
        ..Default::default()
    });
    let trace_id = req.trace_id();
    req.input_text("list the files");
    async {
        let mut chat = rec.chat(ChatStart {
            provider: "openai",
            model: "gpt-x",
            max_tokens: Some(1024),
            session_id: Some("sess_1"),
            parent: Parent::Current,
        });
        chat.input_messages(|| keel_telemetry::text_messages("user", "list the files"));
        chat.first_chunk();
        chat.first_chunk();
        chat.finish(ChatEnd {
            response_model: Some("gpt-x-2025"),
            finish_reason: Some("tool_calls"),
            input_tokens: Some(120),
            output_tokens: Some(30),
            cached_input_tokens: Some(100),
            error_type: None,
        });

        let shell = rec.execute_tool(ToolStart {
            name: "run_shell",
            call_id: "call_1",
            tool_type: Some("function"),
            parent: Parent::Current,
        });
        shell.arguments(|| r#"{"command":"ls"}"#.to_owned());
        async {
            rec.hook_run(HookStart {
                point: "PreToolUse",
                tool: Some("run_shell"),
                parent: Parent::Current,
            })
            .finish("ok", Some(0));
            shell.decision("ask", Some("execute"));
            let wait = rec.approval_wait(ApprovalStart {
                tool: "run_shell",
                call_id: "call_1",
                level: Some("execute"),
                parent: Parent::Current,
            });
            // The answer comes while the request waits.
            tokio::task::yield_now().await;
            wait.finish("allow_once");
        }
        .instrument(shell.span().clone())
        .await;
        shell.result(|| "a.txt\nb.txt".to_owned());
        shell.finish(ToolOutcome::Ok, None);

        let denied = rec.execute_tool(ToolStart {
            name: "write_file",
            call_id: "call_2",
            ..Default::default()
        });
        denied.decision("deny", Some("write"));
        denied.finish(ToolOutcome::Denied, None);

        let failed = rec.execute_tool(ToolStart {
            name: "edit_file",
            call_id: "call_3",
            ..Default::default()
        });
        failed.decision("allow", Some("write"));
        failed.finish(ToolOutcome::Error, Some("TOOL_FAILED"));

        // A sub-agent, spawned as a task of its own under the tool call that asked for it.
        let spawn = rec.execute_tool(ToolStart {
            name: "spawn_sub_agent",
            call_id: "call_4",
            tool_type: Some("function"),
            parent: Parent::Current,
        });
        let sub_rec = rec.clone();
        let task = tokio::spawn(
            async move {
                let sub = sub_rec.invoke_agent(AgentStart {
                    agent_name: "reviewer",
                    agent_id: Some("sub_1"),
                    session_id: "sess_1",
                    request_id: "req_1",
                    ..Default::default()
                });
                async {
                    let mcp = sub_rec.mcp_call(McpStart {
                        server: "files",
                        tool: "read",
                        call_id: Some("call_5"),
                        transport: "pipe",
                        parent: Parent::Current,
                    });
                    mcp.finish(Some("tool_error"));
                }
                .instrument(sub.span().clone())
                .await;
                sub.finish(RunEnd::default());
            }
            .instrument(spawn.span().clone()),
        );
        task.await.unwrap();
        spawn.finish(ToolOutcome::Ok, None);
    }
    .instrument(req.span().clone())
    .await;
    req.output_text("two files");
    req.finish(RunEnd {
        input_tokens: Some(120),
        output_tokens: Some(30),
        error_type: None,
    });
    trace_id
}

#[test]
fn a_request_exports_its_spans_with_parentage_and_attributes() {
    let r = Receiver::start().unwrap();
    let (p, dispatch) = start(&settings(&r.endpoint()));
    let rec = p.recorder();
    let trace_id = run(&dispatch, a_request(&rec));
    let (spans, _) = finish(p, &r);
    assert_eq!(spans.len(), 10, "{spans:#?}");

    let req = one(&spans, "invoke_agent keel");
    assert_eq!(trace_id.as_deref(), Some(req.trace_id.as_str()));
    assert!(
        spans.iter().all(|s| s.trace_id == req.trace_id),
        "one trace"
    );
    assert_eq!(req.parent_span_id, None);
    assert_eq!(req.kind, "internal");
    assert_eq!(req.str(sc::GEN_AI_OPERATION_NAME), Some("invoke_agent"));
    assert_eq!(req.str(sc::GEN_AI_AGENT_NAME), Some("keel"));
    assert_eq!(req.str(sc::KEEL_SESSION_ID), Some("sess_1"));
    assert_eq!(req.str(sc::KEEL_REQUEST_ID), Some("req_1"));
    assert_eq!(req.str(sc::GEN_AI_CONVERSATION_ID), Some("sess_1"));
    assert_eq!(req.str(sc::GEN_AI_PROVIDER_NAME), Some("openai"));
    assert_eq!(req.int(sc::GEN_AI_USAGE_INPUT_TOKENS), Some(120));
    assert_eq!(req.status, "unset");
    assert_eq!(req.scope, "keel");
    assert_eq!(req.schema_url, sc::SCHEMA_URL);
    assert_eq!(req.resource["service.name"].as_str(), Some("keel"));
    assert_eq!(req.resource["service.version"].as_str(), Some("0.0.0-test"));

    let under = |name: &str, parent: &str| {
        let child = one(&spans, name);
        let parent = one(&spans, parent);
        assert_eq!(
            child.parent_span_id.as_deref(),
            Some(parent.span_id.as_str()),
            "{name} under {}",
            parent.name
        );
        child.clone()
    };
    let chat = under("chat gpt-x", "invoke_agent keel");
    assert_eq!(chat.kind, "client");
    assert_eq!(chat.str(sc::GEN_AI_OPERATION_NAME), Some("chat"));
    assert_eq!(chat.str(sc::GEN_AI_REQUEST_MODEL), Some("gpt-x"));
    assert_eq!(chat.str(sc::GEN_AI_RESPONSE_MODEL), Some("gpt-x-2025"));
    assert_eq!(chat.int(sc::GEN_AI_REQUEST_MAX_TOKENS), Some(1024));
    assert_eq!(chat.int(sc::GEN_AI_USAGE_INPUT_TOKENS), Some(120));
    assert_eq!(chat.int(sc::GEN_AI_USAGE_OUTPUT_TOKENS), Some(30));
    assert_eq!(
        chat.int(sc::GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        Some(100)
    );
    assert_eq!(
        chat.str(sc::GEN_AI_RESPONSE_FINISH_REASONS),
        Some("tool_calls")
    );

    let shell = under("execute_tool run_shell", "invoke_agent keel");
    assert_eq!(shell.kind, "internal");
    assert_eq!(shell.str(sc::GEN_AI_OPERATION_NAME), Some("execute_tool"));
    assert_eq!(shell.str(sc::GEN_AI_TOOL_NAME), Some("run_shell"));
    assert_eq!(shell.str(sc::GEN_AI_TOOL_CALL_ID), Some("call_1"));
    assert_eq!(shell.str(sc::GEN_AI_TOOL_TYPE), Some("function"));
    assert_eq!(shell.str(sc::KEEL_PERMISSION_DECISION), Some("ask"));
    assert_eq!(shell.str(sc::KEEL_PERMISSION_LEVEL), Some("execute"));
    assert_eq!(shell.str(sc::KEEL_TOOL_OUTCOME), Some("ok"));
    assert_eq!(shell.status, "unset");

    let hook = under("hook PreToolUse", "execute_tool run_shell");
    assert_eq!(hook.str(sc::KEEL_HOOK_OUTCOME), Some("ok"));
    assert_eq!(hook.int(sc::KEEL_HOOK_EXIT_CODE), Some(0));
    let approval = under("approval run_shell", "execute_tool run_shell");
    assert_eq!(
        approval.str(sc::KEEL_PERMISSION_DECISION),
        Some("allow_once")
    );
    assert_eq!(approval.str(sc::GEN_AI_TOOL_CALL_ID), Some("call_1"));

    let denied = under("execute_tool write_file", "invoke_agent keel");
    assert_eq!(denied.str(sc::KEEL_TOOL_OUTCOME), Some("denied"));
    assert_eq!(denied.str(sc::KEEL_PERMISSION_DECISION), Some("deny"));
    assert_eq!(denied.status, "unset");
    assert_eq!(denied.str(sc::ERROR_TYPE), None);

    let failed = under("execute_tool edit_file", "invoke_agent keel");
    assert_eq!(failed.status, "error");
    assert_eq!(failed.str(sc::ERROR_TYPE), Some("TOOL_FAILED"));
    assert_eq!(failed.str(sc::KEEL_TOOL_OUTCOME), Some("error"));

    under("execute_tool spawn_sub_agent", "invoke_agent keel");
    let sub = under("invoke_agent reviewer", "execute_tool spawn_sub_agent");
    assert_eq!(sub.str(sc::GEN_AI_AGENT_ID), Some("sub_1"));
    let mcp = under("tools/call read", "invoke_agent reviewer");
    assert_eq!(mcp.kind, "client");
    assert_eq!(mcp.str(sc::MCP_METHOD_NAME), Some("tools/call"));
    assert_eq!(mcp.str(sc::GEN_AI_OPERATION_NAME), Some("execute_tool"));
    assert_eq!(mcp.str(sc::KEEL_MCP_SERVER), Some("files"));
    assert_eq!(mcp.str(sc::NETWORK_TRANSPORT), Some("pipe"));
    assert_eq!(mcp.status, "error");
    assert_eq!(mcp.str(sc::ERROR_TYPE), Some("tool_error"));

    // Only the conventions' attributes and Keel's own: no source locations, thread
    // names, timings or targets of the bridge.
    for s in &spans {
        for key in s.attributes.keys() {
            assert!(
                ["gen_ai.", "keel.", "error.", "mcp.", "network."]
                    .iter()
                    .any(|p| key.starts_with(p)),
                "{}: {key}",
                s.name
            );
        }
    }
}
