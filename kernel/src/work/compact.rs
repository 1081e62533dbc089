//! Compaction: older turns are summarised through the model (one call of the turn
//! engine) and replaced by the summary; on failure they are truncated instead.
//!
//! Automatic compaction runs inside a request, before a model call. Compaction by hand
//! (`context.compact`) runs as the session's unit of work, like a request
//! ([`crate::work::request::start_compaction`]).

use std::sync::Arc;

use keel_envelope::events::{CompactionCompleted, CompactionStarted};
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use tokio_util::sync::CancellationToken;

use crate::base::model::{Message, ModelRequest};
use crate::base::probe::Point;
use crate::base::prompt;
use crate::session::Session;
use crate::work::turn::{self, Echo, TurnEnd};

/// Messages kept verbatim at the end of the history.
const KEEP_LAST: usize = 4;

const SUMMARY_PROMPT: &str = "Summarise the conversation below for a coding agent that will continue the work. Keep file names, decisions, open tasks and user preferences. Answer with the summary only.";

/// Compacts when the history passes the configured share of the context window.
pub(crate) async fn maybe(session: &Arc<Session>, rid: &str, cancel: &CancellationToken) {
    let (tokens, window) = {
        let d = session.data();
        (d.state.history.estimated_tokens(), d.model.context_window())
    };
    let threshold = (window as f64 * session.services.config().compaction_threshold) as u64;
    if window > 0 && tokens > threshold {
        let done = run(session, rid, "auto", cancel).await;
        session
            .emitter
            .emit(rid, Event::CompactionCompleted(done))
            .await;
    }
}

/// Summarises older turns through the model; falls back to truncation on failure.
/// An interrupt stops it and leaves the history as it was. Returns the
/// `context.compaction.completed` for the caller to emit.
pub(crate) async fn run(
    session: &Arc<Session>,
    rid: &str,
    trigger: &str,
    cancel: &CancellationToken,
) -> CompactionCompleted {
    let (history, model, window) = {
        let d = session.data();
        (
            d.state.history.clone(),
            d.model.clone(),
            d.model.context_window(),
        )
    };
    let tokens_before = history.estimated_tokens();
    session
        .emitter
        .emit(
            rid,
            Event::CompactionStarted(CompactionStarted::new(trigger.to_owned(), tokens_before)),
        )
        .await;
    session.probe(Point::Compaction, rid).await;
    // Cut at a user message so tool calls and their results stay together.
    let mut cut = history.len().saturating_sub(KEEP_LAST);
    while cut > 0 && !matches!(history[cut], Message::User { .. }) {
        cut -= 1;
    }
    let done = |after: u64, compacted: usize, fallback: bool| {
        CompactionCompleted::new(tokens_before, after, compacted as u32, fallback)
    };
    if cut == 0 {
        return done(tokens_before, 0, false);
    }
    let request = ModelRequest {
        system: SUMMARY_PROMPT.into(),
        messages: vec![Message::User {
            text: prompt::transcript(&history[..cut]),
            images: Vec::new(),
        }]
        .into(),
        tools: Vec::new().into(),
        max_output_tokens: Some(crate::work::budget::short_answer_cap(session)),
    };
    let echo = Echo {
        session,
        rid,
        deltas: false,
    };
    let out = turn::stream(&model, request, cancel, echo).await;
    let failed = match out.end {
        TurnEnd::Interrupted => return done(tokens_before, 0, false),
        TurnEnd::Failed(e) => Some(e),
        TurnEnd::Finished(_) => None,
    };
    let summary = out.text;
    let fallback = failed.is_some() || summary.trim().is_empty();
    // The kept messages keep their ids (and so any encoding cached for them).
    let mut kept = history.slice(cut..);
    if fallback {
        let error = failed.unwrap_or_else(|| {
            ErrorPayload::new(ErrorCode::ContextCompactionFailed, "the summary was empty")
        });
        let warning = ErrorPayload::new(
            ErrorCode::ContextCompactionFailed,
            format!(
                "compaction failed ({}); older turns were truncated instead",
                error.message
            ),
        )
        .severity(keel_envelope::error::Severity::Warning);
        session.emitter.emit(rid, Event::Warning(warning)).await;
        // Truncation: drop older messages; if still too large, keep dropping whole
        // user turns from the front.
        let limit = (window as f64 * session.services.config().compaction_threshold) as u64;
        while kept.estimated_tokens() > limit {
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
    let tokens_after = kept.estimated_tokens();
    {
        // Messages added while the summary was written (none: a request's own
        // compaction runs between its model calls, and a compaction by hand keeps the
        // session busy) would stay after the kept ones.
        let mut d = session.data();
        let from = history.len().min(d.state.history.len());
        let added = d.state.history.drain(from..);
        kept.extend(added);
        d.state.history = kept;
    }
    done(tokens_after, cut, fallback)
}
