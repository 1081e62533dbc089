//! Keel: an embeddable agent runtime kernel.
//!
//! This facade is what a Rust host needs, in one dependency: the kernel and its
//! configuration at the top, and a few modules for the rest:
//!
//! - [`protocol`]: the wire types (commands, events, the envelope, errors, the codec);
//! - [`tools`]: registering a tool of your own ([`tools::Tool`] and its row of the
//!   permission table);
//! - [`models`]: the model port and the providers a host picks (OpenAI-compatible,
//!   Anthropic, the offline scripted model);
//! - [`store`]: where sessions are kept ([`store::FileStore`], [`store::MemoryStore`], or
//!   your own [`store::Store`]);
//! - [`hooks`]: code of the host run at points of a request's life;
//! - [`ids`]: the id generator and clock a kernel uses;
//! - [`config`]: the configuration file (`config.toml`);
//! - [`bridge`]: the JSON-lines server over any reader and writer.
//!
//! A kernel on the scripted model (offline), one request, its events:
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use std::sync::Arc;
//! use keel::models::ScriptedModel;
//! use keel::protocol::{commands::SessionStart, Event};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let model = ScriptedModel::from_json(serde_json::json!({
//!     "turns": [{ "text": "Hello from the script." }]
//! }))
//! .unwrap();
//! let kernel = keel::Kernel::builder()
//!     .workspace(dir.path())
//!     .model(Arc::new(model))
//!     .memory_store()
//!     .build()
//!     .unwrap();
//! let (session, mut events) = kernel.start_session(SessionStart::new()).await.unwrap();
//! session.send("Say hello").await.unwrap();
//! let answer = loop {
//!     match events.recv().await.map(|e| e.event) {
//!         Some(Event::AssistantFinal(f)) => break f.text,
//!         Some(_) => continue,
//!         None => panic!("the stream ended"),
//!     }
//! };
//! assert_eq!(answer, "Hello from the script.");
//! # });
//! ```
//!
//! The `examples/` folder of the repository has three hosts: a minimal one, one with a
//! tool of its own and an approval callback, and one resuming a stored session.

#![warn(unreachable_pub, missing_docs)]

pub use keel_kernel::{
    default_store_dir, EventStream, Kernel, KernelBuilder, KernelConfig, ModelFactory,
    SessionHandle, SessionOptions, WatchEnd, WatchStream, Watcher,
};

/// The wire contract: commands a host sends, the events it receives in envelopes, error
/// payloads and codes, and the JSON-lines codec. Every enum here that may grow in a
/// minor version decodes values it does not know into `Unknown(String)`
/// (docs/protocol.md, "Compatibility").
pub mod protocol {
    pub use keel_envelope::{
        Command, CommandType, Envelope, ErrorCode, ErrorPayload, Event, EventType, Meta,
        SequenceChecker, SequenceGap, Source, PROTOCOL_MAJOR, PROTOCOL_VERSION,
    };

    pub use keel_envelope::{budget, codec, commands, error, events, ext, host, types, wire};

    /// The argument and result shapes of the built-in tools and the gate's verdict.
    pub mod tool_types {
        pub use keel_envelope::kernel_tools::*;
        pub use keel_envelope::tools::*;
    }
}

/// A tool of the host: implement [`Tool`], describe it with a [`ToolSpec`] (its row of
/// the permission table: level, plan-mode behaviour, approval), register it with
/// [`KernelBuilder::tool`](crate::KernelBuilder::tool).
pub mod tools {
    pub use keel_tools::{
        builtin_tools, ApprovalRequirement, CancellationToken, PlanBehavior, SandboxConfig,
        SandboxKind, Tool, ToolContext, ToolSpec,
    };
}

/// The model port and the providers.
pub mod models {
    pub use keel_adapters::{
        build_model, parse_model_spec, AnthropicModel, HttpOptions, OpenAiModel, RetryPolicy,
        ScriptedModel,
    };
    pub use keel_kernel::model::{
        FinishReason, Message, Model, ModelError, ModelEvent, ModelRequest, ToolCallRequest,
        ToolDef,
    };
}

/// Where sessions are kept: their event logs and the state needed to resume them.
pub mod store {
    pub use keel_kernel::store::{FileStore, FileStoreOptions, MemoryStore, Store};
}

/// Host code at five points of a request's life (session start, prompt submit, before
/// and after a tool call, stop), and the configured command hooks.
pub mod hooks {
    pub use keel_kernel::hooks::{
        HookError, HookEvent, HookInput, Hooks, HooksConfig, PromptVerdict, StopVerdict,
        ToolVerdict,
    };
}

/// Ids and time, injected into a kernel (tests use the deterministic ones).
pub mod ids {
    pub use keel_envelope::ids::{
        Clock, IdGen, IdKind, ManualClock, SeqIdGen, SystemClock, UlidGen,
    };
}

/// The configuration file (`KEEL_HOME/config.toml`) and model selection from it.
pub mod config {
    pub use keel_adapters::{default_keel_home, Config};
}

/// The JSON-lines server (what `keel bridge` runs) over any async reader and writer.
pub mod bridge {
    pub use keel_bridge::{serve, BridgeOptions};
}
