//! Integration tests: one binary, one module per area.

// Tests may unwrap: a panic is a failed test with its reason.
#![allow(clippy::unwrap_used)]

mod codec;
mod compat;
mod docs;
mod envelope;
mod examples;
mod golden;
mod openai_e2e;
mod record_replay;
mod samples;
mod shell_interrupt;
mod tidy;
