//! The agent loop: model call → tool calls through the gate → results back to the
//! model → … → final answer. Also the kernel's own tools (plan, ask) and compaction.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use keel_envelope::events::{
    ApprovalDenied, ApprovalExpired, ApprovalGranted, ApprovalRequested, AskAnswered, AskExpired,
    AskRequested, AssistantDelta, AssistantFinal, AssistantThoughtSummary, CompactionCompleted,
    CompactionStarted, PlanApprovalRequired, PlanApproved, PlanRejected, PlanStarted, PlanUpdated,
    RequestAccepted, SessionCompleted, SessionInterrupted, SessionModeChanged, SessionRulesUpdated,
    ToolCallCompleted, ToolCallFailed, ToolCallProgress, ToolCallSkipped, ToolCallStarted,
    UsageUpdated,
};
use keel_envelope::ids::IdKind;
use keel_envelope::tools::Decision;
use keel_envelope::types::{
    ApprovalDecision, PermissionLevel, PermissionMode, Plan, PlanStatus, PlanStep, StepStatus,
    StopReason, Telemetry, Usage,
};
use keel_envelope::{ErrorCode, ErrorPayload, Event, Meta, Source};
use keel_tools::{ProgressStream, ToolContext};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::gate::{self, GateVerdict};
use crate::model::{FinishReason, Message, ModelEvent, ModelRequest, ToolCallRequest};
use crate::prompt;
use crate::session::{Active, PlanAnswer, Queued, Session};

/// How a request ended.
enum Outcome {
    Done {
        stop: StopReason,
        text: Option<String>,
    },
    Failed(ErrorPayload),
    Interrupted,
}

/// Marker: the request was interrupted.
pub(crate) struct Interrupted;

/// Runs `first`, then whatever is queued, until the queue is empty.
pub(crate) async fn run_requests(session: Arc<Session>, first: Queued, cancel: CancellationToken) {
    let mut next = Some((first, cancel, false));
    while let Some((q, cancel, from_queue)) = next.take() {
        let run = std::panic::AssertUnwindSafe(run_request(&session, &q, &cancel, from_queue));
        let turnover = match futures::FutureExt::catch_unwind(run).await {
            Ok(turnover) => turnover,
            Err(panic) => {
                // A bug must not take the session down: report it and end the request.
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let turnover = session.turnover.lock().await;
                {
                    let mut d = session.data();
                    d.approvals.clear();
                    d.asks.clear();
                    d.plan_wait = None;
                }
                session
                    .emitter
                    .emit(
                        &q.id,
                        Event::Error(
                            ErrorPayload::new(
                                ErrorCode::RuntimeInternalError,
                                format!("the request failed inside the runtime: {what}"),
                            )
                            .with_detail("panic", what.clone()),
                        ),
                    )
                    .await;
                session
                    .emitter
                    .emit(
                        &q.id,
                        Event::SessionCompleted(SessionCompleted {
                            stop_reason: StopReason::Error,
                            final_text: None,
                            telemetry: Telemetry::default(),
                        }),
                    )
                    .await;
                turnover
            }
        };
        let popped = {
            let mut d = session.data();
            d.active = None;
            if d.state.closed {
                None
            } else {
                d.queue.pop_front().map(|q| {
                    let cancel = session.cancel.child_token();
                    d.active = Some(Active {
                        id: q.id.clone(),
                        cancel: cancel.clone(),
                        interrupt_reply: None,
                        steer: Vec::new(),
                        patch_preview: q.patch_preview,
                    });
                    (q, cancel)
                })
            }
        };
        drop(turnover);
        next = popped.map(|(q, c)| (q, c, true));
    }
}

struct Counters {
    started: Instant,
    turns: u32,
    tool_calls: u32,
    usage: Usage,
}

/// Runs one request. Returns holding the session's turnover lock: the terminal
/// event is out, and the caller switches to the next request before anything else
/// (a new `request.send`, an interrupt) sees the session.
async fn run_request<'s>(
    session: &'s Arc<Session>,
    q: &Queued,
    cancel: &CancellationToken,
    from_queue: bool,
) -> tokio::sync::MutexGuard<'s, ()> {
    let rid = q.id.as_str();
    session
        .emitter
        .emit(
            rid,
            Event::RequestAccepted(RequestAccepted {
                message: q.message.clone(),
                from_queue,
            }),
        )
        .await;
    session.data().state.history.push(Message::User {
        text: q.message.clone(),
        images: q.images.clone(),
    });
    let mut c = Counters {
        started: Instant::now(),
        turns: 0,
        tool_calls: 0,
        usage: Usage::default(),
    };
    let outcome = agent_loop(session, rid, cancel, &mut c).await;
    let telemetry = Telemetry {
        elapsed_ms: c.started.elapsed().as_millis() as u64,
        turns: c.turns,
        tool_calls: c.tool_calls,
        input_tokens: c.usage.input_tokens,
        output_tokens: c.usage.output_tokens,
    };
    session.persist(rid).await;
    let turnover = session.turnover.lock().await;
    match outcome {
        Outcome::Done { stop, text } => {
            if let Some(t) = &text {
                session
                    .emitter
                    .emit(
                        rid,
                        Event::AssistantFinal(AssistantFinal { text: t.clone() }),
                    )
                    .await;
            }
            session
                .emitter
                .emit(
                    rid,
                    Event::SessionCompleted(SessionCompleted {
                        stop_reason: stop,
                        final_text: text,
                        telemetry,
                    }),
                )
                .await;
        }
        Outcome::Failed(error) => {
            session.emitter.emit(rid, Event::Error(error)).await;
            session
                .emitter
                .emit(
                    rid,
                    Event::SessionCompleted(SessionCompleted {
                        stop_reason: StopReason::Error,
                        final_text: None,
                        telemetry,
                    }),
                )
                .await;
        }
        Outcome::Interrupted => finish_interrupted(session, rid).await,
    }
    turnover
}

