//! Payloads of the extension events: review, patches, task graph, sub-agents,
//! background tasks and the harness status.

use super::*;

payloads! {
    /// `review.requested` / `review.updated` / `review.resolved`.
    pub struct ReviewEvent {
        /// The review.
        pub review: ReviewState,
    }

    /// `review.state`: the answer to `review.status`.
    pub struct ReviewStateEvent {
        /// The review, or null.
        pub review: Option<ReviewState>,
        /// Whether requests are blocked now.
        pub blocking: bool,
    }

    /// `patch.proposed` / `patch.applied` / `patch.rejected`.
    pub struct PatchEvent {
        /// The patch.
        pub patch: Patch,
    }

    /// `patch.summary`.
    pub struct PatchSummary {
        /// Pending patches.
        pub pending: Vec<Patch>,
        /// Resolved patches, oldest first.
        pub history: Vec<Patch>,
        /// Totals over pending patches.
        pub totals: crate::ext::PatchStats,
    }

    /// `task-graph.created` / `task-graph.updated` / `task-graph.completed` / `task-graph.state`.
    pub struct TaskGraphEvent {
        /// The graph (null in `task-graph.state` when there is none).
        pub graph: Option<TaskGraph>,
    }

    /// `task-graph.node.added` / `node.updated` / `node.completed` / `node.failed`.
    pub struct TaskGraphNodeEvent {
        /// The graph id.
        pub graph_id: String,
        /// The node.
        pub node: TaskNode,
    }

    /// `task-graph.advanced`.
    pub struct TaskGraphAdvanced {
        /// The graph id.
        pub graph_id: String,
        /// Nodes promoted to ready.
        pub became_ready: Vec<String>,
        /// The graph after the advance.
        pub graph: TaskGraph,
    }

    /// `sub-agent.started` / `sub-agent.completed` / `sub-agent.failed`.
    pub struct SubAgentEvent {
        /// The session that spawned it.
        pub parent_session_id: String,
        /// The sub-agent.
        pub sub_agent_id: String,
        /// Its snapshot.
        pub sub_agent: SubAgentInfo,
    }

    /// `sub-agent.progress`.
    pub struct SubAgentProgress {
        /// The session that spawned it.
        pub parent_session_id: String,
        /// The sub-agent.
        pub sub_agent_id: String,
        /// What it is doing.
        pub message: String,
    }

    /// `sub-agent.list`.
    pub struct SubAgentList {
        /// Running sub-agents.
        pub active: Vec<SubAgentInfo>,
        /// The last finished ones (at most 100), newest first.
        pub recent: Vec<SubAgentInfo>,
    }

    /// `sub-agent.get`.
    pub struct SubAgentGet {
        /// The sub-agent.
        pub sub_agent: SubAgentInfo,
    }

    /// `harness.status`.
    pub struct HarnessStatus {
        /// Open sessions.
        pub sessions: Vec<SessionInfo>,
        /// Background tasks.
        pub background_tasks: Vec<BackgroundTask>,
        /// Running sub-agents.
        pub sub_agents: Vec<SubAgentInfo>,
    }

    /// `background.list`.
    pub struct BackgroundList {
        /// The tasks.
        pub tasks: Vec<BackgroundTask>,
    }

    /// `background.get` / `background.stopped` / `background.exited`.
    pub struct BackgroundEvent {
        /// The task.
        pub task: BackgroundTask,
    }

    /// `background.history`.
    pub struct BackgroundHistory {
        /// The task id.
        pub task_id: String,
        /// Its output lines, oldest first.
        pub lines: Vec<String>,
    }
}
