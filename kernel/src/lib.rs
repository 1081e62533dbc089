//! Keel's kernel: the one place where agent logic lives.
//!
//! The kernel owns sessions, runs the agent loop, asks the permission gate, handles
//! approvals, plan mode, interrupts, the queue, persistence and resume. It never
//! prints: hosts receive [`keel_envelope::Envelope`]s from [`Kernel::subscribe`] or a
//! session's [`EventStream`], and drive it with [`Kernel::execute`] (one call per wire
//! command) or the typed [`SessionHandle`] methods.

mod agent;
mod approval;
mod budget;
mod builder;
mod compact;
pub mod config;
mod emit;
mod ext;
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
mod handle;
pub mod history;
mod history_import;
pub mod hooks;
mod host_tools;
mod idle;
mod kernel;
mod kernel_tools;
pub mod mcp;
pub mod model;
mod options;
mod overlay;
mod pipeline;
mod probe;
mod prompt;
pub mod record;
mod registry;
mod replay;
mod request;
mod rewind;
mod session;
mod side;
pub mod store;
mod store_history;
mod stored;
pub mod summary;
pub mod title;
mod turn;

pub use builder::{default_store_dir, KernelBuilder};
pub use config::KernelConfig;
pub use emit::WatchEnd;
pub use handle::{EventStream, SessionHandle, WatchStream, Watcher};
pub use kernel::{Kernel, ModelFactory};
pub use options::SessionOptions;

/// Test seams: a probe that pauses a request at the points of its life.
#[doc(hidden)]
pub mod testing {
    pub use crate::probe::{Point, Probe};
}
pub use prompt::{ASK_USER, PROPOSE_PLAN, SPAWN_SUB_AGENT, TASK_GRAPH, UPDATE_PLAN};
