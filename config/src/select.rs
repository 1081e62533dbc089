//! Model selection: one `provider:model` string, from `--model`, `KEEL_MODEL` or the
//! configuration.

use keel_envelope::error::ErrorPayload;

use crate::config::Config;
use crate::spec::{model_unavailable, parse_model_spec};

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
