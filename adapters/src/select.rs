//! Model selection: one `provider:model` string, from `--model`, `KEEL_MODEL` or the
//! configuration, turned into a [`Model`].

use std::collections::HashMap;
use std::sync::Arc;

use keel_envelope::error::{ErrorHint, ErrorPayload};
use keel_kernel::model::Model;

use crate::anthropic::{AnthropicModel, ANTHROPIC_DEFAULT_BASE_URL};
use crate::config::Config;
use crate::error::model_unavailable;
use crate::http::HttpOptions;
use crate::openai::{OpenAiModel, OPENAI_DEFAULT_BASE_URL};
use crate::scripted::ScriptedModel;

/// The context window assumed for models not in the table.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// Known providers.
pub const PROVIDERS: [&str; 3] = ["openai", "anthropic", "scripted"];

/// Environment variables, looked up through a map so callers (and tests) choose
/// where they come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvMap(HashMap<String, String>);

impl EnvMap {
    /// The process environment (variables that are not valid Unicode are skipped).
    pub fn from_process() -> Self {
        Self(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        )
    }

    /// A map of the given pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// A variable's value; empty values count as unset.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }
}

/// Splits `provider:model`; `MODEL_UNAVAILABLE` when either part is missing or the
/// provider is unknown.
pub fn parse_model_spec(spec: &str) -> Result<(&str, &str), ErrorPayload> {
    let spec = spec.trim();
    let Some((provider, name)) = spec.split_once(':') else {
        return Err(model_unavailable(format!(
            "model {spec:?} is not of the form provider:model (e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, scripted:path/to/script.json)"
        ))
        .hint(ErrorHint::CheckLlmConfig)
        .with_detail("model", spec.to_owned()));
    };
    if !PROVIDERS.contains(&provider) {
        return Err(model_unavailable(format!(
            "unknown model provider {provider:?} in {spec:?}; known providers: {}",
            PROVIDERS.join(", ")
        ))
        .hint(ErrorHint::CheckLlmConfig)
        .with_detail("model", spec.to_owned()));
    }
    if name.trim().is_empty() {
        return Err(
            model_unavailable(format!("model {spec:?} names no model after {provider:?}"))
                .hint(ErrorHint::CheckLlmConfig)
                .with_detail("model", spec.to_owned()),
        );
    }
    Ok((provider, name.trim()))
}

fn nonempty(v: Option<&str>) -> Option<&str> {
    v.map(str::trim).filter(|v| !v.is_empty())
}

/// Picks the model: `cli` (`--model`), else `env` (`KEEL_MODEL`), else the
/// configured `model`, else the first of `availableModels`. Empty values count as
/// absent. `MODEL_UNAVAILABLE` when none is set or the chosen one is malformed.
pub fn resolve_model_spec(
    cli: Option<&str>,
    env: Option<&str>,
    config: &Config,
) -> Result<String, ErrorPayload> {
    selected_model_spec(cli, env, config)?.ok_or_else(|| {
        model_unavailable(
            "no model is selected: pass --model provider:model, set KEEL_MODEL, or set `model` in config.toml",
        )
        .hint(ErrorHint::CheckLlmConfig)
    })
}

/// As [`resolve_model_spec`], with `Ok(None)` when no model is set anywhere; a set but
/// malformed one is `MODEL_UNAVAILABLE` naming where it came from (`details.source`).
pub fn selected_model_spec(
    cli: Option<&str>,
    env: Option<&str>,
    config: &Config,
) -> Result<Option<String>, ErrorPayload> {
    let chosen = if let Some(v) = nonempty(cli) {
        Some((v, "--model"))
    } else if let Some(v) = nonempty(env) {
        Some((v, "KEEL_MODEL"))
    } else if let Some(v) = nonempty(config.model.as_deref()) {
        Some((v, "the configuration's `model`"))
    } else {
        config
            .available_models
            .first()
            .map(|m| (m.id.as_str(), "the configuration's `availableModels`"))
    };
    let Some((spec, source)) = chosen else {
        return Ok(None);
    };
    parse_model_spec(spec).map_err(|mut e| {
        e.message = format!("{} (from {source})", e.message);
        e.with_detail("source", source)
    })?;
    Ok(Some(spec.to_owned()))
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
    let options = HttpOptions {
        retry: config.retry,
        ..HttpOptions::default()
    };
    let window = config.context_window_override(spec.trim());
    let missing_key = |var: &str| {
        model_unavailable(format!("{var} is not set; it is needed for {spec}"))
            .hint(ErrorHint::CheckLlmConfig)
            .with_detail("model", spec.to_owned())
            .with_detail("variable", var.to_owned())
    };
    match provider {
        "openai" => {
            let (base, _) = base_url_for(provider, config, env);
            let key = env.get("OPENAI_API_KEY").map(str::to_owned);
            if key.is_none() && base.trim_end_matches('/') == OPENAI_DEFAULT_BASE_URL {
                return Err(missing_key("OPENAI_API_KEY"));
            }
            let mut m = OpenAiModel::new(name, base, key, options)?;
            if let Some(w) = window {
                m = m.with_context_window(w);
            }
            Ok(Arc::new(m))
        }
        "anthropic" => {
            let (base, _) = base_url_for(provider, config, env);
            let key = env.get("ANTHROPIC_API_KEY").map(str::to_owned);
            if key.is_none() && base.trim_end_matches('/') == ANTHROPIC_DEFAULT_BASE_URL {
                return Err(missing_key("ANTHROPIC_API_KEY"));
            }
            let mut m = AnthropicModel::new(name, base, key, options)?;
            if let Some(w) = window {
                m = m.with_context_window(w);
            }
            Ok(Arc::new(m))
        }
        _ => {
            let m = ScriptedModel::from_file(name)?.with_id(spec.trim());
            Ok(Arc::new(m))
        }
    }
}

