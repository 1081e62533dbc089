//! Reliability through the real `keel bridge` process: crashes, load, hostile hosts,
//! bounded resources. docs/reliability.md lists each test with its figures.
#![allow(clippy::unwrap_used)]

mod common;
mod crash;
mod hostile;
mod load;
mod survivors;
