//! The OpenAI-compatible provider against a local fake server.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use keel_envelope::error::{ErrorCode, ErrorHint};
use keel_envelope::types::Usage;
use keel_kernel::model::{
    FinishReason, Message, ModelEvent, ModelRequest, ToolCallRequest, ToolDef,
};
use keel_testsupport::model_server::{openai, split_bytes, FakeResponse, FakeServer, Gate, Part};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn request() -> ModelRequest {
    ModelRequest {
        system: "You are Keel.".into(),
        messages: vec![Message::User {
            text: "Say hello".into(),
            images: vec![],
        }]
        .into(),
        tools: vec![ToolDef {
            name: "read_file".into(),
            description: "Reads a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        }]
        .into(),
        max_output_tokens: None,
    }
}

#[tokio::test]
async fn streams_text_and_usage_and_sends_the_right_request() {
    let server = FakeServer::start([FakeResponse::sse(openai::text_stream(&[
        "Héllo, ", "世界", " 🎉!",
    ]))])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(0));
    assert_eq!(model.id(), "openai:gpt-4o-mini");
    assert_eq!(model.context_window(), 128_000);
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "Héllo, 世界 🎉!");
    let tail: Vec<_> = items.iter().rev().take(2).cloned().collect();
    assert_eq!(
        tail,
        vec![
            Ok(ModelEvent::Finished(FinishReason::EndTurn)),
            Ok(ModelEvent::Usage(Usage::new(10, 5, 0))),
        ]
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    let body = r.json().expect("json body");
    assert_eq!(body["model"], "gpt-4o-mini");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are Keel."},
            {"role": "user", "content": "Say hello"},
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "read_file",
            "description": "Reads a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        }}])
    );
}

#[tokio::test]
async fn no_key_means_no_authorization_header() {
    let server = FakeServer::start([FakeResponse::sse(openai::text_stream(&["ok"]))])
        .await
        .unwrap();
    let env =
        keel_config::EnvMap::from_pairs([("OPENAI_BASE_URL", format!("{}/v1", server.base_url()))]);
    let model =
        keel_adapters::build_model_with_env("openai:llama3", &fast_config(0), &env).unwrap();
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "ok");
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn assembles_several_tool_calls_and_feeds_results_back() {
    let server = FakeServer::start([
        FakeResponse::sse(openai::tool_calls_stream(&[
            ("call_abc", "read_file", r#"{"path": "src/é.rs"}"#),
            ("call_def", "list_dir", r#"{"path": ".", "depth": 2}"#),
        ])),
        FakeResponse::sse(openai::text_stream(&["Done."])),
    ])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(0));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    let calls: Vec<ToolCallRequest> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ToolCall(c)) => Some(c.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        vec![
            ToolCallRequest {
                id: "call_abc".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/é.rs"})
            },
            ToolCallRequest {
                id: "call_def".into(),
                name: "list_dir".into(),
                arguments: json!({"path": ".", "depth": 2})
            },
        ]
    );
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Finished(FinishReason::ToolUse)))
    );

    let mut next_request = request();
    next_request.messages.push(Message::Assistant {
        text: String::new(),
        tool_calls: calls,
    });
    next_request.messages.push(Message::Tool {
        tool_call_id: "call_abc".into(),
        name: "read_file".into(),
        content: "fn main() {}".into(),
        is_error: false,
    });
    next_request.messages.push(Message::Tool {
        tool_call_id: "call_def".into(),
        name: "list_dir".into(),
        content: "denied by the user".into(),
        is_error: true,
    });
    let items = collect(model.stream(next_request, CancellationToken::new())).await;
    assert_eq!(text_of(&items), "Done.");
    let mut body = server.requests()[1].json().unwrap();
    // The arguments are a JSON text whose key order depends on serde_json's features:
    // compare them as values.
    for call in body["messages"][2]["tool_calls"].as_array_mut().unwrap() {
        let text = call["function"]["arguments"].as_str().unwrap().to_owned();
        call["function"]["arguments"] = serde_json::from_str(&text).unwrap();
    }
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are Keel."},
            {"role": "user", "content": "Say hello"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_abc", "type": "function", "function": {"name": "read_file", "arguments": {"path": "src/é.rs"}}},
                {"id": "call_def", "type": "function", "function": {"name": "list_dir", "arguments": {"path": ".", "depth": 2}}},
            ]},
            {"role": "tool", "tool_call_id": "call_abc", "content": "fn main() {}"},
            {"role": "tool", "tool_call_id": "call_def", "content": "Error: denied by the user"},
        ])
    );
}

