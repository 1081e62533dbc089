//! A model selection string, `provider:model`, and the providers it may name.

use keel_envelope::error::{ErrorCategory, ErrorCode, ErrorHint, ErrorPayload, Severity};

/// Known providers.
pub const PROVIDERS: [&str; 3] = ["openai", "anthropic", "scripted"];

/// A `MODEL_UNAVAILABLE` payload in the runtime category, with hint
/// `check_llm_config`.
pub(crate) fn model_unavailable(message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::ModelUnavailable, message)
        .category(ErrorCategory::Runtime)
        .severity(Severity::Error)
        .hint(ErrorHint::CheckLlmConfig)
}

/// Splits `provider:model`; `MODEL_UNAVAILABLE` when either part is missing or the
/// provider is unknown.
pub fn parse_model_spec(spec: &str) -> Result<(&str, &str), ErrorPayload> {
    let spec = spec.trim();
    let Some((provider, name)) = spec.split_once(':') else {
        return Err(model_unavailable(format!(
            "model {spec:?} is not of the form provider:model (e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, scripted:path/to/script.json)"
        ))
        .with_detail("model", spec.to_owned()));
    };
    if !PROVIDERS.contains(&provider) {
        return Err(model_unavailable(format!(
            "unknown model provider {provider:?} in {spec:?}; known providers: {}",
            PROVIDERS.join(", ")
        ))
        .with_detail("model", spec.to_owned()));
    }
    if name.trim().is_empty() {
        return Err(
            model_unavailable(format!("model {spec:?} names no model after {provider:?}"))
                .with_detail("model", spec.to_owned()),
        );
    }
    Ok((provider, name.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
