//! Fixtures shared by Keel's test binaries (a dev-dependency only, never published):
//!
//! - [`model_server`]: the model server driver, a local fake HTTP server speaking the
//!   OpenAI and Anthropic wire formats, with builders of their streams;
//! - [`bridge`]: the bridge driver, a real `keel bridge` process, command lines in,
//!   envelopes read until a predicate holds;
//! - [`Rng`]: a seeded generator for randomised tests.

#![warn(missing_docs)]

pub mod bridge;
pub mod model_server;
mod rng;

pub use rng::Rng;
