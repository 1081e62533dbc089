//! The extension commands: review mode, patches, the task graph, sub-agents and
//! background tasks. Their state machines are [`crate::session::ext`]; the task graph's
//! operations are shared with its tool ([`crate::pipeline::task_graph`]).

use std::sync::Arc;

use keel_envelope::commands::{
    BackgroundGetCmd, BackgroundHistoryCmd, BackgroundListCmd, BackgroundStopCmd, PatchApply,
    PatchPropose, PatchReject, PatchSummaryCmd, ReviewEnter, ReviewResolve, ReviewStatusCmd,
    ReviewSubmit, SubAgentGetCmd, SubAgentListCmd, TaskGraphAddNode, TaskGraphAdvance,
    TaskGraphCreate, TaskGraphStateCmd, TaskGraphUpdateNode,
};
use keel_envelope::events::{
    BackgroundEvent, BackgroundHistory, BackgroundList, PatchEvent, PatchSummary, ReviewEvent,
    ReviewStateEvent, SubAgentGet, SubAgentList,
};
use keel_envelope::ext::{PatchStatus, ReviewState};
use keel_envelope::ids::IdKind;
use keel_envelope::tools::Decision;
use keel_envelope::{ErrorCode, ErrorPayload, Event};

use super::Cx;
use crate::pipeline::gate;
use crate::pipeline::task_graph::{graph_op, GraphOp};
use crate::session::ext::{patch, review};
use crate::session::Session;

/// Who acts through a command.
const HOST: &str = "host";

/// Applies a review transition (`step`, given now) and reports the review after it
/// with `event`.
async fn review_step(
    cx: &Cx<'_>,
    session: &Session,
    step: impl FnOnce(&mut Option<ReviewState>, u64) -> Result<ReviewState, ErrorPayload>,
    event: fn(ReviewEvent) -> Event,
) -> Result<(), ErrorPayload> {
    let now = session.now();
    let review = step(&mut session.data().ext.review, now)?;
    session
        .emit_persist(cx.rid, event(ReviewEvent::new(review)))
        .await;
    Ok(())
}

/// `review.enter`.
pub(crate) async fn review_enter(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &ReviewEnter,
) -> Result<(), ErrorPayload> {
    let id = session.services.next_id(IdKind::Review);
    let checklist = p.checklist.as_deref().unwrap_or(&[]);
    review_step(
        cx,
        session,
        |r, now| review::enter(r, id, &p.reason, p.blocking, checklist, HOST, now),
        Event::ReviewRequested,
    )
    .await
}

/// `review.submit`.
pub(crate) async fn review_submit(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &ReviewSubmit,
) -> Result<(), ErrorPayload> {
    let (comment, item) = (p.comment.as_deref(), p.checklist_item.as_ref());
    review_step(
        cx,
        session,
        |r, now| review::submit(r, comment, item, HOST, now),
        Event::ReviewUpdated,
    )
    .await
}

/// `review.resolve`.
pub(crate) async fn review_resolve(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &ReviewResolve,
) -> Result<(), ErrorPayload> {
    let summary = p.summary.as_deref();
    review_step(
        cx,
        session,
        |r, now| review::resolve(r, p.decision, summary, HOST, now),
        Event::ReviewResolved,
    )
    .await
}

/// `review.status`.
pub(crate) async fn review_status(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &ReviewStatusCmd,
) -> Result<(), ErrorPayload> {
    let ev = {
        let d = session.data();
        ReviewStateEvent::new(review::is_blocking(d.ext.review.as_ref()))
            .review(d.ext.review.clone())
    };
    session.emitter.emit(cx.rid, Event::ReviewState(ev)).await;
    Ok(())
}

