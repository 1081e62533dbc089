//! Keel's kernel: the one place where agent logic lives.
//!
//! The kernel owns sessions, runs the agent loop, asks the permission gate, handles
//! approvals, plan mode, interrupts, the queue, persistence and resume. It never
//! prints: hosts receive [`keel_envelope::Envelope`]s from [`Kernel::subscribe`] or a
//! session's [`EventStream`], and drive it with [`Kernel::execute`] (one call per wire
//! command) or the typed [`SessionHandle`] methods.
//!
//! Inside, the code is layered (docs/ARCHITECTURE.md): `base` (ports, store, delivery,
//! configuration), `session` (a session's state and the tools it holds), `pipeline`
//! (one tool call's path), `work` (requests, the loop, compaction, sub-agents),
//! `commands` (a handler per command, found through one table) and `kernel` (the
//! public API). A module imports only its own layer and those below it.

mod base;
mod commands;
#[doc(hidden)]
pub mod fuzzing;
mod kernel;
mod pipeline;
mod session;
mod work;

pub use base::{config, history, hooks, model, ownership, record, store, summary, title};
pub use pipeline::gate;

/// MCP servers of a session: their configuration. The client is the `keel-mcp` crate.
pub mod mcp {
    pub use crate::base::mcp_config as config;
    pub use crate::base::mcp_config::{McpServerConfig, McpServerParts, McpTransport};
}

/// OpenTelemetry: the recorder [`KernelBuilder::telemetry`] takes, and W3C trace
/// context (the `keel-telemetry` crate).
pub use keel_telemetry as telemetry;

pub use base::config::{KernelConfig, SkillsConfig};
pub use base::hub::WatchEnd;
pub use base::options::SessionOptions;
/// Agent Skills and custom commands (the `keel-skills` crate).
pub use keel_skills as skills;
pub use kernel::builder::{default_store_dir, KernelBuilder};
pub use kernel::handle::{EventStream, SessionHandle, WatchStream, Watcher};
pub use kernel::portable::{ExportReport, ImportOptions, ImportReport};
pub use kernel::{Kernel, ModelFactory};

/// Workspace checkpoints in a store several nodes share: carrying a session's new
/// checkpoints to it, and taking in what it holds (what a kernel on such a store does
/// after each checkpoint and when a session's checkpoints open; public for tools and
/// benchmarks that work on a store directly).
pub mod shared_checkpoints {
    pub use crate::session::shared_checkpoints::{carry, pull_into};
}

/// Test seams: a probe that pauses a request at the points of its life.
#[doc(hidden)]
pub mod testing {
    pub use crate::base::probe::{Point, Probe};
}
pub use base::prompt::{ASK_USER, PROPOSE_PLAN, SPAWN_SUB_AGENT, TASK_GRAPH, UPDATE_PLAN};
