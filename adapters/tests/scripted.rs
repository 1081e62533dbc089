//! The scripted model.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::*;
use keel_adapters::{build_model_with_env, ScriptedModel, SCRIPT_EXHAUSTED_TEXT};
use keel_config::{Config, EnvMap};
use keel_envelope::error::{ErrorCode, ErrorHint};
use keel_envelope::types::Usage;
use keel_kernel::model::{FinishReason, Message, Model, ModelEvent, ModelRequest, ToolCallRequest};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        system: String::new(),
        messages: vec![Message::User {
            text: text.into(),
            images: vec![],
        }]
        .into(),
        tools: Vec::new().into(),
        max_output_tokens: None,
    }
}

fn with_tool_result(content: &str) -> ModelRequest {
    let mut r = ask("go");
    r.messages.push(Message::Assistant {
        text: String::new(),
        tool_calls: vec![ToolCallRequest {
            id: "c1".into(),
            name: "run_shell".into(),
            arguments: json!({}),
        }],
    });
    r.messages.push(Message::Tool {
        tool_call_id: "c1".into(),
        name: "run_shell".into(),
        content: content.into(),
        is_error: false,
    });
    r
}

fn scripts_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/scripts")
}

#[tokio::test]
async fn text_is_split_into_deltas_with_thoughts_tools_and_usage() {
    let model = ScriptedModel::from_json(json!({"turns": [{
        "thought": "Plan: read two files.",
        "text": "I will read both files now, one after the other.",
        "toolCalls": [
            {"name": "read_file", "arguments": {"path": "a.txt"}},
            {"id": "my-id", "name": "read_file", "arguments": {"path": "b.txt"}},
        ],
        "usage": {"inputTokens": 100, "outputTokens": 20, "cachedInputTokens": 40},
    }]}))
    .unwrap();
    assert_eq!(model.id(), "scripted:inline");
    assert_eq!(model.context_window(), 128_000);
    let items = collect(model.stream(ask("hi"), CancellationToken::new())).await;
    let texts: Vec<&str> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::TextDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert!(texts.len() > 3, "{texts:?}");
    assert_eq!(
        texts.concat(),
        "I will read both files now, one after the other."
    );
    let thought: String = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ThoughtDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thought, "Plan: read two files.");
    let tail: Vec<_> = items.iter().rev().take(4).rev().cloned().collect();
    assert_eq!(
        tail,
        vec![
            Ok(ModelEvent::ToolCall(ToolCallRequest {
                id: "call_0_0".into(),
                name: "read_file".into(),
                arguments: json!({"path": "a.txt"})
            })),
            Ok(ModelEvent::ToolCall(ToolCallRequest {
                id: "my-id".into(),
                name: "read_file".into(),
                arguments: json!({"path": "b.txt"})
            })),
            Ok(ModelEvent::Usage(Usage::new(100, 20, 40))),
            Ok(ModelEvent::Finished(FinishReason::ToolUse)),
        ]
    );
    assert_eq!(model.requests(), vec![ask("hi")]);
}

#[tokio::test]
async fn turns_are_consumed_in_order_then_a_fixed_text_ends_the_turn() {
    let model = ScriptedModel::from_json(json!({"turns": [
        {"text": "one"},
        {"text": "two", "stop": "max_tokens"},
    ]}))
    .unwrap();
    assert_eq!(model.remaining_turns(), 2);
    let a = collect(model.stream(ask("1"), CancellationToken::new())).await;
    assert_eq!(text_of(&a), "one");
    assert_eq!(
        a.last(),
        Some(&Ok(ModelEvent::Finished(FinishReason::EndTurn)))
    );
    let b = collect(model.stream(ask("2"), CancellationToken::new())).await;
    assert_eq!(text_of(&b), "two");
    assert_eq!(
        b.last(),
        Some(&Ok(ModelEvent::Finished(FinishReason::MaxTokens)))
    );
    assert_eq!(model.remaining_turns(), 0);
    let c = collect(model.stream(ask("3"), CancellationToken::new())).await;
    assert_eq!(text_of(&c), SCRIPT_EXHAUSTED_TEXT);
    assert_eq!(
        c.last(),
        Some(&Ok(ModelEvent::Finished(FinishReason::EndTurn)))
    );
    assert_eq!(model.requests().len(), 3);
}