#[tokio::test]
async fn reasoning_deltas_become_thoughts() {
    let text = openai::sse(&[
        openai::chunk(
            json!({"role": "assistant", "reasoning_content": "Let me think"}),
            None,
        ),
        openai::chunk(json!({"reasoning": " more"}), None),
        openai::chunk(json!({"content": "42"}), Some("stop")),
    ]);
    let server = FakeServer::start([FakeResponse::sse(text)]).await.unwrap();
    let model = openai_model(&server.base_url(), &fast_config(0));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(
        items,
        vec![
            Ok(ModelEvent::ThoughtDelta("Let me think".into())),
            Ok(ModelEvent::ThoughtDelta(" more".into())),
            Ok(ModelEvent::TextDelta("42".into())),
            Ok(ModelEvent::Finished(FinishReason::EndTurn)),
        ]
    );
}

#[tokio::test]
async fn the_first_delta_arrives_while_the_server_still_holds_the_response() {
    let gate = Gate::new();
    let first = openai::sse(&[openai::chunk(json!({"content": "first"}), None)]);
    let first = first.trim_end_matches("data: [DONE]\n\n").to_owned();
    let rest = openai::sse(&[openai::chunk(json!({"content": " second"}), Some("stop"))]);
    let mut parts = vec![Part::text(first), Part::Wait(gate.clone())];
    parts.extend(split_bytes(&rest, 5));
    let server = FakeServer::start([FakeResponse::sse_parts(parts)])
        .await
        .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(0));
    let mut stream = model.stream(request(), CancellationToken::new());
    // The gate is closed: this can only succeed if the delta is streamed.
    assert_eq!(
        next(&mut stream).await,
        Some(Ok(ModelEvent::TextDelta("first".into())))
    );
    gate.open();
    let rest = collect(stream).await;
    assert_eq!(
        rest,
        vec![
            Ok(ModelEvent::TextDelta(" second".into())),
            Ok(ModelEvent::Finished(FinishReason::EndTurn)),
        ]
    );
}

#[tokio::test]
async fn cancelling_a_stalled_stream_ends_it_and_closes_the_connection() {
    let first = openai::sse(&[openai::chunk(json!({"content": "thinking..."}), None)]);
    let first = first.trim_end_matches("data: [DONE]\n\n").to_owned();
    let server = FakeServer::start([FakeResponse::sse_parts(vec![
        Part::text(first),
        Part::Stall,
    ])])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(3));
    let cancel = CancellationToken::new();
    let mut stream = model.stream(request(), cancel.clone());
    assert_eq!(
        next(&mut stream).await,
        Some(Ok(ModelEvent::TextDelta("thinking...".into())))
    );
    assert_eq!(server.disconnects(), 0);
    let waiter = tokio::spawn(async move { next(&mut stream).await });
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    cancel.cancel();
    assert_eq!(waiter.await.unwrap(), None);
    tokio::time::timeout(GUARD, server.wait_for_disconnects(1))
        .await
        .expect("the server never saw the connection close");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn cancelling_before_the_response_headers_ends_the_stream() {
    let server = FakeServer::start([FakeResponse::silent()]).await.unwrap();
    let model = openai_model(&server.base_url(), &fast_config(0));
    let cancel = CancellationToken::new();
    let mut stream = model.stream(request(), cancel.clone());
    let waiter = tokio::spawn(async move { next(&mut stream).await });
    tokio::time::timeout(GUARD, server.wait_for_requests(1))
        .await
        .expect("no request arrived");
    cancel.cancel();
    assert_eq!(waiter.await.unwrap(), None);
    tokio::time::timeout(GUARD, server.wait_for_disconnects(1))
        .await
        .expect("the connection was not closed");
}