/// Releases every waiter and emits `session.interrupted` on the request's stream.
async fn finish_interrupted(session: &Arc<Session>, rid: &str) {
    let (approvals, asks, plan, reply) = {
        let mut d = session.data();
        let approvals: Vec<String> = d.approvals.drain().map(|(k, _)| k).collect();
        let asks: Vec<String> = d.asks.drain().map(|(k, _)| k).collect();
        let plan = d.plan_wait.take().map(|(id, _)| id);
        let reply = d.active.as_ref().and_then(|a| a.interrupt_reply.clone());
        (approvals, asks, plan, reply)
    };
    // Waiters normally release themselves (they select on the token); these are
    // leftovers, reported so a host never keeps a dialog open.
    for id in approvals {
        session
            .emitter
            .emit(
                rid,
                Event::ApprovalExpired(ApprovalExpired {
                    approval_id: id,
                    tool_call_id: String::new(),
                    reason: "interrupted".into(),
                }),
            )
            .await;
    }
    for id in asks {
        session
            .emitter
            .emit(
                rid,
                Event::AskExpired(AskExpired {
                    ask_id: id,
                    reason: "interrupted".into(),
                }),
            )
            .await;
    }
    drop(plan);
    let reason = if session.cancel.is_cancelled() {
        "shutdown"
    } else {
        "user"
    };
    session
        .emitter
        .emit_reply(
            rid,
            reply.as_deref(),
            Event::SessionInterrupted(SessionInterrupted {
                interrupted_request_id: Some(rid.to_owned()),
                reason: reason.into(),
                was_running: true,
            }),
        )
        .await;
}

