//! Recording a session's model responses in the scripted model's format
//! (`docs/configuration.md`), so `--model scripted:FILE` replays the session offline.
//!
//! [`RecordingModel`] wraps the session's model: each call's stream passes through
//! unchanged while its text, thought, tool calls (with their ids), usage, retries and
//! end are gathered into one script turn; when the call ends the whole script is
//! rewritten (temporary file + rename), so the file is a valid script after every
//! call, even if the process dies later. A call cancelled before it ended is recorded
//! as far as it got, with its output, so a replay of the interrupted session makes the
//! same calls.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use keel_envelope::{ErrorCode, ErrorPayload};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::base::model::{FinishReason, Model, ModelEvent, ModelRequest, ModelStream};

/// A model whose responses are written to a script file.
#[derive(Debug)]
pub struct RecordingModel {
    inner: Arc<dyn Model>,
    path: PathBuf,
    turns: Arc<Mutex<Vec<Value>>>,
}

impl RecordingModel {
    /// Records `inner`'s responses into `path` (created or truncated now, so a path
    /// that cannot be written is refused at once with `REQUEST_INVALID`).
    pub fn new(inner: Arc<dyn Model>, path: impl Into<PathBuf>) -> Result<Self, ErrorPayload> {
        let path = path.into();
        write_script(&path, &[], inner.context_window()).map_err(|e| {
            ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("cannot record into {}: {e}", path.display()),
            )
            .with_detail("field", "payload.record")
        })?;
        Ok(Self {
            inner,
            path,
            turns: Arc::new(Mutex::new(Vec::new())),
        })
    }
}

fn write_script(path: &Path, turns: &[Value], window: u64) -> std::io::Result<()> {
    let script = json!({ "contextWindow": window, "turns": turns });
    let mut bytes = serde_json::to_vec_pretty(&script).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// One call's output, gathered as it streams.
#[derive(Debug, Default)]
struct Turn {
    text: Vec<String>,
    thought: Vec<String>,
    calls: Vec<Value>,
    usage: Option<Value>,
    retries: Vec<Value>,
    stop: Option<FinishReason>,
    error: Option<Value>,
}

fn error_json(e: &ErrorPayload, retry_delay: Option<u64>) -> Value {
    let mut m = Map::new();
    m.insert("message".into(), json!(e.message));
    m.insert("code".into(), json!(e.code));
    if let Some(h) = &e.hint {
        m.insert("hint".into(), json!(h));
    }
    m.insert("retryable".into(), json!(e.retryable));
    if let Some(d) = retry_delay {
        m.insert("delayMs".into(), json!(d));
    }
    Value::Object(m)
}

impl Turn {
    fn take(&mut self, ev: &ModelEvent) {
        match ev {
            ModelEvent::TextDelta(t) => self.text.push(t.clone()),
            ModelEvent::ThoughtDelta(t) => self.thought.push(t.clone()),
            ModelEvent::ToolCall(c) => self.calls.push(json!({
                "id": c.id, "name": c.name, "arguments": c.arguments,
            })),
            ModelEvent::Usage(u) => {
                self.usage = Some(json!({
                    "inputTokens": u.input_tokens,
                    "outputTokens": u.output_tokens,
                    "cachedInputTokens": u.cached_input_tokens,
                }))
            }
            ModelEvent::Retrying {
                delay_ms, error, ..
            } => self.retries.push(error_json(error, Some(*delay_ms))),
            ModelEvent::Finished(r) => self.stop = Some(*r),
        }
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        // The whole text (for a reader) and its exact deltas (for the replay).
        if !self.thought.is_empty() {
            m.insert("thought".into(), json!(self.thought.concat()));
            m.insert("thoughtDeltas".into(), json!(self.thought));
        }
        if !self.text.is_empty() {
            m.insert("text".into(), json!(self.text.concat()));
            m.insert("textDeltas".into(), json!(self.text));
        }
        if !self.calls.is_empty() {
            m.insert("toolCalls".into(), Value::Array(self.calls.clone()));
        }
        if let Some(u) = &self.usage {
            m.insert("usage".into(), u.clone());
        }
        if !self.retries.is_empty() {
            m.insert("retries".into(), Value::Array(self.retries.clone()));
        }
        if let Some(e) = &self.error {
            m.insert("error".into(), e.clone());
        }
        if let Some(r) = self.stop {
            m.insert("stop".into(), json!(r));
        }
        Value::Object(m)
    }
}

/// Writes the gathered turn when the call's stream is done with (ended or dropped).
struct Writer {
    turn: Turn,
    turns: Arc<Mutex<Vec<Value>>>,
    path: PathBuf,
    window: u64,
}

impl Drop for Writer {
    fn drop(&mut self) {
        let mut turns = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        turns.push(self.turn.to_json());
        if let Err(e) = write_script(&self.path, &turns, self.window) {
            tracing::warn!(path = %self.path.display(), error = %e, "recording a model response failed");
        }
    }
}

impl Model for RecordingModel {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn context_window(&self) -> u64 {
        self.inner.context_window()
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let inner = self.inner.stream(request, cancel);
        let writer = Writer {
            turn: Turn::default(),
            turns: self.turns.clone(),
            path: self.path.clone(),
            window: self.inner.context_window(),
        };
        // The writer lives in the stream's state: it writes when the stream ends or
        // is dropped (a cancelled call).
        Box::pin(futures::stream::unfold(
            Some((inner, writer)),
            |st| async move {
                let (mut inner, mut writer) = st?;
                let item = inner.next().await?;
                match &item {
                    Ok(ev) => writer.turn.take(ev),
                    Err(e) => writer.turn.error = Some(error_json(&e.0, None)),
                }
                Some((item, Some((inner, writer))))
            },
        ))
    }
}
