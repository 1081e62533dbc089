//! `new(…)` of every command payload: its required fields, the others at their
//! defaults (the setters named after the fields change them).

use super::*;

/// `new(…)` for a payload: its required fields, every other field at its default
/// (set them with the setters named after the fields).
macro_rules! constructors {
    ($( $name:ident ( $( $field:ident : $ty:ty ),* ) ),* $(,)?) => {
        $(
            impl $name {
                /// A payload with these fields and every other field at its default.
                #[allow(clippy::new_without_default, clippy::needless_update)]
                pub fn new($( $field: impl Into<$ty> ),*) -> Self {
                    Self { $( $field: $field.into(), )* ..Default::default() }
                }
            }
        )*
    };
}

constructors! {
    RuntimeShutdown(),
    SessionStart(),
    SessionResume(session_id: String),
    SessionWatch(session_id: String),
    SessionUnwatch(session_id: String),
    SessionClose(),
    SessionListCmd(),
    SessionStateCmd(),
    CheckpointListCmd(),
    SessionRewind(),
    SessionFork(),
    RequestSide(message: String),
    SetMode(mode: PermissionMode),
    SetModel(model: String),
    SetRules(),
    SetTitle(title: String),
    SessionDelete(session_id: String),
    LoadHistory(messages: Vec<HistoryMessage>),
    RequestSend(message: String),
    RequestInterrupt(),
    CancelQueued(queued_request_id: String),
    PlanApprove(plan_id: String),
    PlanReject(plan_id: String),
    AskRespond(ask_id: String, answer: String),
    ContextCompact(),
    SetHostTools(tools: Vec<HostToolSpec>),
    HostToolRespond(tool_call_id: String),
    McpListCmd(),
    SkillsListCmd(),
    CommandsListCmd(),
    WorktreeListCmd(),
    WorktreeRemove(),
    ReviewEnter(reason: String),
    ReviewSubmit(),
    ReviewResolve(decision: ReviewDecision),
    ReviewStatusCmd(),
    PatchPropose(files: Vec<ProposedFile>),
    PatchApply(patch_id: String),
    PatchReject(patch_id: String),
    PatchSummaryCmd(),
    TaskGraphCreate(nodes: Vec<NewTaskNode>),
    TaskGraphAddNode(node: NewTaskNode),
    TaskGraphUpdateNode(node_id: String, updates: NodeUpdates),
    TaskGraphAdvance(),
    TaskGraphStateCmd(),
    SubAgentListCmd(),
    SubAgentGetCmd(sub_agent_id: String),
    HarnessStatusCmd(),
    BackgroundListCmd(),
    BackgroundGetCmd(task_id: String),
    BackgroundHistoryCmd(task_id: String),
    BackgroundStopCmd(task_id: String),
    ChecklistUpdate(id: String),
    ProposedFile(path: String),
    NewTaskNode(id: String, title: String),
    NodeUpdates(),
}

impl ApprovalRespond {
    /// The answer `decision` to the approval `approval_id`.
    pub fn new(approval_id: impl Into<String>, decision: ApprovalDecision) -> Self {
        Self {
            approval_id: approval_id.into(),
            decision,
        }
    }
}
