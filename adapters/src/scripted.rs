//! The scripted model: a deterministic model that replays a JSON script of turns.
//! Used by tests and by the offline demo; it drives the same kernel paths as a real
//! model (text in several deltas, thoughts, several tool calls per turn, usage,
//! retries, errors, delays that honour cancellation). The format is documented in
//! `docs/configuration.md`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use keel_envelope::error::{ErrorCode, ErrorHint, ErrorPayload};
use keel_envelope::types::Usage;
use keel_kernel::model::{
    FinishReason, Message, Model, ModelError, ModelEvent, ModelRequest, ModelStream,
    ToolCallRequest,
};
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{model_error, model_unavailable};

/// The text of the turn the model produces once every scripted turn is used.
pub const SCRIPT_EXHAUSTED_TEXT: &str = "(The script has no more turns.)";
/// Longest text delta the scripted model emits, in characters.
const MAX_CHUNK_CHARS: usize = 16;
/// Most text one turn may stream with `textRepeat` (the text's size times the count).
pub const MAX_REPEATED_TEXT_BYTES: u64 = 64 * 1024 * 1024;

/// A whole script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Script {
    /// The turns, one per model call.
    pub turns: Vec<ScriptTurn>,
    /// The context window the model reports (default 128 000).
    #[serde(default)]
    pub context_window: Option<u64>,
    /// Default pause between deltas, in milliseconds (default 0).
    #[serde(default)]
    pub chunk_delay_ms: Option<u64>,
}

