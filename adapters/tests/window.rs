//! The default output cap follows the context window a server reports: a loopback
//! server speaking llama-server's wire format (`GET /props`, `GET /v1/models`,
//! streamed `POST /v1/chat/completions`, `POST /v1/messages`), vLLM's model list, a
//! server that reports nothing, and one whose `/props` never answers or breaks.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use keel_adapters::{
    build_model_with_env, planned_output_cap, CapSource, WindowSource, UNKNOWN_WINDOW_OUTPUT_CAP,
};
use keel_config::{Config, EnvMap};
use keel_kernel::model::{Message, Model, ModelRequest};
use keel_testsupport::model_server::{anthropic, openai, FakeResponse, FakeServer, Part};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const GGUF: &str = "/models/qwen2.5-0.5b-instruct-q4_k_m.gguf";

fn request(cap: Option<u32>) -> ModelRequest {
    ModelRequest {
        system: "You are Keel.".into(),
        messages: vec![Message::User {
            text: "write the word banana 5000 times".into(),
            images: vec![],
        }]
        .into(),
        tools: Vec::new().into(),
        max_output_tokens: cap,
    }
}

/// A llama-server whose slot holds `n_ctx` tokens, with `answers` chat answers queued.
async fn llama_server(n_ctx: u64, answers: usize) -> FakeServer {
    let server = FakeServer::start(
        (0..answers).map(|_| FakeResponse::sse(openai::text_stream(&["banana banana"]))),
    )
    .await
    .unwrap();
    server.route(
        "GET",
        "/props",
        FakeResponse::json(200, &openai::llama_props(n_ctx)),
    );
    server.route(
        "GET",
        "/v1/models",
        FakeResponse::json(200, &openai::llama_models(GGUF, 32_768)),
    );
    server
}

fn openai_env(server: &FakeServer) -> EnvMap {
    EnvMap::from_pairs([("OPENAI_BASE_URL", format!("{}/v1", server.base_url()))])
}

fn local(server: &FakeServer, name: &str) -> Arc<dyn Model> {
    build_model_with_env(
        &format!("openai:{name}"),
        &fast_config(0),
        &openai_env(server),
    )
    .unwrap()
}

fn max_tokens(server: &FakeServer) -> Vec<Value> {
    server
        .requests()
        .iter()
        .map(|r| r.json().unwrap()["max_tokens"].clone())
        .collect()
}

fn asked(server: &FakeServer, path: &str) -> usize {
    server
        .endpoint_requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == path)
        .count()
}

