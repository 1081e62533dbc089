//! What every HTTP provider shares: its settings ([`ProviderSettings`]), the model
//! type ([`HttpModel`], one per wire format) and its [`Model`] implementation. A wire
//! format ([`Wire`]: OpenAI's Chat Completions, Anthropic's Messages) adds its body,
//! headers and stream decoder.

use std::marker::PhantomData;
use std::sync::Arc;

use keel_envelope::ErrorPayload;
use keel_kernel::model::{Model, ModelRequest, ModelStream};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use tokio_util::sync::CancellationToken;

use crate::error::model_unavailable;
use crate::fragments::FragmentCache;
use crate::http::{run, Decoder, HttpCall, HttpOptions};
use crate::models::{context_window_for, default_max_output_tokens};

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
    /// The context window, in tokens (default: the model family's, see
    /// [`context_window_for`]).
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
    context_window: u64,
    client: reqwest::Client,
    /// The wire encoding of recent histories (shared by clones of this model).
    pub(crate) cache: Arc<FragmentCache>,
    wire: PhantomData<fn() -> W>,
}

impl<W: Wire> std::fmt::Debug for HttpModel<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(W::LABEL)
            .field("settings", &self.settings)
            .field("context_window", &self.context_window)
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
        Ok(Self {
            context_window: settings
                .context_window
                .unwrap_or_else(|| context_window_for(&settings.model)),
            settings,
            client,
            cache: Arc::default(),
            wire: PhantomData,
        })
    }

    /// Overrides the context window.
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = tokens;
        self
    }

    /// The endpoint called.
    pub fn url(&self) -> String {
        format!("{}{}", self.settings.base_url, W::PATH)
    }

    /// The output cap sent when the request sets none
    /// ([`crate::default_max_output_tokens`]).
    pub fn default_max_output_tokens(&self) -> u32 {
        default_max_output_tokens(W::PROVIDER, &self.settings.model, self.context_window)
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
        self.context_window
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ModelStream {
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