/// The base URL of an HTTP provider (`openai` or `anthropic`) and where it came from:
/// its environment variable, else `providers.<provider>.baseUrl`, else the default.
pub(crate) fn base_url_for<'a>(
    provider: &str,
    config: &'a Config,
    env: &'a EnvMap,
) -> (&'a str, &'static str) {
    let (var, configured, default, key) = if provider == "anthropic" {
        (
            "ANTHROPIC_BASE_URL",
            config.providers.anthropic.base_url.as_deref(),
            ANTHROPIC_DEFAULT_BASE_URL,
            "providers.anthropic.baseUrl",
        )
    } else {
        (
            "OPENAI_BASE_URL",
            config.providers.openai.base_url.as_deref(),
            OPENAI_DEFAULT_BASE_URL,
            "providers.openai.baseUrl",
        )
    };
    if let Some(v) = env.get(var) {
        (v, var)
    } else if let Some(v) = nonempty(configured) {
        (v, key)
    } else {
        (default, "the default")
    }
}

/// The context window of a model family, by name prefix; [`DEFAULT_CONTEXT_WINDOW`]
/// for unknown models.
pub fn context_window_for(model: &str) -> u64 {
    const TABLE: &[(&str, u64)] = &[
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-4-32k", 32_768),
        ("gpt-4", 8_192),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-5", 400_000),
        ("o1-mini", 128_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4", 200_000),
        ("claude", 200_000),
        ("deepseek", 128_000),
        ("llama3", 8_192),
        ("llama-3", 8_192),
        ("llama3.1", 128_000),
        ("llama3.2", 128_000),
        ("llama3.3", 128_000),
        ("qwen2.5", 32_768),
        ("mistral", 32_768),
    ];
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    TABLE
        .iter()
        .filter(|(prefix, _)| m.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, w)| *w)
        .unwrap_or(DEFAULT_CONTEXT_WINDOW)
}

/// The output cap sent with a model call when neither the configuration, the session
/// nor the request sets one: the model's own maximum where it is known and modest,
/// else 8192 tokens but at most a quarter of the context window (a local server with
/// a small window keeps room for the prompt).
pub fn default_max_output_tokens(provider: &str, model: &str, context_window: u64) -> u32 {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    if provider == "anthropic" {
        return if m.starts_with("claude-3-5") {
            8192
        } else if m.starts_with("claude-3-") && !m.starts_with("claude-3-7") {
            4096
        } else {
            32_000
        };
    }
    const TABLE: &[(&str, u32)] = &[
        ("gpt-5", 32_768),
        ("o1", 32_768),
        ("o3", 32_768),
        ("o4", 32_768),
        ("gpt-4.1", 32_768),
        ("gpt-4o", 16_384),
        ("gpt-4", 4096),
        ("gpt-3.5-turbo", 4096),
    ];
    TABLE
        .iter()
        .filter(|(prefix, _)| m.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, n)| *n)
        .unwrap_or_else(|| 8192.min((context_window / 4).max(256) as u32))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn default_output_caps() {
        let cap = default_max_output_tokens;
        assert_eq!(cap("openai", "gpt-4o-mini", 128_000), 16_384);
        assert_eq!(cap("openai", "gpt-4-turbo", 128_000), 4096);
        assert_eq!(cap("openai", "gpt-4.1-mini", 1_047_576), 32_768);
        assert_eq!(cap("openai", "o3-mini", 200_000), 32_768);
        assert_eq!(cap("openai", "qwen2.5-coder:7b", 32_768), 8192);
        assert_eq!(cap("openai", "llama3:8b", 8192), 2048);
        assert_eq!(cap("openai", "tiny", 100), 256);
        assert_eq!(cap("anthropic", "claude-3-haiku-20240307", 200_000), 4096);
        assert_eq!(cap("anthropic", "claude-3-5-haiku-latest", 200_000), 8192);
        assert_eq!(
            cap("anthropic", "claude-3-7-sonnet-latest", 200_000),
            32_000
        );
        assert_eq!(cap("anthropic", "claude-sonnet-4-5", 200_000), 32_000);
    }

    #[test]
    fn context_windows() {
        assert_eq!(context_window_for("gpt-4o-mini"), 128_000);
        assert_eq!(context_window_for("gpt-4"), 8_192);
        assert_eq!(context_window_for("gpt-4.1-mini"), 1_047_576);
        assert_eq!(context_window_for("claude-sonnet-4-5"), 200_000);
        assert_eq!(context_window_for("llama3.1:8b"), 128_000);
        assert_eq!(context_window_for("meta-llama/llama3:8b"), 8_192);
        assert_eq!(context_window_for("something-new"), DEFAULT_CONTEXT_WINDOW);
    }

    #[test]
    fn specs_are_parsed() {
        assert_eq!(
            parse_model_spec("openai:gpt-4o").ok(),
            Some(("openai", "gpt-4o"))
        );
        assert_eq!(
            parse_model_spec("scripted:C:/x.json").ok(),
            Some(("scripted", "C:/x.json"))
        );
        assert!(parse_model_spec("gpt-4o").is_err());
        assert!(parse_model_spec("openai:").is_err());
        assert!(parse_model_spec("foo:bar").is_err());
    }
}