async fn agent_loop(
    session: &Arc<Session>,
    rid: &str,
    cancel: &CancellationToken,
    c: &mut Counters,
) -> Outcome {
    let max_turns = session.kernel.config.max_turns.max(1);
    loop {
        if cancel.is_cancelled() {
            return Outcome::Interrupted;
        }
        if c.turns >= max_turns {
            session
                .emitter
                .emit(
                    rid,
                    Event::Warning(
                        ErrorPayload::new(
                            ErrorCode::MaxTurnsExceeded,
                            format!("the request reached its limit of {max_turns} model calls"),
                        )
                        .with_detail("maxTurns", max_turns),
                    ),
                )
                .await;
            return Outcome::Done {
                stop: StopReason::MaxTurns,
                text: None,
            };
        }
        // Steered messages join the conversation at the next model call.
        {
            let mut d = session.data();
            let steer: Vec<String> = d
                .active
                .as_mut()
                .map(|a| std::mem::take(&mut a.steer))
                .unwrap_or_default();
            for text in steer {
                d.state.history.push(Message::User {
                    text,
                    images: Vec::new(),
                });
            }
        }
        maybe_compact(session, rid, cancel).await;

        let (model, request) = {
            let d = session.data();
            let request = ModelRequest {
                system: prompt::system_prompt(session, d.state.mode),
                messages: d.state.history.clone(),
                tools: session.kernel.tool_defs.clone(),
                max_output_tokens: None,
            };
            (d.model.clone(), request)
        };
        let context_tokens = prompt::estimate_tokens(&request);
        let mut stream = model.stream(request, cancel.child_token());
        c.turns += 1;
        let mut text = String::new();
        let mut calls: Vec<ToolCallRequest> = Vec::new();
        let mut last_usage = Usage::default();
        let mut finish = None;
        let mut failure = None;
        loop {
            let item = tokio::select! {
                biased;
                _ = cancel.cancelled() => None,
                item = stream.next() => Some(item),
            };
            let Some(item) = item else {
                // Interrupted mid-stream: keep what was said so far.
                drop(stream);
                if !text.is_empty() {
                    session.data().state.history.push(Message::Assistant {
                        text,
                        tool_calls: Vec::new(),
                    });
                }
                return Outcome::Interrupted;
            };
            match item {
                None => break,
                Some(Ok(ModelEvent::TextDelta(t))) => {
                    if t.is_empty() {
                        continue;
                    }
                    text.push_str(&t);
                    session
                        .emitter
                        .emit(rid, Event::AssistantDelta(AssistantDelta { text: t }))
                        .await;
                }
                Some(Ok(ModelEvent::ThoughtDelta(t))) => {
                    if t.is_empty() {
                        continue;
                    }
                    session
                        .emitter
                        .emit(
                            rid,
                            Event::AssistantThoughtSummary(AssistantThoughtSummary { text: t }),
                        )
                        .await;
                }
                Some(Ok(ModelEvent::ToolCall(call))) => calls.push(call),
                Some(Ok(ModelEvent::Usage(u))) => last_usage = u,
                Some(Ok(ModelEvent::Retrying {
                    attempt,
                    delay_ms,
                    error,
                })) => {
                    let warning = error
                        .with_detail("attempt", attempt)
                        .with_detail("delayMs", delay_ms)
                        .severity(keel_envelope::error::Severity::Warning);
                    session.emitter.emit(rid, Event::Warning(warning)).await;
                }
                Some(Ok(ModelEvent::Finished(r))) => {
                    finish = Some(r);
                    break;
                }
                Some(Err(e)) => {
                    failure = Some(e.0);
                    break;
                }
            }
        }
        drop(stream);
        // Usage after every model call.
        c.usage.add(last_usage);
        let (session_usage, window) = {
            let mut d = session.data();
            d.state.usage.add(last_usage);
            (d.state.usage, d.model.context_window())
        };
        session
            .emitter
            .emit(
                rid,
                Event::UsageUpdated(UsageUpdated {
                    last: last_usage,
                    request: c.usage,
                    session: session_usage,
                    context_tokens: context_tokens.max(last_usage.input_tokens),
                    context_window: window,
                }),
            )
            .await;
        if let Some(e) = failure {
            if !text.is_empty() {
                session.data().state.history.push(Message::Assistant {
                    text,
                    tool_calls: Vec::new(),
                });
            }
            return Outcome::Failed(e);
        }
        // Give every call a Keel id; keep the provider's id for the history.
        session.data().state.history.push(Message::Assistant {
            text: text.clone(),
            tool_calls: calls.clone(),
        });
        if calls.is_empty() {
            // A message steered in while the model answered still needs an answer.
            let steered = session
                .data()
                .active
                .as_ref()
                .is_some_and(|a| !a.steer.is_empty());
            if steered && finish != Some(FinishReason::Refusal) {
                continue;
            }
            let stop = match finish {
                Some(FinishReason::Refusal) => StopReason::Refusal,
                _ => StopReason::EndTurn,
            };
            return Outcome::Done {
                stop,
                text: Some(text),
            };
        }
        for (i, call) in calls.iter().enumerate() {
            c.tool_calls += 1;
            let result = handle_call(session, rid, call, cancel).await;
            let (content, is_error) = match result {
                Ok(r) => r,
                Err(Interrupted) => {
                    // Keep the history well-formed: every call gets a result.
                    let mut d = session.data();
                    for rest in &calls[i..] {
                        d.state.history.push(Message::Tool {
                            tool_call_id: rest.id.clone(),
                            name: rest.name.clone(),
                            content: "interrupted by the user before it finished".into(),
                            is_error: true,
                        });
                    }
                    return Outcome::Interrupted;
                }
            };
            session.data().state.history.push(Message::Tool {
                tool_call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            });
        }
        session.persist(rid).await;
    }
}

fn refusal_text(error: &ErrorPayload) -> String {
    format!("{}: {}", error.code, error.message)
}

