//! A whole kernel session against a local server speaking the OpenAI-compatible
//! streaming format, through the real HTTP client: read a file, edit it after
//! approval, answer; and what Keel sent back to the server.

use std::sync::Arc;
use std::time::Duration;

use keel_adapters::{HttpOptions, OpenAiModel};
use keel_envelope::types::ApprovalDecision;
use keel_envelope::Event;
use keel_kernel::{Kernel, SessionOptions};
use keel_testsupport::model_server::{openai, FakeResponse, FakeServer};

#[tokio::test]
async fn a_session_reads_and_edits_through_the_openai_wire_format() {
    let ws = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("app.txt"), "version = 1\n").unwrap();
    let server = FakeServer::start([
        FakeResponse::sse(openai::tool_calls_stream(&[(
            "call_read",
            "read_file",
            r#"{"path":"app.txt"}"#,
        )])),
        FakeResponse::sse(openai::tool_calls_stream(&[(
            "call_edit",
            "edit_file",
            r#"{"path":"app.txt","edits":[{"oldText":"version = 1","newText":"version = 2"}]}"#,
        )])),
        FakeResponse::sse(openai::text_stream(&["Bumped the ", "version to 2."])),
    ])
    .await
    .unwrap();
    let model = OpenAiModel::new(
        "gpt-test",
        format!("{}/v1", server.base_url()),
        Some("sk-test".into()),
        HttpOptions::default(),
    )
    .unwrap();
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(Arc::new(model))
        .store_dir(store.path())
        .build()
        .unwrap();
    let (session, mut events) = kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            title: None,
        })
        .await
        .unwrap();
    let rid = session.send("bump the version").await.unwrap();
    let mut seen = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .unwrap();
        if let Event::ApprovalRequested(a) = &env.event {
            assert_eq!(a.tool_name, "edit_file");
            assert!(
                a.preview.contains("-version = 1") && a.preview.contains("+version = 2"),
                "{}",
                a.preview
            );
            session
                .respond_approval(&a.approval_id, ApprovalDecision::AllowOnce)
                .await
                .unwrap();
        }
        let done = matches!(&env.event, Event::SessionCompleted(_)) && env.request_id == rid;
        seen.push(env);
        if done {
            break;
        }
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("app.txt")).unwrap(),
        "version = 2\n"
    );
    let text: String = seen
        .iter()
        .filter_map(|e| match &e.event {
            Event::AssistantDelta(d) => Some(d.text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Bumped the version to 2.");
    let usage = seen
        .iter()
        .filter(|e| e.type_name() == "usage.updated")
        .count();
    assert_eq!(usage, 3, "one usage.updated per model call");

    // What Keel sent: three streaming calls with the tool schemas, the results fed back.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    for r in &requests {
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.header("authorization"), Some("Bearer sk-test"));
        let body = r.json().unwrap();
        assert_eq!(body["stream"], true);
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        for name in [
            "read_file",
            "list_dir",
            "search_files",
            "edit_file",
            "write_file",
            "run_shell",
            "git",
            "propose_plan",
        ] {
            assert!(tools.contains(&name), "{name} missing from {tools:?}");
        }
    }
    let second = requests[1].json().unwrap();
    let msgs = second["messages"].as_array().unwrap();
    let tool_msg = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_msg["tool_call_id"], "call_read");
    assert!(tool_msg["content"]
        .as_str()
        .unwrap()
        .contains("version = 1"));
    let third = requests[2].json().unwrap();
    let last = third["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_edit");
    assert!(last["content"].as_str().unwrap().contains("+version = 2"));
}

/// The output cap of the configuration, then a request's own, reach the server in
/// the body of every model call.
#[tokio::test]
async fn the_output_cap_is_on_the_wire() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start([
        FakeResponse::sse(openai::tool_calls_stream(&[(
            "call_list",
            "list_dir",
            r#"{"path":"."}"#,
        )])),
        FakeResponse::sse(openai::text_stream(&["OK."])),
        FakeResponse::sse(openai::text_stream(&["OK again."])),
    ])
    .await
    .unwrap();
    let mut config = keel_config::Config::default();
    config
        .apply_toml(
            "maxOutputTokens = 300\n",
            std::path::Path::new("config.toml"),
        )
        .unwrap();
    let mut kernel_config = keel_kernel::KernelConfig {
        workspace: Some(ws.path().to_owned()),
        ..Default::default()
    };
    config.agent.apply_to(&mut kernel_config);
    let model = OpenAiModel::new(
        "qwen2.5-coder:7b",
        format!("{}/v1", server.base_url()),
        None,
        HttpOptions::default(),
    )
    .unwrap();
    let kernel = Kernel::builder()
        .config(kernel_config)
        .model(Arc::new(model))
        .memory_store()
        .build()
        .unwrap();
    let (session, mut events) = kernel
        .start_session(SessionOptions::default())
        .await
        .unwrap();
    let rid = session.send("say OK").await.unwrap();
    completed(&mut events, &rid).await;
    let rid = session
        .send_with(
            keel_envelope::commands::RequestSend::new("again, briefly").max_output_tokens(120),
        )
        .await
        .unwrap();
    completed(&mut events, &rid).await;
    let caps: Vec<serde_json::Value> = server
        .requests()
        .iter()
        .map(|r| r.json().unwrap()["max_tokens"].clone())
        .collect();
    assert_eq!(caps, [300, 300, 120]);
}

async fn completed(events: &mut keel_kernel::EventStream, rid: &str) {
    let fut = async {
        loop {
            let env = events.recv().await.unwrap();
            if matches!(&env.event, Event::SessionCompleted(_)) && env.request_id == rid {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .unwrap();
}
