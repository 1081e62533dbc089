//! Keel's configuration: the TOML files (`$KEEL_HOME/config.toml`, overridden key by
//! key by the workspace's `.keel/config.toml`), the environment, the default
//! `KEEL_HOME`, and model selection (`provider:model` from `--model`, `KEEL_MODEL` or
//! the configuration). Every key is documented in `docs/configuration.md`.
//!
//! It describes what is configured and knows nothing of HTTP or of the providers'
//! wire formats: `keel-adapters` builds a model from a selection and this
//! configuration.
//!
//! ```no_run
//! # fn main() -> Result<(), keel_envelope::ErrorPayload> {
//! use keel_config::{default_keel_home, resolve_model_spec, Config, EnvMap};
//! let env = EnvMap::from_process();
//! let home = default_keel_home(&env).expect("a data directory");
//! let config = Config::load(&home, Some(std::path::Path::new(".")))?;
//! let spec = resolve_model_spec(None, env.get("KEEL_MODEL"), &config)?;
//! # let _ = spec; Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod agent;
pub mod checkpoints;
pub mod config;
mod env;
mod mcp;
mod retry;
mod select;
mod skills;
mod spec;
mod store;
mod toml_keys;
mod worktrees;

pub use agent::{AgentConfig, ProjectTrust};
pub use config::{
    CheckpointsConfig, Config, ModelEntry, ProviderConfig, ProvidersConfig, ShellConfig,
    SkillsConfig, WorktreesConfig, CONFIG_FILE, CONFIG_MAX_BYTES, PROJECT_DIR,
};
pub use env::{default_keel_home, EnvMap};
pub use retry::RetryPolicy;
pub use select::{resolve_model_spec, selected_model_spec};
pub use spec::{parse_model_spec, PROVIDERS};
pub use store::{parse_store, redact, StoreSetting, DEFAULT_LEASE_TTL_SECS};
