//! The command handlers, one module per feature.

pub(crate) mod stored;
