//! A request's life: `request.accepted`, the agent loop, the terminal event, then the
//! next queued request. One task runs a session's requests one after another. A
//! compaction by hand is a unit of work like a request and ends the same way.
//!
//! The terminal event is decided under the session's turnover lock. An interrupt
//! takes the same lock, so it either finds the request still running (and the request
//! ends with `session.interrupted` answering it, even when its work was already done)
//! or finds it over (and is answered at once as a no-op). No interrupt is left without
//! an answer.

use std::sync::Arc;

use keel_envelope::events::{
    ApprovalExpired, AskExpired, AssistantFinal, RequestAccepted, SessionCompleted,
    SessionInterrupted, SubAgentEvent,
};
use keel_envelope::types::{StopReason, Telemetry};
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use tokio_util::sync::CancellationToken;

use crate::base::model::Message;
use crate::base::probe::Point;
use crate::base::trace;
use crate::pipeline::hooks;
use crate::session::queue::{Active, Queued};
use crate::session::Session;
use crate::work::agent::{self, Counters, Outcome};
use crate::work::budget::{self, Budget};
use crate::work::compact;

/// Runs `first`, then whatever is queued, until the queue is empty.
pub(crate) async fn run_requests(session: Arc<Session>, first: Queued, cancel: CancellationToken) {
    let mut next = Some((first, cancel, false));
    while let Some((q, cancel, from_queue)) = next.take() {
        // Every log line of the request carries its session and request ids.
        let span = tracing::info_span!("request", session_id = %session.id, request_id = %q.id);
        // The request's `invoke_agent` span, in the host's trace when it gave one; its
        // events carry the trace id while it runs.
        let agent = start_agent_span(&session, &q);
        session.emitter.set_trace(&q.id, agent.trace_id());
        let work = tracing::Instrument::instrument(
            run_request(&session, &q, &cancel, from_queue, &agent),
            agent.span().clone(),
        );
        let run = std::panic::AssertUnwindSafe(tracing::Instrument::instrument(work, span));
        let turnover = match futures::FutureExt::catch_unwind(run).await {
            Ok((turnover, end)) => {
                agent.finish(keel_telemetry::RunEnd {
                    input_tokens: Some(end.input_tokens),
                    output_tokens: Some(end.output_tokens),
                    error_type: end.error_type.as_deref(),
                });
                turnover
            }
            Err(panic) => {
                // A bug must not take the session down: report it and end the request.
                let what = panic_text(panic.as_ref());
                tracing::error!(session_id = %session.id, request_id = %q.id, panic = %what, "a request panicked");
                let turnover = session.turnover.lock().await;
                {
                    let mut d = session.data();
                    d.approvals.clear();
                    d.asks.clear();
                    d.plan_wait = None;
                }
                let error = ErrorPayload::new(
                    ErrorCode::RuntimeInternalError,
                    format!("the request failed inside the runtime: {what}"),
                )
                .with_detail("panic", what.clone());
                finish(
                    &session,
                    &q.id,
                    Outcome::Failed(error),
                    Telemetry::default(),
                )
                .await;
                agent.finish(keel_telemetry::RunEnd {
                    error_type: Some(ErrorCode::RuntimeInternalError.as_str()),
                    ..Default::default()
                });
                turnover
            }
        };
        session.emitter.set_trace(&q.id, None);
        let popped = next_queued(&session, &mut session.data());
        drop(turnover);
        next = popped.map(|(q, c)| (q, c, true));
    }
}

/// Starts the `invoke_agent` span of request `q`: under the host's `traceparent`
/// when it gave one, else the root of a new trace.
fn start_agent_span(session: &Session, q: &Queued) -> keel_telemetry::AgentRun {
    let model = session.data().model.id();
    let (provider, model) = trace::provider_model(&model);
    let parent = match &q.trace {
        Some(tp) => keel_telemetry::Parent::Remote(tp),
        None => keel_telemetry::Parent::Root,
    };
    let run = session
        .services
        .telemetry()
        .invoke_agent(keel_telemetry::AgentStart {
            agent_name: "keel",
            agent_id: None,
            session_id: &session.id,
            request_id: &q.id,
            provider: Some(provider),
            model: Some(model),
            parent,
        });
    run.input_text(&q.message);
    run
}

/// How a request ended, for its span.
struct RunEnded {
    input_tokens: u64,
    output_tokens: u64,
    error_type: Option<String>,
}