/// `patch.propose`: the files as given, checked against the workspace.
pub(crate) async fn patch_propose(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &PatchPropose,
) -> Result<(), ErrorPayload> {
    let now = session.now();
    if p.files.is_empty() {
        return Err(ErrorPayload::new(
            ErrorCode::RequestInvalid,
            "a patch needs at least one file",
        )
        .with_detail("field", "payload.files"));
    }
    let mut files = Vec::with_capacity(p.files.len());
    let roots = session.data().roots.clone();
    for (i, f) in p.files.iter().enumerate() {
        let (display, _, before) = patch::read_current(&session.workspace, &roots, &f.path)
            .map_err(|e| e.with_detail("field", format!("payload.files[{i}].path")))?;
        if files
            .iter()
            .any(|x: &keel_envelope::ext::PatchFile| x.path == display)
        {
            return Err(ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("`{}` appears twice in the patch", f.path),
            )
            .with_detail("field", format!("payload.files[{i}].path")));
        }
        if before.is_none() && f.content.is_none() {
            return Err(ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("`{}` does not exist; there is nothing to delete", f.path),
            )
            .with_detail("field", format!("payload.files[{i}].content")));
        }
        files.push(patch::file_change(
            i as u32,
            &display,
            before,
            f.content.clone(),
        ));
    }
    let id = session.services.next_id(IdKind::Patch);
    let patch = patch::new_patch(
        id,
        HOST,
        p.reason.clone(),
        Some(cx.rid.to_owned()),
        files,
        now,
    );
    session.data().ext.patches.propose(patch.clone());
    session
        .emit_persist(cx.rid, Event::PatchProposed(PatchEvent::new(patch)))
        .await;
    Ok(())
}

/// The permission gate on a patch about to be written: each file is decided as a
/// `write_file` of that path with its new content would be, in the session's mode
/// and rules. A deny refuses the whole patch; an ask is answered by the host's
/// `patch.apply` itself (it is the person's decision on the edit).
fn gate_patch(session: &Session, patch: &keel_envelope::ext::Patch) -> Result<(), ErrorPayload> {
    let Some(spec) = keel_tools::spec::builtin_spec("write_file") else {
        return Ok(());
    };
    let d = session.data();
    for f in &patch.files {
        let raw = serde_json::json!({
            "path": f.path,
            "content": f.after.clone().unwrap_or_default(),
        });
        let Ok(args) = keel_tools::ToolArgs::decode(spec.analysis, &raw) else {
            continue;
        };
        let v = gate::decide(session, &d, &session.workspace, &spec, &raw, &args);
        if v.decision() == Decision::Deny {
            let mut e = v.deny_error(&spec.name);
            e.message = format!(
                "patch {} writes `{}`, which the permission gate refuses: {}",
                patch.patch_id,
                f.path,
                v.reason()
            );
            return Err(e
                .with_detail("patchId", patch.patch_id.clone())
                .with_detail("path", f.path.clone()));
        }
    }
    Ok(())
}

/// `patch.apply`: past the permission gate, written through the workspace jail,
/// only without conflicts.
pub(crate) async fn patch_apply(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &PatchApply,
) -> Result<(), ErrorPayload> {
    let now = session.now();
    // Taken out while it is written, so a second apply cannot race it.
    let taken = session.data().ext.patches.take(&p.patch_id)?;
    let roots = session.data().roots.clone();
    let written = gate_patch(session, &taken)
        .and_then(|()| patch::write_patch(&session.workspace, &roots, &taken));
    let resolved = {
        let mut d = session.data();
        match written {
            Ok(()) => Ok(d
                .ext
                .patches
                .resolve(taken, PatchStatus::Applied, HOST, None, now)),
            Err(e) => {
                d.ext.patches.restore(taken);
                Err(e)
            }
        }
    };
    let patch = resolved?;
    session
        .emit_persist(cx.rid, Event::PatchApplied(PatchEvent::new(patch)))
        .await;
    Ok(())
}

/// `patch.reject`.
pub(crate) async fn patch_reject(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &PatchReject,
) -> Result<(), ErrorPayload> {
    let now = session.now();
    let patch = {
        let mut d = session.data();
        let taken = d.ext.patches.take(&p.patch_id)?;
        d.ext
            .patches
            .resolve(taken, PatchStatus::Rejected, HOST, p.reason.clone(), now)
    };
    session
        .emit_persist(cx.rid, Event::PatchRejected(PatchEvent::new(patch)))
        .await;
    Ok(())
}

