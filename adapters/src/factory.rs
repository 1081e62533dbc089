//! Builds the [`Model`] a selection names: `provider:model` (see
//! [`keel_config::resolve_model_spec`]) with the configuration and the environment
//! turned into the provider's [`ProviderSettings`].

use std::sync::Arc;

use keel_config::{parse_model_spec, Config, EnvMap};
use keel_envelope::error::{ErrorHint, ErrorPayload};
use keel_kernel::model::Model;

use crate::anthropic::{AnthropicModel, ANTHROPIC_DEFAULT_BASE_URL};
use crate::error::model_unavailable;
use crate::http::HttpOptions;
use crate::models::OutputCap;
use crate::openai::{OpenAiModel, OPENAI_DEFAULT_BASE_URL};
use crate::provider::ProviderSettings;
use crate::scripted::ScriptedModel;

/// Where an HTTP provider's settings come from.
#[derive(Debug)]
pub(crate) struct HttpProvider {
    /// `openai` or `anthropic`.
    pub(crate) name: &'static str,
    /// The environment variable of the base URL, which wins over the configuration.
    base_url_var: &'static str,
    /// The configuration key of the base URL.
    base_url_key: &'static str,
    default_base_url: &'static str,
    /// The environment variable holding the key.
    pub(crate) key_var: &'static str,
}

const OPENAI: HttpProvider = HttpProvider {
    name: "openai",
    base_url_var: "OPENAI_BASE_URL",
    base_url_key: "providers.openai.baseUrl",
    default_base_url: OPENAI_DEFAULT_BASE_URL,
    key_var: "OPENAI_API_KEY",
};

const ANTHROPIC: HttpProvider = HttpProvider {
    name: "anthropic",
    base_url_var: "ANTHROPIC_BASE_URL",
    base_url_key: "providers.anthropic.baseUrl",
    default_base_url: ANTHROPIC_DEFAULT_BASE_URL,
    key_var: "ANTHROPIC_API_KEY",
};

/// The HTTP provider named `provider`; `None` for one not called over HTTP.
pub(crate) fn http_provider(provider: &str) -> Option<&'static HttpProvider> {
    match provider {
        "openai" => Some(&OPENAI),
        "anthropic" => Some(&ANTHROPIC),
        _ => None,
    }
}

impl HttpProvider {
    /// The base URL and where it came from: the environment variable, else
    /// `providers.<provider>.baseUrl`, else the default.
    pub(crate) fn base_url<'a>(
        &self,
        config: &'a Config,
        env: &'a EnvMap,
    ) -> (&'a str, &'static str) {
        let configured = if self.name == ANTHROPIC.name {
            &config.providers.anthropic
        } else {
            &config.providers.openai
        };
        if let Some(v) = env.get(self.base_url_var) {
            (v, self.base_url_var)
        } else if let Some(v) = configured
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
        {
            (v, self.base_url_key)
        } else {
            (self.default_base_url, "the default")
        }
    }

    /// The settings of model `name` (`spec` is the whole selection): the base URL,
    /// the key (required for the provider's own servers), the configured context
    /// window and retries.
    fn settings(
        &self,
        spec: &str,
        name: &str,
        config: &Config,
        env: &EnvMap,
    ) -> Result<ProviderSettings, ErrorPayload> {
        let (base, _) = self.base_url(config, env);
        let key = env.get(self.key_var).map(str::to_owned);
        if key.is_none() && base.trim_end_matches('/') == self.default_base_url {
            return Err(model_unavailable(format!(
                "{} is not set; it is needed for {spec}",
                self.key_var
            ))
            .hint(ErrorHint::CheckLlmConfig)
            .with_detail("model", spec.to_owned())
            .with_detail("variable", self.key_var.to_owned()));
        }
        Ok(ProviderSettings {
            context_window: config.context_window_override(spec.trim()),
            http: HttpOptions {
                retry: config.retry,
                ..HttpOptions::default()
            },
            ..ProviderSettings::new(name, base, key)
        })
    }
}

/// Builds the model named by `spec`, reading provider settings from the process
/// environment (see [`build_model_with_env`]).
pub fn build_model(spec: &str, config: &Config) -> Result<Arc<dyn Model>, ErrorPayload> {
    build_model_with_env(spec, config, &EnvMap::from_process())
}

/// Builds the model named by `spec`:
/// - `openai:<model>`: base URL from `OPENAI_BASE_URL`, else `providers.openai.baseUrl`,
///   else `https://api.openai.com/v1`; key from `OPENAI_API_KEY` (optional, except for
///   the default base URL);
/// - `anthropic:<model>`: `ANTHROPIC_BASE_URL`, else `providers.anthropic.baseUrl`,
///   else `https://api.anthropic.com`; key from `ANTHROPIC_API_KEY` (required for the
///   default base URL);
/// - `scripted:<path>`: a script file (relative paths from the current directory).
///
/// Errors are `MODEL_UNAVAILABLE` with hint `check_llm_config`.
pub fn build_model_with_env(
    spec: &str,
    config: &Config,
    env: &EnvMap,
) -> Result<Arc<dyn Model>, ErrorPayload> {
    let (provider, name) = parse_model_spec(spec)?;
    match http_provider(provider) {
        Some(p) if p.name == OPENAI.name => Ok(Arc::new(OpenAiModel::from_settings(
            p.settings(spec, name, config, env)?,
        )?)),
        Some(p) => Ok(Arc::new(AnthropicModel::from_settings(
            p.settings(spec, name, config, env)?,
        )?)),
        None => {
            // Nobody holds this model to read its requests: it keeps none.
            let m = ScriptedModel::from_file(name)?
                .with_id(spec.trim())
                .keep_requests(0);
            Ok(Arc::new(m))
        }
    }
}

/// The output cap a call of `spec` without its own gets (no `maxOutputTokens` set
/// anywhere), and why; the server is asked for the model's window as a first call
/// would ask it (see [`crate::window`]). `None` for a model not called over HTTP.
pub async fn planned_output_cap(
    spec: &str,
    config: &Config,
    env: &EnvMap,
) -> Result<Option<OutputCap>, ErrorPayload> {
    let (provider, name) = parse_model_spec(spec)?;
    Ok(match http_provider(provider) {
        Some(p) if p.name == OPENAI.name => Some(
            OpenAiModel::from_settings(p.settings(spec, name, config, env)?)?
                .planned_output_cap()
                .await,
        ),
        Some(p) => Some(
            AnthropicModel::from_settings(p.settings(spec, name, config, env)?)?
                .planned_output_cap()
                .await,
        ),
        None => None,
    })
}
