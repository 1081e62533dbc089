//! Vocabulary of the tools a session gets from outside the kernel: MCP servers (their
//! specification in `session.start`, their state in `mcp.list`) and the tools the host
//! app defines (`hostTools`, `host-tool.respond`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::types::PermissionLevel;

crate::wire::growable! {
    /// A `{name, value}` pair: an environment variable of a stdio server, or an HTTP
    /// header (the shape ACP's `session/new` uses).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct NameValue {
        /// The name.
        pub name: String,
        /// The value.
        pub value: String,
    }
}

crate::wire::wire_enum! {
    /// How an MCP server's tools are treated by the permission gate.
    pub enum McpTrust {
        /// Every tool of the server needs approval in `ask` and `auto-edit` modes and is
        /// refused in plan mode (execute level). The default.
        Ask = "ask",
        /// The server's tools are read-level: they run without approval, also in plan mode.
        Read = "read",
    }
}

// Declared by `wire_enum!`, which takes no `#[default]`.
#[allow(clippy::derivable_impls)]
impl Default for McpTrust {
    fn default() -> Self {
        McpTrust::Ask
    }
}

/// How a session reaches an MCP server: `{name, command, args, env}` (stdio) or
/// `{name, url, headers}` (streamable HTTP), as in ACP's `session/new`. `type` may say
/// `"stdio"` or `"http"`; `"sse"` (the legacy transport) is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
#[non_exhaustive]
pub struct McpServerSpec {
    /// The server's name; its tools appear to the model as `mcp__NAME__TOOL`.
    pub name: String,
    /// `"stdio"`, `"http"` (default: `http` with `url`, `stdio` with `command`).
    #[serde(default, rename = "type")]
    pub transport: Option<String>,
    /// The program of a stdio server.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Extra environment variables (the runtime's environment is inherited).
    #[serde(default)]
    pub env: Option<Vec<NameValue>>,
    /// The endpoint of a streamable HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers sent with every request (e.g. `Authorization`).
    #[serde(default)]
    pub headers: Option<Vec<NameValue>>,
    /// How the gate treats its tools (default `ask`).
    #[serde(default, deserialize_with = "crate::wire::strict::opt")]
    #[schemars(with = "Option<crate::wire::Known<McpTrust>>")]
    #[ts(optional = nullable, type = "KnownMcpTrust | null")]
    pub trust: Option<McpTrust>,
}

/// Whether a host tool asks for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HostToolApproval {
    /// Asks in `ask` mode (and `auto-edit`), unless a rule allows it.
    Always,
    /// Never asks (an `elevated` tool asks all the same).
    Never,
}

/// A tool the host app defines (`hostTools` of `session.start`,
/// `session.set_host_tools`). The kernel offers it to the model like its own tools;
/// when the model calls it and the gate allows the call, the host runs it
/// (`host-tool.requested` → `host-tool.respond`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
#[non_exhaustive]
pub struct HostToolSpec {
    /// The tool name: letters, digits, `_` and `-`, at most 64 characters, unique among
    /// the session's tools.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments (an object schema).
    #[ts(type = "Record<string, unknown>")]
    pub input_schema: serde_json::Value,
    /// Its permission level: `read` runs without approval (also in plan mode); the
    /// others ask in `ask` mode and are refused in plan mode.
    #[serde(deserialize_with = "crate::wire::strict::one")]
    #[schemars(with = "crate::wire::Known<PermissionLevel>")]
    #[ts(type = "KnownPermissionLevel")]
    pub level: PermissionLevel,
    /// Overrides whether it asks (default: `never` for `read`, else `always`).
    #[serde(default)]
    pub approval: Option<HostToolApproval>,
}

crate::wire::growable! {
    /// The error a host answers a host-tool call with.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct HostToolError {
        /// What went wrong (the model reads it).
        pub message: String,
    }
}

crate::wire::wire_enum! {
    /// The state of an MCP server of a session.
    pub enum McpServerState {
        /// Starting (spawning, connecting, listing tools).
        Starting = "starting",
        /// Connected; its tools are offered to the model.
        Ready = "ready",
        /// Could not start, died, or stopped answering; `reason` says why.
        Failed = "failed",
    }
}

