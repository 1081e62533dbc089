//! Fixtures shared by Keel's test binaries (a dev-dependency only, never published):
//!
//! - [`model_server`]: the model server driver, a local fake HTTP server speaking the
//!   OpenAI and Anthropic wire formats, with builders of their streams;
//! - [`bridge`]: the bridge driver, a real `keel bridge` process, command lines in,
//!   envelopes read until a predicate holds;
//! - [`Rng`]: a seeded generator for randomised tests, [`Busy`]: CPU load for stress
//!   tests;
//! - [`runtime`]: a runtime for the servers of a test that runs `keel` as a process;
//! - [`doc_blocks`]: the fenced code blocks of a document, for tests that check them;
//! - [`git()`]: git isolated from the machine's configuration.

#![warn(missing_docs)]

pub mod bridge;
mod busy;
mod git;
pub mod model_server;
mod rng;

pub use busy::Busy;
pub use git::git;
pub use rng::Rng;

/// A runtime for the servers a synchronous test starts (the fake model server, an MCP
/// server): one worker thread, I/O and time on, so the servers go on answering while
/// the test blocks on a `keel` process.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The fenced blocks of language `lang` (```` ```toml ````) in the Markdown file at
/// `path`, in order. Panics if the file cannot be read.
pub fn doc_blocks(path: &std::path::Path, lang: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} cannot be read: {e}", path.display()));
    let fence = format!("```{lang}\n");
    doc.split(&fence)
        .skip(1)
        .filter_map(|rest| rest.split("```").next().map(str::to_owned))
        .collect()
}
