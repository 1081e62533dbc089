//! What a server says of a model's context window: llama.cpp's `GET /props`
//! (`default_generation_settings.n_ctx`, or `n_ctx`) and the model list's metadata
//! (`max_model_len` from vLLM, `context_length`, llama.cpp's `meta.n_ctx_train`).
//!
//! Asked once per server and model in a process, within [`PROBE_LIMIT`]: a model call
//! that needs the answer waits at most that long for it, and a probe that fails never
//! fails a call. An answer (even one without a window) is kept for good; no answer at
//! all (refused, timed out) is asked again after [`RETRY_AFTER`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use serde_json::Value;

/// How long a probe may take, both endpoints together.
pub const PROBE_LIMIT: Duration = Duration::from_secs(2);
/// When a probe that got no answer is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(60);
/// Longest body read from either endpoint (a large model list is cut, and ignored).
const MAX_BODY: usize = 1 << 20;

/// A context window a server reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReportedWindow {
    /// The window, in tokens.
    pub tokens: u64,
    /// Where it was read: `GET /props`, or the model list's field
    /// (`GET /v1/models max_model_len`, …).
    pub source: &'static str,
}

#[derive(Debug, Clone, Copy)]
enum State {
    NotAsked,
    /// The server answered; with a window or without one.
    Answered(Option<ReportedWindow>),
    /// No answer at this time.
    Unanswered(Instant),
}

/// The probe of one server and model, shared by every model built for them in the
/// process.
#[derive(Debug)]
pub(crate) struct Slot {
    state: Mutex<State>,
    /// Held while a probe runs: a second call waits for its answer instead of asking
    /// again.
    probing: tokio::sync::Mutex<()>,
}

impl Slot {
    fn state(&self) -> State {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The window the server reported, once it answered.
    pub(crate) fn reported(&self) -> Option<ReportedWindow> {
        match self.state() {
            State::Answered(w) => w,
            _ => None,
        }
    }

    /// Whether nothing is to be asked now (answered, or no answer a short while ago).
    pub(crate) fn settled(&self) -> bool {
        match self.state() {
            State::NotAsked => false,
            State::Answered(_) => true,
            State::Unanswered(at) => at.elapsed() < RETRY_AFTER,
        }
    }

    /// Asks the server unless it is settled; returns once the slot is settled or the
    /// limit passed.
    pub(crate) async fn learn(&self, ask: &Ask<'_>) {
        if self.settled() {
            return;
        }
        // One limit for the wait and the probe together.
        let deadline = tokio::time::Instant::now() + ask.limit;
        let Ok(_probing) = tokio::time::timeout_at(deadline, self.probing.lock()).await else {
            return;
        };
        if self.settled() {
            return;
        }
        let state = match ask.run(deadline).await {
            Some(window) => State::Answered(window),
            None => State::Unanswered(Instant::now()),
        };
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
    }
}

/// The slots of the process, by base URL and model.
type Slots = Mutex<HashMap<(String, String), Arc<Slot>>>;

/// The slot of `model` at `base_url`, shared in the process.
pub(crate) fn slot(base_url: &str, model: &str) -> Arc<Slot> {
    static SLOTS: OnceLock<Slots> = OnceLock::new();
    let mut slots = SLOTS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    slots
        .entry((base_url.to_owned(), model.to_owned()))
        .or_insert_with(|| {
            Arc::new(Slot {
                state: Mutex::new(State::NotAsked),
                probing: tokio::sync::Mutex::new(()),
            })
        })
        .clone()
}

/// One probe's request: where, with which client and headers.
pub(crate) struct Ask<'a> {
    pub client: &'a reqwest::Client,
    pub headers: HeaderMap,
    /// llama.cpp's `/props`, at the server's root.
    pub props_url: String,
    /// The provider's model list.
    pub models_url: String,
    pub model: &'a str,
    pub limit: Duration,
}

impl Ask<'_> {
    /// Asks both endpoints at once. `None` when neither answered in time; else the
    /// window `/props` reports, else the one the model list reports, if any.
    async fn run(&self, deadline: tokio::time::Instant) -> Option<Option<ReportedWindow>> {
        let get = |url: String| async move {
            let call = async {
                let mut response = self
                    .client
                    .get(&url)
                    .headers(self.headers.clone())
                    .send()
                    .await?;
                let status = response.status().as_u16();
                let mut body = Vec::new();
                while let Some(chunk) = response.chunk().await? {
                    body.extend_from_slice(&chunk);
                    if body.len() > MAX_BODY {
                        body.clear();
                        break;
                    }
                }
                Ok::<_, reqwest::Error>((status, body))
            };
            match tokio::time::timeout_at(deadline, call).await {
                Ok(Ok(answer)) => Some(answer),
                _ => None,
            }
        };
        let (props, models) =
            tokio::join!(get(self.props_url.clone()), get(self.models_url.clone()));
        if props.is_none() && models.is_none() {
            tracing::info!(
                url = %self.props_url,
                "the server did not answer the context-window probe"
            );
            return None;
        }
        let ok = |a: &Option<(u16, Vec<u8>)>| {
            a.as_ref()
                .filter(|(status, _)| (200..300).contains(status))
                .map(|(_, body)| body.clone())
        };
        let window = ok(&props)
            .and_then(|b| props_window(&b))
            .map(|tokens| ReportedWindow {
                tokens,
                source: "GET /props",
            })
            .or_else(|| {
                ok(&models)
                    .and_then(|b| models_window(&b, self.model))
                    .map(|(tokens, source)| ReportedWindow { tokens, source })
            });
        tracing::info!(
            model = self.model,
            window = window.map(|w| w.tokens),
            source = window.map(|w| w.source),
            "context window probed"
        );
        Some(window)
    }
}

