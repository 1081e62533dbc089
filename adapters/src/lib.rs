//! Keel's model adapters: the OpenAI-compatible Chat Completions and Anthropic
//! Messages providers over streaming HTTP, the scripted model used by tests and the
//! offline demo, model selection (`provider:model`) and the TOML configuration.
//!
//! Hosts typically do:
//!
//! ```no_run
//! # fn main() -> Result<(), keel_envelope::ErrorPayload> {
//! use keel_adapters::{build_model, default_keel_home, resolve_model_spec, Config, EnvMap};
//! let env = EnvMap::from_process();
//! let home = default_keel_home(&env).expect("a data directory");
//! let config = Config::load(&home, Some(std::path::Path::new(".")))?;
//! let spec = resolve_model_spec(None, env.get("KEEL_MODEL"), &config)?;
//! let model = build_model(&spec, &config)?;
//! # let _ = model; Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod anthropic;
mod bodies;
pub mod config;
pub mod config_agent;
pub mod convert;
mod error;
pub mod fragments;
pub mod http;
pub mod openai;
pub mod probe;
pub mod scripted;
pub mod select;
pub mod sse;
#[cfg(feature = "testing")]
pub mod testing;
mod toml_keys;

pub use anthropic::AnthropicModel;
pub use config::{
    default_keel_home, Config, ModelEntry, ProviderConfig, ProvidersConfig, ShellConfig,
};
pub use config_agent::{AgentConfig, ProjectTrust};
pub use http::{HttpOptions, RetryPolicy};
pub use openai::OpenAiModel;
pub use probe::{probe, provider_target, ProbeOutcome, ProviderTarget};
pub use scripted::{ScriptedModel, SCRIPT_EXHAUSTED_TEXT};
pub use select::{
    build_model, build_model_with_env, context_window_for, default_max_output_tokens,
    parse_model_spec, resolve_model_spec, selected_model_spec, EnvMap, DEFAULT_CONTEXT_WINDOW,
};
