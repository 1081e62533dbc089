//! Waiting for a person: the approval of a tool call the gate asked about, with the
//! session's time limit, released by an interrupt.

use std::sync::Arc;
use std::time::Duration;

use keel_envelope::events::{
    ApprovalDenied, ApprovalExpired, ApprovalGranted, ApprovalRequested, SessionRulesUpdated,
};
use keel_envelope::ids::IdKind;
use keel_envelope::types::ApprovalDecision;
use keel_envelope::Event;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::base::model::ToolCallRequest;
use crate::base::probe::Point;
use crate::base::verdict::GateVerdict;
use crate::pipeline::Interrupted;
use crate::session::Session;

/// The time limit of a wait for a person, and when it expires (epoch ms) for hosts.
pub(crate) fn expires_at(session: &Session) -> (Option<Duration>, Option<u64>) {
    let t = session.services.config().approval_timeout;
    if t.is_zero() {
        (None, None)
    } else {
        (Some(t), Some(session.now() + t.as_millis() as u64))
    }
}

/// Sleeps for `d`, or forever.
pub(crate) async fn sleep_opt(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Asks the host; returns whether the call may run. The wait is an approval span
/// (under the call's), ended with the person's decision, `expired` or `cancelled`.
pub(crate) async fn request(
    session: &Arc<Session>,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
    verdict: &GateVerdict,
    cancel: &CancellationToken,
) -> Result<bool, Interrupted> {
    let level = verdict.level();
    let wait = session
        .services
        .telemetry()
        .approval_wait(keel_telemetry::ApprovalStart {
            tool: &call.name,
            call_id: &call.id,
            level: Some(level.as_str()),
            parent: keel_telemetry::Parent::Current,
        });
    let mut decided = "cancelled".to_owned();
    let work = ask(
        session,
        rid,
        tool_call_id,
        call,
        verdict,
        cancel,
        &mut decided,
    );
    let r = tracing::Instrument::instrument(work, wait.span().clone()).await;
    wait.finish(&decided);
    r
}

async fn ask(
    session: &Arc<Session>,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
    verdict: &GateVerdict,
    cancel: &CancellationToken,
    decided: &mut String,
) -> Result<bool, Interrupted> {
    let approval_id = session.services.next_id(IdKind::Approval);
    let (tx, rx) = oneshot::channel();
    session.data().approvals.insert(approval_id.clone(), tx);
    let (timeout, expires) = expires_at(session);
    session
        .emitter
        .emit(
            rid,
            Event::ApprovalRequested(
                ApprovalRequested::new(
                    approval_id.clone(),
                    tool_call_id.to_owned(),
                    call.name.clone(),
                    call.arguments.clone(),
                    verdict.preview(),
                    verdict.reason(),
                    verdict.action_type(),
                    verdict.risk(),
                    verdict.level(),
                    verdict.scope(),
                    ApprovalDecision::ALL.to_vec(),
                )
                .command(verdict.command())
                .expires_at(expires),
            ),
        )
        .await;
    session.probe(Point::ApprovalWait, rid).await;
    let mut rx = rx;
    let answer = tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            let removed = session.data().approvals.remove(&approval_id).is_some();
            if removed {
                // Released by the interrupt; the interrupt's one answer is
                // `session.interrupted`, so this carries no replyTo.
                session.emitter.emit(rid, Event::ApprovalExpired(ApprovalExpired::new(approval_id.clone(), tool_call_id.to_owned(), "interrupted"))).await;
            }
            return Err(Interrupted);
        }
        r = &mut rx => r.ok(),
        _ = sleep_opt(timeout) => {
            let removed = session.data().approvals.remove(&approval_id).is_some();
            if removed {
                None
            } else {
                // An answer won the race; it is in the channel.
                rx.await.ok()
            }
        }
    };
    let Some((decision, reply_to)) = answer else {
        "expired".clone_into(decided);
        session
            .emitter
            .emit(
                rid,
                Event::ApprovalExpired(ApprovalExpired::new(
                    approval_id,
                    tool_call_id.to_owned(),
                    "timeout",
                )),
            )
            .await;
        return Ok(false);
    };
    decision.as_str().clone_into(decided);
    if !decision.allows() {
        session
            .emitter
            .emit_reply(
                rid,
                Some(&reply_to),
                Event::ApprovalDenied(ApprovalDenied::new(
                    approval_id,
                    tool_call_id.to_owned(),
                    "user",
                )),
            )
            .await;
        return Ok(false);
    }
    session
        .emitter
        .emit_reply(
            rid,
            Some(&reply_to),
            Event::ApprovalGranted(ApprovalGranted::new(
                approval_id,
                tool_call_id.to_owned(),
                decision.clone(),
            )),
        )
        .await;
    remember(session, rid, call, verdict, decision).await;
    Ok(true)
}

/// Records what an `allow_session` / `allow_always_*` decision allows from now on.
async fn remember(
    session: &Session,
    rid: &str,
    call: &ToolCallRequest,
    verdict: &GateVerdict,
    decision: ApprovalDecision,
) {
    let rules_changed = {
        let mut d = session.data();
        match decision {
            ApprovalDecision::AllowSession => {
                if !d.state.session_keys.contains(&verdict.key) {
                    d.state.session_keys.push(verdict.key.clone());
                }
                None
            }
            ApprovalDecision::AllowAlwaysProject | ApprovalDecision::AllowAlwaysGlobal => {
                let rule = verdict.rule(&call.name);
                let list = if decision == ApprovalDecision::AllowAlwaysProject {
                    &mut d.state.rules.always_allow_project
                } else {
                    &mut d.state.rules.always_allow_global
                };
                if !list.contains(&rule) {
                    list.push(rule);
                }
                Some(d.state.rules.clone())
            }
            _ => None,
        }
    };
    if let Some(rules) = rules_changed {
        session
            .emitter
            .emit(
                rid,
                Event::SessionRulesUpdated(SessionRulesUpdated::new(rules, "approval")),
            )
            .await;
    }
}
