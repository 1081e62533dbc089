//! The tool registry: every tool the model can call is one entry — its row of the
//! permission table ([`ToolSpec`]), a check of its arguments, and a handler — whether
//! it is built in, one of the kernel's own tools, or registered by the host. Names are
//! unique: a clash is a builder error naming both registrations.
//!
//! This registry is the kernel's; a session adds its own entries on top of it (the
//! tools of its MCP servers and of the host app, [`crate::session::overlay`]), with the same
//! rule for names.
//!
//! The registry also holds the pipeline's stages (patch preview, background tasks):
//! runners that take over an allowed call of another entry. It knows nothing of how a
//! call is run; that is [`crate::pipeline`].

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::spec::Analysis;
use keel_tools::{Tool, ToolSpec};
use serde::de::DeserializeOwned;

use crate::base::model::{ToolCallRequest, ToolDef};
use keel_envelope::types::PermissionMode;
use tokio_util::sync::CancellationToken;

use crate::base::verdict::GateVerdict;
use crate::session::Session;

/// Where an entry came from (for messages, and for what a sub-agent may use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// One of the seven built-in tools.
    Builtin,
    /// One of the kernel's own tools (plans, questions, task graph, sub-agents).
    Kernel,
    /// Registered by the host through the builder.
    Custom,
    /// A tool the host app runs, given to one session (`hostTools`).
    Host,
    /// A tool of one of the session's MCP servers.
    Mcp,
}

impl Origin {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Origin::Builtin => "a built-in tool",
            Origin::Kernel => "one of the kernel's own tools",
            Origin::Custom => "a tool registered by the host",
            Origin::Host => "a tool of the host app (hostTools)",
            Origin::Mcp => "a tool of an MCP server",
        }
    }
}

/// The error for a name taken twice: it names both registrations.
pub(crate) fn conflict(name: &str, first: Origin, second: Origin) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::ToolNameConflict,
        format!(
            "the tool name `{name}` is registered twice: by {} and by {}; rename one of them",
            first.describe(),
            second.describe()
        ),
    )
    .with_detail("toolName", name.to_owned())
}

/// What a handler gets for one call.
#[derive(Debug)]
pub(crate) struct CallCx<'a> {
    pub(crate) session: &'a Arc<Session>,
    /// The request whose stream carries the call's events.
    pub(crate) rid: &'a str,
    pub(crate) tool_call_id: &'a str,
    pub(crate) call: &'a ToolCallRequest,
    /// The call's own token (a child of the request's).
    pub(crate) cancel: &'a CancellationToken,
    pub(crate) verdict: &'a GateVerdict,
    /// The tools the caller may use (`None`: every entry).
    pub(crate) scope: Option<&'a [String]>,
    /// The session's permission mode when the gate decided.
    pub(crate) mode: PermissionMode,
}

/// A handler that needs the session (the kernel's own tools).
#[async_trait]
pub(crate) trait KernelHandler: Send + Sync + std::fmt::Debug {
    /// Runs the call; the result (or error) becomes `tool.call.completed` (or
    /// `failed`). Must return promptly once `cx.cancel` fires.
    async fn run(&self, cx: &CallCx<'_>) -> Result<serde_json::Value, ErrorPayload>;
}

/// A stage: a runner that takes over an allowed call of another entry (patch
/// preview proposes an edit instead of writing it; a background `run_shell` starts a
/// task instead of waiting for it).
#[async_trait]
pub(crate) trait Stage: Send + Sync + std::fmt::Debug {
    /// Whether this stage runs `call` (of the entry `spec`) in `session`.
    fn claims(&self, session: &Session, spec: &ToolSpec, call: &ToolCallRequest) -> bool;
    /// Runs it, like a [`KernelHandler`].
    async fn run(&self, cx: &CallCx<'_>) -> Result<serde_json::Value, ErrorPayload>;
}

/// How an entry runs.
#[derive(Debug, Clone)]
pub(crate) enum Handler {
    /// A tool object: built-in, or registered by the host.
    Tool(Arc<dyn Tool>),
    /// One of the kernel's own tools.
    Kernel(Arc<dyn KernelHandler>),
}

/// Checks a call's arguments before the gate sees them.
pub(crate) type Decoder = fn(&serde_json::Value) -> Result<(), String>;

/// Decodes into `T` and drops it: the typed shape is the check.
pub(crate) fn typed<T: DeserializeOwned>(v: &serde_json::Value) -> Result<(), String> {
    T::deserialize(v).map(|_| ()).map_err(|e| e.to_string())
}

/// The decoder of a tool without a typed shape: the arguments are a JSON object.
pub(crate) fn object(v: &serde_json::Value) -> Result<(), String> {
    if v.is_object() {
        Ok(())
    } else {
        Err("the arguments must be a JSON object".to_owned())
    }
}

/// The decoder of a built-in tool: its argument struct, named by its row's analysis.
fn builtin_decoder(analysis: Analysis) -> Decoder {
    use keel_envelope::tools::*;
    match analysis {
        Analysis::ReadPath => typed::<ReadFileArgs>,
        Analysis::ListPath => typed::<ListDirArgs>,
        Analysis::SearchPath => typed::<SearchFilesArgs>,
        Analysis::Edit => typed::<EditFileArgs>,
        Analysis::Write => typed::<WriteFileArgs>,
        Analysis::Shell => typed::<RunShellArgs>,
        Analysis::Git => typed::<GitArgs>,
        Analysis::None => object,
    }
}

/// One tool.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) spec: ToolSpec,
    pub(crate) origin: Origin,
    pub(crate) handler: Handler,
    pub(crate) decode: Decoder,
}

impl Entry {
    /// The definition offered to the model.
    pub(crate) fn def(&self) -> ToolDef {
        ToolDef {
            name: self.spec.name.clone(),
            description: self.spec.description.clone(),
            parameters: self.spec.parameters.clone(),
        }
    }
}

/// Every tool of a kernel, in the order they are offered to the model.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    stages: Vec<Arc<dyn Stage>>,
    /// The definitions offered to the model, built once.
    defs: Vec<ToolDef>,
}

