//! A host that resumes a stored session: a first kernel runs a request in a session kept
//! by the file store (in a temporary directory) and stops; a second kernel on the same
//! directory resumes the session, with its history, and goes on.
//!
//! Run: `cargo run --example resume`

use std::path::Path;
use std::sync::Arc;

use keel::models::ScriptedModel;
use keel::protocol::commands::SessionStart;
use keel::protocol::{ErrorCode, ErrorPayload, Event};
use keel::{EventStream, Kernel};
use serde_json::json;

fn kernel(workspace: &Path, store: &Path, answer: &str) -> Result<Kernel, ErrorPayload> {
    let model = ScriptedModel::from_json(json!({ "turns": [{ "text": answer }] }))?;
    Kernel::builder()
        .workspace(workspace)
        .model(Arc::new(model))
        .store_dir(store)
        .build()
}

/// The final text of the request `request_id`.
async fn answer(events: &mut EventStream, request_id: &str) -> Result<String, ErrorPayload> {
    while let Some(env) = events.recv().await {
        if let Event::SessionCompleted(done) = env.event {
            if env.request_id == request_id {
                return Ok(done.final_text.unwrap_or_default());
            }
        }
    }
    Err(ErrorPayload::new(
        ErrorCode::RuntimeInternalError,
        "the stream ended",
    ))
}

/// Runs the example; returns the session id, the messages of history it was resumed
/// with, and the second answer.
pub async fn run() -> Result<(String, u32, String), ErrorPayload> {
    let io = |e: std::io::Error| ErrorPayload::new(ErrorCode::RuntimeInternalError, e.to_string());
    let workspace = tempfile::tempdir().map_err(io)?;
    let store = tempfile::tempdir().map_err(io)?;

    // The first run: one request, then the kernel stops (as a process would exit).
    let first = kernel(workspace.path(), store.path(), "Noted: the build is green.")?;
    let (session, mut events) = first.start_session(SessionStart::new()).await?;
    let id = session.id().to_owned();
    let rid = session.send("Remember: the build is green.").await?;
    println!("first run: {}", answer(&mut events, &rid).await?);
    first.shutdown("done").await;
    drop((session, events, first));

    // The second run: a new kernel on the same store resumes the session.
    let second = kernel(
        workspace.path(),
        store.path(),
        "You told me the build is green.",
    )?;
    let (session, mut events) = second.resume_session(&id, None).await?;
    let mut messages = 0;
    while let Some(env) = events.recv().await {
        if let Event::SessionResumed(r) = env.event {
            println!(
                "resumed {} with {} messages of history",
                r.session.session_id, r.message_count
            );
            messages = r.message_count;
            break;
        }
    }
    let rid = session.send("What did I tell you?").await?;
    let again = answer(&mut events, &rid).await?;
    println!("second run: {again}");
    second.shutdown("done").await;
    Ok((id, messages, again))
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("{e}");
        std::process::exit(1);
    }
}
