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
//!     Event::AssistantDelta(AssistantDelta::new("hi")),
//! );
//! let line = keel_envelope::codec::encode_line(&env);
//! let back = keel_envelope::codec::decode_envelope(&line).unwrap();
//! assert_eq!(back, env);
//! ```
//!
//! Command and event payloads (and the other wire structs that may grow) are
//! `#[non_exhaustive]`: a minor version may add an optional field. Build them with
//! `new(…)`, which takes the required fields, and the setters named after the optional
//! fields:
//!
//! ```
//! use keel_envelope::commands::{RequestSend, WhenBusy};
//! use keel_envelope::events::SessionCompleted;
//! use keel_envelope::types::{StopReason, Telemetry};
//!
//! let send = RequestSend::new("Fix the test").when_busy(WhenBusy::Steer);
//! assert_eq!(send.message, "Fix the test");
//! assert_eq!(send.when_busy, Some(WhenBusy::Steer));
//!
//! let done =
//!     SessionCompleted::new(StopReason::EndTurn, Telemetry::default()).final_text("Done".to_owned());
//! assert_eq!(done.final_text.as_deref(), Some("Done"));
//! assert_eq!(done.budget, None);
//! ```
//!
//! A struct literal of a payload does not compile outside this crate, neither of a
//! command payload:
//!
//! ```compile_fail,E0639
//! let send = keel_envelope::commands::RequestSend {
//!     message: "Fix the test".into(),
//!     ..Default::default()
//! };
//! ```
//!
//! nor of an event payload:
//!
//! ```compile_fail,E0639
//! let delta = keel_envelope::events::AssistantDelta { text: "hi".into() };
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
