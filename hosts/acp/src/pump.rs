//! One task per open session: its envelopes become `session/update` notifications,
//! approvals, questions and plans become permission requests, and terminal events
//! answer the waiting prompt.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ConfigOptionUpdate, SessionUpdate, Usage};
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use keel_kernel::EventStream;

use crate::host::{Host, PromptEnd, Sess};
use crate::prompt::stop_reason;
use crate::translate::{meta_of, with_meta, Translator};

/// Translates one session's envelopes until it is closed or replaced.
pub(crate) async fn pump(host: Arc<Host>, sess: Arc<Sess>, mut stream: EventStream) {
    let mut t = Translator::new(sess.workspace.clone());
    let sid = sess.handle.id().to_owned();
    let mut plan_call: Option<String> = None;
    loop {
        // Events already delivered are translated before a stop is seen.
        let env = tokio::select! {
            biased;
            e = stream.recv() => match e { Some(e) => e, None => break },
            _ = sess.stop.cancelled() => break,
        };
        // Replayed envelopes (a resume with a cursor) are sent by `session/load`.
        if env.meta.as_ref().and_then(|m| m.replay) == Some(true) {
            continue;
        }
        for u in t.translate(&env, false) {
            host.update(&sid, u);
        }
        let rid = env.request_id.clone();
        if let Some(tx) = sess.st().event_waiters.remove(&rid) {
            let _ = tx.send(env.clone());
        }
        match env.event {
            Event::ApprovalRequested(a) => {
                tokio::spawn(host.clone().ask_permission(sess.clone(), a));
            }
            Event::ToolCallStarted(c) if c.tool_name == keel_kernel::PROPOSE_PLAN => {
                plan_call = Some(c.tool_call_id);
            }
            Event::AskRequested(q) => {
                tokio::spawn(host.clone().ask_question(sess.clone(), q));
            }
            Event::PlanApprovalRequired(p) => {
                let call = plan_call.clone().unwrap_or_else(|| p.plan_id.clone());
                tokio::spawn(host.clone().ask_plan(sess.clone(), call, p));
            }
            Event::SessionModeChanged(_) | Event::SessionModelChanged(_) => {
                // Clients that follow config options learn the new values here.
                let options = sess.config_options(&host.kernel);
                let update = SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options));
                host.update(&sid, with_meta(update, meta_of(&env, false)));
            }
            Event::Error(e) => {
                sess.st().errors.insert(rid, e);
            }
            Event::RequestRejected(e) => sess.finish(&rid, PromptEnd::Failed(e)),
            Event::SessionCompleted(c) => {
                let last_error = sess.st().errors.remove(&rid);
                let end = match stop_reason(c.stop_reason) {
                    Some(r) => {
                        let (input, output) = (c.telemetry.input_tokens, c.telemetry.output_tokens);
                        PromptEnd::Stop(r, Some(Usage::new(input + output, input, output)))
                    }
                    None => PromptEnd::Failed(last_error.unwrap_or_else(|| {
                        ErrorPayload::new(ErrorCode::RuntimeInternalError, "the request failed")
                    })),
                };
                sess.finish(&rid, end);
            }
            Event::SessionInterrupted(i) => {
                if let Some(r) = i.interrupted_request_id {
                    sess.st().errors.remove(&r);
                    sess.finish(
                        &r,
                        PromptEnd::Stop(
                            agent_client_protocol::v1::schema::StopReason::Cancelled,
                            None,
                        ),
                    );
                }
            }
            _ => {}
        }
    }
}
