//! Switching models keeps the history: a history produced by one provider's stream
//! is sent through the other provider, and the fake server checks what arrives.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use keel_adapters::convert::anthropic_tool_id;
use keel_kernel::model::{Message, ModelEvent, ModelRequest, ToolCallRequest};
use keel_testsupport::model_server::{anthropic, openai, FakeResponse, FakeServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn user(text: &str) -> Message {
    Message::User {
        text: text.into(),
        images: vec![],
    }
}

/// Runs one turn and returns the assistant message it produced.
async fn turn(model: &dyn keel_kernel::model::Model, messages: Vec<Message>) -> Message {
    let items = collect(model.stream(
        ModelRequest {
            system: "sys".into(),
            messages: messages.into(),
            tools: Vec::new().into(),
            max_output_tokens: None,
        },
        CancellationToken::new(),
    ))
    .await;
    let calls: Vec<ToolCallRequest> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ToolCall(c)) => Some(c.clone()),
            _ => None,
        })
        .collect();
    assert!(items.iter().all(|i| i.is_ok()), "{items:?}");
    Message::Assistant {
        text: text_of(&items),
        tool_calls: calls,
    }
}

#[tokio::test]
async fn an_openai_history_continues_on_anthropic() {
    let oa = FakeServer::start([FakeResponse::sse(openai::tool_calls_stream(&[
        ("call_Xy12", "read_file", r#"{"path": "a.txt"}"#),
        ("call_Zz34", "read_file", r#"{"path": "b.txt"}"#),
    ]))])
    .await
    .unwrap();
    let an = FakeServer::start([FakeResponse::sse(anthropic::text_stream(&["Both read."]))])
        .await
        .unwrap();
    let openai_model = openai_model(&oa.base_url(), &fast_config(0));
    let anthropic_model = anthropic_model(&an.base_url(), &fast_config(0));

    let mut history = vec![user("read a and b")];
    history.push(turn(openai_model.as_ref(), history.clone()).await);
    for (id, content) in [("call_Xy12", "AAA"), ("call_Zz34", "BBB")] {
        history.push(Message::Tool {
            tool_call_id: id.into(),
            name: "read_file".into(),
            content: content.into(),
            is_error: false,
        });
    }
    let answer = turn(anthropic_model.as_ref(), history).await;
    assert!(matches!(answer, Message::Assistant { ref text, .. } if text == "Both read."));

    let body = an.requests()[0].json().unwrap();
    assert_eq!(body["system"], "sys");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "read a and b"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_Xy12", "name": "read_file", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "call_Zz34", "name": "read_file", "input": {"path": "b.txt"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_Xy12", "content": "AAA"},
                {"type": "tool_result", "tool_use_id": "call_Zz34", "content": "BBB"},
            ]},
        ])
    );
}

#[tokio::test]
async fn an_anthropic_history_continues_on_openai() {
    let an = FakeServer::start([FakeResponse::sse(anthropic::tool_use_stream(
        "Checking.",
        &[("toolu_01Abc", "list_dir", r#"{"path": "."}"#)],
    ))])
    .await
    .unwrap();
    let oa = FakeServer::start([FakeResponse::sse(openai::text_stream(&["Listed."]))])
        .await
        .unwrap();
    let anthropic_model = anthropic_model(&an.base_url(), &fast_config(0));
    let openai_model = openai_model(&oa.base_url(), &fast_config(0));

    let mut history = vec![user("list")];
    history.push(turn(anthropic_model.as_ref(), history.clone()).await);
    history.push(Message::Tool {
        tool_call_id: "toolu_01Abc".into(),
        name: "list_dir".into(),
        content: "README.md".into(),
        is_error: false,
    });
    history.push(Message::Assistant {
        text: "There is a README.".into(),
        tool_calls: vec![],
    });
    history.push(user("thanks, and now?"));
    turn(openai_model.as_ref(), history).await;

    let body = oa.requests()[0].json().unwrap();
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "list"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "toolu_01Abc", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "toolu_01Abc", "content": "README.md"},
            {"role": "assistant", "content": "There is a README."},
            {"role": "user", "content": "thanks, and now?"},
        ])
    );
}

