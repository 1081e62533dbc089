//! Reading a session's log when it is watched or resumed: what a host missed, the
//! prompts still waiting, the requests a previous process never finished. Pure
//! functions of the log; `session.watch` and `session.resume` use them
//! ([`crate::commands::lifecycle`]).

use keel_envelope::types::Cursor;
use keel_envelope::{Envelope, ErrorCode, ErrorPayload, Event};

/// The events of `log` after `after` (none without a cursor); a cursor that is not in
/// the log is refused.
pub(crate) fn after_cursor<'a>(
    log: &'a [Envelope],
    after: Option<&Cursor>,
) -> Result<&'a [Envelope], ErrorPayload> {
    let Some(c) = after else { return Ok(&[]) };
    let pos = log
        .iter()
        .position(|e| e.request_id == c.request_id && e.sequence == c.sequence)
        .ok_or_else(|| {
            ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!(
                    "cursor {}#{} is not in the session's log",
                    c.request_id, c.sequence
                ),
            )
            .with_detail("field", "payload.afterSequence")
        })?;
    Ok(&log[pos + 1..])
}

/// The approval, plan and question prompts of request `active` that are still waiting
/// for an answer, in log order, leaving out those in `skip`.
pub(crate) fn pending_prompts(log: &[Envelope], active: &str, skip: &[Envelope]) -> Vec<Envelope> {
    let mut open: Vec<(String, &Envelope)> = Vec::new();
    for env in log.iter().filter(|e| e.request_id == active) {
        let (opens, key) = match &env.event {
            Event::ApprovalRequested(p) => (true, format!("approval:{}", p.approval_id)),
            Event::ApprovalGranted(p) => (false, format!("approval:{}", p.approval_id)),
            Event::ApprovalDenied(p) => (false, format!("approval:{}", p.approval_id)),
            Event::ApprovalExpired(p) => (false, format!("approval:{}", p.approval_id)),
            Event::PlanApprovalRequired(p) => (true, format!("plan:{}", p.plan_id)),
            Event::PlanApproved(p) => (false, format!("plan:{}", p.plan_id)),
            Event::PlanRejected(p) => (false, format!("plan:{}", p.plan_id)),
            Event::AskRequested(p) => (true, format!("ask:{}", p.ask_id)),
            Event::AskAnswered(p) => (false, format!("ask:{}", p.ask_id)),
            Event::AskExpired(p) => (false, format!("ask:{}", p.ask_id)),
            _ => continue,
        };
        if opens {
            open.push((key, env));
        } else {
            open.retain(|(k, _)| *k != key);
        }
    }
    open.into_iter()
        .map(|(_, e)| e)
        .filter(|e| !skip.iter().any(|s| s.event_id == e.event_id))
        .cloned()
        .collect()
}

/// Requests that were accepted in `log` but never reached a terminal event.
pub(crate) fn unfinished_requests(log: &[Envelope]) -> Vec<String> {
    let mut open: Vec<String> = Vec::new();
    for env in log {
        match &env.event {
            Event::RequestAccepted(_) => open.push(env.request_id.clone()),
            Event::SessionCompleted(_)
            | Event::SessionInterrupted(_)
            | Event::RequestCancelled(_) => {
                open.retain(|r| r != &env.request_id);
            }
            _ => {}
        }
    }
    open
}

/// The cursor of the last event of `log`.
pub(crate) fn last_cursor(log: &[Envelope]) -> Option<Cursor> {
    log.last()
        .map(|e| Cursor::new(e.request_id.clone(), e.sequence))
}
