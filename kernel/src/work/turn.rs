//! The turn engine: one model call streamed to its end, collecting the text, the tool
//! calls, the usage and how it finished. The main loop, sub-agents and compaction all
//! call the model through [`stream`]; only what they echo to the host differs.

use std::sync::Arc;

use futures::StreamExt;
use keel_envelope::events::{AssistantDelta, AssistantThoughtSummary};
use keel_envelope::types::Usage;
use keel_envelope::{ErrorPayload, Event};
use tokio_util::sync::CancellationToken;

use crate::base::model::{FinishReason, Message, Model, ModelEvent, ModelRequest, ToolCallRequest};
use crate::base::probe::Point;
use crate::base::trace;
use crate::session::Session;

/// How a model call ended.
#[derive(Debug)]
pub(crate) enum TurnEnd {
    /// The stream ended (`Finished`, or simply ran out).
    Finished(Option<FinishReason>),
    /// The call failed.
    Failed(ErrorPayload),
    /// The request's token fired.
    Interrupted,
}

/// What one model call produced.
#[derive(Debug)]
pub(crate) struct Turn {
    pub(crate) text: String,
    pub(crate) calls: Vec<ToolCallRequest>,
    pub(crate) usage: Usage,
    pub(crate) end: TurnEnd,
}

/// What the host sees of a turn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Echo<'a> {
    pub(crate) session: &'a Session,
    /// The stream that carries the turn's events.
    pub(crate) rid: &'a str,
    /// Whether text and thought deltas are emitted (the main loop) or only collected
    /// (sub-agents, compaction). Retry warnings are always emitted.
    pub(crate) deltas: bool,
}

/// Streams one model call to its end.
pub(crate) async fn stream(
    model: &Arc<dyn Model>,
    request: ModelRequest,
    cancel: &CancellationToken,
    echo: Echo<'_>,
) -> Turn {
    let mut turn = Turn {
        text: String::new(),
        calls: Vec::new(),
        usage: Usage::default(),
        end: TurnEnd::Finished(None),
    };
    if cancel.is_cancelled() {
        turn.end = TurnEnd::Interrupted;
        return turn;
    }
    let id = model.id();
    let (provider, model_name) = trace::provider_model(&id);
    // The call's `chat` span, under the span of the work that makes it (a request, a
    // sub-agent, a compaction).
    let mut chat = echo
        .session
        .services
        .telemetry()
        .chat(keel_telemetry::ChatStart {
            provider,
            model: model_name,
            max_tokens: request.max_output_tokens,
            session_id: Some(&echo.session.id),
            parent: keel_telemetry::Parent::Current,
        });
    chat.system_instructions(|| trace::system_json(&request.system));
    chat.input_messages(|| trace::messages_json(request.messages.as_slice()));
    let mut stream = model.stream(request, cancel.child_token());
    let mut first = true;
    loop {
        let item = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                turn.end = TurnEnd::Interrupted;
                break;
            }
            item = stream.next() => item,
        };
        if std::mem::take(&mut first) {
            echo.session.probe(Point::MidStream, echo.rid).await;
        }
        if matches!(
            item,
            Some(Ok(ModelEvent::TextDelta(_)
                | ModelEvent::ThoughtDelta(_)
                | ModelEvent::ToolCall(_)))
        ) {
            chat.first_chunk();
        }
        match item {
            None => break,
            Some(Ok(ModelEvent::TextDelta(t))) => {
                if t.is_empty() {
                    continue;
                }
                turn.text.push_str(&t);
                if echo.deltas {
                    echo.session
                        .emitter
                        .emit(echo.rid, Event::AssistantDelta(AssistantDelta::new(t)))
                        .await;
                }
            }
            Some(Ok(ModelEvent::ThoughtDelta(t))) => {
                if t.is_empty() || !echo.deltas {
                    continue;
                }
                echo.session
                    .emitter
                    .emit(
                        echo.rid,
                        Event::AssistantThoughtSummary(AssistantThoughtSummary::new(t)),
                    )
                    .await;
            }
            Some(Ok(ModelEvent::ToolCall(call))) => turn.calls.push(call),
            Some(Ok(ModelEvent::Usage(u))) => turn.usage = u,
            Some(Ok(ModelEvent::Retrying {
                attempt,
                delay_ms,
                error,
            })) => {
                let warning = error
                    .with_detail("attempt", attempt)
                    .with_detail("delayMs", delay_ms)
                    .severity(keel_envelope::error::Severity::Warning);
                echo.session
                    .emitter
                    .emit(echo.rid, Event::Warning(warning))
                    .await;
            }
            Some(Ok(ModelEvent::Finished(r))) => {
                turn.end = TurnEnd::Finished(Some(r));
                break;
            }
            Some(Err(e)) => {
                turn.end = TurnEnd::Failed(e.0);
                break;
            }
        }
    }
    drop(stream);
    // An interrupt that arrived while the last item was handled still wins.
    if cancel.is_cancelled() {
        turn.end = TurnEnd::Interrupted;
    }
    finish_chat(chat, &turn);
    turn
}

/// Records the end of a model call on its span.
fn finish_chat(chat: keel_telemetry::ChatCall, turn: &Turn) {
    chat.output_messages(|| {
        trace::messages_json(&[Message::Assistant {
            text: turn.text.clone(),
            tool_calls: turn.calls.clone(),
        }])
    });
    let (finish_reason, error_type) = match &turn.end {
        TurnEnd::Finished(r) => (r.map(trace::finish_reason), None),
        TurnEnd::Failed(e) => (None, Some(trace::error_type(e))),
        TurnEnd::Interrupted => (None, Some("interrupted")),
    };
    let reported = turn.usage != Usage::default();
    chat.finish(keel_telemetry::ChatEnd {
        response_model: None,
        finish_reason,
        input_tokens: reported.then_some(turn.usage.input_tokens),
        output_tokens: reported.then_some(turn.usage.output_tokens),
        cached_input_tokens: (turn.usage.cached_input_tokens > 0)
            .then_some(turn.usage.cached_input_tokens),
        error_type,
    });
}
