//! What Keel knows of model families by name: their context windows and the output
//! cap sent when nothing else sets one.

/// The context window assumed for models not in the table.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// The output cap of a model whose family Keel does not know, when its window is
/// known: this, or a quarter of the window when that is less.
pub const DEFAULT_OUTPUT_CAP: u32 = 8192;
/// The output cap of a model Keel does not know, on a server that does not report its
/// window: half of the smallest window local servers run with by default (4 096
/// tokens: Ollama, older llama.cpp), a quarter of an 8 192-token one.
pub const UNKNOWN_WINDOW_OUTPUT_CAP: u32 = 2048;
/// The least output cap derived from a window (unless the window is less than twice
/// that).
pub const MIN_OUTPUT_CAP: u32 = 256;

/// The context window of a model family, by name prefix; `None` for unknown models.
pub fn known_context_window(model: &str) -> Option<u64> {
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
}

/// The context window of a model family, by name prefix; [`DEFAULT_CONTEXT_WINDOW`]
/// for unknown models.
pub fn context_window_for(model: &str) -> u64 {
    known_context_window(model).unwrap_or(DEFAULT_CONTEXT_WINDOW)
}

/// The output cap of a model family whose own maximum is known and modest (hosted
/// models: OpenAI's, Claude).
fn family_output_cap(provider: &str, model: &str) -> Option<u32> {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    if provider == "anthropic" && m.starts_with("claude") {
        return Some(if m.starts_with("claude-3-5") {
            8192
        } else if m.starts_with("claude-3-") && !m.starts_with("claude-3-7") {
            4096
        } else {
            32_000
        });
    }
    if provider != "openai" {
        return None;
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
}

/// Where a model's context window comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// `availableModels[].contextWindow` (or the settings' own).
    Configured,
    /// The server reported it; where it was read (`GET /props`, …).
    Reported(&'static str),
    /// Keel's table of model families.
    Known,
    /// Not known: [`DEFAULT_CONTEXT_WINDOW`] is assumed.
    Assumed,
}

/// A model's context window and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextWindow {
    /// In tokens.
    pub tokens: u64,
    /// Where it comes from.
    pub source: WindowSource,
}

/// Why a default output cap is what it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapSource {
    /// The model family's own default.
    Family,
    /// Derived from the window: [`DEFAULT_OUTPUT_CAP`] (or the family's), at most a
    /// quarter of the window.
    Window(ContextWindow),
    /// The window is not known and the server is not the provider's own:
    /// [`UNKNOWN_WINDOW_OUTPUT_CAP`].
    UnknownWindow,
}

/// The output cap sent with a model call that sets none, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputCap {
    /// In tokens.
    pub tokens: u32,
    /// Why.
    pub source: CapSource,
}

impl std::fmt::Display for OutputCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} tokens, ", self.tokens)?;
        match self.source {
            CapSource::Family => write!(f, "the model family's default"),
            CapSource::UnknownWindow => write!(
                f,
                "the default for a model whose window neither Keel nor the server reports"
            ),
            CapSource::Window(w) => {
                let n = w.tokens;
                match w.source {
                    WindowSource::Configured => {
                        write!(
                            f,
                            "from the configured window of {n} tokens (contextWindow)"
                        )
                    }
                    WindowSource::Reported(at) => {
                        write!(f, "from the window of {n} tokens the server reports ({at})")
                    }
                    WindowSource::Known => {
                        write!(f, "from the model family's window of {n} tokens")
                    }
                    WindowSource::Assumed => {
                        write!(
                            f,
                            "from the window of {n} tokens assumed for an unknown model"
                        )
                    }
                }
            }
        }
    }
}