/// Builds a [`Registry`].
#[derive(Debug, Default)]
pub(crate) struct RegistryBuilder {
    entries: Vec<Entry>,
    stages: Vec<Arc<dyn Stage>>,
}

impl RegistryBuilder {
    /// Adds the seven built-in tools.
    pub(crate) fn builtin(mut self) -> Self {
        for tool in keel_tools::builtin_tools() {
            let spec = tool.spec().clone();
            let decode = builtin_decoder(spec.analysis);
            self.entries.push(Entry {
                spec,
                origin: Origin::Builtin,
                handler: Handler::Tool(tool),
                decode,
            });
        }
        self
    }

    /// Adds one of the kernel's own tools: its row from `keel_tools::spec::kernel_specs`.
    pub(crate) fn kernel(
        mut self,
        name: &str,
        decode: Decoder,
        handler: Arc<dyn KernelHandler>,
    ) -> Self {
        let spec = keel_tools::spec::kernel_specs()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| {
                // Every kernel tool has a row; a missing one would be a bug caught by the
                // registry test. Fall back to the strictest row rather than panic.
                ToolSpec::custom(
                    name,
                    "",
                    serde_json::json!({"type": "object"}),
                    keel_envelope::types::PermissionLevel::Execute,
                    keel_tools::PlanBehavior::Denied,
                    keel_tools::ApprovalRequirement::Always,
                )
            });
        self.entries.push(Entry {
            spec,
            origin: Origin::Kernel,
            handler: Handler::Kernel(handler),
            decode,
        });
        self
    }

    /// Adds a tool registered by the host.
    pub(crate) fn custom(mut self, tool: Arc<dyn Tool>) -> Self {
        let spec = tool.spec().clone();
        let decode = match spec.analysis {
            Analysis::None => object,
            other => builtin_decoder(other),
        };
        self.entries.push(Entry {
            spec,
            origin: Origin::Custom,
            handler: Handler::Tool(tool),
            decode,
        });
        self
    }

    /// Adds a stage.
    pub(crate) fn stage(mut self, stage: Arc<dyn Stage>) -> Self {
        self.stages.push(stage);
        self
    }

    /// Builds the registry; two entries with one name are an error naming both.
    pub(crate) fn build(self) -> Result<Registry, ErrorPayload> {
        let mut index: HashMap<String, usize> = HashMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            if e.spec.name.trim().is_empty() {
                return Err(ErrorPayload::new(
                    ErrorCode::ToolNameConflict,
                    format!("{} has an empty name", e.origin.describe()),
                ));
            }
            if let Some(&first) = index.get(&e.spec.name) {
                let first = &self.entries[first];
                return Err(conflict(&e.spec.name, first.origin, e.origin));
            }
            index.insert(e.spec.name.clone(), i);
        }
        let defs = self.entries.iter().map(Entry::def).collect();
        Ok(Registry {
            entries: self.entries,
            index,
            stages: self.stages,
            defs,
        })
    }
}

impl Registry {
    /// The entry named `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&Entry> {
        self.index.get(name).map(|&i| &self.entries[i])
    }

    /// Every entry, in offering order.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The definitions offered to the model.
    pub(crate) fn defs(&self) -> &[ToolDef] {
        &self.defs
    }

    /// The definitions of the named entries only.
    pub(crate) fn defs_of(&self, names: &[String]) -> Vec<ToolDef> {
        self.defs
            .iter()
            .filter(|d| names.contains(&d.name))
            .cloned()
            .collect()
    }

    /// The first stage that takes over `call`, if any.
    pub(crate) fn stage_for(
        &self,
        session: &Session,
        spec: &ToolSpec,
        call: &ToolCallRequest,
    ) -> Option<Arc<dyn Stage>> {
        self.stages
            .iter()
            .find(|s| s.claims(session, spec, call))
            .cloned()
    }
}
