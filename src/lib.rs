//! Keel: an embeddable agent runtime kernel.
//!
//! This facade re-exports the public API of the member crates so a host application
//! adds one dependency:
//!
//! - [`envelope`]: the wire types (envelope, events, commands, errors, codec).
//! - [`kernel`]: sessions and the agent loop.
//! - [`tools`]: the built-in tools and the permission matrix.
//! - [`config`]: the configuration files, the environment and model selection.
//! - [`adapters`]: model providers, and the factory that builds one from a selection.
//! - [`bridge`]: the stdio JSON-lines protocol server.

pub use keel_adapters as adapters;
pub use keel_bridge as bridge;
pub use keel_config as config;
pub use keel_envelope as envelope;
pub use keel_kernel as kernel;
pub use keel_tools as tools;

pub use keel_envelope::{Command, Envelope, ErrorCode, ErrorPayload, Event, EventType};
