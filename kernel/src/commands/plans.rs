//! Plans: `plan.approve` and `plan.reject` hand the decision to the `propose_plan`
//! call waiting for it ([`crate::pipeline::kernel_tools`]).

use std::sync::Arc;

use keel_envelope::commands::{PlanApprove, PlanReject};
use keel_envelope::types::PermissionMode;
use keel_envelope::{ErrorCode, ErrorPayload};
use tokio::sync::oneshot;

use super::{not_pending, Cx};
use crate::session::queue::PlanAnswer;
use crate::session::Session;

/// `plan.approve`.
pub(crate) async fn approve(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &PlanApprove,
) -> Result<(), ErrorPayload> {
    let tx = take_plan_wait(session, &p.plan_id)?;
    let _ = tx.send(PlanAnswer::Approve {
        mode: p.mode.clone().unwrap_or(PermissionMode::Ask),
        reply_to: cx.rid.to_owned(),
    });
    Ok(())
}

/// `plan.reject`.
pub(crate) async fn reject(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &PlanReject,
) -> Result<(), ErrorPayload> {
    let tx = take_plan_wait(session, &p.plan_id)?;
    let _ = tx.send(PlanAnswer::Reject {
        feedback: p.feedback.clone(),
        reply_to: cx.rid.to_owned(),
    });
    Ok(())
}

fn take_plan_wait(
    session: &Session,
    plan_id: &str,
) -> Result<oneshot::Sender<PlanAnswer>, ErrorPayload> {
    let mut d = session.data();
    match d.plan_wait.take() {
        Some((id, tx)) if id == plan_id => Ok(tx),
        other => {
            d.plan_wait = other;
            Err(not_pending(ErrorCode::PlanNotFound, "plan", plan_id))
        }
    }
}
