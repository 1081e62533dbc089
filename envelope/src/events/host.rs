//! Payloads of the events about MCP servers, the tools the host app defines, and
//! the session's skills and custom commands.

use super::*;
use crate::host::{CustomCommandInfo, McpServerInfo, SkillInfo};

payloads! {
    /// `skills.list`: the answer to `skills.list`.
    pub struct SkillsList {
        /// The session's skills, in the order their names won (project, user,
        /// configured folders), by name within a folder.
        pub skills: Vec<SkillInfo>,
    }

    /// `commands.list`: the answer to `commands.list`.
    pub struct CommandsList {
        /// The session's custom commands, by name.
        pub commands: Vec<CustomCommandInfo>,
    }

    /// `mcp.list`: the answer to `mcp.list`.
    pub struct McpList {
        /// The session's servers, configured ones first, in name order.
        pub servers: Vec<McpServerInfo>,
    }

    /// `session.host_tools_updated`: the answer to `session.set_host_tools`.
    pub struct SessionHostToolsUpdated {
        /// The names of the session's host tools now.
        pub tools: Vec<String>,
    }

    /// `host-tool.requested`: the model called a host tool and the gate allowed it; the
    /// kernel waits for `host-tool.respond`.
    pub struct HostToolRequested {
        /// The call (as in `tool.call.started`).
        pub tool_call_id: String,
        /// The host tool.
        pub tool_name: String,
        /// The model's arguments.
        #[ts(type = "unknown")]
        pub arguments: serde_json::Value,
        /// When the call times out (ms since the epoch; null: never).
        pub expires_at: Option<u64>,
    }

    /// `host-tool.responded`: the host's answer was taken (on the request's stream,
    /// `meta.replyTo` = the `host-tool.respond`); `tool.call.completed` or `failed`
    /// follows.
    pub struct HostToolResponded {
        /// The call.
        pub tool_call_id: String,
        /// The host tool.
        pub tool_name: String,
        /// Whether the host answered with an error.
        pub is_error: bool,
    }
}
