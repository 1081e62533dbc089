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
    /// Whether sessions checkpoint their workspace before each request and each tool
    /// call that may change files (for `session.rewind` and `session.fork`).
    pub checkpoints: bool,
    /// Where checkpoints are kept (`<dir>/<sessionId>/`); default: the session's
    /// directory in the store, when the store keeps files.
    pub checkpoint_dir: Option<PathBuf>,
    /// How long an open session may do nothing before it is dropped from memory (and
    /// reloaded from its log by the next command naming it); `None`: never.
    pub idle_unload_after: Option<Duration>,
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
            checkpoints: true,
            checkpoint_dir: None,
            idle_unload_after: Some(Duration::from_secs(30 * 60)),
        }
    }
}
