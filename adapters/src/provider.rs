//! What every HTTP provider shares: its settings ([`ProviderSettings`]), the model
//! type ([`HttpModel`], one per wire format) and its [`Model`] implementation. A wire
//! format ([`Wire`]: OpenAI's Chat Completions, Anthropic's Messages) adds its body,
//! headers and stream decoder.

use std::marker::PhantomData;

use futures::StreamExt;
use std::sync::Arc;

use keel_envelope::ErrorPayload;
use keel_kernel::model::{Model, ModelRequest, ModelStream};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use tokio_util::sync::CancellationToken;

use crate::error::model_unavailable;
use crate::fragments::FragmentCache;
use crate::http::{run, Decoder, HttpCall, HttpOptions};
use crate::models::{known_context_window, output_cap, ContextWindow, OutputCap, WindowSource};
use crate::window::{Ask, Slot, PROBE_LIMIT};
use crate::DEFAULT_CONTEXT_WINDOW;

/// Everything an HTTP provider is given: which model, where, with which key, and how
/// calls are made. The key never appears in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    /// The model name the provider knows (`gpt-4o-mini`, `claude-sonnet-4-5`).
    pub model: String,
    /// The base URL (e.g. `http://127.0.0.1:11434/v1`); a trailing `/` is dropped.
    pub base_url: String,
    /// The key; none (or an empty one) sends no key.
    pub api_key: Option<String>,
    /// The context window, in tokens. Without one, a server other than the
    /// provider's own is asked (see [`HttpModel::window`]), else the model family's
    /// is used ([`crate::context_window_for`]).
    pub context_window: Option<u64>,
    /// Retries and time limits.
    pub http: HttpOptions,
}

impl ProviderSettings {
    /// `model` at `base_url` with `api_key`, the family's context window and the
    /// default retries and time limits.
    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<String>,
    ) -> Self {
        Self {
            model: model.into(),
            base_url: base_url.into(),
            api_key,
            context_window: None,
            http: HttpOptions::default(),
        }
    }
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("context_window", &self.context_window)
            .field("http", &self.http)
            .finish()
    }
}

/// A provider's wire format: where a call goes, what it sends and how the answer's
/// events are read. Implemented by the providers' marker types only.
pub trait Wire: std::fmt::Debug + Clone + Send + Sync + 'static {
    /// The provider in model ids (`openai:gpt-4o`) and output-cap defaults.
    const PROVIDER: &'static str;
    /// The provider's name in error messages (`OpenAI`).
    const LABEL: &'static str;
    /// The path after the base URL (`/chat/completions`).
    const PATH: &'static str;
    /// The path of the model list after the base URL (`/models`).
    const MODELS_PATH: &'static str;
    /// The provider's own base URL (whose models Keel knows; it is never asked for a
    /// window).
    const DEFAULT_BASE_URL: &'static str;
    /// The request body's bytes.
    fn body(model: &HttpModel<Self>, request: &ModelRequest) -> Vec<u8>;
    /// Adds the provider's own headers to a call's (the content type and `Accept`
    /// are set): the key, when there is one, and any version header.
    fn add_headers(headers: &mut HeaderMap, api_key: Option<&str>);
    /// A decoder of one response's events.
    fn decoder() -> Box<dyn Decoder>;
}

/// A model behind an HTTP provider speaking wire format `W` (see
/// [`OpenAiModel`](crate::OpenAiModel) and [`AnthropicModel`](crate::AnthropicModel)).
/// The key never appears in `Debug` output.
#[derive(Clone)]
pub struct HttpModel<W> {
    /// As given, the base URL without a trailing `/` and an empty key dropped.
    pub(crate) settings: ProviderSettings,
    /// The window given in the settings or by [`with_context_window`](Self::with_context_window).
    configured_window: Option<u64>,
    /// Where the server's report of the window is kept; `None` when the server is
    /// not asked (a configured window, the provider's own server).
    probe: Option<Arc<Slot>>,
    client: reqwest::Client,
    /// The wire encoding of recent histories (shared by clones of this model).
    pub(crate) cache: Arc<FragmentCache>,
    wire: PhantomData<fn() -> W>,
}

impl<W: Wire> std::fmt::Debug for HttpModel<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(W::LABEL)
            .field("settings", &self.settings)
            .field("window", &self.window())
            .finish_non_exhaustive()
    }
}

impl<W: Wire> HttpModel<W> {
    /// A model named `model` at `base_url` (e.g. `http://127.0.0.1:11434/v1`), with an
    /// optional key. Fails with `MODEL_UNAVAILABLE` if the HTTP client cannot be built.
    pub fn new(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<String>,
        options: HttpOptions,
    ) -> Result<Self, ErrorPayload> {
        Self::from_settings(ProviderSettings {
            http: options,
            ..ProviderSettings::new(model, base_url, api_key)
        })
    }

