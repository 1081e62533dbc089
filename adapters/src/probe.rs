//! Whether a model's endpoint answers: one short `GET` of the provider's model list,
//! with a time limit. Used by `keel doctor`; the key is sent as a real call would
//! send it and never appears in what is returned.

use std::time::{Duration, Instant};

use keel_config::{parse_model_spec, Config, EnvMap};
use keel_envelope::ErrorPayload;
use reqwest::header::HeaderMap;

use crate::anthropic::MessagesApi;
use crate::factory::http_provider;
use crate::http::HttpOptions;
use crate::openai::ChatCompletions;
use crate::provider::Wire;

/// Longest model-list body read.
const MAX_BODY: usize = 1 << 20;

/// Where an HTTP model is called, as the model itself would be built.
#[derive(Clone)]
pub struct ProviderTarget {
    /// `provider:model`.
    pub spec: String,
    /// `openai` or `anthropic`.
    pub provider: &'static str,
    /// The model name.
    pub model: String,
    /// The base URL.
    pub base_url: String,
    /// Where the base URL came from: an environment variable, a configuration key,
    /// or `the default`.
    pub base_url_source: &'static str,
    /// The environment variable holding the key.
    pub key_variable: &'static str,
    api_key: Option<String>,
}

impl std::fmt::Debug for ProviderTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderTarget")
            .field("spec", &self.spec)
            .field("base_url", &self.base_url)
            .field("key_set", &self.key_set())
            .finish_non_exhaustive()
    }
}

impl ProviderTarget {
    /// Whether a key is set (its value is never shown).
    pub fn key_set(&self) -> bool {
        self.api_key.is_some()
    }

    /// The URL the probe asks: the provider's model list.
    pub fn probe_url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if self.provider == "anthropic" {
            format!("{base}/v1/models")
        } else {
            format!("{base}/models")
        }
    }
}

/// The endpoint of `spec`; `None` for a model that is not called over HTTP
/// (`scripted:`). `MODEL_UNAVAILABLE` when the spec is malformed.
pub fn provider_target(
    spec: &str,
    config: &Config,
    env: &EnvMap,
) -> Result<Option<ProviderTarget>, ErrorPayload> {
    let (provider, model) = parse_model_spec(spec)?;
    let Some(p) = http_provider(provider) else {
        return Ok(None);
    };
    let (base, source) = p.base_url(config, env);
    Ok(Some(ProviderTarget {
        spec: spec.trim().to_owned(),
        provider: p.name,
        model: model.to_owned(),
        base_url: base.trim_end_matches('/').to_owned(),
        base_url_source: source,
        key_variable: p.key_var,
        api_key: env.get(p.key_var).map(str::to_owned),
    }))
}

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The server answered with an HTTP status.
    Answered {
        /// The status.
        status: u16,
        /// How long it took.
        elapsed_ms: u64,
        /// Whether the model list names the model (`None` when there was no list).
        lists_model: Option<bool>,
    },
    /// No answer: the connection failed (refused, DNS, TLS, …).
    Unreachable {
        /// Why.
        message: String,
    },
    /// No answer within the time limit.
    TimedOut {
        /// The limit.
        limit_ms: u64,
    },
}

/// Asks the endpoint for its model list, within `limit`.
pub async fn probe(target: &ProviderTarget, limit: Duration) -> ProbeOutcome {
    let limit_ms = limit.as_millis() as u64;
    let options = HttpOptions {
        connect_timeout: limit,
        ..HttpOptions::default()
    };
    let client = match options.client(&target.base_url) {
        Ok(c) => c,
        Err(e) => {
            return ProbeOutcome::Unreachable {
                message: format!("the HTTP client could not be created: {e}"),
            }
        }
    };
    // The headers a call sends, the key among them.
    let mut headers = HeaderMap::new();
    let key = target.api_key.as_deref();
    if target.provider == MessagesApi::PROVIDER {
        MessagesApi::add_headers(&mut headers, key);
    } else {
        ChatCompletions::add_headers(&mut headers, key);
    }
    let started = Instant::now();
    let url = target.probe_url();
    let call = async {
        let mut response = client.get(&url).headers(headers).send().await?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BODY {
                break;
            }
        }
        Ok::<_, reqwest::Error>((status, body))
    };
    let outcome = match tokio::time::timeout(limit, call).await {
        Err(_) => ProbeOutcome::TimedOut { limit_ms },
        Ok(Err(e)) if e.is_timeout() => ProbeOutcome::TimedOut { limit_ms },
        Ok(Err(e)) => ProbeOutcome::Unreachable {
            message: describe(&e),
        },
        Ok(Ok((status, body))) => ProbeOutcome::Answered {
            status,
            elapsed_ms: started.elapsed().as_millis() as u64,
            lists_model: ((200..300).contains(&status))
                .then(|| lists_model(&body, &target.model))
                .flatten(),
        },
    };
    tracing::info!(
        provider = target.provider,
        url = %url,
        outcome = ?outcome,
        "model endpoint probed"
    );
    outcome
}

