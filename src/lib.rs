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
//! - [`config`]: the configuration file (`config.toml`), the environment and model
//!   selection;
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
    default_store_dir, KernelBuilder, KernelConfig, ModelFactory, SessionOptions, WatchEnd,
    WatchStream, Watcher,
};

/// The kernel: build one with [`Kernel::builder`], then start sessions with
/// [`Kernel::start_session`] or drive it with wire commands through [`Kernel::execute`]
/// (its answers arrive on [`Kernel::subscribe`]).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use keel::protocol::commands::{CommandPayload, SessionListCmd};
/// use keel::protocol::{Command, Event};
///
/// let model = keel::models::ScriptedModel::from_json(serde_json::json!({"turns": []})).unwrap();
/// let kernel = keel::Kernel::builder()
///     .workspace(std::env::temp_dir())
///     .model(Arc::new(model))
///     .memory_store()
///     .build()
///     .unwrap();
/// let mut all = kernel.subscribe();
/// let cmd = Command::new("req_1", None, CommandPayload::SessionList(SessionListCmd::new()));
/// kernel.execute(cmd).await.unwrap();
/// let answer = all.recv().await.unwrap();
/// assert_eq!(answer.request_id, "req_1");
/// assert!(matches!(answer.event, Event::SessionList(_)));
/// # });
/// ```
#[doc(inline)]
pub use keel_kernel::Kernel;

/// One session: [`SessionHandle::send`] a message (it answers with the request id at
/// once; the events follow on the session's [`EventStream`]), answer approvals, plans
/// and questions, change the mode, interrupt.
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::sync::Arc;
/// use keel::protocol::{commands::SessionStart, Event};
///
/// let model = keel::models::ScriptedModel::from_json(serde_json::json!({
///     "turns": [{ "text": "Done." }]
/// }))
/// .unwrap();
/// let kernel = keel::Kernel::builder()
///     .workspace(std::env::temp_dir())
///     .model(Arc::new(model))
///     .memory_store()
///     .build()
///     .unwrap();
/// let (session, mut events) = kernel.start_session(SessionStart::new()).await.unwrap();
/// let request_id = session.send("Go").await.unwrap();
/// // The request's events carry its id; `session.completed` ends it.
/// while let Some(env) = events.recv().await {
///     if env.request_id == request_id && matches!(env.event, Event::SessionCompleted(_)) {
///         break;
///     }
/// }
/// # });
/// ```
#[doc(inline)]
pub use keel_kernel::SessionHandle;

/// A session's events in order, from before `session.started` on: `recv().await` each
/// one (`None` once the session is closed and the stream drained).
#[doc(inline)]
pub use keel_kernel::EventStream;

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

/// A tool of the host: implement [`Tool`](tools::Tool), describe it with a [`ToolSpec`](tools::ToolSpec) (its row of
/// the permission table: level, plan-mode behaviour, approval), register it with
/// [`KernelBuilder::tool`](crate::KernelBuilder::tool).
pub mod tools {
    pub use keel_tools::{
        builtin_tools, ApprovalRequirement, CancellationToken, PlanBehavior, SandboxConfig,
        SandboxKind, ToolContext, ToolSpec,
    };

    /// A tool: its row of the permission table and its handler. Register it with
    /// [`KernelBuilder::tool`](crate::KernelBuilder::tool); the model is offered it like
    /// the built-in tools, and every call goes through the same gate and approvals.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use keel::protocol::types::PermissionLevel;
    /// use keel::protocol::ErrorPayload;
    /// use keel::tools::{ApprovalRequirement, PlanBehavior, Tool, ToolContext, ToolSpec};
    ///
    /// #[derive(Debug)]
    /// struct Clock(ToolSpec);
    ///
    /// #[async_trait::async_trait]
    /// impl Tool for Clock {
    ///     fn spec(&self) -> &ToolSpec {
    ///         &self.0
    ///     }
    ///     async fn run(&self, _: serde_json::Value, _: ToolContext) -> Result<serde_json::Value, ErrorPayload> {
    ///         Ok(serde_json::json!({ "now": "noon" }))
    ///     }
    /// }
    ///
    /// let spec = ToolSpec::custom(
    ///     "clock", "Tells the time.", serde_json::json!({"type": "object"}),
    ///     PermissionLevel::Read, PlanBehavior::Allowed, ApprovalRequirement::Never,
    /// );
    /// let model = keel::models::ScriptedModel::from_json(serde_json::json!({"turns": []})).unwrap();
    /// let kernel = keel::Kernel::builder()
    ///     .workspace(std::env::temp_dir())
    ///     .model(Arc::new(model))
    ///     .tool(Arc::new(Clock(spec)))
    ///     .memory_store()
    ///     .build();
    /// assert!(kernel.is_ok());
    /// ```
    #[doc(inline)]
    pub use keel_tools::Tool;
}

/// The model port and the providers.
pub mod models {
    pub use keel_adapters::{
        build_model, AnthropicModel, HttpOptions, OpenAiModel, ProviderSettings, RetryPolicy,
        ScriptedModel,
    };
    pub use keel_config::parse_model_spec;
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
        HookError, HookEvent, HookInput, HooksConfig, PromptVerdict, StopVerdict, ToolVerdict,
    };

    /// The host's hooks: every method has a default that changes nothing; implement the
    /// points you need and give them to [`KernelBuilder::hooks`](crate::KernelBuilder::hooks).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use keel::hooks::{HookError, HookInput, Hooks};
    ///
    /// /// Adds the team's conventions to every session's system prompt.
    /// #[derive(Debug)]
    /// struct Conventions;
    ///
    /// #[async_trait::async_trait]
    /// impl Hooks for Conventions {
    ///     async fn session_start(&self, _: &HookInput) -> Result<Option<String>, HookError> {
    ///         Ok(Some("Tests live next to the code.".into()))
    ///     }
    /// }
    ///
    /// let model = keel::models::ScriptedModel::from_json(serde_json::json!({"turns": []})).unwrap();
    /// let kernel = keel::Kernel::builder()
    ///     .workspace(std::env::temp_dir())
    ///     .model(Arc::new(model))
    ///     .hooks(Arc::new(Conventions))
    ///     .memory_store()
    ///     .build();
    /// assert!(kernel.is_ok());
    /// ```
    #[doc(inline)]
    pub use keel_kernel::hooks::Hooks;
}

/// Ids and time, injected into a kernel (tests use the deterministic ones).
pub mod ids {
    pub use keel_envelope::ids::{
        Clock, IdGen, IdKind, ManualClock, SeqIdGen, SystemClock, UlidGen,
    };
}

/// The configuration file (`KEEL_HOME/config.toml`) and model selection from it.
pub mod config {
    pub use keel_config::{
        default_keel_home, resolve_model_spec, selected_model_spec, Config, EnvMap,
    };
}

/// The JSON-lines server (what `keel bridge` runs) over any async reader and writer.
pub mod bridge {
    pub use keel_bridge::{serve, BridgeOptions};
}
