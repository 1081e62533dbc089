//! Kernel configuration.

use std::path::PathBuf;
use std::time::Duration;

use keel_envelope::types::{ModelInfo, PermissionMode};
use keel_tools::policy::ShellPolicy;
use keel_tools::SandboxConfig;

/// Limits and defaults of a kernel.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// Default workspace for `session.start` without `workspacePath`.
    pub workspace: Option<PathBuf>,
    /// Default permission mode of new sessions.
    pub permission_mode: PermissionMode,
    /// How long an approval or a question waits; `Duration::ZERO` waits forever.
    pub approval_timeout: Duration,
    /// Maximum model calls per request.
    pub max_turns: u32,
    /// Compaction starts when the estimated context passes this fraction of the window.
    pub compaction_threshold: f64,
    /// Shell whitelist and high-risk additions.
    pub shell: ShellPolicy,
    /// Sandbox settings for `run_shell` (foreground and background): the mode (`auto`:
    /// bubblewrap, else Landlock, else none) and whether the network is on inside it.
    /// `require_sandbox` is set per call (in the `auto` permission mode).
    pub sandbox: SandboxConfig,
    /// Models offered to hosts.
    pub available_models: Vec<ModelInfo>,
    /// Extra system-prompt text placed before the project instructions.
    pub system_prompt: Option<String>,
    /// Capacity of each subscriber's channel (backpressure beyond it).
    pub channel_capacity: usize,
    /// Whether new sessions propose edits as patches instead of writing them.
    pub patch_preview: bool,
    /// MCP servers every session starts with (the configuration file's `mcpServers`).
    pub mcp_servers: Vec<crate::mcp::McpServerConfig>,
    /// How long an MCP server may take to start (spawn, handshake, tool list).
    pub mcp_startup_timeout: Duration,
    /// How long one MCP tool call may run before it is cancelled; `Duration::ZERO`:
    /// no limit.
    pub mcp_call_timeout: Duration,
    /// How long the kernel waits for the host to answer a host-tool call;
    /// `Duration::ZERO` waits forever.
    pub host_tool_timeout: Duration,
}

impl Default for KernelConfig {
    fn default() -> Self {
        Self {
            workspace: None,
            permission_mode: PermissionMode::Ask,
            approval_timeout: Duration::from_secs(60),
            max_turns: 50,
            compaction_threshold: 0.8,
            shell: ShellPolicy::default(),
            sandbox: SandboxConfig::default(),
            available_models: Vec::new(),
            system_prompt: None,
            channel_capacity: 1024,
            patch_preview: false,
            mcp_servers: Vec::new(),
            mcp_startup_timeout: Duration::from_secs(30),
            mcp_call_timeout: Duration::from_secs(120),
            host_tool_timeout: Duration::from_secs(60),
        }
    }
}
