//! Integration tests: one binary, one module per area.

mod codec;
mod docs;
mod envelope;
mod samples;