/// The output cap sent with a model call when neither the configuration, the session
/// nor the request sets one (see [`OutputCap`]):
/// - a window that is configured or that the server reported: [`DEFAULT_OUTPUT_CAP`]
///   (or the family's own cap when less), at most a quarter of the window, at least
///   [`MIN_OUTPUT_CAP`] but never more than half the window;
/// - else a hosted family's own cap (OpenAI's models, Claude), or the same rule with
///   the family's window from Keel's table;
/// - else, on a server that is not the provider's own (`own_server` false), a model
///   Keel does not know: [`UNKNOWN_WINDOW_OUTPUT_CAP`]; on the provider's own server,
///   the rule with [`DEFAULT_CONTEXT_WINDOW`].
pub fn output_cap(
    provider: &str,
    model: &str,
    window: ContextWindow,
    own_server: bool,
) -> OutputCap {
    let family = family_output_cap(provider, model);
    let from_window = |w: ContextWindow| {
        let ceiling = family.unwrap_or(DEFAULT_OUTPUT_CAP);
        let quarter = u32::try_from(w.tokens / 4).unwrap_or(u32::MAX);
        let half = u32::try_from(w.tokens / 2).unwrap_or(u32::MAX);
        OutputCap {
            tokens: ceiling.min(quarter.max(MIN_OUTPUT_CAP)).min(half).max(1),
            source: CapSource::Window(w),
        }
    };
    match (window.source, family) {
        (WindowSource::Configured | WindowSource::Reported(_), _) => from_window(window),
        (_, Some(tokens)) => OutputCap {
            tokens,
            source: CapSource::Family,
        },
        (WindowSource::Known, None) => from_window(window),
        (WindowSource::Assumed, None) if !own_server => OutputCap {
            tokens: UNKNOWN_WINDOW_OUTPUT_CAP,
            source: CapSource::UnknownWindow,
        },
        (WindowSource::Assumed, None) => from_window(window),
    }
}

/// The output cap of `model` with a `context_window` from Keel's table, on the
/// provider's own server (see [`output_cap`]).
pub fn default_max_output_tokens(provider: &str, model: &str, context_window: u64) -> u32 {
    let window = ContextWindow {
        tokens: context_window,
        source: WindowSource::Known,
    };
    output_cap(provider, model, window, true).tokens
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
        assert_eq!(cap("openai", "tiny", 600), 256);
        assert_eq!(
            cap("openai", "tiny", 300),
            150,
            "never more than half the window"
        );
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
        assert_eq!(known_context_window("something-new"), None);
    }

    #[test]
    fn caps_follow_where_the_window_comes_from() {
        let w = |tokens, source| ContextWindow { tokens, source };
        let reported = WindowSource::Reported("GET /props");
        // A small local server: a quarter of what it reports, whatever the name.
        let c = output_cap("openai", "local", w(8192, reported), false);
        assert_eq!(c.tokens, 2048);
        assert_eq!(c.source, CapSource::Window(w(8192, reported)));
        assert_eq!(
            output_cap("openai", "qwen2.5-coder:7b", w(4096, reported), false).tokens,
            1024
        );
        assert_eq!(
            output_cap("anthropic", "qwen3", w(8192, reported), false).tokens,
            2048
        );
        // A large one: the default.
        assert_eq!(
            output_cap("openai", "local", w(131_072, reported), false).tokens,
            8192
        );
        // A hosted family keeps its cap, within a window that is reported or configured.
        assert_eq!(
            output_cap("openai", "gpt-4o", w(128_000, WindowSource::Known), false).tokens,
            16_384
        );
        assert_eq!(
            output_cap(
                "openai",
                "gpt-4o",
                w(16_384, WindowSource::Configured),
                false
            )
            .tokens,
            4096
        );
        // Unknown name and window: never the default 8192 on a local server.
        let c = output_cap(
            "openai",
            "local",
            w(DEFAULT_CONTEXT_WINDOW, WindowSource::Assumed),
            false,
        );
        assert_eq!(
            (c.tokens, c.source),
            (UNKNOWN_WINDOW_OUTPUT_CAP, CapSource::UnknownWindow)
        );
        assert_eq!(
            output_cap(
                "anthropic",
                "local",
                w(DEFAULT_CONTEXT_WINDOW, WindowSource::Assumed),
                false
            )
            .tokens,
            UNKNOWN_WINDOW_OUTPUT_CAP
        );
        // On the provider's own server an unknown name keeps the default.
        assert_eq!(
            output_cap(
                "openai",
                "gpt-next",
                w(DEFAULT_CONTEXT_WINDOW, WindowSource::Assumed),
                true
            )
            .tokens,
            8192
        );
        // A known open-weight family without a report: its table window.
        assert_eq!(
            output_cap("openai", "llama3:8b", w(8192, WindowSource::Known), false).tokens,
            2048
        );
    }
}