#[tokio::test]
async fn unauthorized_points_to_the_configuration_and_is_not_retried() {
    let server = FakeServer::start([FakeResponse::json(
        401,
        &openai::error_body(
            "Incorrect API key provided: sk-test***123. You can find your API key at https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
    )])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(3));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(items.len(), 1);
    let err = items[0].clone().unwrap_err().0;
    assert_eq!(err.code, ErrorCode::ModelError);
    assert_eq!(err.hint, Some(ErrorHint::CheckLlmConfig));
    assert!(!err.retryable);
    assert!(
        err.message.contains("Incorrect API key provided"),
        "{}",
        err.message
    );
    assert_eq!(err.details["status"], 401);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limits_are_retried_honouring_retry_after() {
    let server = FakeServer::start([
        FakeResponse::json(
            429,
            &openai::error_body(
                "Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1.",
                "requests",
                Some("rate_limit_exceeded"),
            ),
        )
        .header("retry-after", "1"),
        FakeResponse::sse(openai::text_stream(&["after ", "retry"])),
    ])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(3));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    match &items[0] {
        Ok(ModelEvent::Retrying {
            attempt,
            delay_ms,
            error,
        }) => {
            assert_eq!(*attempt, 1);
            assert_eq!(*delay_ms, 1000);
            assert_eq!(error.hint, Some(ErrorHint::QuotaExceeded));
            assert!(error.retryable);
            assert!(error.message.contains("Rate limit reached"));
        }
        other => panic!("expected Retrying, got {other:?}"),
    }
    assert_eq!(text_of(&items), "after retry");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn retry_after_ms_is_preferred() {
    let server = FakeServer::start([
        FakeResponse::json(
            503,
            &openai::error_body("The server is overloaded", "server_error", None),
        )
        .header("retry-after-ms", "3")
        .header("retry-after", "100"),
        FakeResponse::sse(openai::text_stream(&["ok"])),
    ])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(3));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert!(matches!(
        &items[0],
        Ok(ModelEvent::Retrying { delay_ms: 3, .. })
    ));
    assert_eq!(text_of(&items), "ok");
}

#[tokio::test]
async fn server_errors_are_retried_a_bounded_number_of_times() {
    let body = openai::error_body(
        "The server had an error while processing your request.",
        "server_error",
        None,
    );
    let server = FakeServer::start((0..4).map(|_| FakeResponse::json(500, &body)))
        .await
        .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(2));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(items.len(), 3);
    for (i, item) in items[..2].iter().enumerate() {
        match item {
            Ok(ModelEvent::Retrying {
                attempt,
                delay_ms,
                error,
            }) => {
                assert_eq!(*attempt, i as u32 + 1);
                assert!(*delay_ms <= 5);
                assert!(error.retryable);
            }
            other => panic!("expected Retrying, got {other:?}"),
        }
    }
    let err = items[2].clone().unwrap_err().0;
    assert!(err.retryable);
    assert!(err.message.contains("HTTP 500"));
    assert!(err.message.contains("The server had an error"));
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn exhausted_quota_is_not_retried() {
    let server = FakeServer::start([FakeResponse::json(
        429,
        &openai::error_body(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            Some("insufficient_quota"),
        ),
    )])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(3));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(items.len(), 1);
    let err = items[0].clone().unwrap_err().0;
    assert_eq!(err.hint, Some(ErrorHint::QuotaExceeded));
    assert!(!err.retryable);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_cut_after_content_is_a_final_network_error() {
    let text = openai::text_stream(&["partial ", "answer"]);
    let cut_at = text.find("\"stop\"").unwrap();
    let mut parts = split_bytes(&text[..cut_at], 9);
    parts.push(Part::Cut);
    let server = FakeServer::start([FakeResponse::sse_parts(parts)])
        .await
        .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(3));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "partial answer");
    let err = items.last().unwrap().clone().unwrap_err().0;
    assert_eq!(err.hint, Some(ErrorHint::Network));
    assert!(!items
        .iter()
        .any(|i| matches!(i, Ok(ModelEvent::Retrying { .. }))));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_ending_without_done_is_an_error() {
    let text = openai::text_stream(&["no end"]);
    let text = text.trim_end_matches("data: [DONE]\n\n").to_owned();
    let server = FakeServer::start([FakeResponse::sse(text)]).await.unwrap();
    let model = openai_model(&server.base_url(), &fast_config(0));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "no end");
    let err = items.last().unwrap().clone().unwrap_err().0;
    assert!(
        err.message.contains("before it was complete"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_cut_before_content_is_retried() {
    let server = FakeServer::start([
        FakeResponse::sse_parts(vec![Part::text(": keep-alive\n\n"), Part::Cut]),
        FakeResponse::sse(openai::text_stream(&["second try"])),
    ])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(1));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert!(matches!(
        &items[0],
        Ok(ModelEvent::Retrying { attempt: 1, error, .. }) if error.hint == Some(ErrorHint::Network)
    ));
    assert_eq!(text_of(&items), "second try");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn malformed_json_is_a_final_error_not_a_panic() {
    let server = FakeServer::start([FakeResponse::sse(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\ndata: {\"choices\": [oops\n\n",
    )])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(3));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(items[0], Ok(ModelEvent::TextDelta("ok".into())));
    let err = items[1].clone().unwrap_err().0;
    assert!(err.message.contains("malformed"));
    assert!(!err.retryable);
    assert_eq!(items.len(), 2);
}

#[tokio::test]
async fn an_unreachable_server_is_a_network_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let model = openai_model(&format!("http://{addr}"), &fast_config(1));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert!(matches!(
        &items[0],
        Ok(ModelEvent::Retrying { attempt: 1, .. })
    ));
    let err = items[1].clone().unwrap_err().0;
    assert_eq!(err.hint, Some(ErrorHint::Network));
    assert!(err.retryable);
    assert_eq!(items.len(), 2);
}

#[tokio::test]
async fn an_error_object_inside_the_stream_is_reported() {
    let server = FakeServer::start([FakeResponse::sse(
        "data: {\"error\":{\"message\":\"Context length exceeded\",\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}\n\n",
    )])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(3));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(items.len(), 1);
    let err = items[0].clone().unwrap_err().0;
    assert!(err.message.contains("Context length exceeded"));
    assert!(!err.retryable);
}