    /// The model `settings` describe. Fails with `MODEL_UNAVAILABLE` if the HTTP
    /// client cannot be built.
    pub fn from_settings(mut settings: ProviderSettings) -> Result<Self, ErrorPayload> {
        settings.base_url = settings.base_url.trim_end_matches('/').to_owned();
        settings.api_key = settings.api_key.filter(|k| !k.is_empty());
        let client = settings
            .http
            .client(&settings.base_url)
            .map_err(|e| model_unavailable(format!("the HTTP client could not be created: {e}")))?;
        let own_server = settings.base_url == W::DEFAULT_BASE_URL.trim_end_matches('/');
        let probe = (settings.context_window.is_none() && !own_server)
            .then(|| crate::window::slot(&settings.base_url, &settings.model));
        Ok(Self {
            configured_window: settings.context_window,
            probe,
            settings,
            client,
            cache: Arc::default(),
            wire: PhantomData,
        })
    }

    /// Overrides the context window (the server is then not asked for it).
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.configured_window = Some(tokens);
        self.probe = None;
        self
    }

    /// The context window and where it comes from: the configured one, else the one
    /// the server reported (once it was asked), else the model family's, else
    /// [`DEFAULT_CONTEXT_WINDOW`].
    pub fn window(&self) -> ContextWindow {
        if let Some(tokens) = self.configured_window {
            return ContextWindow {
                tokens,
                source: WindowSource::Configured,
            };
        }
        if let Some(w) = self.probe.as_ref().and_then(|p| p.reported()) {
            return ContextWindow {
                tokens: w.tokens,
                source: WindowSource::Reported(w.source),
            };
        }
        match known_context_window(&self.settings.model) {
            Some(tokens) => ContextWindow {
                tokens,
                source: WindowSource::Known,
            },
            None => ContextWindow {
                tokens: DEFAULT_CONTEXT_WINDOW,
                source: WindowSource::Assumed,
            },
        }
    }

    /// Asks the server for the model's window unless that is done (once per server
    /// and model in the process, at most [`PROBE_LIMIT`]; see [`crate::window`]).
    pub async fn learn_window(&self) {
        let Some(slot) = &self.probe else {
            return;
        };
        let base = self.settings.base_url.as_str();
        let root = base.strip_suffix("/v1").unwrap_or(base);
        let mut headers = HeaderMap::new();
        W::add_headers(&mut headers, self.settings.api_key.as_deref());
        slot.learn(&Ask {
            client: &self.client,
            headers,
            props_url: format!("{root}/props"),
            models_url: format!("{base}{}", W::MODELS_PATH),
            model: &self.settings.model,
            limit: PROBE_LIMIT,
        })
        .await;
    }

    /// The output cap a call without its own gets once the server was asked (see
    /// [`learn_window`](Self::learn_window)), and why.
    pub async fn planned_output_cap(&self) -> OutputCap {
        self.learn_window().await;
        self.default_output_cap()
    }

    /// The endpoint called.
    pub fn url(&self) -> String {
        format!("{}{}", self.settings.base_url, W::PATH)
    }

    /// The output cap sent when the request sets none, and why
    /// ([`crate::output_cap`]), with what is known of the window now.
    pub fn default_output_cap(&self) -> OutputCap {
        let own_server = self.settings.base_url == W::DEFAULT_BASE_URL.trim_end_matches('/');
        output_cap(W::PROVIDER, &self.settings.model, self.window(), own_server)
    }

    /// The output cap sent when the request sets none ([`default_output_cap`](Self::default_output_cap)).
    pub fn default_max_output_tokens(&self) -> u32 {
        self.default_output_cap().tokens
    }

    /// The cap sent with `request`: its own, else the default.
    pub(crate) fn max_output_tokens(&self, request: &ModelRequest) -> u32 {
        request
            .max_output_tokens
            .unwrap_or_else(|| self.default_max_output_tokens())
    }
}

impl<W: Wire> Model for HttpModel<W> {
    fn id(&self) -> String {
        format!("{}:{}", W::PROVIDER, self.settings.model)
    }

    fn context_window(&self) -> u64 {
        self.window().tokens
    }

    /// A call that needs the default cap while the server's window is not known
    /// yet waits for the probe first (at most [`PROBE_LIMIT`]); one with its own cap
    /// starts at once, the probe running beside it.
    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        if self.probe.as_ref().is_some_and(|p| !p.settled()) {
            let model = self.clone();
            if request.max_output_tokens.is_none() {
                return Box::pin(
                    futures::stream::once(async move {
                        tokio::select! {
                            biased;
                            _ = cancel.cancelled() => {
                                Box::pin(futures::stream::empty()) as ModelStream
                            }
                            _ = model.learn_window() => model.start(request, cancel),
                        }
                    })
                    .flatten(),
                );
            }
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { model.learn_window().await });
            }
        }
        self.start(request, cancel)
    }
}

impl<W: Wire> HttpModel<W> {
    /// Sends the call.
    fn start(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
        let body = self.cache.share(W::body(self, &request));
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        W::add_headers(&mut headers, self.settings.api_key.as_deref());
        run(
            HttpCall {
                provider: W::LABEL,
                client: self.client.clone(),
                url: self.url(),
                headers,
                body,
                options: self.settings.http.clone(),
                new_decoder: Box::new(W::decoder),
            },
            cancel,
        )
    }
}
