//! Which command each sample event answers, for the requestId rule's checks.

use keel_envelope::events::EventType;
use keel_envelope::CommandType;

/// The command a sample event of type `t` answers in that command's own stream, for
/// events that are not part of an agent-loop stream.
pub fn answered_command(t: EventType) -> Option<CommandType> {
    use CommandType as C;
    use EventType as E;
    Some(match t {
        E::RuntimeStopped => C::RuntimeShutdown,
        E::SessionStarted => C::SessionStart,
        E::SessionResumed => C::SessionResume,
        E::SessionClosed => C::SessionClose,
        E::SessionList => C::SessionList,
        E::SessionState => C::SessionState,
        E::CheckpointList => C::CheckpointList,
        E::SessionRewound => C::SessionRewind,
        E::SessionForked => C::SessionFork,
        E::SideAnswered => C::RequestSide,
        E::SessionModeChanged => C::SessionSetMode,
        E::SessionModelChanged => C::SessionSetModel,
        E::SessionRulesUpdated => C::SessionSetRules,
        E::SessionHistoryLoaded => C::SessionLoadHistory,
        E::SessionTitleChanged => C::SessionSetTitle,
        E::SessionDeleted => C::SessionDelete,
        E::RequestCancelled => C::RequestCancelQueued,
        E::ReviewRequested => C::ReviewEnter,
        E::ReviewUpdated => C::ReviewSubmit,
        E::ReviewResolved => C::ReviewResolve,
        E::ReviewState => C::ReviewStatus,
        E::PatchApplied => C::PatchApply,
        E::PatchRejected => C::PatchReject,
        E::PatchSummary => C::PatchSummary,
        E::TaskGraphCreated => C::TaskGraphCreate,
        E::TaskGraphNodeAdded => C::TaskGraphAddNode,
        E::TaskGraphNodeUpdated => C::TaskGraphUpdateNode,
        E::TaskGraphAdvanced => C::TaskGraphAdvance,
        E::TaskGraphState => C::TaskGraphState,
        E::SubAgentList => C::SubAgentList,
        E::SubAgentGet => C::SubAgentGet,
        E::HarnessStatus => C::HarnessStatus,
        E::BackgroundList => C::BackgroundList,
        E::BackgroundGet => C::BackgroundGet,
        E::BackgroundHistory => C::BackgroundHistory,
        E::BackgroundStopped => C::BackgroundStop,
        E::SessionWatched => C::SessionWatch,
        E::SessionUnwatched => C::SessionUnwatch,
        E::McpList => C::McpList,
        E::SkillsList => C::SkillsList,
        E::CommandsList => C::CommandsList,
        E::WorktreeList => C::WorktreeList,
        E::WorktreeRemoved => C::WorktreeRemove,
        E::SessionHostToolsUpdated => C::SessionSetHostTools,
        _ => return None,
    })
}

/// The command whose `requestId` a sample event of type `t` carries in `meta.replyTo`:
/// events that act on the running request (see docs/protocol.md).
pub fn replied_command(t: EventType) -> Option<CommandType> {
    use CommandType as C;
    use EventType as E;
    Some(match t {
        E::ApprovalGranted | E::ApprovalDenied => C::ApprovalRespond,
        E::PlanApproved => C::PlanApprove,
        E::PlanRejected => C::PlanReject,
        E::AskAnswered => C::AskRespond,
        E::SessionInterrupted => C::RequestInterrupt,
        E::RequestSteered => C::RequestSend,
        E::HostToolResponded => C::HostToolRespond,
        _ => return None,
    })
}
