//! What Keel knows of model families by name: their context windows and the output
//! cap sent when nothing else sets one.

/// The context window assumed for models not in the table.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

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
}
