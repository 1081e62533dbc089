//! The agent loop of one request: turn after turn, call the model through the turn
//! engine, run the tool calls it asks for through the pipeline, feed the results
//! back, until the model answers without tools (and no `Stop` hook asks it to go
//! on), a limit of the budget is reached, or the request is interrupted. Each turn is
//! framed by `turn.started` / `turn.completed`.

use std::sync::Arc;
use std::time::Instant;

use keel_envelope::budget::BudgetStatus;
use keel_envelope::events::{TurnCompleted, TurnStarted, UsageUpdated};
use keel_envelope::types::{PermissionMode, StopReason, Telemetry, TurnStopReason, Usage};
use keel_envelope::{ErrorPayload, Event};
use tokio_util::sync::CancellationToken;

use crate::pipeline::hooks;
use crate::work::budget::{self, Budget};

use crate::base::model::{FinishReason, Message, ModelRequest};
use crate::base::probe::Point;
use crate::base::prompt;
use crate::pipeline::{self, Interrupted};
use crate::session::Session;
use crate::work::turn::{self, Echo, TurnEnd};

/// How a request ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    Done {
        stop: StopReason,
        text: Option<String>,
    },
    Failed(ErrorPayload),
    Interrupted,
    /// A limit of the budget was reached.
    Budget(BudgetStatus),
}

/// The request's running figures.
#[derive(Debug)]
pub(crate) struct Counters {
    started: Instant,
    turns: u32,
    tool_calls: u32,
    usage: Usage,
    context_tokens: u64,
    context_window: u64,
    /// Set when the last turn reported the request's figures.
    pub(crate) telemetry: Option<Telemetry>,
    /// Whether the `Stop` hooks already ran (at the end of an answer).
    pub(crate) stop_hooks_ran: bool,
    /// Whether a `Stop` hook made the request go on.
    stop_hook_active: bool,
}

impl Counters {
    pub(crate) fn new() -> Self {
        Self {
            started: Instant::now(),
            turns: 0,
            tool_calls: 0,
            usage: Usage::default(),
            context_tokens: 0,
            context_window: 0,
            telemetry: None,
            stop_hooks_ran: false,
            stop_hook_active: false,
        }
    }

    /// The request's figures now.
    pub(crate) fn telemetry(&self) -> Telemetry {
        self.telemetry.unwrap_or(Telemetry::new(
            self.started.elapsed().as_millis() as u64,
            self.turns,
            self.tool_calls,
            self.usage.input_tokens,
            self.usage.output_tokens,
            self.usage.cached_input_tokens,
            self.context_tokens,
            self.context_window,
        ))
    }
}

/// One turn's figures, for `turn.completed`.
struct TurnFigures {
    index: u32,
    started: Instant,
    tool_calls: u32,
    usage: Usage,
}

/// Emits `turn.completed`; the request's last turn carries its telemetry.
async fn turn_completed(
    session: &Session,
    rid: &str,
    c: &mut Counters,
    t: &TurnFigures,
    stop_reason: TurnStopReason,
    last: bool,
) {
    let telemetry = last.then(|| {
        let tm = c.telemetry();
        c.telemetry = Some(tm);
        tm
    });
    session
        .emitter
        .emit(
            rid,
            Event::TurnCompleted(
                TurnCompleted::new(
                    t.index,
                    stop_reason,
                    t.tool_calls,
                    t.usage,
                    t.started.elapsed().as_millis() as u64,
                )
                .telemetry(telemetry),
            ),
        )
        .await;
}