crate::wire::growable! {
    /// One tool of an MCP server, as offered to the model.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct McpToolInfo {
        /// The name the model sees, `mcp__SERVER__TOOL`.
        pub name: String,
        /// The tool's name on the server.
        pub tool: String,
        /// Its description.
        pub description: String,
    }
}

crate::wire::growable! {
    /// One MCP server of a session, in `mcp.list`.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    #[ts(optional_fields = nullable)]
    pub struct McpServerInfo {
        /// The server's name.
        pub name: String,
        /// `stdio` or `http`.
        pub transport: String,
        /// How the gate treats its tools.
        pub trust: McpTrust,
        /// Where it came from: `config` or `session`.
        pub origin: String,
        /// Its state.
        pub state: McpServerState,
        /// Why it failed (only when `failed`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub reason: Option<String>,
        /// Its tools (empty until it is ready; kept while a server that died can be
        /// restarted by the next call).
        pub tools: Vec<McpToolInfo>,
    }
}

/// A skill of a session, as `skills.list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
#[non_exhaustive]
pub struct SkillInfo {
    /// Its name (what `activate_skill` and `/skill:NAME` take).
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// Where it was found: `project`, `user` or `config`.
    pub source: String,
    /// Its `SKILL.md`.
    pub path: String,
}

impl SkillInfo {
    /// A skill.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        source: impl Into<String>,
        path: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            source: source.into(),
            path: path.into(),
        }
    }
}

/// A custom slash command of a session, as `commands.list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
#[non_exhaustive]
pub struct CustomCommandInfo {
    /// Its name: the host offers it as `/NAME`.
    pub name: String,
    /// Its front matter's `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its front matter's `argument-hint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_hint: Option<String>,
    /// Where it was found: `project` or `user`.
    pub source: String,
    /// Its file.
    pub path: String,
    /// The prompt template (`$ARGUMENTS`, `$1` … `$9` are filled in by the host).
    pub template: String,
}

impl CustomCommandInfo {
    /// A command.
    pub fn new(
        name: impl Into<String>,
        source: impl Into<String>,
        path: impl Into<String>,
        template: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: None,
            argument_hint: None,
            source: source.into(),
            path: path.into(),
            template: template.into(),
        }
    }
}

/// Setters of `McpServerSpec` fields that take the value itself or an `Option`.
macro_rules! option_setters {
    ($name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        impl $name {
            $(
                #[doc = concat!("Sets `", stringify!($field), "` (takes the value itself or an `Option`).")]
                #[must_use]
                pub fn $field(mut self, value: impl Into<Option<$ty>>) -> Self {
                    self.$field = value.into();
                    self
                }
            )*
        }
    };
}

option_setters!(McpServerSpec {
    transport: String,
    command: String,
    env: Vec<NameValue>,
    url: String,
    headers: Vec<NameValue>,
});

impl McpServerSpec {
    /// A server named `name` with every other field unset (set them with the methods
    /// named after them).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: None,
            command: None,
            args: None,
            env: None,
            url: None,
            headers: None,
            trust: None,
        }
    }

    /// A stdio server: `command` started with no arguments (add them with `args`).
    pub fn stdio(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: Some("stdio".to_owned()),
            command: Some(command.into()),
            args: None,
            env: None,
            url: None,
            headers: None,
            trust: None,
        }
    }

    /// A streamable HTTP server at `url`.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: Some("http".to_owned()),
            command: None,
            args: None,
            env: None,
            url: Some(url.into()),
            headers: None,
            trust: None,
        }
    }

    /// Sets the arguments of a stdio server.
    #[must_use]
    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.args = Some(args.into_iter().map(Into::into).collect());
        self
    }

    /// Sets how the gate treats the server's tools.
    #[must_use]
    pub fn trust(mut self, trust: McpTrust) -> Self {
        self.trust = Some(trust);
        self
    }
}

impl HostToolSpec {
    /// A host tool; whether it asks follows its level (see [`HostToolSpec::approval`]).
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: serde_json::Value,
        level: PermissionLevel,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            level,
            approval: None,
        }
    }

    /// Overrides whether it asks.
    #[must_use]
    pub fn approval(mut self, approval: HostToolApproval) -> Self {
        self.approval = Some(approval);
        self
    }
}