/// Runs one request. Returns holding the session's turnover lock: the terminal
/// event is out, and the caller switches to the next request before anything else
/// (a new `request.send`, an interrupt) sees the session.
async fn run_request<'s>(
    session: &'s Arc<Session>,
    q: &Queued,
    cancel: &CancellationToken,
    from_queue: bool,
    agent: &keel_telemetry::AgentRun,
) -> (tokio::sync::MutexGuard<'s, ()>, RunEnded) {
    let rid = q.id.as_str();
    // The workspace and the conversation as they are before the request: the
    // workspace's checkpoint is taken beside the first model call.
    crate::session::checkpoints::mark_request(session, rid);
    crate::session::checkpoints::begin_request(session, rid);
    session
        .emitter
        .emit(
            rid,
            Event::RequestAccepted(RequestAccepted::new(q.message.clone(), from_queue)),
        )
        .await;
    tracing::info!(from_queue, "request accepted");
    hooks::wait_session_start(session, cancel).await;
    let b = Budget::start(session, &q.overrides);
    b.record_output_cap(session, rid);
    let mut c = Counters::new();
    let outcome = match Box::pin(hooks::user_prompt_submit(session, rid, &q.message, cancel)).await
    {
        // Blocked: the prompt never reaches the history nor the model.
        Err(blocked) => {
            c.stop_hooks_ran = true;
            Outcome::Failed(blocked)
        }
        Ok(context) => {
            {
                let mut d = session.data();
                d.state.history.push(Message::User {
                    text: q.message.clone(),
                    images: q.images.clone(),
                });
                if let Some(context) = context {
                    d.state.history.push(hooks::context_message(context));
                }
            }
            session.probe(Point::RequestStarted, rid).await;
            run_clocked(session, rid, cancel, &mut c, &b).await
        }
    };
    // The request's checkpoint is recorded before its end (unless interrupted).
    Box::pin(crate::session::checkpoints::settle(session, rid, cancel)).await;
    // Its sub-agents' worktrees are gone before its end, interrupted or not.
    session.cleanups.settle().await;
    if !c.stop_hooks_ran {
        let reason = match &outcome {
            Outcome::Done { stop, .. } => Some(stop.clone()),
            Outcome::Budget(_) => Some(StopReason::MaxTurns),
            Outcome::Failed(_) => Some(StopReason::Error),
            Outcome::Interrupted => None,
        };
        if let Some(reason) = reason {
            // Told, but cannot make the request go on.
            Box::pin(hooks::stop(session, rid, reason, None, false, cancel)).await;
        }
    }
    b.save(session);
    let telemetry = c.telemetry();
    session.persist(rid).await;
    // A session without a title gets one from its first message, before the
    // request's terminal event.
    Box::pin(session.generate_title(rid)).await;
    session.probe(Point::BeforeTerminal, rid).await;
    let turnover = session.turnover.lock().await;
    let error_type = match &outcome {
        Outcome::Done { text, .. } => {
            if let Some(t) = text {
                agent.output_text(t);
            }
            None
        }
        Outcome::Failed(e) => Some(trace::error_type(e).to_owned()),
        Outcome::Budget(_) => Some("budget_exceeded".to_owned()),
        Outcome::Interrupted => Some("interrupted".to_owned()),
    };
    let ended = RunEnded {
        input_tokens: telemetry.input_tokens,
        output_tokens: telemetry.output_tokens,
        error_type,
    };
    finish(session, rid, outcome, telemetry).await;
    (turnover, ended)
}

/// Runs the agent loop under the budget's wall-time limit: at 80 % a `budget.warning`,
/// at 100 % the loop is stopped like an interrupt and the request ends as over budget.
async fn run_clocked(
    session: &Arc<Session>,
    rid: &str,
    cancel: &CancellationToken,
    c: &mut Counters,
    b: &Budget,
) -> Outcome {
    let Some(left) = b.wall_time_left() else {
        return Box::pin(agent::run(session, rid, cancel, c, b)).await;
    };
    let clock = cancel.child_token();
    let mut run = Box::pin(agent::run(session, rid, &clock, c, b));
    let stop_at = tokio::time::sleep(left);
    tokio::pin!(stop_at);
    let warn_in = b.wall_warning_in();
    let warn_at = tokio::time::sleep(warn_in.unwrap_or(left));
    tokio::pin!(warn_at);
    let mut warn_pending = warn_in.is_some();
    let mut fired = false;
    let outcome = loop {
        tokio::select! {
            o = &mut run => break o,
            _ = &mut warn_at, if warn_pending => {
                warn_pending = false;
                budget::warn(session, rid, b).await;
            }
            _ = &mut stop_at, if !fired => {
                fired = true;
                clock.cancel();
            }
        }
    };
    if fired && !cancel.is_cancelled() && matches!(outcome, Outcome::Interrupted) {
        release_waiters(session, rid).await;
        budget::warn(session, rid, b).await;
        return Outcome::Budget(b.wall_time_reached());
    }
    outcome
}