/// Steered messages join the conversation at the next model call.
fn take_steered(session: &Session) {
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

fn steered(session: &Session) -> bool {
    session
        .data()
        .active
        .as_ref()
        .is_some_and(|a| !a.steer.is_empty())
}

/// Says once per session why `AGENTS.md` is left out of the prompt (a symlink out of
/// the workspace, a special or oversized file).
async fn warn_instructions(session: &Session, rid: &str, e: ErrorPayload) {
    let first = !std::mem::replace(&mut session.data().instructions_warned, true);
    if first {
        let warning = e.severity(keel_envelope::error::Severity::Warning);
        session.emitter.emit(rid, Event::Warning(warning)).await;
    }
}

/// Runs the request's turns within its budget `b`.
pub(crate) async fn run(
    session: &Arc<Session>,
    rid: &str,
    cancel: &CancellationToken,
    c: &mut Counters,
    b: &Budget,
) -> Outcome {
    let session_context = crate::pipeline::hooks::session_context(session);
    // The system prompt's first part (with `AGENTS.md`) is made once per request, and
    // again when the mode changes (e.g. a plan approved): not read from the disk on
    // every turn, nor under the session's lock.
    let mut base: Option<(PermissionMode, String)> = None;
    loop {
        if cancel.is_cancelled() {
            return Outcome::Interrupted;
        }
        take_steered(session);
        Box::pin(crate::work::compact::maybe(session, rid, cancel)).await;
        if cancel.is_cancelled() {
            return Outcome::Interrupted;
        }
        if let Some(hit) = budget::before_model_call(session, rid, b).await {
            return Outcome::Budget(hit);
        }
        let mode = session.data().state.mode.clone();
        let mut unread = None;
        if base.as_ref().is_none_or(|(m, _)| *m != mode) {
            let (text, e) = prompt::system_prompt(
                &session.workspace,
                session.services.config().system_prompt.as_deref(),
                mode.clone(),
            );
            unread = e;
            base = Some((mode, text));
        }
        let (model, mut request) = {
            let d = session.data();
            let mut system = base.as_ref().map(|(_, s)| s.clone()).unwrap_or_default();
            system.push_str(&crate::session::roots::prompt_section(&d.roots));
            system.push_str(&prompt::plan_section(d.state.plan.as_ref()));
            if let Some(block) = session.skills.prompt_block() {
                system.push('\n');
                system.push_str(block);
            }
            let request = ModelRequest {
                system,
                messages: d.state.history.clone(),
                tools: session.tool_defs(),
                max_output_tokens: None,
            };
            (d.model.clone(), request)
        };
        request.max_output_tokens = b.max_output_tokens();
        if let Some(context) = &session_context {
            request.system = format!("{}\n\n# Session context\n\n{context}", request.system);
        }
        if let Some(e) = unread {
            warn_instructions(session, rid, e).await;
        }
        let context_tokens = prompt::estimate_tokens(&request);
        c.turns += 1;
        let mut t = TurnFigures {
            index: c.turns,
            started: Instant::now(),
            tool_calls: 0,
            usage: Usage::default(),
        };
        session
            .emitter
            .emit(rid, Event::TurnStarted(TurnStarted::new(t.index)))
            .await;
        session.probe(Point::BeforeModelCall, rid).await;
        let echo = Echo {
            session,
            rid,
            deltas: true,
        };
        let out = Box::pin(turn::stream(&model, request, cancel, echo)).await;
        session.probe(Point::AfterStream, rid).await;
        t.usage = out.usage;
        t.tool_calls = out.calls.len() as u32;
        let finish = match out.end {
            TurnEnd::Interrupted => {
                // Keep what was said so far.
                if !out.text.is_empty() {
                    session.data().state.history.push(Message::Assistant {
                        text: out.text,
                        tool_calls: Vec::new(),
                    });
                }
                turn_completed(session, rid, c, &t, TurnStopReason::Interrupted, true).await;
                return Outcome::Interrupted;
            }
            TurnEnd::Failed(_) | TurnEnd::Finished(_) => {
                report_usage(session, rid, c, out.usage, context_tokens).await;
                b.record_model_call(out.usage, context_tokens, output_estimate(&out));
                budget::warn(session, rid, b).await;
                match out.end {
                    TurnEnd::Failed(e) => {
                        if !out.text.is_empty() {
                            session.data().state.history.push(Message::Assistant {
                                text: out.text,
                                tool_calls: Vec::new(),
                            });
                        }
                        turn_completed(session, rid, c, &t, TurnStopReason::Error, true).await;
                        return Outcome::Failed(e);
                    }
                    TurnEnd::Finished(f) => f,
                    TurnEnd::Interrupted => None,
                }
            }
        };
        session.data().state.history.push(Message::Assistant {
            text: out.text.clone(),
            tool_calls: out.calls.clone(),
        });
        if out.calls.is_empty() {
            let refused = finish == Some(FinishReason::Refusal);
            // A message steered in while the model answered still needs an answer.
            if steered(session) && !refused {
                turn_completed(session, rid, c, &t, TurnStopReason::EndTurn, false).await;
                continue;
            }
            let (stop, turn_stop) = match finish {
                Some(FinishReason::Refusal) => (StopReason::Refusal, TurnStopReason::Refusal),
                Some(FinishReason::MaxTokens) => (StopReason::MaxTokens, TurnStopReason::MaxTokens),
                _ => (StopReason::EndTurn, TurnStopReason::EndTurn),
            };
            // The Stop hooks may ask the model to go on after its answer (a cut one too).
            if matches!(stop, StopReason::EndTurn | StopReason::MaxTokens) {
                let active = c.stop_hook_active;
                let more = Box::pin(hooks::stop(
                    session,
                    rid,
                    stop.clone(),
                    Some(&out.text),
                    active,
                    cancel,
                ))
                .await;
                c.stop_hooks_ran = true;
                if let Some(reason) = more {
                    c.stop_hook_active = true;
                    c.stop_hooks_ran = false;
                    session
                        .data()
                        .state
                        .history
                        .push(hooks::continue_message(reason));
                    turn_completed(session, rid, c, &t, turn_stop, false).await;
                    continue;
                }
            }
            turn_completed(session, rid, c, &t, turn_stop, true).await;
            return Outcome::Done {
                stop,
                text: Some(out.text),
            };
        }
        for (i, call) in out.calls.iter().enumerate() {
            if let Some(hit) = budget::before_tool_call(session, rid, b, &call.name).await {
                budget::skip_calls(session, rid, &out.calls[i..], &hit).await;
                session.persist(rid).await;
                turn_completed(session, rid, c, &t, TurnStopReason::ToolUse, true).await;
                return Outcome::Budget(hit);
            }
            c.tool_calls += 1;
            match Box::pin(pipeline::run_call(
                session,
                rid,
                call,
                cancel,
                Default::default(),
            ))
            .await
            {
                Ok((content, is_error)) => {
                    session.data().state.history.push(Message::Tool {
                        tool_call_id: call.id.clone(),
                        name: call.name.clone(),
                        content,
                        is_error,
                    });
                }
                Err(Interrupted) => {
                    // Keep the history well-formed: every call gets a result.
                    {
                        let mut d = session.data();
                        for rest in &out.calls[i..] {
                            d.state.history.push(Message::Tool {
                                tool_call_id: rest.id.clone(),
                                name: rest.name.clone(),
                                content: "interrupted by the user before it finished".into(),
                                is_error: true,
                            });
                        }
                    }
                    turn_completed(session, rid, c, &t, TurnStopReason::Interrupted, true).await;
                    return Outcome::Interrupted;
                }
            }
        }
        b.save(session);
        session.persist(rid).await;
        // The limit that forbids the next model call makes this turn the last.
        let hit = budget::before_model_call(session, rid, b).await;
        turn_completed(session, rid, c, &t, TurnStopReason::ToolUse, hit.is_some()).await;
        if let Some(hit) = hit {
            return Outcome::Budget(hit);
        }
    }
}

/// Estimated output tokens of a model call (for providers that report no usage).
fn output_estimate(out: &turn::Turn) -> u64 {
    let args: usize = out
        .calls
        .iter()
        .map(|c| c.name.len() + c.arguments.to_string().len())
        .sum();
    ((out.text.len() + args) as u64).div_ceil(4)
}

/// `usage.updated` after every model call.
async fn report_usage(
    session: &Session,
    rid: &str,
    c: &mut Counters,
    last: Usage,
    context_tokens: u64,
) {
    c.usage.add(last);
    let (session_usage, window) = {
        let mut d = session.data();
        d.state.usage.add(last);
        (d.state.usage, d.model.context_window())
    };
    c.context_tokens = context_tokens.max(last.input_tokens);
    c.context_window = window;
    session
        .emitter
        .emit(
            rid,
            Event::UsageUpdated(UsageUpdated::new(
                last,
                c.usage,
                session_usage,
                c.context_tokens,
                window,
            )),
        )
        .await;
}
