//! The base layer: the model port, the conversation, the store, event delivery, the
//! configuration and the small pure pieces everything above is built from. It imports
//! nothing of the kernel above it.

pub(crate) mod archive;
pub mod config;
pub(crate) mod emit;
pub mod history;
pub(crate) mod history_import;
pub mod hooks;
pub(crate) mod hub;
pub(crate) mod limits;
pub mod mcp_config;
pub mod model;
pub(crate) mod options;
pub mod ownership;
pub(crate) mod probe;
pub(crate) mod prompt;
pub mod record;
pub(crate) mod replay;
pub mod store;
pub(crate) mod store_history;
pub mod summary;
pub(crate) mod time;
pub mod title;
pub(crate) mod trace;
pub(crate) mod verdict;