/// Emits the request's terminal event (under the turnover lock). An interrupt that
/// reached the request before this point makes it end as interrupted, whatever its
/// outcome, so the interrupt always gets its answer.
async fn finish(session: &Arc<Session>, rid: &str, outcome: Outcome, telemetry: Telemetry) {
    let interrupted = session
        .data()
        .active
        .as_ref()
        .is_some_and(|a| a.interrupt_reply.is_some());
    match &outcome {
        Outcome::Done { stop, .. } => {
            tracing::info!(stop = ?stop, turns = telemetry.turns, tool_calls = telemetry.tool_calls, elapsed_ms = telemetry.elapsed_ms, "request completed")
        }
        Outcome::Failed(e) => {
            tracing::warn!(code = %e.code, message = %e.message, "request failed")
        }
        Outcome::Budget(hit) => {
            tracing::info!(scope = ?hit.scope, limit = ?hit.limit, used = hit.used, max = hit.max, "request stopped by its budget")
        }
        Outcome::Interrupted => tracing::info!("request interrupted"),
    }
    let outcome = match outcome {
        Outcome::Failed(error) => {
            session.emitter.emit(rid, Event::Error(error)).await;
            if interrupted {
                Outcome::Interrupted
            } else {
                Outcome::Done {
                    stop: StopReason::Error,
                    text: None,
                }
            }
        }
        _ if interrupted => Outcome::Interrupted,
        other => other,
    };
    match outcome {
        Outcome::Done { stop, text } => {
            if let Some(t) = &text {
                session
                    .emitter
                    .emit(rid, Event::AssistantFinal(AssistantFinal::new(t.clone())))
                    .await;
            }
            emit_terminal(
                session,
                rid,
                None,
                Event::SessionCompleted(SessionCompleted::new(stop, telemetry).final_text(text)),
            )
            .await;
        }
        Outcome::Budget(hit) => {
            session
                .emitter
                .emit(rid, Event::Warning(budget::exceeded(&hit)))
                .await;
            emit_terminal(
                session,
                rid,
                None,
                Event::SessionCompleted(
                    SessionCompleted::new(StopReason::MaxTurns, telemetry).budget(hit),
                ),
            )
            .await;
        }
        Outcome::Interrupted | Outcome::Failed(_) => finish_interrupted(session, rid).await,
    }
}

/// Starts a compaction by hand (`context.compact`) as the session's running unit of
/// work, like a request: while it runs the session is busy (messages sent meanwhile
/// are queued behind it, settings that need an idle session are refused), it runs
/// under a child of the session's cancellation token (interrupt, close and shutdown
/// stop it), and it returns once accepted, so a host's next command is read at once. Refused with `SESSION_BUSY` while a request (or another
/// compaction) runs.
pub(crate) async fn start_compaction(
    session: &Arc<Session>,
    rid: &str,
) -> Result<(), ErrorPayload> {
    // The turnover lock is held until the task is recorded as the session's runner,
    // so the switch at its end cannot run before that.
    let _turnover = session.turnover.lock().await;
    let cancel = {
        let mut d = session.data();
        if d.state.closed {
            return Err(crate::session::closed());
        }
        if let Some(active) = &d.active {
            return Err(ErrorPayload::new(
                ErrorCode::SessionBusy,
                format!(
                    "request {} is running; compaction by hand runs while the session is idle",
                    active.id
                ),
            )
            .retryable(true)
            .with_detail("activeRequestId", active.id.clone()));
        }
        let cancel = session.cancel.child_token();
        d.active = Some(Active::new(rid, cancel.clone(), false));
        d.compacting = true;
        cancel
    };
    let task = tokio::spawn(run_compaction(session.clone(), rid.to_owned(), cancel));
    session.data().runner = Some(task);
    Ok(())
}

/// The task of a compaction by hand: compacts, saves, answers an interrupt that
/// reached it, then hands the session to the first queued request (or leaves it idle).
async fn run_compaction(session: Arc<Session>, rid: String, cancel: CancellationToken) {
    let work = std::panic::AssertUnwindSafe(compact::run(&session, &rid, "manual", &cancel));
    let outcome = match futures::FutureExt::catch_unwind(work).await {
        Ok(done) => Event::CompactionCompleted(done),
        Err(panic) => {
            let what = panic_text(panic.as_ref());
            let error = ErrorPayload::new(
                ErrorCode::RuntimeInternalError,
                format!("the compaction failed inside the runtime: {what}"),
            )
            .with_detail("panic", what);
            Event::Error(error)
        }
    };
    // Saved before the outcome is told, so a host that has it can rely on the log.
    session.persist(&rid).await;
    let _turnover = session.turnover.lock().await;
    let interrupted = session
        .data()
        .active
        .as_ref()
        .is_some_and(|a| a.interrupt_reply.is_some());
    // The last event the compaction sends is its terminal event: the outcome, or the
    // `session.interrupted` after it that answers the interrupt.
    if interrupted {
        session.emitter.emit(&rid, outcome).await;
        emit_interrupted(&session, &rid).await;
    } else {
        emit_terminal(&session, &rid, None, outcome).await;
    }
    let next = {
        let mut d = session.data();
        d.compacting = false;
        next_queued(&session, &mut d)
    };
    if let Some((q, cancel)) = next {
        let task = tokio::spawn(run_requests(session.clone(), q, cancel));
        session.data().runner = Some(task);
    }
}

