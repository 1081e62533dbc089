//! Approvals and questions: `approval.respond` and `ask.respond` hand the answer to
//! the request waiting for it ([`crate::pipeline::approval`],
//! [`crate::pipeline::kernel_tools`]), which reports it on its own stream.

use std::sync::Arc;

use keel_envelope::commands::{ApprovalRespond, AskRespond};
use keel_envelope::{ErrorCode, ErrorPayload};

use super::{not_pending, Cx};
use crate::session::Session;

/// `approval.respond`.
pub(crate) async fn approval(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &ApprovalRespond,
) -> Result<(), ErrorPayload> {
    let gone = || not_pending(ErrorCode::ApprovalNotFound, "approval", &p.approval_id);
    let tx = session.data().approvals.remove(&p.approval_id);
    let tx = tx.ok_or_else(gone)?;
    tx.send((p.decision.clone(), cx.rid.to_owned()))
        .map_err(|_| gone())
}

/// `ask.respond`.
pub(crate) async fn ask(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &AskRespond,
) -> Result<(), ErrorPayload> {
    let gone = || not_pending(ErrorCode::AskNotFound, "question", &p.ask_id);
    let tx = session.data().asks.remove(&p.ask_id);
    let tx = tx.ok_or_else(gone)?;
    tx.send((p.answer.clone(), cx.rid.to_owned()))
        .map_err(|_| gone())
}
