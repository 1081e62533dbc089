//! Data structures of the optional extensions (seed 002 §8, §12.5): review mode,
//! patch preview, the task graph, sub-agents and background tasks.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::error::ErrorPayload;
use crate::tools::DiffStats;
use crate::types::Usage;
use crate::worktree::WorktreeInfo;

crate::wire::wire_enum! {
    /// Where a review stands.
    pub enum ReviewStatus {
        /// Waiting for a decision.
        Pending = "pending",
        /// Approved.
        Approved = "approved",
        /// Rejected.
        Rejected = "rejected",
    }
}

crate::wire::growable! {
    /// A review comment.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct ReviewComment {
        /// Comment id within the review.
        pub id: String,
        /// Who wrote it.
        pub author: String,
        /// The text.
        pub content: String,
        /// When, ms since the epoch.
        pub created_at: u64,
    }
}

crate::wire::growable! {
    /// A checklist item of a review.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct ChecklistItem {
        /// Item id within the review.
        pub id: String,
        /// What to check.
        pub title: String,
        /// Whether it is done.
        pub done: bool,
        /// An optional note.
        pub note: Option<String>,
    }
}

crate::wire::growable! {
    /// The review state of a session (seed 002 §8).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct ReviewState {
        /// The review id.
        pub review_id: String,
        /// Where it stands.
        pub status: ReviewStatus,
        /// Why the review was requested.
        pub reason: String,
        /// Who requested it.
        pub requested_by: String,
        /// When, ms since the epoch.
        pub requested_at: u64,
        /// Who resolved it.
        pub resolved_by: Option<String>,
        /// When it was resolved.
        pub resolved_at: Option<u64>,
        /// The decision, once resolved.
        pub decision: Option<ReviewStatus>,
        /// Whether requests are refused while it is pending.
        pub blocking: bool,
        /// Comments, oldest first.
        pub comments: Vec<ReviewComment>,
        /// The checklist.
        pub checklist: Vec<ChecklistItem>,
        /// A closing summary.
        pub summary: Option<String>,
    }
}

crate::wire::wire_enum! {
    /// What happens to a file in a patch.
    pub enum PatchOp {
        /// The file is created.
        Create = "create",
        /// The file is changed.
        Modify = "modify",
        /// The file is deleted.
        Delete = "delete",
    }
}

crate::wire::growable! {
    /// One file of a patch.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct PatchFile {
        /// Position in the patch.
        pub index: u32,
        /// Path relative to the workspace root.
        pub path: String,
        /// What happens to it.
        pub op: PatchOp,
        /// Content before (null for create).
        pub before: Option<String>,
        /// Content after (null for delete).
        pub after: Option<String>,
        /// Unified diff.
        pub diff: String,
        /// Lines added and removed.
        pub stats: DiffStats,
    }
}

crate::wire::wire_enum! {
    /// Where a patch stands.
    pub enum PatchStatus {
        /// Waiting for apply or reject.
        Pending = "pending",
        /// Written to disk.
        Applied = "applied",
        /// Dropped.
        Rejected = "rejected",
    }
}

crate::wire::growable! {
    /// Totals of a patch.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct PatchStats {
        /// Files touched.
        pub file_count: u32,
        /// Lines added.
        pub added: u64,
        /// Lines removed.
        pub removed: u64,
    }
}

crate::wire::growable! {
    /// A proposed change set (seed 002 §8).
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct Patch {
        /// The patch id.
        pub patch_id: String,
        /// Where it stands.
        pub status: PatchStatus,
        /// `tool` when a tool proposed it, `host` when the host did, `sub-agent` when it
        /// brings back the changes of a sub-agent that worked in a worktree of its own.
        pub origin: String,
        /// Why it was proposed.
        pub reason: Option<String>,
        /// The request that proposed it.
        pub request_id: Option<String>,
        /// When, ms since the epoch.
        pub proposed_at: u64,
        /// When it was applied or rejected.
        pub resolved_at: Option<u64>,
        /// Who resolved it.
        pub resolved_by: Option<String>,
        /// The files.
        pub files: Vec<PatchFile>,
        /// Totals.
        pub stats: PatchStats,
    }
}

crate::wire::wire_enum! {
    /// The status of a task-graph node.
    pub enum NodeStatus {
        /// Waiting for its dependencies.
        Pending = "pending",
        /// Its dependencies are done; it may start.
        Ready = "ready",
        /// Being worked on.
        Running = "running",
        /// Done.
        Completed = "completed",
        /// Failed; its dependents are never promoted.
        Failed = "failed",
        /// Skipped; counts as done for its dependents.
        Skipped = "skipped",
    }
}

