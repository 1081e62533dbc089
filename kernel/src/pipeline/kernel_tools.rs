//! The kernel's own plan and question tools: `propose_plan`, `update_plan` and
//! `ask_user`. They are registry entries like any other tool (rows in
//! `keel_tools::spec::kernel_specs`), run by the pipeline after the gate; these are
//! their handlers.

use async_trait::async_trait;
use keel_envelope::events::{
    AskAnswered, AskExpired, AskRequested, PlanApprovalRequired, PlanApproved, PlanRejected,
    PlanStarted, PlanUpdated, SessionModeChanged,
};
use keel_envelope::ids::IdKind;
use keel_envelope::kernel_tools::PlanStepArg;
use keel_envelope::types::{PermissionMode, Plan, PlanStatus, PlanStep, StepStatus};
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::pipeline::approval::{expires_at, sleep_opt};
use crate::session::queue::PlanAnswer;
use crate::session::registry::{args_mismatch, Args, CallCx, KernelHandler};

fn interrupted() -> ErrorPayload {
    ErrorPayload::new(ErrorCode::Interrupted, "interrupted before it finished")
}

fn step_id(i: usize, s: &PlanStepArg) -> String {
    s.id.clone().unwrap_or_else(|| format!("s{}", i + 1))
}

/// `propose_plan`: records the plan; in plan mode waits for the host's decision.
#[derive(Debug)]
pub(crate) struct ProposePlan;

#[async_trait]
impl KernelHandler for ProposePlan {
    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<Value, ErrorPayload> {
        let session = cx.session;
        let Args::ProposePlan(a) = args else {
            return Err(args_mismatch(&cx.call.name));
        };
        if a.steps.is_empty() {
            return Err(ErrorPayload::new(
                ErrorCode::ToolArgumentsInvalid,
                "a plan needs at least one step",
            ));
        }
        let steps: Vec<PlanStep> = a
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                PlanStep::new(
                    step_id(i, s),
                    s.title.clone().unwrap_or_default(),
                    StepStatus::Pending,
                )
            })
            .collect();
        let (plan_id, is_new, in_plan_mode) = {
            let d = session.data();
            let existing = d
                .state
                .plan
                .as_ref()
                .filter(|p| p.status != PlanStatus::Approved)
                .map(|p| p.plan_id.clone());
            let in_plan = d.state.mode == PermissionMode::Plan;
            drop(d);
            match existing {
                Some(id) => (id, false, in_plan),
                None => (session.services.next_id(IdKind::Plan), true, in_plan),
            }
        };
        let status = if in_plan_mode {
            PlanStatus::AwaitingApproval
        } else {
            PlanStatus::Approved
        };
        session.data().state.plan =
            Some(Plan::new(plan_id.clone(), status, steps.clone()).summary(a.summary.clone()));
        let rid = cx.rid;
        if is_new {
            let ev = PlanStarted::new(plan_id.clone());
            session.emitter.emit(rid, Event::PlanStarted(ev)).await;
        }
        let ev = PlanUpdated::new(plan_id.clone(), steps.clone());
        session.emitter.emit(rid, Event::PlanUpdated(ev)).await;
        if !in_plan_mode {
            return Ok(json!({"planId": plan_id, "status": "approved",
                "message": "Plan recorded. Work through it and call update_plan as steps progress."}));
        }
        let (tx, rx) = oneshot::channel();
        session.data().plan_wait = Some((plan_id.clone(), tx));
        let ev = PlanApprovalRequired::new(plan_id.clone(), steps).summary(a.summary);
        session
            .emitter
            .emit(rid, Event::PlanApprovalRequired(ev))
            .await;
        let answer = tokio::select! {
            biased;
            _ = cx.cancel.cancelled() => {
                session.data().plan_wait = None;
                return Err(interrupted());
            }
            a = rx => a.ok(),
        };
        match answer {
            Some(PlanAnswer::Approve { mode, reply_to }) => {
                let previous = {
                    let mut d = session.data();
                    if let Some(p) = d.state.plan.as_mut() {
                        p.status = PlanStatus::Approved;
                    }
                    std::mem::replace(&mut d.state.mode, mode.clone())
                };
                let ev = PlanApproved::new(plan_id.clone(), mode.clone());
                session
                    .emitter
                    .emit_reply(rid, Some(&reply_to), Event::PlanApproved(ev))
                    .await;
                let ev = SessionModeChanged::new(mode.clone(), previous);
                session
                    .emitter
                    .emit(rid, Event::SessionModeChanged(ev))
                    .await;
                Ok(
                    json!({"planId": plan_id, "status": "approved", "mode": mode.as_str(),
                    "message": format!("The plan was approved; the session is now in `{}` mode. Execute the steps in order and call update_plan to mark each step in_progress and completed.", mode.as_str())}),
                )
            }
            Some(PlanAnswer::Reject { feedback, reply_to }) => {
                if let Some(p) = session.data().state.plan.as_mut() {
                    p.status = PlanStatus::Rejected;
                }
                let ev = PlanRejected::new(plan_id.clone()).feedback(feedback.clone());
                session
                    .emitter
                    .emit_reply(rid, Some(&reply_to), Event::PlanRejected(ev))
                    .await;
                Ok(json!({"planId": plan_id, "status": "rejected",
                    "message": format!("The plan was rejected; the session stays in plan mode. Feedback: {}. Revise the plan and propose it again.", feedback.as_deref().unwrap_or("(none)"))}))
            }
            None => Err(ErrorPayload::new(
                ErrorCode::PlanRejected,
                "the plan decision was dropped",
            )),
        }
    }
}