fn impatient_model(base: &str) -> keel_adapters::OpenAiModel {
    keel_adapters::OpenAiModel::new(
        "gpt-4o-mini",
        format!("{base}/v1"),
        None,
        keel_adapters::HttpOptions {
            retry: keel_adapters::RetryPolicy {
                max_retries: 0,
                base_delay_ms: 1,
                max_delay_ms: 1,
            },
            connect_timeout: std::time::Duration::from_secs(5),
            idle_timeout: std::time::Duration::from_millis(100),
        },
    )
    .unwrap()
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_as_a_network_error() {
    let server = FakeServer::start([
        FakeResponse::silent(),
        FakeResponse::sse_parts(vec![Part::Stall]),
    ])
    .await
    .unwrap();
    let model = impatient_model(&server.base_url());
    // No status line at all.
    let items = collect(keel_kernel::model::Model::stream(
        &model,
        request(),
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(items.len(), 1);
    let err = items[0].clone().unwrap_err().0;
    assert_eq!(err.hint, Some(ErrorHint::Network));
    assert!(err.message.contains("sent no response"), "{}", err.message);
    // Headers, then nothing.
    let items = collect(keel_kernel::model::Model::stream(
        &model,
        request(),
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(items.len(), 1);
    let err = items[0].clone().unwrap_err().0;
    assert_eq!(err.hint, Some(ErrorHint::Network));
    assert!(err.message.contains("sent nothing"), "{}", err.message);
}

#[tokio::test]
async fn a_silent_stream_is_abandoned() {
    let first = openai::sse(&[openai::chunk(json!({"content": "hello"}), None)]);
    let first = first.trim_end_matches("data: [DONE]\n\n").to_owned();
    let server = FakeServer::start([FakeResponse::sse_parts(vec![
        Part::text(first),
        Part::Pause(GUARD * 3),
    ])])
    .await
    .unwrap();
    let items = collect(keel_kernel::model::Model::stream(
        &impatient_model(&server.base_url()),
        request(),
        CancellationToken::new(),
    ))
    .await;
    assert_eq!(text_of(&items), "hello");
    let err = items.last().unwrap().clone().unwrap_err().0;
    assert_eq!(err.hint, Some(ErrorHint::Network));
}

#[tokio::test]
async fn a_last_event_without_its_blank_line_still_completes() {
    let text = openai::text_stream(&["fine"]);
    let text = text.trim_end_matches('\n').to_owned();
    let server = FakeServer::start([FakeResponse::sse(text)]).await.unwrap();
    let model = openai_model(&server.base_url(), &fast_config(0));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "fine");
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Finished(FinishReason::EndTurn)))
    );
}

#[tokio::test]
async fn a_cut_inside_an_event_is_a_network_error() {
    let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"}}]}\n\ndata: {\"choices\":[{\"ind";
    let server = FakeServer::start([FakeResponse::sse(text)]).await.unwrap();
    let model = openai_model(&server.base_url(), &fast_config(0));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(items[0], Ok(ModelEvent::TextDelta("ok".into())));
    let err = items[1].clone().unwrap_err().0;
    assert_eq!(err.hint, Some(ErrorHint::Network));
    assert!(err.message.contains("before it was complete"));
    assert_eq!(items.len(), 2);
}

/// Every call carries an output cap, so that a local server cannot generate until its
/// context is full: the request's own, else the model's default.
#[tokio::test]
async fn every_call_carries_an_output_cap() {
    let server = FakeServer::start([
        FakeResponse::sse(openai::text_stream(&["OK"])),
        FakeResponse::sse(openai::text_stream(&["OK"])),
        FakeResponse::sse(openai::text_stream(&["OK"])),
    ])
    .await
    .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(0));
    collect(model.stream(request(), CancellationToken::new())).await;
    let capped = ModelRequest {
        max_output_tokens: Some(64),
        ..request()
    };
    collect(model.stream(capped, CancellationToken::new())).await;
    // A local model with a small window keeps room for its prompt.
    let env =
        keel_config::EnvMap::from_pairs([("OPENAI_BASE_URL", format!("{}/v1", server.base_url()))]);
    let local =
        keel_adapters::build_model_with_env("openai:llama3:8b", &fast_config(0), &env).unwrap();
    collect(local.stream(request(), CancellationToken::new())).await;
    let bodies: Vec<serde_json::Value> = server
        .requests()
        .iter()
        .map(|r| r.json().unwrap())
        .collect();
    assert_eq!(bodies[0]["max_tokens"], 16_384);
    assert_eq!(bodies[1]["max_tokens"], 64);
    assert_eq!(bodies[2]["max_tokens"], 2048);
    assert!(bodies
        .iter()
        .all(|b| b.get("max_completion_tokens").is_none()));
}

