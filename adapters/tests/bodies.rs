//! Request bodies built from cached fragments are byte for byte the bodies of the
//! straightforward encoding (`request_body`, serialised whole), over varied histories
//! and edits, and over a real loopback server in a multi-turn conversation.
//!
//! The bytes depend on `serde_json`'s key order, which its `preserve_order` feature
//! decides for the whole build: `cargo test --workspace` turns it on (a dependency of
//! another crate asks for it), `cargo test -p keel-adapters --test bodies` leaves it
//! off (sorted keys). Both runs are part of the checks.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use keel_adapters::{AnthropicModel, HttpOptions, OpenAiModel};
use keel_kernel::model::{
    History, Message, Model, ModelEvent, ModelRequest, ToolCallRequest, ToolDef,
};
use keel_testsupport::model_server::{anthropic, openai, FakeResponse, FakeServer};
use keel_testsupport::Rng;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TEXTS: &[&str] = &[
    "",
    "   ",
    "plain text",
    "Héllo, 世界 🎉",
    "quotes \" and \\ backslashes\nnew lines\ttabs",
    "control \u{1} \u{1f} and U+2028 \u{2028} and astral 𝄞",
    "{\"looks\": \"like json\"}",
];

fn call(rng: &mut Rng, n: usize) -> ToolCallRequest {
    let id = match rng.below(4) {
        0 => format!("call_{n}"),
        1 => format!("toolu_01.{n}:weird id with spaces and more than forty characters"),
        2 => format!("fc-{n}"),
        _ => format!("c{n}"),
    };
    let arguments = match rng.below(5) {
        0 => json!({}),
        1 => json!({"path": format!("src/f{n}.rs"), "limit": n}),
        2 => json!({"__invalid_json": "{\"path\": "}),
        3 => json!({"text": rng.pick(TEXTS), "nested": {"a": [1, 2.5, null, true]}}),
        _ => json!({"z": 1, "a": 2, "m": [3]}),
    };
    ToolCallRequest {
        id,
        name: rng
            .pick(&["read_file", "run_shell", "edit_file"])
            .to_owned(),
        arguments,
    }
}

/// A random history message; tool results usually answer the last calls.
fn message(rng: &mut Rng, n: usize, open: &mut Vec<ToolCallRequest>, image: &str) -> Message {
    match rng.below(10) {
        0 | 1 => Message::User {
            text: rng.pick(TEXTS).to_owned(),
            images: match rng.below(6) {
                0 => vec![image.to_owned()],
                1 => vec!["/no/such/picture.png".to_owned()],
                _ => vec![],
            },
        },
        2..=4 => {
            let calls: Vec<ToolCallRequest> =
                (0..rng.below(3)).map(|k| call(rng, n * 10 + k)).collect();
            *open = calls.clone();
            Message::Assistant {
                text: rng.pick(TEXTS).to_owned(),
                tool_calls: calls,
            }
        }
        _ => {
            let id = if !open.is_empty() && rng.below(5) > 0 {
                open.remove(0).id
            } else {
                format!("orphan_{n}")
            };
            Message::Tool {
                tool_call_id: id,
                name: "read_file".into(),
                content: rng.pick(TEXTS).to_owned(),
                is_error: rng.below(3) == 0,
            }
        }
    }
}

fn tools() -> Vec<ToolDef> {
    vec![ToolDef {
        name: "read_file".into(),
        description: "Reads a file. Ünïcode too.".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    }]
}

fn models() -> (OpenAiModel, OpenAiModel, AnthropicModel) {
    let o = OpenAiModel::new(
        "gpt-4o-mini",
        "http://127.0.0.1:9/v1",
        None,
        HttpOptions::default(),
    )
    .unwrap();
    let r = OpenAiModel::new(
        "o3-mini",
        "http://127.0.0.1:9/v1",
        None,
        HttpOptions::default(),
    )
    .unwrap();
    let a = AnthropicModel::new(
        "claude-sonnet-4-5",
        "http://127.0.0.1:9",
        None,
        HttpOptions::default(),
    )
    .unwrap();
    (o, r, a)
}