#[tokio::test]
async fn foreign_ids_are_sanitised_consistently_for_anthropic() {
    // Ids another provider (or the scripted model) produced, invalid for Anthropic.
    let history = vec![
        user("go"),
        Message::Assistant {
            text: String::new(),
            tool_calls: vec![
                ToolCallRequest {
                    id: "fc.1:read".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "x"}),
                },
                ToolCallRequest {
                    id: "fc.1/read".into(),
                    name: "read_file".into(),
                    arguments: json!({"path": "y"}),
                },
            ],
        },
        Message::Tool {
            tool_call_id: "fc.1/read".into(),
            name: "read_file".into(),
            content: "Y".into(),
            is_error: false,
        },
        Message::Tool {
            tool_call_id: "fc.1:read".into(),
            name: "read_file".into(),
            content: "X".into(),
            is_error: false,
        },
    ];
    let an = FakeServer::start([FakeResponse::sse(anthropic::text_stream(&["ok"]))])
        .await
        .unwrap();
    let model = anthropic_model(&an.base_url(), &fast_config(0));
    turn(model.as_ref(), history).await;
    let body = an.requests()[0].json().unwrap();
    let uses = body["messages"][1]["content"].as_array().unwrap().clone();
    let results = body["messages"][2]["content"].as_array().unwrap().clone();
    let valid = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let use_ids: Vec<String> = uses
        .iter()
        .map(|u| u["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(use_ids.iter().all(|id| valid(id)), "{use_ids:?}");
    assert_ne!(use_ids[0], use_ids[1]);
    assert_eq!(use_ids[0], anthropic_tool_id("fc.1:read"));
    // Each result points at the tool_use of the same original call.
    assert_eq!(results[0]["tool_use_id"], use_ids[1].as_str());
    assert_eq!(results[0]["content"], "Y");
    assert_eq!(results[1]["tool_use_id"], use_ids[0].as_str());
    assert_eq!(results[1]["content"], "X");
}

#[tokio::test]
async fn an_interrupted_tool_call_gets_a_result_on_either_provider() {
    let history = vec![
        user("go"),
        Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCallRequest {
                id: "call_1".into(),
                name: "run_shell".into(),
                arguments: json!({"command": "sleep 100"}),
            }],
        },
        user("never mind"),
    ];
    let oa = FakeServer::start([FakeResponse::sse(openai::text_stream(&["ok"]))])
        .await
        .unwrap();
    let an = FakeServer::start([FakeResponse::sse(anthropic::text_stream(&["ok"]))])
        .await
        .unwrap();
    turn(
        openai_model(&oa.base_url(), &fast_config(0)).as_ref(),
        history.clone(),
    )
    .await;
    turn(
        anthropic_model(&an.base_url(), &fast_config(0)).as_ref(),
        history,
    )
    .await;
    let ob = oa.requests()[0].json().unwrap();
    assert_eq!(ob["messages"][3]["role"], "tool");
    assert_eq!(ob["messages"][3]["tool_call_id"], "call_1");
    assert_eq!(
        ob["messages"][4],
        json!({"role": "user", "content": "never mind"})
    );
    let ab = an.requests()[0].json().unwrap();
    assert_eq!(ab["messages"][2]["content"][0]["type"], "tool_result");
    assert_eq!(ab["messages"][2]["content"][0]["tool_use_id"], "call_1");
    assert_eq!(ab["messages"][2]["content"][0]["is_error"], true);
    assert_eq!(
        ab["messages"][2]["content"][1],
        json!({"type": "text", "text": "never mind"})
    );
}

#[test]
fn images_are_sent_inline_and_missing_ones_are_noted() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("shot.png");
    std::fs::write(&png, [0x89, b'P', b'N', b'G']).unwrap();
    let missing = dir.path().join("gone.png");
    let req = ModelRequest {
        messages: vec![Message::User {
            text: "what is this?".into(),
            images: vec![png.display().to_string(), missing.display().to_string()],
        }]
        .into(),
        ..ModelRequest::default()
    };
    let oa = keel_adapters::OpenAiModel::new(
        "gpt-4o",
        "http://127.0.0.1:1/v1",
        None,
        Default::default(),
    )
    .unwrap();
    let body = oa.request_body(&req);
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
            {"type": "text", "text": format!("[image not available: {}]", missing.display())},
        ])
    );
    let an = keel_adapters::AnthropicModel::new(
        "claude-sonnet-4-5",
        "http://127.0.0.1:1",
        None,
        Default::default(),
    )
    .unwrap();
    let body = an.request_body(&req);
    assert_eq!(
        body["messages"][0]["content"],
        json!([
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
            {"type": "text", "text": format!("[image not available: {}]", missing.display())},
            {"type": "text", "text": "what is this?"},
        ])
    );
}