/// Reasoning models take the cap as `max_completion_tokens`.
#[tokio::test]
async fn reasoning_models_get_max_completion_tokens() {
    let server = FakeServer::start([FakeResponse::sse(openai::text_stream(&["OK"]))])
        .await
        .unwrap();
    let env = keel_config::EnvMap::from_pairs([
        ("OPENAI_BASE_URL", format!("{}/v1", server.base_url())),
        ("OPENAI_API_KEY", "sk-test".to_owned()),
    ]);
    let model =
        keel_adapters::build_model_with_env("openai:o3-mini", &fast_config(0), &env).unwrap();
    collect(model.stream(request(), CancellationToken::new())).await;
    let body = server.requests()[0].json().unwrap();
    assert_eq!(body["max_completion_tokens"], 32_768);
    assert!(body.get("max_tokens").is_none());
}

/// llama-server answers a request it cannot read (malformed tool-call arguments in the
/// history) with HTTP 500: sending the same request again cannot help.
#[tokio::test]
async fn a_500_that_says_the_request_is_malformed_is_not_retried() {
    let body = serde_json::json!({"error": {
        "code": 500,
        "message": "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 22",
        "type": "server_error"
    }});
    let server = FakeServer::start((0..4).map(|_| FakeResponse::json(500, &body)))
        .await
        .unwrap();
    let model = openai_model(&server.base_url(), &fast_config(2));
    let items = collect(model.stream(request(), CancellationToken::new())).await;
    assert_eq!(items.len(), 1, "{items:?}");
    let err = items[0].clone().unwrap_err().0;
    assert!(!err.retryable, "{err:?}");
    assert_eq!(err.details["reason"], "malformed_request", "{err:?}");
    assert!(err.message.contains("Failed to parse tool call arguments"));
    assert_eq!(server.requests().len(), 1);
}

/// The models of one process share one HTTP client per kind of address (and connect
/// timeout): four models, as four sessions have, calling one server one after the
/// other use the connection the first one opened, kept alive, rather than a client
/// (with its pool, buffers and TLS state) and a connection each.
#[tokio::test]
async fn the_models_of_a_process_share_their_connections() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    // A server that keeps each connection open for the next request.
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream);
                loop {
                    let (mut length, mut get, mut line) = (0usize, false, String::new());
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        get |= l.starts_with("get ");
                        if let Some(v) = l.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let sse = openai::text_stream(&["hi"]);
                    let answer = if get {
                        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_owned()
                    } else {
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{sse}",
                            sse.len()
                        )
                    };
                    if reader.get_mut().write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let base = format!("http://{addr}");
    for _ in 0..4 {
        let model = openai_model(&base, &fast_config(0));
        let items = collect(model.stream(request(), CancellationToken::new())).await;
        assert_eq!(text_of(&items), "hi");
        // The connection goes back to the pool once the answer is read.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let n = accepted.load(Ordering::SeqCst);
    assert!(n <= 2, "{n} connections for four models' calls");
    server.abort();
}
