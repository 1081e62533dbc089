//! keel-bridge (skeleton).
