//! `request.side`: a question answered from the conversation so far, through the turn
//! engine, with no tools, on its own stream (`side.answered`, or `error`). It runs
//! beside a running request, reads a copy of the history and changes nothing: the
//! question and its answer never enter the history.

use std::sync::Arc;

use keel_envelope::events::SideAnswered;
use keel_envelope::{ErrorCode, ErrorPayload, Event};

use crate::base::model::{History, Message, ModelRequest};
use crate::session::Session;
use crate::work::turn::{self, Echo, TurnEnd};

const SIDE_PROMPT: &str = "You answer a side question about the conversation below, while the work in it may still be going on. You cannot use tools. Answer briefly from what the conversation shows; say so when it does not tell.";

/// The history without a trailing model turn whose tool calls have no results yet (a
/// request is running): providers refuse such a history.
fn settled(mut history: History) -> History {
    let Some(pos) = history.iter().rposition(
        |m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()),
    ) else {
        return history;
    };
    let answered = history[pos + 1..]
        .iter()
        .filter(|m| matches!(m, Message::Tool { .. }))
        .count();
    if let Message::Assistant { tool_calls, .. } = &history[pos] {
        if answered < tool_calls.len() {
            history.truncate(pos);
        }
    }
    history
}

/// Starts answering `message` on stream `rid`; returns at once.
pub(crate) fn spawn(session: &Arc<Session>, rid: &str, message: &str) -> Result<(), ErrorPayload> {
    if message.trim().is_empty() {
        return Err(
            ErrorPayload::new(ErrorCode::RequestInvalid, "the question is empty")
                .with_detail("field", "payload.message"),
        );
    }
    let (model, mut messages) = {
        let d = session.data();
        if d.state.closed {
            return Err(crate::session::closed());
        }
        (d.model.clone(), settled(d.state.history.clone()))
    };
    messages.push(Message::User {
        text: message.to_owned(),
        images: Vec::new(),
    });
    let session = session.clone();
    let rid = rid.to_owned();
    let cancel = session.cancel.child_token();
    // Counted while it runs, so an idle sweep leaves the session in memory.
    session
        .sides
        .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    tokio::spawn(async move {
        let request = ModelRequest {
            system: SIDE_PROMPT.into(),
            messages,
            tools: Vec::new().into(),
            max_output_tokens: Some(crate::work::budget::short_answer_cap(&session)),
        };
        let echo = Echo {
            session: &session,
            rid: &rid,
            deltas: false,
        };
        let out = turn::stream(&model, request, &cancel, echo).await;
        let event = match out.end {
            TurnEnd::Finished(_) => Event::SideAnswered(SideAnswered::new(out.text)),
            TurnEnd::Failed(e) => Event::Error(e),
            TurnEnd::Interrupted => Event::Error(ErrorPayload::new(
                ErrorCode::Interrupted,
                "the session closed before the side question was answered",
            )),
        };
        session.emitter.emit(&rid, event).await;
        session
            .sides
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::model::ToolCallRequest;

    fn call(id: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: id.into(),
            name: "read_file".into(),
            arguments: serde_json::json!({}),
        }
    }

    #[test]
    fn a_turn_waiting_for_tool_results_is_left_out() {
        let user = Message::User {
            text: "hi".into(),
            images: Vec::new(),
        };
        let asking = Message::Assistant {
            text: String::new(),
            tool_calls: vec![call("a"), call("b")],
        };
        let result = |id: &str| Message::Tool {
            tool_call_id: id.into(),
            name: "read_file".into(),
            content: "x".into(),
            is_error: false,
        };
        let partial = vec![user.clone(), asking.clone(), result("a")];
        assert_eq!(settled(partial.into()), vec![user.clone()]);
        let full = vec![user.clone(), asking, result("a"), result("b")];
        assert_eq!(settled(full.clone().into()), full);
        assert_eq!(settled(vec![user.clone()].into()), vec![user]);
    }
}