fn positive(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64).filter(|n| *n > 0)
}

/// The window in llama.cpp's `/props`: the slot's `default_generation_settings.n_ctx`
/// (the context of one request, the server's `-c` divided among its slots), else a
/// top-level `n_ctx`.
pub(crate) fn props_window(body: &[u8]) -> Option<u64> {
    let v: Value = serde_json::from_slice(body).ok()?;
    positive(v.pointer("/default_generation_settings/n_ctx")).or_else(|| positive(v.get("n_ctx")))
}

/// The entry of `model` in a `{data: [...]}` model list: the one whose id is the name,
/// else one listed by a file path whose file name is the name (with or without
/// `.gguf`), else the only entry of a list of one (llama-server serves one model,
/// whatever the name asked).
pub(crate) fn model_entry<'a>(list: &'a Value, model: &str) -> Option<&'a Value> {
    let entries = list.get("data")?.as_array()?;
    let id = |e: &'a Value| e.get("id").and_then(Value::as_str);
    let file_names = |i: &str| {
        let file = i.rsplit('/').next().unwrap_or(i);
        file == model || file.strip_suffix(".gguf") == Some(model)
    };
    entries
        .iter()
        .find(|e| id(e) == Some(model))
        .or_else(|| {
            entries
                .iter()
                .find(|e| id(e).is_some_and(|i| is_path(i) && file_names(i)))
        })
        .or(match entries.as_slice() {
            [only] => Some(only),
            _ => None,
        })
}

/// Whether a listed id is a model file's path (as llama-server lists its model).
pub(crate) fn is_path(id: &str) -> bool {
    id.contains('/') || id.ends_with(".gguf")
}

/// The window the model list reports for `model`, and the field it came from: vLLM's
/// `max_model_len` (the server's limit), `context_length` (OpenRouter, LiteLLM, …),
/// else llama.cpp's `meta.n_ctx_train` (what the model was trained on).
pub(crate) fn models_window(body: &[u8], model: &str) -> Option<(u64, &'static str)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let entry = model_entry(&v, model)?;
    [
        ("/max_model_len", "GET /v1/models max_model_len"),
        ("/context_length", "GET /v1/models context_length"),
        ("/meta/n_ctx_train", "GET /v1/models meta.n_ctx_train"),
    ]
    .into_iter()
    .find_map(|(pointer, source)| positive(entry.pointer(pointer)).map(|n| (n, source)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn props_are_read_in_both_shapes() {
        let older =
            json!({"default_generation_settings": {"n_ctx": 8192, "params": {}}, "total_slots": 1});
        assert_eq!(props_window(older.to_string().as_bytes()), Some(8192));
        let newer = json!({"n_ctx": 4096, "total_slots": 2});
        assert_eq!(props_window(newer.to_string().as_bytes()), Some(4096));
        assert_eq!(props_window(b"{\"n_ctx\": 0}"), None);
        assert_eq!(props_window(b"<html>not found</html>"), None);
    }

    #[test]
    fn model_lists_are_read_by_server_kind() {
        let vllm = json!({"data": [{"id": "Qwen/Qwen2.5-7B-Instruct", "max_model_len": 32768}, {"id": "lora-a", "max_model_len": 16384}]});
        assert_eq!(
            models_window(vllm.to_string().as_bytes(), "lora-a"),
            Some((16384, "GET /v1/models max_model_len"))
        );
        assert_eq!(
            models_window(vllm.to_string().as_bytes(), "Qwen2.5-7B-Instruct"),
            Some((32768, "GET /v1/models max_model_len"))
        );
        assert_eq!(models_window(vllm.to_string().as_bytes(), "other"), None);
        let llama = json!({"data": [{"id": "/m/small.gguf", "meta": {"n_ctx_train": 32768}}]});
        assert_eq!(
            models_window(llama.to_string().as_bytes(), "anything"),
            Some((32768, "GET /v1/models meta.n_ctx_train"))
        );
        let router = json!({"data": [{"id": "a", "context_length": 65536}, {"id": "b"}]});
        assert_eq!(
            models_window(router.to_string().as_bytes(), "a"),
            Some((65536, "GET /v1/models context_length"))
        );
        assert_eq!(models_window(router.to_string().as_bytes(), "b"), None);
    }
}