/// `patch.summary`.
pub(crate) async fn patch_summary(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &PatchSummaryCmd,
) -> Result<(), ErrorPayload> {
    let ev = {
        let d = session.data();
        PatchSummary::new(
            d.ext.patches.pending.clone(),
            d.ext.patches.history.clone(),
            d.ext.patches.totals(),
        )
    };
    session.emitter.emit(cx.rid, Event::PatchSummary(ev)).await;
    Ok(())
}

/// `task-graph.create`.
pub(crate) async fn graph_create(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &TaskGraphCreate,
) -> Result<(), ErrorPayload> {
    graph_op(
        session,
        cx.rid,
        GraphOp::Create {
            title: p.title.clone(),
            description: p.description.clone(),
            nodes: p.nodes.clone(),
        },
    )
    .await?;
    Ok(())
}

/// `task-graph.add-node`.
pub(crate) async fn graph_add_node(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &TaskGraphAddNode,
) -> Result<(), ErrorPayload> {
    graph_op(session, cx.rid, GraphOp::AddNode(p.node.clone())).await?;
    Ok(())
}

/// `task-graph.update-node`.
pub(crate) async fn graph_update_node(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &TaskGraphUpdateNode,
) -> Result<(), ErrorPayload> {
    graph_op(
        session,
        cx.rid,
        GraphOp::UpdateNode {
            node_id: p.node_id.clone(),
            updates: p.updates.clone(),
        },
    )
    .await?;
    Ok(())
}

/// `task-graph.advance`.
pub(crate) async fn graph_advance(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &TaskGraphAdvance,
) -> Result<(), ErrorPayload> {
    graph_op(session, cx.rid, GraphOp::Advance).await?;
    Ok(())
}

/// `task-graph.state`.
pub(crate) async fn graph_state(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &TaskGraphStateCmd,
) -> Result<(), ErrorPayload> {
    graph_op(session, cx.rid, GraphOp::State).await?;
    Ok(())
}

/// `sub-agent.list`.
pub(crate) async fn sub_agent_list(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &SubAgentListCmd,
) -> Result<(), ErrorPayload> {
    let ev = {
        let d = session.data();
        SubAgentList::new(
            d.ext.sub_agents.active.clone(),
            d.ext.sub_agents.recent.iter().cloned().collect::<Vec<_>>(),
        )
    };
    session.emitter.emit(cx.rid, Event::SubAgentList(ev)).await;
    Ok(())
}

/// `sub-agent.get`.
pub(crate) async fn sub_agent_get(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &SubAgentGetCmd,
) -> Result<(), ErrorPayload> {
    let sub_agent = session.data().ext.sub_agents.get(&p.sub_agent_id)?;
    session
        .emitter
        .emit(cx.rid, Event::SubAgentGet(SubAgentGet::new(sub_agent)))
        .await;
    Ok(())
}

/// `background.list`.
pub(crate) async fn background_list(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &BackgroundListCmd,
) -> Result<(), ErrorPayload> {
    let tasks = session.data().ext.background.tasks.clone();
    session
        .emitter
        .emit(cx.rid, Event::BackgroundList(BackgroundList::new(tasks)))
        .await;
    Ok(())
}

/// `background.get`.
pub(crate) async fn background_get(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &BackgroundGetCmd,
) -> Result<(), ErrorPayload> {
    let task = session.data().ext.background.get(&p.task_id)?;
    session
        .emitter
        .emit(cx.rid, Event::BackgroundGet(BackgroundEvent::new(task)))
        .await;
    Ok(())
}

/// `background.history`.
pub(crate) async fn background_history(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &BackgroundHistoryCmd,
) -> Result<(), ErrorPayload> {
    let lines = session.data().ext.background.history(&p.task_id)?;
    session
        .emitter
        .emit(
            cx.rid,
            Event::BackgroundHistory(BackgroundHistory::new(p.task_id.clone(), lines)),
        )
        .await;
    Ok(())
}

/// `background.stop`: stops the task and waits until it is gone.
pub(crate) async fn background_stop(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &BackgroundStopCmd,
) -> Result<(), ErrorPayload> {
    let task = crate::work::process::stop(session, &p.task_id).await?;
    session
        .emit_persist(cx.rid, Event::BackgroundStopped(BackgroundEvent::new(task)))
        .await;
    Ok(())
}