/// A transport error with its causes, on one line.
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// Whether a `{data: [{id}]}` model list names `model`. An id that is a file path
/// (llama-server lists the model it serves by its `.gguf` path) names the model by its
/// file name too, with or without the extension; and a list of one such path is a
/// server of one model, which answers to any name.
fn lists_model(body: &[u8], model: &str) -> Option<bool> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let list = v.get("data")?.as_array()?;
    let ids: Vec<&str> = list
        .iter()
        .filter_map(|m| m.get("id").and_then(|i| i.as_str()))
        .collect();
    let is_path = |id: &str| id.contains('/') || id.ends_with(".gguf");
    let names = |id: &str| {
        let file = id.rsplit('/').next().unwrap_or(id);
        id == model || file == model || file.strip_suffix(".gguf") == Some(model)
    };
    Some(match ids.as_slice() {
        [only] if is_path(only) => true,
        _ => ids
            .iter()
            .any(|id| id == &model || (is_path(id) && names(id))),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::anthropic::ANTHROPIC_VERSION;

    #[test]
    fn targets_follow_the_model_s_own_resolution() {
        let mut config = Config::default();
        config.providers.openai.base_url = Some("http://127.0.0.1:9/v1/".into());
        let env = EnvMap::from_pairs([("OPENAI_API_KEY", "sk-secret")]);
        let t = provider_target("openai:gpt-x", &config, &env)
            .unwrap()
            .unwrap();
        assert_eq!(t.probe_url(), "http://127.0.0.1:9/v1/models");
        assert_eq!(t.base_url_source, "providers.openai.baseUrl");
        assert!(t.key_set());
        assert!(!format!("{t:?}").contains("sk-secret"));
        let env = EnvMap::from_pairs([("ANTHROPIC_BASE_URL", "http://h:1")]);
        let t = provider_target("anthropic:claude-x", &config, &env)
            .unwrap()
            .unwrap();
        assert_eq!(t.probe_url(), "http://h:1/v1/models");
        assert_eq!(t.base_url_source, "ANTHROPIC_BASE_URL");
        assert!(!t.key_set());
        assert!(provider_target("scripted:x.json", &config, &env)
            .unwrap()
            .is_none());
        assert!(provider_target("nope", &config, &env).is_err());
    }

    #[test]
    fn model_lists_are_read() {
        assert_eq!(
            lists_model(br#"{"data":[{"id":"a"},{"id":"b"}]}"#, "b"),
            Some(true)
        );
        assert_eq!(lists_model(br#"{"data":[{"id":"a"}]}"#, "b"), Some(false));
        assert_eq!(lists_model(b"<html>", "b"), None);
    }

    /// llama-server lists the one model it serves by its file path, and answers to
    /// any model name.
    #[test]
    fn a_llama_server_listing_its_model_by_file_path_serves_the_model() {
        let listed = br#"{"object":"list","data":[{"id":"/models/qwen2.5-0.5b-instruct-q4_k_m.gguf","object":"model","owned_by":"llamacpp","meta":{"n_ctx_train":32768}}]}"#;
        assert_eq!(lists_model(listed, "qwen2.5-coder:7b"), Some(true));
        assert_eq!(
            lists_model(listed, "qwen2.5-0.5b-instruct-q4_k_m"),
            Some(true)
        );
        let relative = br#"{"data":[{"id":"models/small.gguf"}]}"#;
        assert_eq!(lists_model(relative, "small"), Some(true));
        assert_eq!(lists_model(relative, "small.gguf"), Some(true));
        // Several entries: the name must match one of them, path or file name.
        let several = br#"{"data":[{"id":"/m/a.gguf"},{"id":"/m/b.gguf"}]}"#;
        assert_eq!(lists_model(several, "b"), Some(true));
        assert_eq!(lists_model(several, "c"), Some(false));
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let env = EnvMap::from_pairs([("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))]);
        let t = provider_target("openai:m", &Config::default(), &env)
            .unwrap()
            .unwrap();
        let out = probe(&t, Duration::from_secs(5)).await;
        assert!(matches!(out, ProbeOutcome::Unreachable { .. }), "{out:?}");
    }

    #[tokio::test]
    async fn an_answering_server_is_asked_with_the_key() {
        use keel_testsupport::model_server::{FakeResponse, FakeServer};
        let server = FakeServer::start([]).await.unwrap();
        server.route(
            "GET",
            "/v1/models",
            FakeResponse::json(200, &serde_json::json!({"data": [{"id": "claude-x"}]})),
        );
        let env = EnvMap::from_pairs([
            ("ANTHROPIC_BASE_URL", server.base_url()),
            ("ANTHROPIC_API_KEY", "k-1".to_owned()),
        ]);
        let t = provider_target("anthropic:claude-x", &Config::default(), &env)
            .unwrap()
            .unwrap();
        let out = probe(&t, Duration::from_secs(20)).await;
        assert!(
            matches!(
                out,
                ProbeOutcome::Answered {
                    status: 200,
                    lists_model: Some(true),
                    ..
                }
            ),
            "{out:?}"
        );
        let req = &server.endpoint_requests()[0];
        assert_eq!(
            (req.method.as_str(), req.path.as_str()),
            ("GET", "/v1/models")
        );
        assert_eq!(req.header("x-api-key"), Some("k-1"));
        assert_eq!(req.header("anthropic-version"), Some(ANTHROPIC_VERSION));
    }
}