#[tokio::test]
async fn the_cap_is_a_quarter_of_the_window_llama_server_reports() {
    let server = llama_server(8192, 3).await;
    // A name Keel does not know: it assumed a 128k window and sent 8192 before.
    let model = local(&server, "local-model");
    let items = collect(model.stream(request(None), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "banana banana");
    // The server's window is the model's from then on (compaction uses it).
    assert_eq!(model.context_window(), 8192);
    // A known name too: the server's window wins over the family's (32 768).
    let qwen = local(&server, "qwen2.5-coder:7b");
    collect(qwen.stream(request(None), CancellationToken::new())).await;
    collect(model.stream(request(None), CancellationToken::new())).await;
    assert_eq!(max_tokens(&server), [2048, 2048, 2048]);
    // Asked once per model and server, whatever the number of calls.
    assert_eq!(asked(&server, "/props"), 2);
    assert_eq!(asked(&server, "/v1/models"), 2);
    // With the key a call sends.
    let env = EnvMap::from_pairs([
        ("OPENAI_BASE_URL", format!("{}/v1", server.base_url())),
        ("OPENAI_API_KEY", "sk-local".to_owned()),
    ]);
    let keyed = build_model_with_env("openai:keyed", &fast_config(0), &env).unwrap();
    server.push(FakeResponse::sse(openai::text_stream(&["ok"])));
    collect(keyed.stream(request(None), CancellationToken::new())).await;
    let props = server
        .endpoint_requests()
        .into_iter()
        .rfind(|r| r.path == "/props")
        .unwrap();
    assert_eq!(props.header("authorization"), Some("Bearer sk-local"));
}

#[tokio::test]
async fn an_explicit_cap_wins_over_the_reported_window() {
    let server = llama_server(8192, 2).await;
    let model = local(&server, "local-model");
    collect(model.stream(request(Some(6000)), CancellationToken::new())).await;
    collect(model.stream(request(Some(100)), CancellationToken::new())).await;
    assert_eq!(max_tokens(&server), [6000, 100]);
}

#[tokio::test]
async fn several_calls_at_once_ask_once() {
    let server = llama_server(4096, 4).await;
    let model = local(&server, "local-model");
    let calls = (0..4).map(|_| collect(model.stream(request(None), CancellationToken::new())));
    for items in futures::future::join_all(calls).await {
        assert_eq!(text_of(&items), "banana banana");
    }
    assert_eq!(max_tokens(&server), [1024, 1024, 1024, 1024]);
    assert_eq!(asked(&server, "/props"), 1);
}

#[tokio::test]
async fn a_model_list_reports_the_window_when_there_is_no_props() {
    // vLLM: no /props, `max_model_len` in the model list.
    let server = FakeServer::start([
        FakeResponse::sse(openai::text_stream(&["ok"])),
        FakeResponse::sse(openai::text_stream(&["ok"])),
    ])
    .await
    .unwrap();
    server.route(
        "GET",
        "/v1/models",
        FakeResponse::json(
            200,
            &json!({"object": "list", "data": [
                {"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "vllm", "max_model_len": 6000},
                {"id": "adapter-b", "object": "model", "owned_by": "vllm", "max_model_len": 40960},
            ]}),
        ),
    );
    let model = local(&server, "Qwen/Qwen3-8B");
    collect(model.stream(request(None), CancellationToken::new())).await;
    let other = local(&server, "adapter-b");
    collect(other.stream(request(None), CancellationToken::new())).await;
    assert_eq!(max_tokens(&server), [1500, 8192]);
    assert_eq!(asked(&server, "/props"), 2, "asked, answered 404");
}

#[tokio::test]
async fn a_server_that_reports_nothing_gets_the_documented_default() {
    // Every GET answers 404 (an OpenAI-compatible server with neither endpoint).
    let server = FakeServer::start([
        FakeResponse::sse(openai::text_stream(&["ok"])),
        FakeResponse::sse(openai::text_stream(&["ok"])),
    ])
    .await
    .unwrap();
    let unknown = local(&server, "local-model");
    collect(unknown.stream(request(None), CancellationToken::new())).await;
    // A known family keeps its table's window.
    let known = local(&server, "qwen2.5-coder:7b");
    collect(known.stream(request(None), CancellationToken::new())).await;
    assert_eq!(max_tokens(&server), [UNKNOWN_WINDOW_OUTPUT_CAP, 8192]);
    assert_eq!(asked(&server, "/props"), 2);
    assert_eq!(
        unknown.context_window(),
        keel_adapters::DEFAULT_CONTEXT_WINDOW
    );
}

#[tokio::test]
async fn a_configured_window_is_not_asked_for() {
    let server = llama_server(8192, 1).await;
    let mut config = fast_config(0);
    config.available_models.push(keel_config::ModelEntry {
        id: "openai:local-model".into(),
        display_name: None,
        context_window: Some(65536),
    });
    let model = build_model_with_env("openai:local-model", &config, &openai_env(&server)).unwrap();
    collect(model.stream(request(None), CancellationToken::new())).await;
    assert_eq!(max_tokens(&server), [8192]);
    assert_eq!(server.endpoint_requests().len(), 0);
}

/// `/props` that never answers, or breaks off: the call goes on after the probe's
/// limit with what is known, and never fails because of it.
#[tokio::test]
async fn a_silent_or_broken_props_never_hangs_or_fails_a_call() {
    let silent = FakeServer::start([FakeResponse::sse(openai::text_stream(&["ok"]))])
        .await
        .unwrap();
    silent.route("GET", "/props", FakeResponse::silent());
    silent.route("GET", "/v1/models", FakeResponse::silent());
    let model = local(&silent, "local-model");
    let items = collect(model.stream(request(None), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "ok");
    assert_eq!(max_tokens(&silent), [UNKNOWN_WINDOW_OUTPUT_CAP]);

    let broken = FakeServer::start([
        FakeResponse::sse(openai::text_stream(&["ok"])),
        FakeResponse::sse(openai::text_stream(&["ok"])),
    ])
    .await
    .unwrap();
    broken.route(
        "GET",
        "/props",
        FakeResponse::sse_parts(vec![
            Part::text("{\"default_generation_settings\": {\"n_c"),
            Part::Cut,
        ]),
    );
    broken.route(
        "GET",
        "/v1/models",
        FakeResponse::full(200, "text/html", "<html>models</html>"),
    );
    let model = local(&broken, "local-model");
    collect(model.stream(request(None), CancellationToken::new())).await;
    // Answered (badly): not asked again.
    collect(model.stream(request(None), CancellationToken::new())).await;
    assert_eq!(
        max_tokens(&broken),
        [UNKNOWN_WINDOW_OUTPUT_CAP, UNKNOWN_WINDOW_OUTPUT_CAP]
    );
    assert_eq!(asked(&broken, "/props"), 1);
}

/// A call cancelled while the probe waits ends at once, without a model call.
#[tokio::test]
async fn a_call_cancelled_during_the_probe_ends() {
    let server = FakeServer::start([]).await.unwrap();
    server.route("GET", "/props", FakeResponse::silent());
    let model = local(&server, "local-model");
    let cancel = CancellationToken::new();
    let mut stream = model.stream(request(None), cancel.clone());
    let waiting = tokio::spawn(async move { next(&mut stream).await });
    while asked(&server, "/props") == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    cancel.cancel();
    assert!(waiting.await.unwrap().is_none());
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn llama_server_s_messages_endpoint_follows_its_window_too() {
    let server = FakeServer::start([FakeResponse::sse(anthropic::text_stream(&["ok"]))])
        .await
        .unwrap();
    server.route(
        "GET",
        "/props",
        FakeResponse::json(200, &openai::llama_props(8192)),
    );
    let env = EnvMap::from_pairs([("ANTHROPIC_BASE_URL", server.base_url())]);
    let model = build_model_with_env("anthropic:local-model", &fast_config(0), &env).unwrap();
    let items = collect(model.stream(request(None), CancellationToken::new())).await;
    assert_eq!(text_of(&items), "ok");
    assert_eq!(max_tokens(&server), [2048]);
    assert_eq!(asked(&server, "/props"), 1);
    assert_eq!(asked(&server, "/v1/models"), 1);
}

#[tokio::test]
async fn the_planned_cap_says_where_it_comes_from() {
    let server = llama_server(8192, 0).await;
    let cap = planned_output_cap(
        "openai:local-model",
        &Config::default(),
        &openai_env(&server),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(cap.tokens, 2048);
    assert!(matches!(
        cap.source,
        CapSource::Window(w) if w.tokens == 8192 && w.source == WindowSource::Reported("GET /props")
    ));
    assert_eq!(
        cap.to_string(),
        "2048 tokens, from the window of 8192 tokens the server reports (GET /props)"
    );
    let none = FakeServer::start([]).await.unwrap();
    let cap = planned_output_cap("openai:local-model", &Config::default(), &openai_env(&none))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (cap.tokens, cap.source),
        (UNKNOWN_WINDOW_OUTPUT_CAP, CapSource::UnknownWindow)
    );
    assert!(
        planned_output_cap("scripted:x.json", &Config::default(), &EnvMap::default())
            .await
            .unwrap()
            .is_none()
    );
}