crate::wire::growable! {
    /// A task-graph node (seed 002 §12.5).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct TaskNode {
        /// Unique within the graph.
        pub id: String,
        /// What the task is.
        pub title: String,
        /// More detail.
        pub description: Option<String>,
        /// Where it stands.
        pub status: NodeStatus,
        /// Nodes that must complete first.
        pub depends_on: Vec<String>,
        /// Free-form data.
        #[ts(type = "Record<string, unknown>")]
        pub metadata: serde_json::Map<String, serde_json::Value>,
        /// Created, ms since the epoch.
        pub created_at: u64,
        /// Last change, ms since the epoch.
        pub updated_at: u64,
        /// When it started running.
        pub started_at: Option<u64>,
        /// When it reached a terminal status.
        pub completed_at: Option<u64>,
        /// The result, once completed.
        #[ts(type = "unknown")]
        pub result: serde_json::Value,
        /// The error, once failed.
        #[ts(type = "unknown")]
        pub error: serde_json::Value,
    }
}

crate::wire::wire_enum! {
    /// Where a task graph stands.
    pub enum GraphStatus {
        /// Some node is not terminal.
        Active = "active",
        /// Every node is terminal and none failed.
        Completed = "completed",
        /// Every node is terminal and at least one failed.
        Failed = "failed",
    }
}

crate::wire::growable! {
    /// A persistent task DAG (seed 002 §12.5).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct TaskGraph {
        /// The graph id.
        pub graph_id: String,
        /// A title.
        pub title: Option<String>,
        /// A description.
        pub description: Option<String>,
        /// Where it stands.
        pub status: GraphStatus,
        /// A topological order of the node ids.
        pub order: Vec<String>,
        /// The nodes by id.
        pub nodes: BTreeMap<String, TaskNode>,
        /// Created, ms since the epoch.
        pub created_at: u64,
        /// Last change.
        pub updated_at: u64,
        /// When it reached a terminal status.
        pub completed_at: Option<u64>,
    }
}

crate::wire::wire_enum! {
    /// Where a sub-agent stands.
    pub enum SubAgentStatus {
        /// Working.
        Running = "running",
        /// Finished with a summary.
        Completed = "completed",
        /// Failed or was cancelled.
        Failed = "failed",
    }
}

crate::wire::growable! {
    /// A sub-agent snapshot.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct SubAgentInfo {
        /// The sub-agent id.
        pub sub_agent_id: String,
        /// The session that spawned it.
        pub parent_session_id: String,
        /// The parent's request.
        pub parent_request_id: String,
        /// The task it was given.
        pub task: String,
        /// Tools it may use (a subset of the parent's).
        pub tools: Vec<String>,
        /// Where it stands.
        pub status: SubAgentStatus,
        /// The summary returned to the parent.
        pub summary: Option<String>,
        /// The error, if it failed.
        pub error: Option<ErrorPayload>,
        /// Tokens used.
        pub usage: Usage,
        /// Model turns taken.
        pub turns: u32,
        /// Started, ms since the epoch.
        pub started_at: u64,
        /// Finished.
        pub finished_at: Option<u64>,
        /// The worktree it works in (`spawn_sub_agent {isolation: "worktree"}`; absent
        /// otherwise). Removed when it ends: a finished sub-agent's is history.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub worktree: Option<WorktreeInfo>,
        /// The patch proposing its changes (a sub-agent in a worktree that changed
        /// files; absent otherwise).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[ts(optional = nullable)]
        pub patch_id: Option<String>,
    }
}

crate::wire::wire_enum! {
    /// Where a background task stands.
    pub enum BackgroundStatus {
        /// Running.
        Running = "running",
        /// Exited on its own.
        Exited = "exited",
        /// Stopped by a host or by the session closing.
        Stopped = "stopped",
    }
}

crate::wire::growable! {
    /// A background shell task.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    pub struct BackgroundTask {
        /// The task id.
        pub task_id: String,
        /// The session that owns it.
        pub session_id: String,
        /// The command line.
        pub command: String,
        /// Where it stands.
        pub status: BackgroundStatus,
        /// Exit code once exited.
        pub exit_code: Option<i32>,
        /// Started, ms since the epoch.
        pub started_at: u64,
        /// Ended.
        pub ended_at: Option<u64>,
        /// The last lines of output.
        pub output_tail: String,
    }
}