/// Runs one tool call through the gate. Returns the content the model sees.
pub(crate) async fn handle_call(
    session: &Arc<Session>,
    rid: &str,
    call: &ToolCallRequest,
    cancel: &CancellationToken,
) -> Result<(String, bool), Interrupted> {
    let tool_call_id = session.kernel.ctx.ids.next_id(IdKind::ToolCall);
    if let Some(raw) = call.arguments.get("__invalid_json") {
        let error = ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("the arguments of {} are not valid JSON", call.name),
        )
        .with_detail("arguments", raw.clone());
        skip(session, rid, &tool_call_id, &call.name, error.clone()).await;
        return Ok((refusal_text(&error), true));
    }
    match call.name.as_str() {
        prompt::PROPOSE_PLAN => {
            return propose_plan(session, rid, &tool_call_id, call, cancel).await
        }
        prompt::UPDATE_PLAN => return update_plan(session, rid, &tool_call_id, call).await,
        prompt::ASK_USER => return ask_user(session, rid, &tool_call_id, call, cancel).await,
        prompt::SPAWN_SUB_AGENT => {
            return crate::ext::child::spawn_sub_agent(session, rid, &tool_call_id, call, cancel)
                .await
        }
        prompt::TASK_GRAPH => {
            return Ok(crate::ext::task_graph_tool(session, rid, &tool_call_id, call).await)
        }
        _ => {}
    }
    let Some(tool) = session
        .kernel
        .tools
        .iter()
        .find(|t| t.spec().name == call.name)
        .cloned()
    else {
        let error = ErrorPayload::new(
            ErrorCode::ToolNotRegistered,
            format!("there is no tool named {:?}", call.name),
        )
        .with_detail("toolName", call.name.clone());
        skip(session, rid, &tool_call_id, &call.name, error.clone()).await;
        return Ok((refusal_text(&error), true));
    };
    let verdict = {
        let d = session.data();
        gate::decide(session, &d, tool.spec(), &call.arguments)
    };
    match verdict.decision() {
        Decision::Deny => {
            let error = verdict.deny_error(&call.name);
            skip(session, rid, &tool_call_id, &call.name, error.clone()).await;
            return Ok((refusal_text(&error), true));
        }
        Decision::Ask => {
            match request_approval(session, rid, &tool_call_id, call, &verdict, cancel).await? {
                true => {}
                false => {
                    let error = ErrorPayload::new(
                        ErrorCode::ToolPermissionDenied,
                        format!("the user did not approve {}", call.name),
                    )
                    .with_detail("toolName", call.name.clone());
                    skip(session, rid, &tool_call_id, &call.name, error.clone()).await;
                    return Ok((
                        format!(
                            "{} Do not retry the same call; ask the user or try another way.",
                            refusal_text(&error)
                        ),
                        true,
                    ));
                }
            }
        }
        Decision::Allow => {}
    }
    if crate::ext::process::is_background(call) {
        return Ok(crate::ext::process::run_background(
            session,
            rid,
            &tool_call_id,
            call,
            verdict.level(),
            verdict.elevated(),
        )
        .await);
    }
    if crate::ext::previews(session, &call.name) {
        // Patch preview: the allowed change is proposed instead of written.
        return Ok(
            crate::ext::preview_call(session, rid, &tool_call_id, call, verdict.level()).await,
        );
    }
    run_tool(session, rid, &tool_call_id, call, tool, &verdict, cancel).await
}

async fn skip(session: &Session, rid: &str, tool_call_id: &str, name: &str, error: ErrorPayload) {
    session
        .emitter
        .emit(
            rid,
            Event::ToolCallSkipped(ToolCallSkipped {
                tool_call_id: tool_call_id.to_owned(),
                tool_name: name.to_owned(),
                error,
            }),
        )
        .await;
}

async fn run_tool(
    session: &Arc<Session>,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
    tool: Arc<dyn keel_tools::Tool>,
    verdict: &GateVerdict,
    cancel: &CancellationToken,
) -> Result<(String, bool), Interrupted> {
    session
        .emitter
        .emit_with(
            rid,
            Event::ToolCallStarted(ToolCallStarted {
                tool_call_id: tool_call_id.to_owned(),
                tool_name: call.name.clone(),
                arguments: call.arguments.clone(),
                permission_level: verdict.level(),
            }),
            Source::Runtime,
            None,
        )
        .await;
    let (ptx, mut prx) = mpsc::unbounded_channel::<(ProgressStream, String)>();
    let ctx = ToolContext {
        workspace: session.workspace.clone(),
        cancel: cancel.child_token(),
        progress: Arc::new(move |stream, chunk| {
            let _ = ptx.send((stream, chunk));
        }),
        elevated: verdict.elevated(),
        sandbox: session.kernel.config.sandbox.clone(),
    };
    let started = Instant::now();
    let mut fut = tool.run(call.arguments.clone(), ctx);
    let result = loop {
        tokio::select! {
            r = &mut fut => break r,
            Some((stream, chunk)) = prx.recv() => {
                emit_progress(session, rid, tool_call_id, stream, chunk).await;
            }
        }
    };
    drop(fut);
    while let Ok((stream, chunk)) = prx.try_recv() {
        emit_progress(session, rid, tool_call_id, stream, chunk).await;
    }
    let duration_ms = started.elapsed().as_millis() as u64;
    if cancel.is_cancelled() {
        // The tool stopped because of the interrupt (its process group is gone); close
        // the call for hosts before the request's `session.interrupted`.
        session
            .emitter
            .emit(
                rid,
                Event::ToolCallFailed(ToolCallFailed {
                    tool_call_id: tool_call_id.to_owned(),
                    tool_name: call.name.clone(),
                    error: ErrorPayload::new(
                        ErrorCode::Interrupted,
                        "interrupted before it finished",
                    ),
                    duration_ms,
                }),
            )
            .await;
        return Err(Interrupted);
    }
    let meta = Some(Meta {
        duration_ms: Some(duration_ms),
        ..Meta::default()
    });
    match result {
        Ok(value) => {
            warn_unsandboxed(session, rid, &value).await;
            let content = serde_json::to_string(&value).unwrap_or_default();
            session
                .emitter
                .emit_with(
                    rid,
                    Event::ToolCallCompleted(ToolCallCompleted {
                        tool_call_id: tool_call_id.to_owned(),
                        tool_name: call.name.clone(),
                        result: value,
                        duration_ms,
                    }),
                    Source::Runtime,
                    meta,
                )
                .await;
            Ok((content, false))
        }
        Err(error) => {
            let content = refusal_text(&error);
            session
                .emitter
                .emit_with(
                    rid,
                    Event::ToolCallFailed(ToolCallFailed {
                        tool_call_id: tool_call_id.to_owned(),
                        tool_name: call.name.clone(),
                        error,
                        duration_ms,
                    }),
                    Source::Runtime,
                    meta,
                )
                .await;
            Ok((content, true))
        }
    }
}