#[tokio::test]
async fn errors_and_retries_are_replayed() {
    let model = ScriptedModel::from_file(scripts_dir().join("flaky.json")).unwrap();
    let items = collect(model.stream(ask("x"), CancellationToken::new())).await;
    match (&items[0], &items[1]) {
        (
            Ok(ModelEvent::Retrying {
                attempt: 1,
                delay_ms: 10,
                error: e1,
            }),
            Ok(ModelEvent::Retrying {
                attempt: 2,
                error: e2,
                ..
            }),
        ) => {
            assert_eq!(e1.hint, Some(ErrorHint::QuotaExceeded));
            assert!(e1.retryable);
            assert_eq!(e2.message, "scripted server error");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(text_of(&items), "Answered after two retries.");
    let items = collect(model.stream(ask("y"), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "This call fails half-way");
    let err = items.last().unwrap().clone().unwrap_err().0;
    assert_eq!(err.code, ErrorCode::ModelError);
    assert_eq!(err.message, "scripted provider failure");
    assert!(err.retryable);
    assert!(!items
        .iter()
        .any(|i| matches!(i, Ok(ModelEvent::Finished(_)))));
}

#[tokio::test]
async fn a_delay_is_cut_short_by_cancellation() {
    let model = ScriptedModel::from_file(scripts_dir().join("stall.json")).unwrap();
    let cancel = CancellationToken::new();
    let mut stream = model.stream(ask("x"), cancel.clone());
    let waiter = tokio::spawn(async move { next(&mut stream).await });
    tokio::task::yield_now().await;
    cancel.cancel();
    assert_eq!(waiter.await.unwrap(), None);
    // The turn was used: the next call does not replay it.
    assert_eq!(model.remaining_turns(), 0);
}

#[tokio::test]
async fn a_short_delay_then_output() {
    let model = ScriptedModel::from_json(
        json!({"turns": [{"delayMs": 5, "chunkDelayMs": 1, "text": "late but here"}]}),
    )
    .unwrap();
    let items = collect(model.stream(ask("x"), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "late but here");
}

#[tokio::test]
async fn conditions_choose_and_expectations_check() {
    let model = ScriptedModel::from_json(json!({"turns": [
        {"whenLastToolResultContains": "exit code 1", "text": "The command failed."},
        {"whenLastToolResultContains": "exit code 0", "text": "The command worked."},
        {"expectLastMessageContains": "please", "text": "Polite."},
    ]}))
    .unwrap();
    let a = collect(model.stream(with_tool_result("exit code 0"), CancellationToken::new())).await;
    assert_eq!(text_of(&a), "The command worked.");
    // The next unconditional turn's expectation fails.
    let b = collect(model.stream(ask("now"), CancellationToken::new())).await;
    let err = b[0].clone().unwrap_err().0;
    assert!(err.message.contains("please"), "{}", err.message);
    let c = collect(model.stream(with_tool_result("exit code 1"), CancellationToken::new())).await;
    assert_eq!(text_of(&c), "The command failed.");
}

#[test]
fn bad_scripts_are_model_unavailable() {
    let err = ScriptedModel::from_json(json!({"turns": [{"txt": "typo"}]})).unwrap_err();
    assert_eq!(err.code, ErrorCode::ModelUnavailable);
    assert!(err.message.contains("txt"), "{}", err.message);
    let err = ScriptedModel::from_json(
        json!({"turns": [{"toolCalls": [{"name": "x", "arguments": [1]}]}]}),
    )
    .unwrap_err();
    assert!(
        err.message.contains("turns[0].toolCalls[0]"),
        "{}",
        err.message
    );
    let err = ScriptedModel::from_json(json!({"turns": [{"stop": "sometime"}]})).unwrap_err();
    assert!(err.message.contains("turns[0].stop"), "{}", err.message);
    let err = ScriptedModel::from_file("/nonexistent/keel/script.json").unwrap_err();
    assert_eq!(err.code, ErrorCode::ModelUnavailable);
    assert!(err.message.contains("could not be read"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, "{\"turns\": [\n  {\"text\": }\n]}").unwrap();
    let err = ScriptedModel::from_file(&path).unwrap_err();
    assert!(err.message.contains("line 2"), "{}", err.message);
}

#[tokio::test]
async fn every_shipped_script_loads_and_runs() {
    let mut count = 0;
    for entry in std::fs::read_dir(scripts_dir()).unwrap() {
        let path = entry.unwrap().path();
        // Scripts named `*stall*` wait a minute on purpose (for interrupt tests).
        let stalls = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.contains("stall"));
        if path.extension().and_then(|e| e.to_str()) != Some("json") || stalls {
            continue;
        }
        count += 1;
        let spec = format!("scripted:{}", path.display());
        let model = build_model_with_env(&spec, &Config::default(), &EnvMap::default()).unwrap();
        assert_eq!(model.id(), spec);
        let items = collect(model.stream(ask("hi"), CancellationToken::new())).await;
        assert!(!items.is_empty(), "{}", path.display());
    }
    assert!(count >= 3);
}

#[tokio::test]
async fn a_long_session_keeps_only_the_first_requests() {
    let n = keel_adapters::scripted::KEPT_REQUESTS + 36;
    let turns: Vec<serde_json::Value> = (0..n).map(|i| json!({"text": format!("t{i}")})).collect();
    let model = ScriptedModel::from_json(json!({ "turns": turns })).unwrap();
    let mut history = ask("start").messages;
    for i in 0..n {
        let request = ModelRequest {
            messages: history.clone(),
            ..ask("")
        };
        let out = collect(model.stream(request, CancellationToken::new())).await;
        assert_eq!(text_of(&out), format!("t{i}"));
        history.push(Message::User {
            text: format!("next {i}"),
            images: vec![],
        });
    }
    let kept = model.requests();
    assert_eq!(kept.len(), keel_adapters::scripted::KEPT_REQUESTS);
    assert_eq!(kept[0].messages.len(), 1);
    assert_eq!(model.remaining_turns(), 0);
}

/// A model nobody inspects keeps no request (hosts make theirs from a `scripted:`
/// spec with `keep_requests(0)`): each kept request holds its own version of the
/// session's history.
#[tokio::test]
async fn a_model_told_to_keep_no_requests_keeps_none() {
    let turns: Vec<serde_json::Value> = (0..5).map(|i| json!({"text": format!("t{i}")})).collect();
    let model = ScriptedModel::from_json(json!({ "turns": turns }))
        .unwrap()
        .keep_requests(0);
    for i in 0..5 {
        let out = collect(model.stream(ask("go"), CancellationToken::new())).await;
        assert_eq!(text_of(&out), format!("t{i}"));
    }
    assert!(model.requests().is_empty());
    let two =
        ScriptedModel::from_json(json!({"turns": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}))
            .unwrap()
            .keep_requests(2);
    for _ in 0..3 {
        collect(two.stream(ask("go"), CancellationToken::new())).await;
    }
    assert_eq!(two.requests().len(), 2);
}
