//! Isolated workspaces: where a session works (`session.start {isolation}`,
//! `session.fork {isolation}`), the git worktrees the runtime keeps for sessions
//! (`worktree.list`, `worktree.remove`), and the extra roots a session may reach
//! beside its workspace (`session.start {additionalRoots}`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

crate::wire::wire_enum! {
    /// Where a session works.
    pub enum Isolation {
        /// In the workspace itself, shared with every other session of it (the default).
        None = "none",
        /// In a new git worktree of the workspace's repository, on a new branch
        /// `keel/<short session id>`, kept under the runtime's worktree folder.
        Worktree = "worktree",
    }
}

// Declared by `wire_enum!`, which takes no `#[default]`.
#[allow(clippy::derivable_impls)]
impl Default for Isolation {
    fn default() -> Self {
        Isolation::None
    }
}

crate::wire::wire_enum! {
    /// Where a worktree the runtime keeps stands.
    pub enum WorktreeState {
        /// Made and usable.
        Ready = "ready",
        /// Being made, or left half-made by a process that died while making it
        /// (`keel doctor` removes such leftovers; so does `worktree.remove`).
        Creating = "creating",
        /// Recorded, but its folder is gone (removed by hand).
        Missing = "missing",
    }
}

crate::wire::wire_enum! {
    /// What a session may do in an extra root.
    pub enum RootAccess {
        /// Read only: writes there are refused like writes outside the workspace.
        Read = "read",
        /// Read and write, like the workspace.
        Write = "write",
    }
}

/// A git worktree the runtime made for a session (or a sub-agent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
#[non_exhaustive]
pub struct WorktreeInfo {
    /// The worktree's root folder (absolute, on the runtime's machine).
    pub path: String,
    /// Its branch, `keel/<short id>`.
    pub branch: String,
    /// The top folder of the repository it was made from.
    pub repository: String,
    /// The commit it was made at (the `baseRef` given, else the repository's `HEAD`).
    pub base_commit: String,
    /// The session that owns it (a sub-agent's worktree names its parent session).
    #[serde(default)]
    pub session_id: Option<String>,
    /// Where it stands.
    pub state: WorktreeState,
    /// Whether it has uncommitted changes (tracked or untracked files); answered by
    /// `worktree.list` only, absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty: Option<bool>,
    /// When it was made, ms since the epoch.
    pub created_at: u64,
}

impl WorktreeInfo {
    /// A ready worktree with these fields (`dirty` unknown).
    pub fn new(
        path: impl Into<String>,
        branch: impl Into<String>,
        repository: impl Into<String>,
        base_commit: impl Into<String>,
        session_id: Option<String>,
        created_at: u64,
    ) -> Self {
        Self {
            path: path.into(),
            branch: branch.into(),
            repository: repository.into(),
            base_commit: base_commit.into(),
            session_id,
            state: WorktreeState::Ready,
            dirty: None,
            created_at,
        }
    }

    /// Sets `state`.
    #[must_use]
    pub fn state(mut self, state: WorktreeState) -> Self {
        self.state = state;
        self
    }

    /// Sets `dirty`.
    #[must_use]
    pub fn dirty(mut self, dirty: Option<bool>) -> Self {
        self.dirty = dirty;
        self
    }
}

/// A folder a session may reach beside its workspace (`session.start
/// {additionalRoots}`), jailed like the workspace.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
#[non_exhaustive]
pub struct AdditionalRoot {
    /// The folder (absolute, on the runtime's machine).
    pub path: String,
    /// What the session may do there (default `read`).
    #[serde(default)]
    pub access: Option<RootAccess>,
}

impl AdditionalRoot {
    /// A root at `path` with `access`.
    pub fn new(path: impl Into<String>, access: RootAccess) -> Self {
        Self {
            path: path.into(),
            access: Some(access),
        }
    }
}