/// Says once per session that shell commands run without the OS sandbox although
/// it is enabled (bubblewrap missing or unusable).
async fn warn_unsandboxed(session: &Session, rid: &str, result: &serde_json::Value) {
    if !session.kernel.config.sandbox.enabled
        || result.get("sandboxed") != Some(&serde_json::Value::Bool(false))
    {
        return;
    }
    let first = {
        let mut d = session.data();
        !std::mem::replace(&mut d.sandbox_warned, true)
    };
    if first {
        let reason = match keel_tools::sandbox_status() {
            keel_tools::SandboxStatus::Unavailable { reason } => reason,
            _ => "the sandbox could not be used".to_owned(),
        };
        let warning = ErrorPayload::new(
            ErrorCode::ToolExecutionFailed,
            format!("shell commands run without the OS sandbox: {reason}"),
        )
        .severity(keel_envelope::error::Severity::Warning)
        .with_detail("reason", "sandbox_unavailable");
        session.emitter.emit(rid, Event::Warning(warning)).await;
    }
}

async fn emit_progress(
    session: &Session,
    rid: &str,
    tool_call_id: &str,
    stream: ProgressStream,
    chunk: String,
) {
    session
        .emitter
        .emit_with(
            rid,
            Event::ToolCallProgress(ToolCallProgress {
                tool_call_id: tool_call_id.to_owned(),
                stream: stream.as_str().to_owned(),
                chunk,
            }),
            Source::Tool,
            None,
        )
        .await;
}

fn expires_at(session: &Session) -> (Option<Duration>, Option<u64>) {
    let t = session.kernel.config.approval_timeout;
    if t.is_zero() {
        (None, None)
    } else {
        (Some(t), Some(session.now() + t.as_millis() as u64))
    }
}

async fn sleep_opt(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Asks the host; returns whether the call may run.
async fn request_approval(
    session: &Arc<Session>,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
    verdict: &GateVerdict,
    cancel: &CancellationToken,
) -> Result<bool, Interrupted> {
    let approval_id = session.kernel.ctx.ids.next_id(IdKind::Approval);
    let (tx, rx) = oneshot::channel();
    session.data().approvals.insert(approval_id.clone(), tx);
    let (timeout, expires) = expires_at(session);
    session
        .emitter
        .emit(
            rid,
            Event::ApprovalRequested(ApprovalRequested {
                approval_id: approval_id.clone(),
                tool_call_id: tool_call_id.to_owned(),
                tool_name: call.name.clone(),
                arguments: call.arguments.clone(),
                preview: verdict.preview(),
                command: verdict.command(),
                reason: verdict.reason(),
                action_type: verdict.action_type(),
                risk_level: verdict.risk(),
                permission_level: verdict.level(),
                scope: verdict.scope(),
                decisions: ApprovalDecision::ALL.to_vec(),
                expires_at: expires,
            }),
        )
        .await;
    let mut rx = rx;
    let answer = tokio::select! {
        r = &mut rx => r.ok(),
        _ = cancel.cancelled() => {
            let removed = session.data().approvals.remove(&approval_id).is_some();
            if removed {
                // Released by the interrupt; the interrupt's one answer is
                // `session.interrupted`, so this carries no replyTo.
                session.emitter.emit(rid, Event::ApprovalExpired(ApprovalExpired {
                    approval_id: approval_id.clone(),
                    tool_call_id: tool_call_id.to_owned(),
                    reason: "interrupted".into(),
                })).await;
            }
            return Err(Interrupted);
        }
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
        session
            .emitter
            .emit(
                rid,
                Event::ApprovalExpired(ApprovalExpired {
                    approval_id,
                    tool_call_id: tool_call_id.to_owned(),
                    reason: "timeout".into(),
                }),
            )
            .await;
        return Ok(false);
    };
    if !decision.allows() {
        session
            .emitter
            .emit_reply(
                rid,
                Some(&reply_to),
                Event::ApprovalDenied(ApprovalDenied {
                    approval_id,
                    tool_call_id: tool_call_id.to_owned(),
                    reason: "user".into(),
                }),
            )
            .await;
        return Ok(false);
    }
    session
        .emitter
        .emit_reply(
            rid,
            Some(&reply_to),
            Event::ApprovalGranted(ApprovalGranted {
                approval_id,
                tool_call_id: tool_call_id.to_owned(),
                decision,
            }),
        )
        .await;
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
                Event::SessionRulesUpdated(SessionRulesUpdated {
                    rules,
                    source: "approval".into(),
                }),
            )
            .await;
    }
    Ok(true)
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlanArgs {
    #[serde(default)]
    summary: Option<String>,
    steps: Vec<PlanStepArg>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PlanStepArg {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    status: Option<StepStatus>,
}

fn parse_args<T: serde::de::DeserializeOwned>(call: &ToolCallRequest) -> Result<T, ErrorPayload> {
    serde_json::from_value(call.arguments.clone()).map_err(|e| {
        ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("bad arguments for {}: {e}", call.name),
        )
    })
}

