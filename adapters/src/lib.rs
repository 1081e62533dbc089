//! Keel's model adapters: the OpenAI-compatible Chat Completions and Anthropic
//! Messages providers over streaming HTTP, the scripted model used by tests and the
//! offline demo, and the factory that builds the model a selection names
//! (`provider:model`) from the configuration of `keel-config`.
//!
//! Hosts typically do:
//!
//! ```no_run
//! # fn main() -> Result<(), keel_envelope::ErrorPayload> {
//! use keel_adapters::build_model;
//! use keel_config::{default_keel_home, resolve_model_spec, Config, EnvMap};
//! let env = EnvMap::from_process();
//! let home = default_keel_home(&env).expect("a data directory");
//! let config = Config::load(&home, Some(std::path::Path::new(".")))?;
//! let spec = resolve_model_spec(None, env.get("KEEL_MODEL"), &config)?;
//! let model = build_model(&spec, &config)?;
//! # let _ = model; Ok(()) }
//! ```
//!
//! A provider is given only its [`ProviderSettings`] (model, base URL, key, context
//! window, retries and time limits); [`factory`] is the one module that reads the
//! configuration.

#![warn(missing_docs)]

pub mod anthropic;
mod bodies;
pub mod convert;
mod error;
pub mod factory;
pub mod fragments;
mod http;
mod messages;
mod models;
pub mod openai;
pub mod probe;
mod provider;
pub mod scripted;
pub mod sse;
pub mod window;

pub use anthropic::AnthropicModel;
pub use factory::{build_model, build_model_with_env, planned_output_cap};
pub use http::HttpOptions;
pub use keel_config::RetryPolicy;
pub use models::{
    context_window_for, default_max_output_tokens, known_context_window, output_cap, CapSource,
    ContextWindow, OutputCap, WindowSource, DEFAULT_CONTEXT_WINDOW, DEFAULT_OUTPUT_CAP,
    MIN_OUTPUT_CAP, UNKNOWN_WINDOW_OUTPUT_CAP,
};
pub use openai::OpenAiModel;
pub use probe::{probe, provider_target, ProbeOutcome, ProviderTarget};
pub use provider::{HttpModel, ProviderSettings};
pub use scripted::{ScriptedModel, SCRIPT_EXHAUSTED_TEXT};
