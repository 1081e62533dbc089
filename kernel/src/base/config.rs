//! Kernel configuration.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use keel_envelope::types::{ModelInfo, PermissionMode};
pub use keel_envelope::worktree::Isolation;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::policy::ShellPolicy;
use keel_tools::SandboxConfig;

pub use crate::base::hooks::{CommandHookConfig, HooksConfig};
pub use crate::base::limits::{BudgetConfig, ModelPrice};

/// The default of [`KernelConfig::max_turns`]: a guard against a model that loops,
/// high enough never to stop a real task (see docs/configuration.md).
pub const DEFAULT_MAX_TURNS: u32 = 1000;

/// Agent Skills and custom slash commands of the kernel's sessions.
#[derive(Debug, Clone, Default)]
pub struct SkillsConfig {
    /// Where they are found and which projects' own are trusted (`keel_skills`).
    pub settings: keel_skills::Settings,
    /// Names a custom command may not take (the host's own slash commands); such a
    /// command is left out with a warning.
    pub reserved_commands: Vec<String>,
}

/// Limits and defaults of a kernel.
#[derive(Debug, Clone)]
pub struct KernelConfig {
    /// Default workspace for `session.start` without `workspacePath`.
    pub workspace: Option<PathBuf>,
    /// Default permission mode of new sessions.
    pub permission_mode: PermissionMode,
    /// How long an approval or a question waits; `Duration::ZERO` waits forever.
    pub approval_timeout: Duration,
    /// Maximum model calls per request (the request budget's `modelCalls` unless
    /// `budget.request.model_calls` is set; 0 = no limit).
    pub max_turns: u32,
    /// Limits of each request and of each session (model calls, tokens, cost, wall
    /// time, calls per tool); `session.start` and `request.send` override them.
    pub budget: BudgetConfig,
    /// Prices per model (`provider:model`), for the cost limits.
    pub prices: HashMap<String, ModelPrice>,
    /// Cap on the output tokens of each model call; `None` leaves the provider's
    /// default (`session.start` and `request.send` override it).
    pub max_output_tokens: Option<u32>,
    /// Command hooks (`[[hooks.PreToolUse]]`, …); a Rust host adds its own with
    /// [`crate::KernelBuilder::hooks`].
    pub hooks: HooksConfig,
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
    /// Whether sessions checkpoint their workspace before each request and each tool
    /// call that may change files (for `session.rewind` and `session.fork`).
    pub checkpoints: bool,
    /// Where checkpoints are kept: one store per workspace under it, shared by the
    /// workspace's sessions (`keel_tools::checkpoint::CheckpointHome`). Default:
    /// `checkpoints/` beside the sessions of a store the builder makes from a
    /// directory; else `checkpoints/` in each session's directory of a store that
    /// keeps files.
    pub checkpoint_dir: Option<PathBuf>,
    /// The checkpoint stores under `checkpoint_dir` together hold at most about this
    /// many bytes: beyond it the oldest checkpoints go, closed sessions' first, never
    /// those of a running request (`None`: no size limit). Default 2 GiB.
    pub checkpoint_max_bytes: Option<u64>,
    /// Checkpoints older than this go (except those of a running request); `None`:
    /// kept whatever their age. Default 30 days.
    pub checkpoint_max_age: Option<Duration>,
    /// How long an open session may do nothing before it is dropped from memory (and
    /// reloaded from its log by the next command naming it); `None`: never.
    pub idle_unload_after: Option<Duration>,
    /// Whether the file store syncs every event to the disk before delivering it
    /// (survives a power loss; one disk sync per event). Off: logs are synced when
    /// their session closes and at shutdown. Applies to the store the builder makes
    /// (`store_dir` or the default); a store given with `store` decides for itself.
    pub fsync_each_event: bool,
    /// Maximum number of sessions open at once in this kernel (started or resumed and
    /// not closed); beyond it `session.start` and `session.resume` are refused with
    /// `SESSION_LIMIT_REACHED`. `0` means no limit.
    pub max_open_sessions: usize,
    /// MCP servers every session starts with (the configuration file's `mcpServers`).
    pub mcp_servers: Vec<crate::base::mcp_config::McpServerConfig>,
    /// How long an MCP server may take to start (spawn, handshake, tool list).
    pub mcp_startup_timeout: Duration,
    /// How long one MCP tool call may run before it is cancelled; `Duration::ZERO`:
    /// no limit.
    pub mcp_call_timeout: Duration,
    /// How long the kernel waits for the host to answer a host-tool call;
    /// `Duration::ZERO` waits forever.
    pub host_tool_timeout: Duration,
    /// How long a lease on a session lasts in a store several nodes share (the owner
    /// renews it every third of it); a node that cannot renew for this long stops
    /// serving the session, and another may take it over. Ignored by stores one
    /// process uses alone. Default 10 s.
    pub lease_ttl: Duration,
    /// This node's name in a shared store's leases (what `SESSION_OWNED_ELSEWHERE`
    /// and `session.owner_changed` show). `None`: `HOST-PID-RANDOM`, new each run.
    pub node_id: Option<String>,
    /// Agent Skills and custom commands: each session finds them in its workspace
    /// and the folders named here when it opens. `None` (the default): sessions have
    /// none.
    pub skills: Option<SkillsConfig>,
    /// Isolated workspaces: where worktrees are kept, the default isolation of new
    /// sessions and sub-agents, whether a deleted session's branch is kept.
    pub worktrees: WorktreeConfig,
}