/// The message a panic carried (`panic!("…")`), or empty.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Emits a request's terminal event on its stream (answering `reply_to`), marking the
/// request ended first: a host that reads the session's state once it has that event
/// sees it idle (or running the next queued request), not running the one that ended.
pub(crate) async fn emit_terminal(
    session: &Session,
    rid: &str,
    reply_to: Option<&str>,
    event: Event,
) {
    if let Some(a) = session.data().active.as_mut() {
        a.ended = true;
    }
    session.emitter.emit_reply(rid, reply_to, event).await;
}

/// Releases every waiter and emits `session.interrupted` on the request's stream.
async fn finish_interrupted(session: &Arc<Session>, rid: &str) {
    release_waiters(session, rid).await;
    emit_interrupted(session, rid).await;
}

/// Emits `session.interrupted`, the terminal event of an interrupted unit of work (a
/// request, a compaction by hand), answering the command that stopped it.
pub(crate) async fn emit_interrupted(session: &Session, rid: &str) {
    let reply = session
        .data()
        .active
        .as_ref()
        .and_then(|a| a.interrupt_reply.clone());
    let reason = if session.lease.is_lost() {
        "lease_lost"
    } else if session.cancel.is_cancelled() {
        "shutdown"
    } else {
        "user"
    };
    let event = Event::SessionInterrupted(
        SessionInterrupted::new(reason, true).interrupted_request_id(rid.to_owned()),
    );
    emit_terminal(session, rid, reply.as_deref(), event).await;
}

/// Reports the sub-agents, approvals and questions of a stopped request that did not
/// get to report their own end.
async fn release_waiters(session: &Arc<Session>, rid: &str) {
    let now = session.now();
    let (approvals, asks, sub_agents) = {
        let mut d = session.data();
        // Sub-agents of this request that did not get to report their end.
        let running: Vec<String> = d
            .ext
            .sub_agents
            .active
            .iter()
            .filter(|a| a.parent_request_id == rid)
            .map(|a| a.sub_agent_id.clone())
            .collect();
        let interrupted = || {
            Err(ErrorPayload::new(
                ErrorCode::Interrupted,
                "the parent request was interrupted",
            ))
        };
        let sub_agents: Vec<_> = running
            .iter()
            .filter_map(|id| d.ext.sub_agents.finish(id, interrupted(), now))
            .collect();
        let approvals: Vec<String> = d.approvals.drain().map(|(k, _)| k).collect();
        let asks: Vec<String> = d.asks.drain().map(|(k, _)| k).collect();
        d.plan_wait = None;
        (approvals, asks, sub_agents)
    };
    for info in sub_agents {
        let ev = SubAgentEvent::new(session.id.clone(), info.sub_agent_id.clone(), info);
        session.emitter.emit(rid, Event::SubAgentFailed(ev)).await;
    }
    // Waiters normally release themselves (they select on the token); these are
    // leftovers, reported so a host never keeps a dialog open.
    for id in approvals {
        session
            .emitter
            .emit(
                rid,
                Event::ApprovalExpired(ApprovalExpired::new(id, String::new(), "interrupted")),
            )
            .await;
    }
    for id in asks {
        session
            .emitter
            .emit(rid, Event::AskExpired(AskExpired::new(id, "interrupted")))
            .await;
    }
}

/// Ends the session's running unit of work and, unless the session is closed, makes the
/// next queued request the active one: returns it with its cancellation token (a child
/// of the session's), for the caller to run.
pub(crate) fn next_queued(
    session: &Session,
    d: &mut crate::session::Data,
) -> Option<(Queued, CancellationToken)> {
    d.active = None;
    if d.state.closed {
        return None;
    }
    let q = d.queue.pop_front()?;
    let cancel = session.cancel.child_token();
    d.active = Some(Active::new(&q.id, cancel.clone(), q.patch_preview));
    Some((q, cancel))
}
