//! The tool registry: every tool the model can call is one entry — its row of the
//! permission table ([`ToolSpec`]), the decoder of its arguments, and a handler — whether
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
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::kernel_tools::{
    ActivateSkillArgs, AskUserArgs, ProposePlanArgs, SpawnSubAgentArgs, TaskGraphArgs,
    UpdatePlanArgs,
};
use keel_envelope::types::PermissionMode;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::{Tool, ToolArgs, ToolSpec};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::base::model::{ToolCallRequest, ToolDef};
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

/// Where a caller's tool calls may act: the tools it may use and the folder they
/// work in.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CallScope<'a> {
    /// The tools the caller may use (`None`: every entry).
    pub(crate) tools: Option<&'a [String]>,
    /// The folder the calls work in, jailed to it, instead of the session's
    /// workspace (a sub-agent in a worktree of its own); `None`: the workspace.
    pub(crate) workspace: Option<&'a Path>,
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
    /// The folder the call works in: the session's workspace, or the caller's own
    /// ([`CallScope::workspace`]).
    pub(crate) workspace: &'a Path,
    /// The session's permission mode when the gate decided.
    pub(crate) mode: PermissionMode,
}

/// A call's arguments, decoded once by the pipeline ([`Entry::decode`]) and handed as
/// they are to the gate and to the stage or handler that runs the call.
#[derive(Debug, Clone)]
pub(crate) enum Args {
    /// The shape the entry's row names (built-in tools, the host's registered tools,
    /// host-app and MCP tools: [`ToolArgs::Untyped`] for those without one).
    Tool(ToolArgs),
    /// `propose_plan`.
    ProposePlan(ProposePlanArgs),
    /// `update_plan`.
    UpdatePlan(UpdatePlanArgs),
    /// `ask_user`.
    AskUser(AskUserArgs),
    /// `spawn_sub_agent`.
    SpawnSubAgent(SpawnSubAgentArgs),
    /// `task_graph` (boxed: by far the largest).
    TaskGraph(Box<TaskGraphArgs>),
    /// `activate_skill`.
    ActivateSkill(ActivateSkillArgs),
}

macro_rules! kernel_args {
    ($($ty:ident => $variant:ident),* $(,)?) => {$(
        impl From<$ty> for Args {
            fn from(a: $ty) -> Self {
                Args::$variant(a)
            }
        }
    )*};
}

kernel_args! {
    ProposePlanArgs => ProposePlan,
    UpdatePlanArgs => UpdatePlan,
    AskUserArgs => AskUser,
    SpawnSubAgentArgs => SpawnSubAgent,
    ActivateSkillArgs => ActivateSkill,
}

impl From<TaskGraphArgs> for Args {
    fn from(a: TaskGraphArgs) -> Self {
        Args::TaskGraph(Box::new(a))
    }
}

impl Args {
    /// What the gate and a tool object read: the row's shape (a kernel tool's row
    /// names none).
    pub(crate) fn tool_args(&self) -> &ToolArgs {
        const UNTYPED: &ToolArgs = &ToolArgs::Untyped;
        match self {
            Args::Tool(t) => t,
            _ => UNTYPED,
        }
    }

    /// [`Args::tool_args`], taken.
    pub(crate) fn into_tool_args(self) -> ToolArgs {
        match self {
            Args::Tool(t) => t,
            _ => ToolArgs::Untyped,
        }
    }
}

/// The error of a handler given arguments decoded for another tool (a registry bug:
/// every entry's decoder matches its handler).
pub(crate) fn args_mismatch(tool: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::ToolArgumentsInvalid,
        format!("bad arguments for {tool}: they were decoded for another tool"),
    )
    .with_detail("toolName", tool.to_owned())
}

/// A handler that needs the session (the kernel's own tools).
#[async_trait]
pub(crate) trait KernelHandler: Send + Sync + std::fmt::Debug {
    /// Runs the call with its decoded `args`; the result (or error) becomes
    /// `tool.call.completed` (or `failed`). Must return promptly once `cx.cancel`
    /// fires.
    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<serde_json::Value, ErrorPayload>;
}

/// A stage: a runner that takes over an allowed call of another entry (patch
/// preview proposes an edit instead of writing it; a background `run_shell` starts a
/// task instead of waiting for it).
#[async_trait]
pub(crate) trait Stage: Send + Sync + std::fmt::Debug {
    /// Whether this stage runs a call with these arguments in `session`.
    fn claims(&self, session: &Session, args: &Args) -> bool;
    /// Runs it, like a [`KernelHandler`].
    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<serde_json::Value, ErrorPayload>;
}

/// How an entry runs.
#[derive(Debug, Clone)]
pub(crate) enum Handler {
    /// A tool object: built-in, or registered by the host.
    Tool(Arc<dyn Tool>),
    /// One of the kernel's own tools.
    Kernel(Arc<dyn KernelHandler>),
}

/// How an entry's arguments are decoded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Decoder {
    /// Into the shape the entry's row names ([`ToolArgs::decode`]).
    Row,
    /// Into the typed shape of one of the kernel's own tools.
    Kernel(fn(&serde_json::Value) -> Result<Args, String>),
}

/// The decoder of a kernel tool whose arguments are `T`.
pub(crate) fn kernel_args<T: DeserializeOwned + Into<Args>>(
    v: &serde_json::Value,
) -> Result<Args, String> {
    T::deserialize(v).map(Into::into).map_err(|e| e.to_string())
}

/// One tool.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) spec: ToolSpec,
    pub(crate) origin: Origin,
    pub(crate) handler: Handler,
    pub(crate) decoder: Decoder,
}

impl Entry {
    /// Decodes a call's arguments, once: the error is the decoder's message.
    pub(crate) fn decode(&self, args: &serde_json::Value) -> Result<Args, String> {
        match self.decoder {
            Decoder::Row => ToolArgs::decode(self.spec.analysis, args).map(Args::Tool),
            Decoder::Kernel(f) => f(args),
        }
    }

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
    /// Shared by every session whose view adds no tool (no copy per session).
    defs: Arc<[ToolDef]>,
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
            self.entries.push(Entry {
                spec: tool.spec().clone(),
                origin: Origin::Builtin,
                handler: Handler::Tool(tool),
                decoder: Decoder::Row,
            });
        }
        self
    }

    /// Adds one of the kernel's own tools: its row from `keel_tools::spec::kernel_specs`.
    pub(crate) fn kernel(
        mut self,
        name: &str,
        decoder: Decoder,
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
            decoder,
        });
        self
    }

    /// Adds a tool registered by the host.
    pub(crate) fn custom(mut self, tool: Arc<dyn Tool>) -> Self {
        self.entries.push(Entry {
            spec: tool.spec().clone(),
            origin: Origin::Custom,
            handler: Handler::Tool(tool),
            decoder: Decoder::Row,
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
    pub(crate) fn defs(&self) -> &Arc<[ToolDef]> {
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

    /// The first stage that takes over a call with these arguments, if any.
    pub(crate) fn stage_for(&self, session: &Session, args: &Args) -> Option<Arc<dyn Stage>> {
        self.stages
            .iter()
            .find(|s| s.claims(session, args))
            .cloned()
    }
}
