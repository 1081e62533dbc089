//! Keel's wire contract: the versioned event envelope, the command set, error codes
//! and the JSON-lines codec.
//!
//! This crate is the only place where wire types are defined. It knows nothing of
//! tokio, of the kernel, of tools or of models: it is plain data plus a codec, so a
//! host written in Rust can depend on it alone.
//!
//! ```
//! use keel_envelope::{Envelope, Event, Source, events::AssistantDelta};
//! let env = Envelope::new(
//!     Some("sess_1".into()), "req_1".into(), "evt_1".into(), 1_775_600_000_000,
//!     Source::Runtime, 1,
//!     Event::AssistantDelta(AssistantDelta { text: "hi".into() }),
//! );
//! let line = keel_envelope::codec::encode_line(&env);
//! let back = keel_envelope::codec::decode_envelope(&line).unwrap();
//! assert_eq!(back, env);
//! ```

pub mod budget;
pub mod codec;
pub mod commands;
mod encode;
mod envelope;
pub mod error;
pub mod events;
pub mod ext;
pub mod generate;
pub mod host;
pub mod ids;
pub mod kernel_tools;
pub mod remote;
pub mod tools;
pub mod types;
pub mod wire;
pub mod worktree;

pub use commands::{Command, CommandType};
pub use envelope::{Envelope, Meta, SequenceChecker, SequenceGap, Sequencer, Source};
pub use error::{ErrorCode, ErrorPayload};
pub use events::{Event, EventType};

/// The protocol version this crate speaks, as carried in every envelope.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The major part of [`PROTOCOL_VERSION`]; peers with another major are refused.
pub const PROTOCOL_MAJOR: u32 = 1;