/// Settings of isolated workspaces (git worktrees).
#[derive(Debug, Clone, Default)]
pub struct WorktreeConfig {
    /// The folder holding the worktrees. Default: `worktrees/` beside the sessions
    /// of a store the builder makes from a directory, else `$KEEL_HOME/worktrees`.
    pub dir: Option<PathBuf>,
    /// The isolation of a `session.start` that names none.
    pub isolation: Isolation,
    /// The isolation of a `spawn_sub_agent` call that names none.
    pub sub_agent_isolation: Isolation,
    /// Whether deleting a session keeps its worktree's branch (a branch with
    /// commits beyond its base is always kept).
    pub keep_branch: bool,
}

/// Default of [`KernelConfig::checkpoint_max_bytes`]: 2 GiB.
pub const DEFAULT_CHECKPOINT_MAX_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// Default of [`KernelConfig::checkpoint_max_age`]: 30 days.
pub const DEFAULT_CHECKPOINT_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Default of [`KernelConfig::max_open_sessions`].
pub const DEFAULT_MAX_OPEN_SESSIONS: usize = 1000;

impl Default for KernelConfig {
    fn default() -> Self {
        Self {
            workspace: None,
            permission_mode: PermissionMode::Ask,
            approval_timeout: Duration::from_secs(60),
            max_turns: DEFAULT_MAX_TURNS,
            budget: BudgetConfig::default(),
            prices: HashMap::new(),
            max_output_tokens: None,
            hooks: HooksConfig::default(),
            compaction_threshold: 0.8,
            shell: ShellPolicy::default(),
            sandbox: SandboxConfig::default(),
            available_models: Vec::new(),
            system_prompt: None,
            channel_capacity: 1024,
            patch_preview: false,
            checkpoints: true,
            checkpoint_dir: None,
            checkpoint_max_bytes: Some(DEFAULT_CHECKPOINT_MAX_BYTES),
            checkpoint_max_age: Some(DEFAULT_CHECKPOINT_MAX_AGE),
            idle_unload_after: Some(Duration::from_secs(30 * 60)),
            fsync_each_event: false,
            max_open_sessions: DEFAULT_MAX_OPEN_SESSIONS,
            mcp_servers: Vec::new(),
            mcp_startup_timeout: Duration::from_secs(30),
            mcp_call_timeout: Duration::from_secs(120),
            host_tool_timeout: Duration::from_secs(60),
            lease_ttl: crate::base::ownership::DEFAULT_LEASE_TTL,
            node_id: None,
            skills: None,
            worktrees: WorktreeConfig::default(),
        }
    }
}

/// The store directory: `$KEEL_HOME`, else the platform data dir.
pub(crate) fn default_store_dir() -> Result<PathBuf, ErrorPayload> {
    if let Some(home) = std::env::var_os("KEEL_HOME") {
        return Ok(PathBuf::from(home));
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME") {
        return Ok(PathBuf::from(xdg).join("keel"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        return Ok(PathBuf::from(home)
            .join(".local")
            .join("share")
            .join("keel"));
    }
    Err(ErrorPayload::new(
        ErrorCode::SessionPersistenceFailed,
        "no store directory: set KEEL_HOME",
    ))
}