pub(crate) async fn kernel_tool_done(
    session: &Session,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
    result: Result<serde_json::Value, ErrorPayload>,
) -> (String, bool) {
    match result {
        Ok(value) => {
            let content = value
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
                .unwrap_or_else(|| value.to_string());
            session
                .emitter
                .emit(
                    rid,
                    Event::ToolCallCompleted(ToolCallCompleted {
                        tool_call_id: tool_call_id.to_owned(),
                        tool_name: call.name.clone(),
                        result: value,
                        duration_ms: 0,
                    }),
                )
                .await;
            (content, false)
        }
        Err(error) => {
            let content = refusal_text(&error);
            session
                .emitter
                .emit(
                    rid,
                    Event::ToolCallFailed(ToolCallFailed {
                        tool_call_id: tool_call_id.to_owned(),
                        tool_name: call.name.clone(),
                        error,
                        duration_ms: 0,
                    }),
                )
                .await;
            (content, true)
        }
    }
}

pub(crate) async fn emit_kernel_tool_started(
    session: &Session,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
) {
    session
        .emitter
        .emit(
            rid,
            Event::ToolCallStarted(ToolCallStarted {
                tool_call_id: tool_call_id.to_owned(),
                tool_name: call.name.clone(),
                arguments: call.arguments.clone(),
                permission_level: PermissionLevel::Read,
            }),
        )
        .await;
}

/// `propose_plan`: records the plan; in plan mode waits for the host's decision.
async fn propose_plan(
    session: &Arc<Session>,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
    cancel: &CancellationToken,
) -> Result<(String, bool), Interrupted> {
    emit_kernel_tool_started(session, rid, tool_call_id, call).await;
    let args: PlanArgs = match parse_args::<PlanArgs>(call) {
        Ok(a) if !a.steps.is_empty() => a,
        Ok(_) => {
            let e = ErrorPayload::new(
                ErrorCode::ToolArgumentsInvalid,
                "a plan needs at least one step",
            );
            return Ok(kernel_tool_done(session, rid, tool_call_id, call, Err(e)).await);
        }
        Err(e) => return Ok(kernel_tool_done(session, rid, tool_call_id, call, Err(e)).await),
    };
    let steps: Vec<PlanStep> = args
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| PlanStep {
            id: s.id.clone().unwrap_or_else(|| format!("s{}", i + 1)),
            title: s.title.clone().unwrap_or_default(),
            status: StepStatus::Pending,
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
            None => (session.kernel.ctx.ids.next_id(IdKind::Plan), true, in_plan),
        }
    };
    let status = if in_plan_mode {
        PlanStatus::AwaitingApproval
    } else {
        PlanStatus::Approved
    };
    session.data().state.plan = Some(Plan {
        plan_id: plan_id.clone(),
        status,
        summary: args.summary.clone(),
        steps: steps.clone(),
    });
    if is_new {
        session
            .emitter
            .emit(
                rid,
                Event::PlanStarted(PlanStarted {
                    plan_id: plan_id.clone(),
                }),
            )
            .await;
    }
    session
        .emitter
        .emit(
            rid,
            Event::PlanUpdated(PlanUpdated {
                plan_id: plan_id.clone(),
                steps: steps.clone(),
            }),
        )
        .await;
    if !in_plan_mode {
        let v = serde_json::json!({"planId": plan_id, "status": "approved",
            "message": "Plan recorded. Work through it and call update_plan as steps progress."});
        return Ok(kernel_tool_done(session, rid, tool_call_id, call, Ok(v)).await);
    }
    let (tx, rx) = oneshot::channel();
    session.data().plan_wait = Some((plan_id.clone(), tx));
    session
        .emitter
        .emit(
            rid,
            Event::PlanApprovalRequired(PlanApprovalRequired {
                plan_id: plan_id.clone(),
                steps,
                summary: args.summary,
            }),
        )
        .await;
    let answer = tokio::select! {
        a = rx => a.ok(),
        _ = cancel.cancelled() => {
            session.data().plan_wait = None;
            return Err(Interrupted);
        }
    };
    let result = match answer {
        Some(PlanAnswer::Approve { mode, reply_to }) => {
            let previous = {
                let mut d = session.data();
                if let Some(p) = d.state.plan.as_mut() {
                    p.status = PlanStatus::Approved;
                }
                std::mem::replace(&mut d.state.mode, mode)
            };
            session
                .emitter
                .emit_reply(
                    rid,
                    Some(&reply_to),
                    Event::PlanApproved(PlanApproved {
                        plan_id: plan_id.clone(),
                        mode,
                    }),
                )
                .await;
            session
                .emitter
                .emit(
                    rid,
                    Event::SessionModeChanged(SessionModeChanged {
                        mode,
                        previous_mode: previous,
                    }),
                )
                .await;
            Ok(
                serde_json::json!({"planId": plan_id, "status": "approved", "mode": mode.as_str(),
                "message": format!("The plan was approved; the session is now in `{}` mode. Execute the steps in order and call update_plan to mark each step in_progress and completed.", mode.as_str())}),
            )
        }
        Some(PlanAnswer::Reject { feedback, reply_to }) => {
            if let Some(p) = session.data().state.plan.as_mut() {
                p.status = PlanStatus::Rejected;
            }
            session
                .emitter
                .emit_reply(
                    rid,
                    Some(&reply_to),
                    Event::PlanRejected(PlanRejected {
                        plan_id: plan_id.clone(),
                        feedback: feedback.clone(),
                    }),
                )
                .await;
            Ok(serde_json::json!({"planId": plan_id, "status": "rejected",
                "message": format!("The plan was rejected; the session stays in plan mode. Feedback: {}. Revise the plan and propose it again.", feedback.as_deref().unwrap_or("(none)"))}))
        }
        None => Err(ErrorPayload::new(
            ErrorCode::PlanRejected,
            "the plan decision was dropped",
        )),
    };
    Ok(kernel_tool_done(session, rid, tool_call_id, call, result).await)
}

