//! Keel's kernel: the one place where agent logic lives.
//!
//! The kernel owns sessions, runs the agent loop, asks the permission gate, handles
//! approvals, plan mode, interrupts, the queue, persistence and resume. It never
//! prints: hosts receive [`keel_envelope::Envelope`]s from [`Kernel::subscribe`] or a
//! session's [`EventStream`], and drive it with [`Kernel::execute`] (one call per wire
//! command) or the typed [`SessionHandle`] methods.

mod agent;
pub mod config;
mod emit;
mod ext;
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
mod kernel;
pub mod model;
mod prompt;
mod session;
pub mod store;

pub use config::KernelConfig;
pub use kernel::{
    default_store_dir, EventStream, Kernel, KernelBuilder, ModelFactory, SessionHandle,
    SessionOptions,
};
pub use prompt::{ASK_USER, PROPOSE_PLAN, SPAWN_SUB_AGENT, TASK_GRAPH, UPDATE_PLAN};
