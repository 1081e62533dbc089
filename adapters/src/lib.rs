//! Keel's model adapters: the OpenAI-compatible Chat Completions and Anthropic
//! Messages providers over streaming HTTP, the scripted model used by tests and the
//! offline demo, model selection (`provider:model`) and the TOML configuration.
//!
//! Hosts typically do:
//!
//! ```no_run
//! # fn main() -> Result<(), keel_envelope::ErrorPayload> {
//! use keel_adapters::{build_model, resolve_model_spec, Config};
//! let config = Config::load(std::path::Path::new("/home/me/.local/share/keel"), None)?;
//! let spec = resolve_model_spec(None, std::env::var("KEEL_MODEL").ok().as_deref(), &config)?;
//! let model = build_model(&spec, &config)?;
//! # let _ = model; Ok(()) }
//! ```

pub mod anthropic;
pub mod config;
pub mod convert;
mod error;
pub mod http;
pub mod openai;
pub mod scripted;
pub mod select;
pub mod sse;
#[cfg(feature = "testing")]
pub mod testing;

pub use anthropic::AnthropicModel;
pub use config::{
    default_keel_home, Config, ModelEntry, ProviderConfig, ProvidersConfig, ShellConfig,
};
pub use http::{HttpOptions, RetryPolicy};
pub use openai::OpenAiModel;
pub use scripted::{ScriptedModel, SCRIPT_EXHAUSTED_TEXT};
pub use select::{
    build_model, build_model_with_env, context_window_for, parse_model_spec, resolve_model_spec,
    EnvMap, DEFAULT_CONTEXT_WINDOW,
};