/// One model call's worth of output.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptTurn {
    /// Answer text, streamed as several deltas.
    #[serde(default)]
    pub text: Option<String>,
    /// How many times the text is streamed in a row (default 1): a compact way to
    /// script many deltas, e.g. for load tests.
    #[serde(default)]
    pub text_repeat: Option<u64>,
    /// The text as these exact deltas, in order (instead of `text` split into
    /// deltas): what a recording writes, so a replay streams the same deltas.
    #[serde(default)]
    pub text_deltas: Option<Vec<String>>,
    /// Thought summary, streamed before the text.
    #[serde(default)]
    pub thought: Option<String>,
    /// The thought as these exact deltas (instead of `thought`).
    #[serde(default)]
    pub thought_deltas: Option<Vec<String>>,
    /// Tool calls, emitted after the text.
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
    /// Token usage reported before the end.
    #[serde(default)]
    pub usage: Option<ScriptUsage>,
    /// Pause before any output, in milliseconds (cancellation ends it at once).
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Pause between deltas, in milliseconds (overrides the script's default).
    #[serde(default)]
    pub chunk_delay_ms: Option<u64>,
    /// Retryable failures reported (as `Retrying`) before the output.
    #[serde(default)]
    pub retries: Vec<ScriptError>,
    /// A failure ending the call after any text, thought and tool calls.
    #[serde(default)]
    pub error: Option<ScriptError>,
    /// Why the call ends (default `tool_use` when there are tool calls, else `end_turn`).
    #[serde(default)]
    pub stop: Option<FinishReason>,
    /// Use this turn only when one of the trailing tool results of the request
    /// contains this text.
    #[serde(default)]
    pub when_last_tool_result_contains: Option<String>,
    /// Fail the call unless the last message of the request contains this text.
    #[serde(default)]
    pub expect_last_message_contains: Option<String>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptToolCall {
    /// The call id (default `call_<turn>_<n>`).
    #[serde(default)]
    pub id: Option<String>,
    /// The tool name.
    pub name: String,
    /// The arguments object (default `{}`).
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Scripted token usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptUsage {
    /// Prompt tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cached prompt tokens.
    #[serde(default)]
    pub cached_input_tokens: u64,
}

/// A scripted failure.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptError {
    /// The message.
    pub message: String,
    /// The code (default `MODEL_ERROR`).
    #[serde(default, deserialize_with = "keel_envelope::wire::strict::opt")]
    pub code: Option<ErrorCode>,
    /// The hint, if any.
    #[serde(default, deserialize_with = "keel_envelope::wire::strict::opt")]
    pub hint: Option<ErrorHint>,
    /// Whether it is retryable (default false; true for `retries` entries).
    #[serde(default)]
    pub retryable: Option<bool>,
    /// For `retries` entries: the announced wait, in milliseconds (default 0).
    #[serde(default)]
    pub delay_ms: Option<u64>,
}

impl ScriptError {
    fn payload(&self, default_retryable: bool) -> ErrorPayload {
        let mut p = model_error(self.message.clone())
            .retryable(self.retryable.unwrap_or(default_retryable))
            .with_detail("provider", "scripted");
        p.code = self.code.clone().unwrap_or(ErrorCode::ModelError);
        if let Some(h) = &self.hint {
            p = p.hint(h.clone());
        }
        p
    }
}

/// How many requests a scripted model keeps for [`ScriptedModel::requests`]: the
/// first ones. Keeping every one would hold a version of the history per model call
/// (memory growing with the square of a long session's length) and make each
/// addition to the session's history copy it.
pub const KEPT_REQUESTS: usize = 64;

#[derive(Debug, Default)]
struct State {
    used: Vec<bool>,
    requests: Vec<ModelRequest>,
    /// At most this many requests are kept ([`KEPT_REQUESTS`] unless set).
    keep: usize,
}

/// The scripts this process parsed, by file, while a model still uses them.
mod parsed {
    use super::{Arc, Mutex, Path, PathBuf, Script, Weak};
    use std::collections::HashMap;
    use std::time::SystemTime;

    /// A file's length and modification time when it was read.
    pub(super) type Stamp = (u64, Option<SystemTime>);

    type Parsed = HashMap<PathBuf, (Stamp, Weak<Script>)>;

    fn cache() -> std::sync::MutexGuard<'static, Parsed> {
        static CACHE: std::sync::OnceLock<Mutex<Parsed>> = std::sync::OnceLock::new();
        CACHE
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn get(path: &Path, stamp: Stamp) -> Option<Arc<Script>> {
        let cache = cache();
        let (known, script) = cache.get(path)?;
        (*known == stamp).then(|| script.upgrade()).flatten()
    }

    pub(super) fn put(path: &Path, stamp: Stamp, script: &Arc<Script>) {
        let mut cache = cache();
        // Scripts no model uses any more are forgotten.
        cache.retain(|_, (_, s)| s.strong_count() > 0);
        cache.insert(path.to_path_buf(), (stamp, Arc::downgrade(script)));
    }
}

/// A model replaying a [`Script`]. Each call consumes the first unused turn whose
/// condition holds; once none is left it answers [`SCRIPT_EXHAUSTED_TEXT`].
#[derive(Debug)]
pub struct ScriptedModel {
    id: String,
    script: Arc<Script>,
    state: Mutex<State>,
}

impl ScriptedModel {
    /// Builds a model from a script value; `MODEL_UNAVAILABLE` naming the faulty
    /// field when it does not match the format.
    pub fn from_json(value: Value) -> Result<Self, ErrorPayload> {
        Self::parse(value, "inline script")
    }

    /// Reads a script file; `MODEL_UNAVAILABLE` when it is unreadable or invalid.
    ///
    /// Models of one process made from the same file share its parsed script while
    /// the file is unchanged (same length and modification time): a bridge whose
    /// sessions all run one script keeps it once, not once per session.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ErrorPayload> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let stamp = std::fs::metadata(path)
            .ok()
            .map(|m| (m.len(), m.modified().ok()));
        if let Some(script) = stamp.and_then(|stamp| parsed::get(path, stamp)) {
            return Ok(Self::with_script(script).with_id(format!("scripted:{shown}")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            model_unavailable(format!("the script {shown} could not be read: {e}"))
                .hint(ErrorHint::CheckLlmConfig)
                .with_detail("path", shown.clone())
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            model_unavailable(format!(
                "the script {shown} is not valid JSON (line {}, column {}): {e}",
                e.line(),
                e.column()
            ))
            .hint(ErrorHint::CheckLlmConfig)
            .with_detail("path", shown.clone())
        })?;
        let mut model = Self::parse(value, &shown)?;
        model.id = format!("scripted:{shown}");
        if let Some(stamp) = stamp {
            parsed::put(path, stamp, &model.script);
        }
        Ok(model)
    }

    fn with_script(script: Arc<Script>) -> Self {
        Self {
            id: "scripted:inline".to_owned(),
            state: Mutex::new(State {
                used: vec![false; script.turns.len()],
                requests: Vec::new(),
                keep: KEPT_REQUESTS,
            }),
            script,
        }
    }

    fn parse(value: Value, source: &str) -> Result<Self, ErrorPayload> {
        let script: Script = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            model_unavailable(format!(
                "the script {source} is invalid at {path}: {}",
                e.inner()
            ))
            .hint(ErrorHint::CheckLlmConfig)
            .with_detail("path", source.to_owned())
            .with_detail("field", path)
        })?;
        for (t, turn) in script.turns.iter().enumerate() {
            if let Some(repeat) = turn.text_repeat {
                let text_bytes = turn.text.as_deref().map_or(0, str::len) as u64;
                let problem = if repeat == 0 {
                    Some("must be at least 1".to_owned())
                } else if text_bytes == 0 {
                    Some("needs a non-empty `text`".to_owned())
                } else if text_bytes.saturating_mul(repeat) > MAX_REPEATED_TEXT_BYTES {
                    Some(format!(
                        "would stream {} bytes of text, more than the limit of {MAX_REPEATED_TEXT_BYTES}",
                        text_bytes.saturating_mul(repeat)
                    ))
                } else {
                    None
                };
                if let Some(problem) = problem {
                    return Err(model_unavailable(format!(
                        "the script {source} is invalid at turns[{t}].textRepeat: it {problem}"
                    ))
                    .hint(ErrorHint::CheckLlmConfig)
                    .with_detail("path", source.to_owned())
                    .with_detail("field", format!("turns[{t}].textRepeat")));
                }
            }
            for (c, call) in turn.tool_calls.iter().enumerate() {
                if call.name.is_empty() || !call.arguments.is_object() {
                    return Err(model_unavailable(format!(
                        "the script {source} is invalid at turns[{t}].toolCalls[{c}]: a tool call needs a name and an arguments object"
                    ))
                    .hint(ErrorHint::CheckLlmConfig)
                    .with_detail("path", source.to_owned()));
                }
            }
        }
        Ok(Self::with_script(Arc::new(script)))
    }

    /// Sets the id reported by [`Model::id`].
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Keeps at most `n` requests for [`ScriptedModel::requests`] (default
    /// [`KEPT_REQUESTS`]). A model nobody inspects (one named by a `scripted:` model
    /// spec, as hosts make them) keeps none: each kept request holds its own version
    /// of the session's history.
    pub fn keep_requests(self, n: usize) -> Self {
        self.lock().keep = n;
        self
    }

    /// The requests received so far, oldest first (the first [`KEPT_REQUESTS`]).
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.lock().requests.clone()
    }

    /// How many turns are still unused.
    pub fn remaining_turns(&self) -> usize {
        self.lock().used.iter().filter(|u| !**u).count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Picks and consumes the turn for `request`.
    fn take_turn(&self, request: &ModelRequest) -> Option<(usize, ScriptTurn)> {
        let mut state = self.lock();
        if state.requests.len() < state.keep {
            state.requests.push(request.clone());
        }
        let trailing: Vec<&str> = request
            .messages
            .iter()
            .rev()
            .map_while(|m| match m {
                Message::Tool { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        let index = self.script.turns.iter().enumerate().position(|(i, t)| {
            !state.used[i]
                && t.when_last_tool_result_contains
                    .as_deref()
                    .is_none_or(|needle| trailing.iter().any(|c| c.contains(needle)))
        })?;
        state.used[index] = true;
        Some((index, self.script.turns[index].clone()))
    }
}

enum Step {
    Sleep(Duration),
    Emit(Result<ModelEvent, ModelError>),
    /// Deltas made one at a time, so that a repeated text costs memory once.
    Deltas(Deltas),
}

struct Deltas {
    chunks: Vec<String>,
    make: fn(String) -> ModelEvent,
    /// Pause before each delta.
    delay: Option<Duration>,
    /// Whether the pause before the next delta is over.
    slept: bool,
    next: usize,
    rounds_left: u64,
}

impl Deltas {
    fn done(&self) -> bool {
        self.chunks.is_empty() || self.rounds_left == 0
    }

    fn next_delta(&mut self) -> Option<ModelEvent> {
        if self.done() {
            return None;
        }
        let chunk = self.chunks.get(self.next)?.clone();
        self.next += 1;
        if self.next == self.chunks.len() {
            self.next = 0;
            self.rounds_left -= 1;
        }
        self.slept = false;
        Some((self.make)(chunk))
    }
}

/// Splits text into deltas: at most [`MAX_CHUNK_CHARS`] characters, ending after
/// whitespace where possible.
pub(crate) fn chunk_text(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut n = 0;
    for c in text.chars() {
        cur.push(c);
        n += 1;
        if c.is_whitespace() || n >= MAX_CHUNK_CHARS {
            out.push(std::mem::take(&mut cur));
            n = 0;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn last_message_text(request: &ModelRequest) -> &str {
    match request.messages.last() {
        Some(Message::User { text, .. }) | Some(Message::Assistant { text, .. }) => text,
        Some(Message::Tool { content, .. }) => content,
        None => "",
    }
}

impl ScriptedModel {
    fn steps(&self, request: &ModelRequest) -> VecDeque<Step> {
        let mut steps = VecDeque::new();
        let Some((index, turn)) = self.take_turn(request) else {
            steps.push_back(Step::Emit(Ok(ModelEvent::TextDelta(
                SCRIPT_EXHAUSTED_TEXT.to_owned(),
            ))));
            steps.push_back(Step::Emit(Ok(ModelEvent::Finished(FinishReason::EndTurn))));
            return steps;
        };
        if let Some(needle) = &turn.expect_last_message_contains {
            if !last_message_text(request).contains(needle.as_str()) {
                let err = model_error(format!(
                    "script turn {index} expected the last message to contain {needle:?}"
                ))
                .with_detail("provider", "scripted")
                .with_detail("turn", index);
                steps.push_back(Step::Emit(Err(ModelError(err))));
                return steps;
            }
        }
        let chunk_delay = turn
            .chunk_delay_ms
            .or(self.script.chunk_delay_ms)
            .filter(|d| *d > 0)
            .map(Duration::from_millis);
        if let Some(d) = turn.delay_ms.filter(|d| *d > 0) {
            steps.push_back(Step::Sleep(Duration::from_millis(d)));
        }
        for (i, r) in turn.retries.iter().enumerate() {
            let delay = r.delay_ms.unwrap_or(0);
            steps.push_back(Step::Emit(Ok(ModelEvent::Retrying {
                attempt: i as u32 + 1,
                delay_ms: delay,
                error: r.payload(true),
            })));
            if delay > 0 {
                steps.push_back(Step::Sleep(Duration::from_millis(delay)));
            }
        }
        let mut deltas = |text: &Option<String>,
                          exact: &Option<Vec<String>>,
                          rounds: u64,
                          make: fn(String) -> ModelEvent| {
            steps.push_back(Step::Deltas(Deltas {
                chunks: match exact {
                    Some(d) => d.iter().filter(|c| !c.is_empty()).cloned().collect(),
                    None => chunk_text(text.as_deref().unwrap_or_default()),
                },
                make,
                delay: chunk_delay,
                slept: false,
                next: 0,
                rounds_left: rounds,
            }));
        };
        deltas(
            &turn.thought,
            &turn.thought_deltas,
            1,
            ModelEvent::ThoughtDelta,
        );
        deltas(
            &turn.text,
            &turn.text_deltas,
            turn.text_repeat.unwrap_or(1),
            ModelEvent::TextDelta,
        );
        for (i, call) in turn.tool_calls.iter().enumerate() {
            steps.push_back(Step::Emit(Ok(ModelEvent::ToolCall(ToolCallRequest {
                id: call
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call_{index}_{i}")),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            }))));
        }
        if let Some(u) = turn.usage {
            steps.push_back(Step::Emit(Ok(ModelEvent::Usage(Usage::new(
                u.input_tokens,
                u.output_tokens,
                u.cached_input_tokens,
            )))));
        }
        if let Some(e) = &turn.error {
            steps.push_back(Step::Emit(Err(ModelError(e.payload(false)))));
        } else {
            let stop = turn.stop.unwrap_or(if turn.tool_calls.is_empty() {
                FinishReason::EndTurn
            } else {
                FinishReason::ToolUse
            });
            steps.push_back(Step::Emit(Ok(ModelEvent::Finished(stop))));
        }
        steps
    }
}

impl Model for ScriptedModel {
    fn id(&self) -> String {
        self.id.clone()
    }

    fn context_window(&self) -> u64 {
        self.script
            .context_window
            .unwrap_or(crate::models::DEFAULT_CONTEXT_WINDOW)
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let steps = self.steps(&request);
        Box::pin(futures::stream::unfold(
            (steps, cancel),
            |(mut steps, cancel)| async move {
                loop {
                    if cancel.is_cancelled() {
                        return None;
                    }
                    let pause = match steps.front_mut()? {
                        Step::Deltas(deltas) if deltas.done() => {
                            steps.pop_front();
                            continue;
                        }
                        Step::Deltas(deltas) => match deltas.delay {
                            Some(d) if !deltas.slept => {
                                deltas.slept = true;
                                d
                            }
                            _ => match deltas.next_delta() {
                                Some(event) => return Some((Ok(event), (steps, cancel))),
                                None => continue,
                            },
                        },
                        Step::Sleep(d) => {
                            let d = *d;
                            steps.pop_front();
                            d
                        }
                        Step::Emit(_) => match steps.pop_front() {
                            Some(Step::Emit(item)) => return Some((item, (steps, cancel))),
                            _ => continue,
                        },
                    };
                    tokio::select! {
                        biased;
                        _ = cancel.cancelled() => return None,
                        _ = tokio::time::sleep(pause) => {}
                    }
                }
            },
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Models made from one unchanged file share its parsed script; a changed file is
    /// read again.
    #[test]
    fn models_of_one_file_share_its_script_until_it_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("script.json");
        std::fs::write(&path, r#"{"turns": [{"text": "one"}]}"#).expect("write");
        let a = ScriptedModel::from_file(&path).expect("a");
        let b = ScriptedModel::from_file(&path).expect("b");
        assert!(Arc::ptr_eq(&a.script, &b.script));
        assert_eq!(b.id, format!("scripted:{}", path.display()));
        std::fs::write(&path, r#"{"turns": [{"text": "one"}, {"text": "two"}]}"#).expect("rewrite");
        let c = ScriptedModel::from_file(&path).expect("c");
        assert!(!Arc::ptr_eq(&a.script, &c.script));
        assert_eq!(c.script.turns.len(), 2);
        assert_eq!(c.lock().used.len(), 2);
        // A file that became invalid is an error, whatever was parsed before.
        std::fs::write(&path, r#"{"turns": 3}"#).expect("rewrite");
        assert!(ScriptedModel::from_file(&path).is_err());
    }

    #[test]
    fn chunks_rejoin_to_the_text() {
        let text = "Hello there, this is a fairly long sentence — with ünïcödé and 一二三四五六七八九十一二三四五六七八九十.";
        let chunks = chunk_text(text);
        assert!(chunks.len() > 5);
        assert_eq!(chunks.concat(), text);
        assert!(chunks.iter().all(|c| c.chars().count() <= MAX_CHUNK_CHARS));
        assert!(chunk_text("").is_empty());
    }

    fn ask() -> ModelRequest {
        ModelRequest {
            system: String::new(),
            messages: vec![Message::User {
                text: "go".into(),
                images: vec![],
            }]
            .into(),
            tools: Vec::new().into(),
            max_output_tokens: None,
        }
    }

    async fn events(model: &ScriptedModel) -> Vec<ModelEvent> {
        use futures::StreamExt;
        model
            .stream(ask(), CancellationToken::new())
            .map(|item| item.unwrap())
            .collect()
            .await
    }

    #[tokio::test]
    async fn a_repeated_text_streams_its_deltas_that_many_times() {
        let model = ScriptedModel::from_json(serde_json::json!({"turns": [
            {"thought": "hm", "text": "word ", "textRepeat": 1000, "chunkDelayMs": 0},
            {"text": "ab cd ", "textRepeat": 3, "chunkDelayMs": 1},
        ]}))
        .unwrap();
        let first = events(&model).await;
        assert!(matches!(&first[0], ModelEvent::ThoughtDelta(t) if t == "hm"));
        let texts: Vec<&str> = first
            .iter()
            .filter_map(|e| match e {
                ModelEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts.len(), 1000);
        assert!(texts.iter().all(|t| *t == "word "));
        assert!(matches!(
            first.last(),
            Some(ModelEvent::Finished(FinishReason::EndTurn))
        ));
        // With pauses between deltas, and chunks of more than one delta per round.
        let second = events(&model).await;
        let texts: Vec<&str> = second
            .iter()
            .filter_map(|e| match e {
                ModelEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["ab ", "cd ", "ab ", "cd ", "ab ", "cd "]);
    }

    #[test]
    fn a_bad_repeat_count_is_refused_naming_the_field() {
        for (turn, says) in [
            (
                serde_json::json!({"text": "x", "textRepeat": 0}),
                "at least 1",
            ),
            (serde_json::json!({"textRepeat": 5}), "non-empty `text`"),
            (
                serde_json::json!({"text": "", "textRepeat": 5}),
                "non-empty `text`",
            ),
            (
                serde_json::json!({"text": "0123456789", "textRepeat": 10_000_000u64}),
                "more than the limit",
            ),
        ] {
            let err = ScriptedModel::from_json(serde_json::json!({ "turns": [turn] })).unwrap_err();
            assert_eq!(err.code, keel_envelope::ErrorCode::ModelUnavailable);
            assert!(
                err.message.contains("turns[0].textRepeat"),
                "{}",
                err.message
            );
            assert!(err.message.contains(says), "{}", err.message);
            assert_eq!(err.details["field"], "turns[0].textRepeat");
        }
        for bad in [
            serde_json::json!(-1),
            serde_json::json!("many"),
            serde_json::json!(1.5),
        ] {
            let err = ScriptedModel::from_json(
                serde_json::json!({"turns": [{"text": "x", "textRepeat": bad}]}),
            )
            .unwrap_err();
            assert!(
                err.message.contains("turns[0].textRepeat"),
                "{}",
                err.message
            );
        }
    }
}