/// `update_plan`: moves step statuses.
async fn update_plan(
    session: &Arc<Session>,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
) -> Result<(String, bool), Interrupted> {
    emit_kernel_tool_started(session, rid, tool_call_id, call).await;
    let args: PlanArgs = match parse_args::<PlanArgs>(call) {
        Ok(a) => a,
        Err(e) => return Ok(kernel_tool_done(session, rid, tool_call_id, call, Err(e)).await),
    };
    let updated = {
        let mut d = session.data();
        match d.state.plan.as_mut() {
            None => None,
            Some(plan) => {
                for (i, s) in args.steps.iter().enumerate() {
                    let id = s.id.clone().unwrap_or_else(|| format!("s{}", i + 1));
                    match plan.steps.iter_mut().find(|p| p.id == id) {
                        Some(step) => {
                            if let Some(st) = s.status {
                                step.status = st;
                            }
                            if let Some(t) = &s.title {
                                step.title = t.clone();
                            }
                        }
                        None => plan.steps.push(PlanStep {
                            id,
                            title: s.title.clone().unwrap_or_default(),
                            status: s.status.unwrap_or(StepStatus::Pending),
                        }),
                    }
                }
                Some((plan.plan_id.clone(), plan.steps.clone()))
            }
        }
    };
    let Some((plan_id, steps)) = updated else {
        let e = ErrorPayload::new(
            ErrorCode::PlanApprovalRequired,
            "there is no plan yet: call propose_plan first",
        );
        return Ok(kernel_tool_done(session, rid, tool_call_id, call, Err(e)).await);
    };
    session
        .emitter
        .emit(
            rid,
            Event::PlanUpdated(PlanUpdated {
                plan_id: plan_id.clone(),
                steps,
            }),
        )
        .await;
    let v = serde_json::json!({"planId": plan_id, "message": "Plan updated."});
    Ok(kernel_tool_done(session, rid, tool_call_id, call, Ok(v)).await)
}

#[derive(serde::Deserialize)]
struct AskArgs {
    question: String,
    #[serde(default)]
    candidates: Vec<String>,
}

/// `ask_user`: asks the host and waits for the answer.
async fn ask_user(
    session: &Arc<Session>,
    rid: &str,
    tool_call_id: &str,
    call: &ToolCallRequest,
    cancel: &CancellationToken,
) -> Result<(String, bool), Interrupted> {
    emit_kernel_tool_started(session, rid, tool_call_id, call).await;
    let args: AskArgs = match parse_args(call) {
        Ok(a) => a,
        Err(e) => return Ok(kernel_tool_done(session, rid, tool_call_id, call, Err(e)).await),
    };
    let ask_id = session.kernel.ctx.ids.next_id(IdKind::Ask);
    let (tx, rx) = oneshot::channel();
    session.data().asks.insert(ask_id.clone(), tx);
    let (timeout, expires) = expires_at(session);
    session
        .emitter
        .emit(
            rid,
            Event::AskRequested(AskRequested {
                ask_id: ask_id.clone(),
                tool_call_id: tool_call_id.to_owned(),
                question: args.question,
                candidates: args.candidates,
                expires_at: expires,
            }),
        )
        .await;
    let mut rx = rx;
    let answer = tokio::select! {
        a = &mut rx => a.ok(),
        _ = cancel.cancelled() => {
            if session.data().asks.remove(&ask_id).is_some() {
                session.emitter.emit(rid, Event::AskExpired(AskExpired {
                    ask_id: ask_id.clone(),
                    reason: "interrupted".into(),
                })).await;
            }
            return Err(Interrupted);
        }
        _ = sleep_opt(timeout) => {
            if session.data().asks.remove(&ask_id).is_some() { None } else { rx.await.ok() }
        }
    };
    let result = match answer {
        Some((text, reply_to)) => {
            session
                .emitter
                .emit_reply(
                    rid,
                    Some(&reply_to),
                    Event::AskAnswered(AskAnswered {
                        ask_id: ask_id.clone(),
                        answer: text.clone(),
                    }),
                )
                .await;
            Ok(
                serde_json::json!({"askId": ask_id, "answer": text, "message": format!("The user answered: {text}")}),
            )
        }
        None => {
            session
                .emitter
                .emit(
                    rid,
                    Event::AskExpired(AskExpired {
                        ask_id: ask_id.clone(),
                        reason: "timeout".into(),
                    }),
                )
                .await;
            Err(ErrorPayload::new(
                ErrorCode::ToolExecutionFailed,
                "the user did not answer in time",
            ))
        }
    };
    Ok(kernel_tool_done(session, rid, tool_call_id, call, result).await)
}

