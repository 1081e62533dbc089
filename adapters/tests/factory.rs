//! Building a model from a selection and the configuration: the errors, the context
//! window, where the base URL comes from, and the documented script.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::*;
use keel_adapters::{build_model, build_model_with_env, ScriptedModel};
use keel_config::{Config, EnvMap, ModelEntry};
use keel_envelope::error::{ErrorCode, ErrorHint};
use keel_kernel::model::{Message, Model, ModelEvent, ModelRequest, ToolCallRequest};
use keel_testsupport::model_server::{openai, FakeResponse, FakeServer};
use tokio_util::sync::CancellationToken;

/// The fenced blocks of a language in docs/configuration.md.
fn doc_blocks(lang: &str) -> Vec<String> {
    keel_testsupport::doc_blocks(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md"),
        lang,
    )
}

#[test]
fn build_model_errors_are_model_unavailable() {
    let c = Config::default();
    let env = EnvMap::default();
    for (spec, needle) in [
        ("ollama:llama3", "unknown model provider"),
        ("openai:", "names no model"),
        ("openai", "provider:model"),
        ("scripted:/nonexistent/keel/s.json", "could not be read"),
        ("openai:gpt-4o", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ] {
        let err = build_model_with_env(spec, &c, &env).unwrap_err();
        assert_eq!(err.code, ErrorCode::ModelUnavailable, "{spec}");
        assert_eq!(err.hint, Some(ErrorHint::CheckLlmConfig), "{spec}");
        assert!(err.message.contains(needle), "{spec}: {}", err.message);
    }
    // The process-environment variant works the same for things that need no env.
    assert!(build_model("nope:x", &c).is_err());
}

#[test]
fn context_windows_come_from_the_table_or_the_config() {
    let env = EnvMap::from_pairs([("OPENAI_API_KEY", "k"), ("ANTHROPIC_API_KEY", "k")]);
    let mut c = Config::default();
    let m = build_model_with_env("openai:gpt-4", &c, &env).unwrap();
    assert_eq!(m.context_window(), 8192);
    let m = build_model_with_env("anthropic:claude-opus-4-1", &c, &env).unwrap();
    assert_eq!(m.context_window(), 200_000);
    c.available_models.push(ModelEntry {
        id: "openai:gpt-4".into(),
        display_name: None,
        context_window: Some(9999),
    });
    let m = build_model_with_env("openai:gpt-4", &c, &env).unwrap();
    assert_eq!(m.context_window(), 9999);
}

#[tokio::test]
async fn the_environment_base_url_wins_over_the_config() {
    let from_env = FakeServer::start([FakeResponse::sse(openai::text_stream(&["env"]))])
        .await
        .unwrap();
    let from_config = FakeServer::start([FakeResponse::sse(openai::text_stream(&["config"]))])
        .await
        .unwrap();
    let mut c = fast_config(0);
    c.providers.openai.base_url = Some(format!("{}/v1", from_config.base_url()));
    let req = ModelRequest {
        messages: vec![Message::User {
            text: "hi".into(),
            images: vec![],
        }]
        .into(),
        ..ModelRequest::default()
    };
    let m = build_model_with_env("openai:local", &c, &EnvMap::default()).unwrap();
    assert_eq!(
        text_of(&collect(m.stream(req.clone(), CancellationToken::new())).await),
        "config"
    );
    let env = EnvMap::from_pairs([("OPENAI_BASE_URL", format!("{}/v1", from_env.base_url()))]);
    let m = build_model_with_env("openai:local", &c, &env).unwrap();
    assert_eq!(
        text_of(&collect(m.stream(req, CancellationToken::new())).await),
        "env"
    );
    assert_eq!(from_env.requests().len(), 1);
    assert_eq!(from_config.requests().len(), 1);
}

#[tokio::test]
async fn the_documented_script_runs_as_described() {
    let blocks = doc_blocks("json");
    assert_eq!(blocks.len(), 1);
    let value: serde_json::Value = serde_json::from_str(&blocks[0]).unwrap();
    let model = ScriptedModel::from_json(value).unwrap();
    let mut req = ModelRequest {
        messages: vec![Message::User {
            text: "look".into(),
            images: vec![],
        }]
        .into(),
        ..ModelRequest::default()
    };
    let first = collect(model.stream(req.clone(), CancellationToken::new())).await;
    let calls: Vec<ToolCallRequest> = first
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ToolCall(c)) => Some(c.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].id, "call_readme");
    req.messages.push(Message::Assistant {
        text: text_of(&first),
        tool_calls: calls,
    });
    req.messages.push(Message::Tool {
        tool_call_id: "call_0_0".into(),
        name: "list_dir".into(),
        content: "README.md".into(),
        is_error: false,
    });
    req.messages.push(Message::Tool {
        tool_call_id: "call_readme".into(),
        name: "read_file".into(),
        content: "# The project".into(),
        is_error: false,
    });
    // Not "denied": the conditional turn is skipped for the next one.
    let second = collect(model.stream(req, CancellationToken::new())).await;
    assert_eq!(text_of(&second), "The README describes the project.");
    // Still no "denied" result: the retrying turn comes next, then the failing one.
    let third = collect(model.stream(ModelRequest::default(), CancellationToken::new())).await;
    assert!(matches!(
        &third[0],
        Ok(ModelEvent::Retrying {
            attempt: 1,
            delay_ms: 100,
            ..
        })
    ));
    assert_eq!(text_of(&third), "Answered after one retry.");
    let fourth = collect(model.stream(ModelRequest::default(), CancellationToken::new())).await;
    assert_eq!(text_of(&fourth), "Cut off");
    assert_eq!(
        fourth.last().unwrap().clone().unwrap_err().0.message,
        "provider failed"
    );
    // The conditional turn and the stalling one are left.
    assert_eq!(model.remaining_turns(), 2);
}
