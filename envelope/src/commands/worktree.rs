//! The worktree commands: `worktree.list` and `worktree.remove`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

command_payloads! {
    /// `worktree.list`: the worktrees the runtime keeps (of every session, open or
    /// stored, and the leftovers of creations that did not finish).
    #[derive(Default)]
    pub struct WorktreeListCmd {}

    /// `worktree.remove`: removes a worktree by its folder or by the session owning
    /// it; one with uncommitted changes is refused unless `force`.
    #[derive(Default)]
    pub struct WorktreeRemove {
        /// The worktree's folder (as `worktree.list` names it).
        #[serde(default)]
        pub path: Option<String>,
        /// Or the session whose worktree it is.
        #[serde(default)]
        pub session_id: Option<String>,
        /// Remove it even with uncommitted changes (they are lost).
        #[serde(default)]
        pub force: Option<bool>,
    }
}