fn check(models: &(OpenAiModel, OpenAiModel, AnthropicModel), req: &ModelRequest, what: &str) {
    let (o, r, a) = models;
    for (name, fast, reference) in [
        (
            "openai",
            o.request_bytes(req),
            o.request_body(req).to_string(),
        ),
        (
            "openai-reasoning",
            r.request_bytes(req),
            r.request_body(req).to_string(),
        ),
        (
            "anthropic",
            a.request_bytes(req),
            a.request_body(req).to_string(),
        ),
    ] {
        assert_eq!(
            String::from_utf8(fast).unwrap(),
            reference,
            "{name}: {what} (history of {})",
            req.messages.len()
        );
    }
}

#[test]
fn fragment_bodies_equal_the_full_encoding_over_random_histories_and_edits() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("pixel.png");
    std::fs::write(&image, [0x89, b'P', b'N', b'G', 0, 1, 2, 3]).unwrap();
    let image = image.display().to_string();
    for seed in 1..=40u64 {
        let models = models();
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut req = ModelRequest {
            system: if seed % 3 == 0 {
                String::new()
            } else {
                "You are Keel.\n".into()
            },
            messages: History::new(),
            tools: if seed % 4 == 0 { Vec::new() } else { tools() }.into(),
            max_output_tokens: if seed % 2 == 0 { Some(1000) } else { None },
        };
        let mut open = Vec::new();
        let mut snapshots: Vec<History> = Vec::new();
        for step in 0..60 {
            match rng.below(12) {
                // Edits: truncate (rewind), replace one, drop the head (compaction),
                // go back to an older snapshot (another branch of the same history).
                0 if !req.messages.is_empty() => {
                    let len = rng.below(req.messages.len());
                    req.messages.truncate(len);
                }
                1 if !req.messages.is_empty() => {
                    let i = rng.below(req.messages.len());
                    let m = message(&mut rng, step, &mut open, &image);
                    req.messages.set(i, m);
                }
                2 if req.messages.len() > 3 => {
                    let cut = rng.below(req.messages.len());
                    let mut kept = req.messages.slice(cut..);
                    kept.insert(
                        0,
                        Message::User {
                            text: "Summary of the earlier conversation:\nthings".into(),
                            images: vec![],
                        },
                    );
                    req.messages = kept;
                }
                3 if !snapshots.is_empty() => {
                    req.messages = snapshots[rng.below(snapshots.len())].clone();
                }
                _ => {
                    for _ in 0..=rng.below(3) {
                        let m = message(&mut rng, step, &mut open, &image);
                        req.messages.push(m);
                    }
                }
            }
            if rng.below(4) == 0 {
                snapshots.push(req.messages.clone());
            }
            check(&models, &req, &format!("seed {seed}, step {step}"));
            // The same request twice: the second comes from the cache alone.
            check(&models, &req, &format!("seed {seed}, step {step}, again"));
        }
    }
}

#[test]
fn a_history_that_starts_with_an_assistant_message_or_orphans() {
    let models = models();
    let histories: Vec<Vec<Message>> = vec![
        vec![],
        vec![Message::Assistant {
            text: "earlier answer".into(),
            tool_calls: vec![],
        }],
        vec![
            Message::Assistant {
                text: "  ".into(),
                tool_calls: vec![],
            },
            Message::Assistant {
                text: "after an empty one".into(),
                tool_calls: vec![],
            },
        ],
        vec![Message::Tool {
            tool_call_id: "lost".into(),
            name: "read_file".into(),
            content: "orphan".into(),
            is_error: true,
        }],
        vec![Message::Assistant {
            text: String::new(),
            tool_calls: vec![ToolCallRequest {
                id: "a".into(),
                name: "read_file".into(),
                arguments: json!({}),
            }],
        }],
    ];
    for h in histories {
        let mut req = ModelRequest {
            system: "s".into(),
            messages: History::new(),
            tools: tools().into(),
            max_output_tokens: None,
        };
        for m in h {
            req.messages.push(m);
            check(&models, &req, "prefix");
        }
        req.messages.push(Message::User {
            text: "next".into(),
            images: vec![],
        });
        check(&models, &req, "then a user message");
    }
    // The tool list's encoding is kept while a session offers the same list; a new
    // list (the session's tools changed) or none is encoded afresh.
    let mut req = ModelRequest {
        system: "s".into(),
        messages: vec![Message::User {
            text: "hi".into(),
            images: vec![],
        }]
        .into(),
        tools: tools().into(),
        max_output_tokens: None,
    };
    check(&models, &req, "a tool list");
    check(&models, &req, "the same tool list again");
    let mut more = tools();
    more.push(ToolDef {
        name: "mcp__web__echo".into(),
        description: "Echoes \"text\".".into(),
        parameters: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
    });
    req.tools = more.into();
    check(&models, &req, "a changed tool list");
    req.tools = Vec::new().into();
    check(&models, &req, "no tools");
}

