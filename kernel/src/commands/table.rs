//! The command table: every command type, the feature module that owns it, and its
//! handler, in one list. [`dispatch`] is made from the same list, and a test checks the
//! rows against `CommandType::ALL` (each type once), so a command type without a row
//! fails it.
//!
//! A row's scope says what its handler gets besides the context and the payload:
//! `kernel` handlers get nothing more; `session` handlers get the command's open
//! session, looked up here, in one place: a command without `sessionId` is refused
//! with `REQUEST_INVALID` (`details.field: "sessionId"`), one naming a session that is
//! not open with `SESSION_NOT_FOUND` (an idle session unloaded from memory is reloaded
//! first).

use std::sync::Arc;

use keel_envelope::commands::CommandPayload;
#[cfg(test)]
use keel_envelope::commands::CommandType;
use keel_envelope::{Command, ErrorCode, ErrorPayload};

use super::{
    approvals, checkpoints, compaction, ext, fork, host_tools, lifecycle, mcp, plans, requests,
    runtime, settings, side, skills, stored, worktree, Cx,
};
use crate::session::Session;

/// What a handler needs besides its context and payload.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Nothing: the command names no session, or names it in its payload.
    Kernel,
    /// The command's open session (`sessionId`).
    Session,
}

/// One row of the table.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    pub(crate) command: CommandType,
    pub(crate) scope: Scope,
    /// The feature module (`commands::<feature>`).
    pub(crate) feature: &'static str,
    /// The handler in that module.
    pub(crate) handler: &'static str,
}

macro_rules! table {
    (@call Kernel, $cx:ident, $cmd:ident, $m:ident :: $h:ident, $p:ident) => {
        $m::$h($cx, $p).await
    };
    (@call Session, $cx:ident, $cmd:ident, $m:ident :: $h:ident, $p:ident) => {{
        let session = session_of($cx, $cmd)?;
        $m::$h($cx, &session, $p).await
    }};
    ($( $variant:ident => $scope:ident $m:ident :: $h:ident, )*) => {
        /// Every command type with its scope, feature module and handler.
        #[cfg(test)]
        pub(crate) const TABLE: &[Row] = &[$(
            Row {
                command: CommandType::$variant,
                scope: Scope::$scope,
                feature: stringify!($m),
                handler: stringify!($h),
            },
        )*];

        /// Runs `cmd`'s handler. Its answers go out as events; an error is returned
        /// for the caller to report.
        pub(crate) async fn dispatch(cx: &Cx<'_>, cmd: &Command) -> Result<(), ErrorPayload> {
            match &cmd.payload {
                $( CommandPayload::$variant(p) => table!(@call $scope, cx, cmd, $m::$h, p), )*
                // The codec decodes the known command types only; a payload of a later
                // version cannot reach here, and is refused if it does.
                other => Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!("no handler for the command type {}", other.command_type().as_str()),
                )),
            }
        }
    };
}

table! {
    RuntimeShutdown => Kernel runtime::shutdown,
    HarnessStatus => Kernel runtime::status,

    SessionStart => Kernel lifecycle::start,
    SessionResume => Kernel lifecycle::resume,
    SessionClose => Session lifecycle::close,
    SessionWatch => Kernel lifecycle::watch,
    SessionUnwatch => Kernel lifecycle::unwatch,

    SessionList => Kernel stored::list,
    SessionDelete => Kernel stored::delete,
    SessionSetTitle => Session stored::set_title,

    SessionState => Session settings::state,
    SessionSetMode => Session settings::set_mode,
    SessionSetModel => Session settings::set_model,
    SessionSetRules => Session settings::set_rules,
    SessionLoadHistory => Session settings::load_history,

    RequestSend => Session requests::send,
    RequestInterrupt => Session requests::interrupt,
    RequestCancelQueued => Session requests::cancel_queued,

    ApprovalRespond => Session approvals::approval,
    AskRespond => Session approvals::ask,

    PlanApprove => Session plans::approve,
    PlanReject => Session plans::reject,

    CheckpointList => Session checkpoints::list,
    SessionRewind => Session checkpoints::rewind,

    SessionFork => Session fork::fork,

    RequestSide => Session side::ask,

    ContextCompact => Session compaction::compact,

    ReviewEnter => Session ext::review_enter,
    ReviewSubmit => Session ext::review_submit,
    ReviewResolve => Session ext::review_resolve,
    ReviewStatus => Session ext::review_status,
    PatchPropose => Session ext::patch_propose,
    PatchApply => Session ext::patch_apply,
    PatchReject => Session ext::patch_reject,
    PatchSummary => Session ext::patch_summary,
    TaskGraphCreate => Session ext::graph_create,
    TaskGraphAddNode => Session ext::graph_add_node,
    TaskGraphUpdateNode => Session ext::graph_update_node,
    TaskGraphAdvance => Session ext::graph_advance,
    TaskGraphState => Session ext::graph_state,
    SubAgentList => Session ext::sub_agent_list,
    SubAgentGet => Session ext::sub_agent_get,
    BackgroundList => Session ext::background_list,
    BackgroundGet => Session ext::background_get,
    BackgroundHistory => Session ext::background_history,
    BackgroundStop => Session ext::background_stop,

    SessionSetHostTools => Session host_tools::set,
    HostToolRespond => Session host_tools::respond,

    McpList => Session mcp::list,

    SkillsList => Session skills::list_skills,
    CommandsList => Session skills::list_commands,
    WorktreeList => Kernel worktree::list,
    WorktreeRemove => Kernel worktree::remove,
}

/// The open session a session command names.
fn session_of(cx: &Cx<'_>, cmd: &Command) -> Result<Arc<Session>, ErrorPayload> {
    let Some(id) = cmd.session_id.as_deref() else {
        return Err(
            ErrorPayload::new(ErrorCode::RequestInvalid, "missing field `sessionId`")
                .with_detail("field", "sessionId"),
        );
    };
    cx.open.require(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_type_has_exactly_one_row() {
        for ty in CommandType::ALL {
            let rows: Vec<String> = TABLE
                .iter()
                .filter(|r| r.command == *ty)
                .map(|r| format!("commands::{}::{}", r.feature, r.handler))
                .collect();
            assert_eq!(
                rows.len(),
                1,
                "`{}` needs exactly one row in the command table, has {rows:?}",
                ty.as_str(),
            );
        }
        assert_eq!(
            TABLE.len(),
            CommandType::ALL.len(),
            "a row names no command type"
        );
    }

    #[test]
    fn a_row_takes_a_session_exactly_when_the_command_needs_one() {
        for row in TABLE {
            assert_eq!(
                row.scope == Scope::Session,
                row.command.needs_session(),
                "`{}`: the row's scope disagrees with the protocol",
                row.command.as_str()
            );
        }
    }

    #[test]
    fn rows_name_the_feature_modules_of_the_architecture() {
        let doc = include_str!("../../../docs/ARCHITECTURE.md");
        for row in TABLE {
            assert!(
                doc.contains(&format!("`commands/{}.rs`", row.feature)),
                "docs/ARCHITECTURE.md does not name the feature module commands/{}.rs",
                row.feature
            );
        }
    }
}
