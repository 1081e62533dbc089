//! Keel's tools and the permission gate's pure decision.
//!
//! - [`spec`]: the permission matrix as one data table (name, description, argument
//!   schema, level, plan-mode behaviour, approval requirement). The gate, the docs and
//!   the tests read this table.
//! - [`policy`]: the pure decision `(tool, arguments, mode, rules) → allow / ask / deny`.
//! - [`Tool`]: the trait every tool (built-in or registered by a host) implements;
//!   [`ToolArgs`]: a call's arguments decoded once, for the gate and the tool.
//!
//! - [`builtin_tools`]: the seven tools; [`jail`] resolves their paths, [`shell`]
//!   analyses shell commands, [`exec`] runs processes in the OS sandbox that
//!   [`sandbox`] chooses (bubblewrap, else Landlock) and kills all they start.
//! - [`checkpoint`]: checkpoints of the workspace (only what changed since the last
//!   one, found by inotify or a stat scan) and restoring one.
//! - [`worktree`]: git worktrees kept for isolated sessions (made, listed, removed).
//!
//! This crate knows nothing of sessions, envelopes streams or models.

pub mod args;
mod builtin;
pub mod checkpoint;
pub mod edit;
pub mod exec;
pub mod fs;
pub mod git;
pub mod jail;
pub mod policy;
mod reap;
pub mod sandbox;
pub mod search;
pub mod shell;
pub mod spawn;
pub mod spec;
pub mod worktree;
mod wrap;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::ErrorPayload;

pub use args::ToolArgs;
pub use builtin::{builtin_tools, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS};
pub use keel_envelope::tools::SandboxKind;
pub use policy::canonical_key;
pub use sandbox::{
    sandbox_report, sandbox_status, LandlockInfo, SandboxConfig, SandboxMode, SandboxReport,
    SandboxStatus,
};
pub use spec::{ApprovalRequirement, PlanBehavior, ToolSpec};
/// Re-exported so hosts can build a [`ToolContext`] without naming `tokio-util`.
pub use tokio_util::sync::CancellationToken;

/// Which output stream a progress chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressStream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// A note from the tool itself.
    Info,
}

impl ProgressStream {
    /// The wire spelling used in `tool.call.progress.stream`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProgressStream::Stdout => "stdout",
            ProgressStream::Stderr => "stderr",
            ProgressStream::Info => "info",
        }
    }
}

/// Receives streamed output of a running tool.
pub type ProgressSink = Arc<dyn Fn(ProgressStream, String) + Send + Sync>;

/// Everything a tool call may use.
#[derive(Clone)]
pub struct ToolContext {
    /// The workspace root (canonical, absolute).
    pub workspace: PathBuf,
    /// Fires when the call is cancelled (interrupt, shutdown).
    pub cancel: CancellationToken,
    /// Streamed output.
    pub progress: ProgressSink,
    /// Whether the call was approved at the elevated level (network allowed, paths
    /// outside the workspace readable).
    pub elevated: bool,
    /// Sandbox settings, including `require_sandbox` (refuse shell commands when no
    /// sandbox can run), which the kernel sets per call.
    pub sandbox: SandboxConfig,
    /// The session's extra roots: the file tools reach them (by absolute path) like
    /// the workspace, writes only in the `write` ones; shell commands may write in the
    /// `write` ones inside the sandbox.
    pub roots: jail::Roots,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("workspace", &self.workspace)
            .field("elevated", &self.elevated)
            .field("sandbox", &self.sandbox)
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

/// A tool. Built-in tools and host-registered tools implement the same trait and
/// declare the same metadata ([`ToolSpec`]).
#[async_trait]
pub trait Tool: Send + Sync + std::fmt::Debug {
    /// The tool's row in the permission matrix.
    fn spec(&self) -> &ToolSpec;

    /// Runs the call. Arguments were validated against the spec's schema by the caller
    /// only loosely; the tool parses them itself and reports `TOOL_ARGUMENTS_INVALID`.
    /// Must return promptly after `ctx.cancel` fires (with code `INTERRUPTED`).
    async fn run(
        &self,
        args: serde_json::Value,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload>;

    /// Runs a call whose arguments the caller already decoded once into the shape of
    /// the tool's row ([`ToolArgs::decode`]); `raw` is the JSON they came from. The
    /// default runs [`Tool::run`] on `raw`, so a tool that reads its own arguments
    /// sees exactly what the model sent; the built-in tools take `args` as they are.
    async fn run_decoded(
        &self,
        args: ToolArgs,
        raw: &serde_json::Value,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        let _ = args;
        self.run(raw.clone(), ctx).await
    }
}
