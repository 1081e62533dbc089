//! Argument shapes of the kernel's own tools: `propose_plan`, `update_plan`,
//! `ask_user`, `task_graph`, `spawn_sub_agent` and `activate_skill`. Their schemas are what the model is
//! offered; unknown fields are ignored (models add them), missing required fields are
//! `TOOL_ARGUMENTS_INVALID`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::commands::{NewTaskNode, NodeUpdates};
use crate::types::StepStatus;
use crate::worktree::Isolation;

/// One step as the model writes it: every field optional (ids default to `s1`, `s2`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
pub struct PlanStepArg {
    /// Stable id within the plan.
    #[serde(default)]
    pub id: Option<String>,
    /// What the step does.
    #[serde(default)]
    pub title: Option<String>,
    /// Where it stands.
    #[serde(default, deserialize_with = "crate::wire::strict::opt")]
    #[schemars(with = "Option<crate::wire::Known<StepStatus>>")]
    #[ts(optional = nullable, type = "KnownStepStatus | null")]
    pub status: Option<StepStatus>,
}

/// `propose_plan {summary?, steps}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
pub struct ProposePlanArgs {
    /// One paragraph on what the plan achieves.
    #[serde(default)]
    pub summary: Option<String>,
    /// The ordered steps (at least one).
    pub steps: Vec<PlanStepArg>,
}

/// `update_plan {steps}`: steps matched by id; unknown ids are added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct UpdatePlanArgs {
    /// The steps whose status or title changes.
    pub steps: Vec<PlanStepArg>,
}

/// `ask_user {question, candidates?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct AskUserArgs {
    /// The question.
    pub question: String,
    /// Suggested answers.
    #[serde(default)]
    pub candidates: Vec<String>,
}

/// `spawn_sub_agent {task, tools?, isolation?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
pub struct SpawnSubAgentArgs {
    /// The self-contained task.
    pub task: String,
    /// The tools it may use (a subset of the caller's; default: all registered tools).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Where it works: `"none"`, in your workspace; `"worktree"`, in a git worktree
    /// of its own holding your files as they are, its changes coming back to you as
    /// a patch for the user to apply or reject. Default: the runtime's configuration.
    #[serde(default, deserialize_with = "crate::wire::strict::opt")]
    #[schemars(with = "Option<crate::wire::Known<Isolation>>")]
    #[ts(optional = nullable, type = "KnownIsolation | null")]
    pub isolation: Option<Isolation>,
}

/// The `task_graph` tool's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskGraphAction {
    /// Create the graph from `nodes`.
    Create,
    /// Add `node`.
    AddNode,
    /// Apply `updates` to `nodeId`.
    UpdateNode,
    /// Mark every node whose dependencies are done as ready.
    Advance,
    /// Return the graph.
    State,
}

/// `task_graph {action, …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
pub struct TaskGraphArgs {
    /// What to do.
    pub action: TaskGraphAction,
    /// `create`: the graph's title.
    #[serde(default)]
    pub title: Option<String>,
    /// `create`: the graph's description.
    #[serde(default)]
    pub description: Option<String>,
    /// `create`: the nodes.
    #[serde(default)]
    pub nodes: Option<Vec<NewTaskNode>>,
    /// `add_node`: the node.
    #[serde(default)]
    pub node: Option<NewTaskNode>,
    /// `update_node`: which node.
    #[serde(default)]
    pub node_id: Option<String>,
    /// `update_node`: the changes.
    #[serde(default)]
    pub updates: Option<NodeUpdates>,
}

/// `activate_skill {name, file?}`: a skill's instructions, or one file of its folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
#[ts(optional_fields = nullable)]
pub struct ActivateSkillArgs {
    /// The skill's name, as listed in the system prompt.
    pub name: String,
    /// A file of the skill's folder (a path relative to it) to read instead of the
    /// instructions.
    #[serde(default)]
    pub file: Option<String>,
}
