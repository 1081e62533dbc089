//! A minimal host: a kernel on the scripted model (offline), one request, its events
//! printed as the JSON lines a host would send over the wire.
//!
//! Run: `cargo run --example minimal`

use std::io::Write;
use std::sync::Arc;

use keel::models::ScriptedModel;
use keel::protocol::codec::encode_line;
use keel::protocol::commands::SessionStart;
use keel::protocol::{ErrorPayload, Event};

/// Runs the example, writing each event of the request to `out`; returns the answer.
pub async fn run(out: &mut impl Write) -> Result<String, ErrorPayload> {
    let workspace = tempfile::tempdir().map_err(|e| io_error(&e))?;
    // The scripted model answers from a script: here one turn of text.
    let model = ScriptedModel::from_json(serde_json::json!({
        "turns": [{ "text": "Hello! I am Keel on a scripted model.", "usage": { "inputTokens": 12, "outputTokens": 9 } }]
    }))?;
    let kernel = keel::Kernel::builder()
        .workspace(workspace.path())
        .model(Arc::new(model))
        .memory_store()
        .build()?;
    let (session, mut events) = kernel.start_session(SessionStart::new()).await?;
    let request_id = session.send("Say hello").await?;
    while let Some(env) = events.recv().await {
        out.write_all(&encode_line(&env))
            .map_err(|e| io_error(&e))?;
        if env.request_id == request_id {
            if let Event::SessionCompleted(done) = &env.event {
                kernel.shutdown("done").await;
                return Ok(done.final_text.clone().unwrap_or_default());
            }
        }
    }
    Err(ErrorPayload::new(
        keel::protocol::ErrorCode::RuntimeInternalError,
        "the stream ended",
    ))
}

fn io_error(e: &std::io::Error) -> ErrorPayload {
    ErrorPayload::new(
        keel::protocol::ErrorCode::RuntimeInternalError,
        e.to_string(),
    )
}

#[tokio::main]
async fn main() {
    match run(&mut std::io::stdout()).await {
        Ok(answer) => eprintln!("answer: {answer}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
