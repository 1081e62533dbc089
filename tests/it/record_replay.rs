//! Record and replay: a session against a local server speaking the OpenAI streaming
//! format is recorded (`session.start {record}`) in the scripted model's format; the
//! same request replayed offline with `scripted:<file>` in a copy of the workspace
//! gives the same event stream, once ids, times and paths are normalised.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel_adapters::{HttpOptions, OpenAiModel, ScriptedModel};
use keel_envelope::commands::SessionStart;
use keel_envelope::types::PermissionMode;
use keel_envelope::{Envelope, ErrorCode, Event};
use keel_kernel::model::Model;
use keel_kernel::Kernel;
use keel_testsupport::model_server::{openai, FakeResponse, FakeServer};
use serde_json::Value;

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("app.txt"), "version = 1\n").unwrap();
    ws
}

fn options(record: Option<&Path>) -> SessionStart {
    SessionStart::new()
        .permission_mode(PermissionMode::Auto)
        .title(Some("bump".into()))
        .record(record.map(|p| p.display().to_string()))
}

/// Runs one request; returns every envelope of the session up to its end.
async fn run(model: Arc<dyn Model>, ws: &Path, record: Option<&Path>) -> Vec<Envelope> {
    let store = tempfile::tempdir().unwrap();
    let config = keel_kernel::KernelConfig {
        sandbox: keel_tools::SandboxConfig::off(),
        ..Default::default()
    };
    let kernel = Kernel::builder()
        .config(config)
        .workspace(ws)
        .model(model)
        .store_dir(store.path())
        .build()
        .unwrap();
    let (session, mut events) = kernel.start_session(options(record)).await.unwrap();
    let rid = session
        .send("bump the version, then check it")
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .unwrap()
            .unwrap();
        let done = matches!(&env.event, Event::SessionCompleted(_)) && env.request_id == rid;
        seen.push(env);
        if done {
            break;
        }
    }
    kernel.shutdown("test").await;
    seen
}

/// The stream as JSON with ids numbered in order of appearance, times zeroed and the
/// workspace and model names replaced.
fn normalise(envs: &[Envelope], ws: &Path, model: &str) -> Vec<Value> {
    fn walk(v: &mut Value, ids: &mut HashMap<String, usize>, ws: &str, model: &str) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    let id_like = k.ends_with("Id") && !k.ends_with("ToolCallId");
                    if k == "timestamp" || k.ends_with("Ms") || k.ends_with("At") {
                        *x = Value::from(0);
                    } else if let (true, Some(s)) = (id_like, x.as_str()) {
                        let n = ids.len();
                        let n = *ids.entry(s.to_owned()).or_insert(n);
                        *x = Value::from(format!("<id{n}>"));
                    } else {
                        walk(x, ids, ws, model);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, ids, ws, model)),
            Value::String(s) => {
                *s = s.replace(ws, "<ws>").replace(model, "<model>");
            }
            _ => {}
        }
    }
    let mut ids = HashMap::new();
    let ws = ws.display().to_string();
    envs.iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            walk(&mut v, &mut ids, &ws, model);
            v
        })
        .collect()
}

#[tokio::test]
async fn a_recorded_session_replays_offline_with_the_same_event_stream() {
    let server = FakeServer::start([
        FakeResponse::sse(openai::tool_calls_stream(&[(
            "call_edit",
            "edit_file",
            r#"{"path":"app.txt","edits":[{"oldText":"version = 1","newText":"version = 2"}]}"#,
        )])),
        FakeResponse::sse(openai::tool_calls_stream(&[(
            "call_read",
            "read_file",
            r#"{"path":"app.txt"}"#,
        )])),
        FakeResponse::sse(openai::text_stream(&["Bumped the ", "version to 2", "."])),
    ])
    .await
    .unwrap();
    let live = OpenAiModel::new(
        "gpt-test",
        format!("{}/v1", server.base_url()),
        Some("sk-test".into()),
        HttpOptions::default(),
    )
    .unwrap();
    let live_id = live.id();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("session.json");
    let ws1 = workspace();
    let recorded = run(Arc::new(live), ws1.path(), Some(&file)).await;
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        std::fs::read_to_string(ws1.path().join("app.txt")).unwrap(),
        "version = 2\n"
    );

    // The file is a script: three turns, the text with its exact deltas.
    let script: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let turns = script["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[0]["toolCalls"][0]["id"], "call_edit");
    assert_eq!(turns[2]["text"], "Bumped the version to 2.");
    assert_eq!(turns[2]["textDeltas"].as_array().unwrap().len(), 3);

    // Offline, in a fresh copy of the workspace: no server, the same stream.
    let replay = ScriptedModel::from_file(&file).unwrap();
    let replay_id = replay.id();
    let ws2 = workspace();
    let replayed = run(Arc::new(replay), ws2.path(), None).await;
    assert_eq!(
        server.requests().len(),
        3,
        "the replay never calls the server"
    );
    assert_eq!(
        std::fs::read_to_string(ws2.path().join("app.txt")).unwrap(),
        "version = 2\n"
    );
    let count = |ty: &str| replayed.iter().filter(|e| e.type_name() == ty).count();
    assert_eq!(count("assistant.delta"), 3);
    assert_eq!(count("tool.call.completed"), 2);
    assert_eq!(count("usage.updated"), 3);
    let a = normalise(&recorded, ws1.path(), &live_id);
    let b = normalise(&replayed, ws2.path(), &replay_id);
    assert_eq!(a.len(), b.len(), "{a:#?}\n---\n{b:#?}");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y);
    }
}

#[tokio::test]
async fn a_record_file_that_cannot_be_written_is_refused_at_start() {
    let ws = workspace();
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(Arc::new(
            ScriptedModel::from_json(serde_json::json!({"turns": []})).unwrap(),
        ))
        .memory_store()
        .build()
        .unwrap();
    let missing = ws.path().join("no/such/dir/rec.json");
    let err = kernel
        .start_session(options(Some(&missing)))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::RequestInvalid);
    assert_eq!(err.details["field"], "payload.record");
    assert!(kernel.list_sessions().unwrap().is_empty());
}
