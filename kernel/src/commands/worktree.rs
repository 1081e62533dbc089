//! The worktrees the runtime keeps for isolated sessions: `worktree.list` and
//! `worktree.remove` (answered on the command's stream; `worktree.removed` is
//! logged in the owning session's log when that session is open).

use keel_envelope::commands::{WorktreeListCmd, WorktreeRemove};
use keel_envelope::events::{WorktreeList, WorktreeRemoved};
use keel_envelope::{ErrorCode, ErrorPayload, Event};

use super::Cx;
use crate::session::worktree;

/// `worktree.list`.
pub(crate) async fn list(cx: &Cx<'_>, _: &WorktreeListCmd) -> Result<(), ErrorPayload> {
    let worktrees = worktree::list(cx.services).await?;
    cx.services
        .emitter()
        .emit(cx.rid, Event::WorktreeList(WorktreeList::new(worktrees)))
        .await;
    Ok(())
}

/// `worktree.remove`: refused while its session is open (close or delete the
/// session first), and with uncommitted changes unless `force`.
pub(crate) async fn remove(cx: &Cx<'_>, p: &WorktreeRemove) -> Result<(), ErrorPayload> {
    if p.path.is_some() && p.session_id.is_some() {
        return Err(ErrorPayload::new(
            ErrorCode::RequestInvalid,
            "give `path` or `sessionId`, not both",
        )
        .with_detail("field", "payload.sessionId"));
    }
    if p.path.as_deref().is_some_and(str::is_empty) {
        return Err(
            ErrorPayload::new(ErrorCode::RequestInvalid, "`path` is empty")
                .with_detail("field", "payload.path"),
        );
    }
    let name = worktree::find(cx.services, p.path.as_deref(), p.session_id.as_deref()).await?;
    if cx.open.get(&name).is_some() {
        return Err(ErrorPayload::new(
            ErrorCode::SessionBusy,
            format!("session {name} is open and works in this worktree; close or delete it first"),
        )
        .with_detail("sessionId", name.clone()));
    }
    let removed = worktree::remove(cx.services, &name, p.force.unwrap_or(false)).await?;
    let owner = removed.info.session_id.clone();
    cx.services
        .emitter()
        .emit_as(
            owner,
            cx.rid,
            Event::WorktreeRemoved(WorktreeRemoved::new(removed.info, removed.branch_kept)),
        )
        .await;
    Ok(())
}
