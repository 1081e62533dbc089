//! Keel's kernel: the one place where agent logic lives.
//!
//! The kernel owns sessions (one actor task each), runs the agent loop, asks the
//! permission gate, handles approvals, plan mode, interrupts, the queue, persistence
//! and resume. It never prints: hosts receive [`keel_envelope::Envelope`]s.

pub mod model;