/// Plays a conversation of `turns` tool calls through `model` against `server`, the
/// way the kernel does (the history grows by the answer and the results), and checks
/// that each body the server received is the full encoding of its request.
async fn multi_turn(
    model: &dyn Model,
    server: &FakeServer,
    reference: impl Fn(&ModelRequest) -> String,
    turns: usize,
) {
    let mut req = ModelRequest {
        system: "You are Keel.".into(),
        messages: History::new(),
        tools: tools().into(),
        max_output_tokens: None,
    };
    req.messages.push(Message::User {
        text: "read them all — ünïcode".into(),
        images: vec![],
    });
    let mut sent = Vec::new();
    for turn in 0..=turns {
        sent.push(reference(&req));
        let items = collect(model.stream(req.clone(), CancellationToken::new())).await;
        let calls: Vec<ToolCallRequest> = items
            .iter()
            .filter_map(|i| match i {
                Ok(ModelEvent::ToolCall(c)) => Some(c.clone()),
                _ => None,
            })
            .collect();
        let text = text_of(&items);
        req.messages.push(Message::Assistant {
            text,
            tool_calls: calls.clone(),
        });
        if turn == turns {
            assert!(calls.is_empty());
            break;
        }
        assert_eq!(calls.len(), 1, "turn {turn}: {items:?}");
        for c in calls {
            req.messages.push(Message::Tool {
                tool_call_id: c.id,
                name: c.name,
                content: format!(
                    "{{\"path\":\"f{turn}.txt\",\"content\":\"line \\\"{turn}\\\"\\n\"}}"
                ),
                is_error: turn % 5 == 4,
            });
        }
    }
    let got: Vec<String> = server
        .requests()
        .into_iter()
        .map(|r| String::from_utf8(r.body).unwrap())
        .collect();
    assert_eq!(got.len(), turns + 1);
    for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
        assert_eq!(g, s, "body of call {i}");
    }
}

#[tokio::test]
async fn a_multi_turn_openai_conversation_sends_the_full_encodings_bytes() {
    let turns = 12;
    let mut responses: Vec<FakeResponse> = (0..turns)
        .map(|i| {
            let args = format!(r#"{{"path":"f{i}.txt"}}"#);
            FakeResponse::sse(openai::tool_calls_stream(&[(
                &format!("call_{i}"),
                "read_file",
                &args,
            )]))
        })
        .collect();
    responses.push(FakeResponse::sse(openai::text_stream(&["done"])));
    let server = FakeServer::start(responses).await.unwrap();
    let model = OpenAiModel::new(
        "gpt-4o-mini",
        format!("{}/v1", server.base_url()),
        None,
        HttpOptions::default(),
    )
    .unwrap();
    let reference = model.clone();
    multi_turn(
        &model,
        &server,
        |r| reference.request_body(r).to_string(),
        turns,
    )
    .await;
}

#[tokio::test]
async fn a_multi_turn_anthropic_conversation_sends_the_full_encodings_bytes() {
    let turns = 12;
    let mut responses: Vec<FakeResponse> = (0..turns)
        .map(|i| {
            let args = format!(r#"{{"path":"f{i}.txt"}}"#);
            FakeResponse::sse(anthropic::tool_use_stream(
                "reading",
                &[(&format!("toolu_{i}"), "read_file", &args)],
            ))
        })
        .collect();
    responses.push(FakeResponse::sse(anthropic::text_stream(&["done"])));
    let server = FakeServer::start(responses).await.unwrap();
    let model = AnthropicModel::new(
        "claude-sonnet-4-5",
        server.base_url(),
        Some("k".into()),
        HttpOptions::default(),
    )
    .unwrap();
    let reference = model.clone();
    multi_turn(
        &model,
        &server,
        |r| reference.request_body(r).to_string(),
        turns,
    )
    .await;
}
