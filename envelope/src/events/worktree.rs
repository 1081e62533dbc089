//! Payloads of the events about worktrees.

use super::*;

payloads! {
    /// `worktree.list`: the answer to `worktree.list`, newest first.
    pub struct WorktreeList {
        /// The worktrees the runtime keeps, with `dirty` answered.
        pub worktrees: Vec<WorktreeInfo>,
    }

    /// `worktree.removed`: a worktree's folder is gone (the answer to
    /// `worktree.remove`; also sent before `session.deleted` when the session's
    /// worktree goes with it).
    pub struct WorktreeRemoved {
        /// The worktree as it was.
        pub worktree: WorktreeInfo,
        /// Whether its branch was kept: asked for by the configuration, or because
        /// the branch has commits beyond the worktree's base (never deleted).
        pub branch_kept: bool,
    }
}
