//! keel-adapters (skeleton).