async fn maybe_compact(session: &Arc<Session>, rid: &str, cancel: &CancellationToken) {
    let (tokens, window) = {
        let d = session.data();
        (
            prompt::estimate_history(&d.state.history),
            d.model.context_window(),
        )
    };
    let threshold = (window as f64 * session.kernel.config.compaction_threshold) as u64;
    if window > 0 && tokens > threshold {
        compact(session, rid, "auto", cancel).await;
    }
}

/// Summarises older turns through the model; falls back to truncation on failure.
pub(crate) async fn compact(
    session: &Arc<Session>,
    rid: &str,
    trigger: &str,
    cancel: &CancellationToken,
) {
    const KEEP_LAST: usize = 4;
    let (history, model, window) = {
        let d = session.data();
        (
            d.state.history.clone(),
            d.model.clone(),
            d.model.context_window(),
        )
    };
    let tokens_before = prompt::estimate_history(&history);
    session
        .emitter
        .emit(
            rid,
            Event::CompactionStarted(CompactionStarted {
                trigger: trigger.to_owned(),
                tokens_before,
            }),
        )
        .await;
    // Cut at a user message so tool calls and their results stay together.
    let mut cut = history.len().saturating_sub(KEEP_LAST);
    while cut > 0 && !matches!(history[cut], Message::User { .. }) {
        cut -= 1;
    }
    if cut == 0 {
        session
            .emitter
            .emit(
                rid,
                Event::CompactionCompleted(CompactionCompleted {
                    tokens_before,
                    tokens_after: tokens_before,
                    messages_compacted: 0,
                    fallback: false,
                }),
            )
            .await;
        return;
    }
    let older = &history[..cut];
    let transcript = prompt::transcript(older);
    let request = ModelRequest {
        system: "Summarise the conversation below for a coding agent that will continue the work. Keep file names, decisions, open tasks and user preferences. Answer with the summary only.".into(),
        messages: vec![Message::User {
            text: transcript,
            images: Vec::new(),
        }],
        tools: Vec::new(),
        max_output_tokens: Some(2048),
    };
    let mut summary = String::new();
    let mut failed: Option<ErrorPayload> = None;
    let mut stream = model.stream(request, cancel.child_token());
    while let Some(item) = stream.next().await {
        match item {
            Ok(ModelEvent::TextDelta(t)) => summary.push_str(&t),
            Ok(ModelEvent::Finished(_)) => break,
            Ok(_) => {}
            Err(e) => {
                failed = Some(e.0);
                break;
            }
        }
    }
    drop(stream);
    let fallback = failed.is_some() || summary.trim().is_empty();
    let mut kept: Vec<Message> = history[cut..].to_vec();
    if fallback {
        let error = failed.unwrap_or_else(|| {
            ErrorPayload::new(ErrorCode::ContextCompactionFailed, "the summary was empty")
        });
        session
            .emitter
            .emit(
                rid,
                Event::Warning(
                    ErrorPayload::new(
                        ErrorCode::ContextCompactionFailed,
                        format!(
                            "compaction failed ({}); older turns were truncated instead",
                            error.message
                        ),
                    )
                    .severity(keel_envelope::error::Severity::Warning),
                ),
            )
            .await;
        // Truncation: drop older messages; if still too large, keep dropping whole
        // user turns from the front.
        let limit = (window as f64 * session.kernel.config.compaction_threshold) as u64;
        while prompt::estimate_history(&kept) > limit {
            let next_user = kept
                .iter()
                .skip(1)
                .position(|m| matches!(m, Message::User { .. }));
            match next_user {
                Some(i) => {
                    kept.drain(..=i);
                }
                None => break,
            }
        }
    } else {
        kept.insert(
            0,
            Message::User {
                text: format!("Summary of the earlier conversation:\n{summary}"),
                images: Vec::new(),
            },
        );
    }
    let tokens_after = prompt::estimate_history(&kept);
    session.data().state.history = kept;
    session
        .emitter
        .emit(
            rid,
            Event::CompactionCompleted(CompactionCompleted {
                tokens_before,
                tokens_after,
                messages_compacted: cut as u32,
                fallback,
            }),
        )
        .await;
}