/// `update_plan`: moves step statuses.
#[derive(Debug)]
pub(crate) struct UpdatePlan;

#[async_trait]
impl KernelHandler for UpdatePlan {
    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<Value, ErrorPayload> {
        let Args::UpdatePlan(a) = args else {
            return Err(args_mismatch(&cx.call.name));
        };
        let updated = {
            let mut d = cx.session.data();
            d.state.plan.as_mut().map(|plan| {
                for (i, s) in a.steps.iter().enumerate() {
                    let id = step_id(i, s);
                    match plan.steps.iter_mut().find(|p| p.id == id) {
                        Some(step) => {
                            if let Some(st) = s.status.clone() {
                                step.status = st;
                            }
                            if let Some(t) = &s.title {
                                step.title = t.clone();
                            }
                        }
                        None => plan.steps.push(PlanStep::new(
                            id,
                            s.title.clone().unwrap_or_default(),
                            s.status.clone().unwrap_or(StepStatus::Pending),
                        )),
                    }
                }
                (plan.plan_id.clone(), plan.steps.clone())
            })
        };
        let Some((plan_id, steps)) = updated else {
            return Err(ErrorPayload::new(
                ErrorCode::PlanApprovalRequired,
                "there is no plan yet: call propose_plan first",
            ));
        };
        let ev = PlanUpdated::new(plan_id.clone(), steps);
        cx.session
            .emitter
            .emit(cx.rid, Event::PlanUpdated(ev))
            .await;
        Ok(json!({"planId": plan_id, "message": "Plan updated."}))
    }
}

/// `ask_user`: asks the host and waits for the answer.
#[derive(Debug)]
pub(crate) struct AskUser;

#[async_trait]
impl KernelHandler for AskUser {
    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<Value, ErrorPayload> {
        let session = cx.session;
        let rid = cx.rid;
        let Args::AskUser(a) = args else {
            return Err(args_mismatch(&cx.call.name));
        };
        let ask_id = session.services.next_id(IdKind::Ask);
        let (tx, mut rx) = oneshot::channel();
        session.data().asks.insert(ask_id.clone(), tx);
        let (timeout, expires) = expires_at(session);
        let ev = AskRequested::new(
            ask_id.clone(),
            cx.tool_call_id.to_owned(),
            a.question,
            a.candidates,
        )
        .expires_at(expires);
        session.emitter.emit(rid, Event::AskRequested(ev)).await;
        let expired = |reason: &str| Event::AskExpired(AskExpired::new(ask_id.clone(), reason));
        let answer = tokio::select! {
            biased;
            _ = cx.cancel.cancelled() => {
                if session.data().asks.remove(&ask_id).is_some() {
                    session.emitter.emit(rid, expired("interrupted")).await;
                }
                return Err(interrupted());
            }
            a = &mut rx => a.ok(),
            _ = sleep_opt(timeout) => {
                if session.data().asks.remove(&ask_id).is_some() { None } else { rx.await.ok() }
            }
        };
        let Some((text, reply_to)) = answer else {
            session.emitter.emit(rid, expired("timeout")).await;
            return Err(ErrorPayload::new(
                ErrorCode::ToolExecutionFailed,
                "the user did not answer in time",
            ));
        };
        let ev = AskAnswered::new(ask_id.clone(), text.clone());
        session
            .emitter
            .emit_reply(rid, Some(&reply_to), Event::AskAnswered(ev))
            .await;
        Ok(
            json!({"askId": ask_id, "answer": text, "message": format!("The user answered: {text}")}),
        )
    }
}
