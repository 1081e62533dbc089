//! The hook points: where a session's hooks ([`crate::base::hooks`]) run and what
//! their answers change — `SessionStart` when a session starts or is resumed (in the
//! background; the first request waits for it), `UserPromptSubmit` and `Stop` in a
//! request's life ([`crate::work::request`], [`crate::work::agent`]), `PreToolUse`
//! between decode and gate and `PostToolUse` after a call ([`crate::pipeline`]). A
//! hook's failure or timeout is a `warning` (`HOOK_FAILED`) and changes nothing.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use keel_envelope::error::Severity;
use keel_envelope::types::StopReason;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use tokio_util::sync::CancellationToken;

use crate::base::hooks::{
    HookError, HookEvent, HookFailure, HookInput, Hooks, PromptVerdict, StopVerdict, ToolVerdict,
    CONTEXT_KEY,
};
use crate::base::model::{Message, ToolCallRequest};
use crate::session::Session;

/// The input of a hook at `event` in `session`.
fn input(
    session: &Session,
    event: HookEvent,
    rid: Option<&str>,
    cancel: &CancellationToken,
) -> HookInput {
    HookInput {
        hook_event_name: event,
        session_id: session.id.clone(),
        request_id: rid.map(str::to_owned),
        cwd: session.workspace.display().to_string(),
        permission_mode: session.data().state.mode.clone(),
        tool_name: None,
        tool_input: None,
        tool_response: None,
        tool_error: None,
        prompt: None,
        stop_reason: None,
        final_text: None,
        stop_hook_active: None,
        source: None,
        cancel: cancel.clone(),
    }
}

fn hooks_for(session: &Session, event: HookEvent, tool: Option<&str>) -> Vec<Arc<dyn Hooks>> {
    session
        .services
        .hooks()
        .iter()
        .filter(|h| h.applies(event, tool))
        .cloned()
        .collect()
}

/// Runs one hook's answer future under its time limit and the cancellation; a failure
/// becomes a `warning` on `rid` and `None`.
async fn answer<T>(
    session: &Session,
    rid: &str,
    event: HookEvent,
    hook: &dyn Hooks,
    cancel: &CancellationToken,
    fut: BoxFuture<'_, Result<T, HookError>>,
) -> Option<T> {
    let limit = hook
        .timeout()
        .unwrap_or(session.services.config().hooks.timeout);
    // A command hook kills itself at its limit; this guard is for the others.
    let guard = limit + Duration::from_secs(2);
    // The run is a hook span under the span of what it is about (the request, the
    // tool call).
    let run = session
        .services
        .telemetry()
        .hook_run(keel_telemetry::HookStart {
            point: event.as_str(),
            tool: None,
            parent: keel_telemetry::Parent::Current,
        });
    let timed =
        tracing::Instrument::instrument(tokio::time::timeout(guard, fut), run.span().clone());
    let result = tokio::select! {
        biased;
        _ = cancel.cancelled() => {
            run.finish("cancelled", None);
            return None;
        }
        r = timed => r,
    };
    let error = match result {
        Ok(Ok(v)) => {
            run.finish("ok", None);
            return Some(v);
        }
        Ok(Err(e)) => e,
        Err(_) => HookError {
            reason: HookFailure::Timeout,
            message: format!("did not answer within {} s", limit.as_secs_f64()),
            exit_code: None,
            stderr: None,
        },
    };
    let outcome = if error.reason == HookFailure::Timeout {
        "timeout"
    } else {
        "error"
    };
    run.finish(outcome, error.exit_code);
    if cancel.is_cancelled() {
        return None;
    }
    let mut w = ErrorPayload::new(
        ErrorCode::HookFailed,
        format!(
            "the {} hook `{}` {}; its answer was ignored",
            event.as_str(),
            hook.name(),
            error.message
        ),
    )
    .severity(Severity::Warning)
    .with_detail("hook", event.as_str())
    .with_detail("command", hook.name())
    .with_detail("reason", error.reason.as_str());
    if let Some(code) = error.exit_code {
        w = w.with_detail("exitCode", code);
    }
    if let Some(stderr) = error.stderr.filter(|s| !s.is_empty()) {
        w = w.with_detail("stderr", stderr);
    }
    session.emitter.emit(rid, Event::Warning(w)).await;
    None
}

fn join(parts: Vec<String>) -> Option<String> {
    let parts: Vec<String> = parts
        .into_iter()
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

/// `SessionStart`: runs the hooks in the background, so that `session.start` (and the
/// commands after it) are answered at once; the session's first request waits for
/// them ([`wait_session_start`]). Warnings go on `rid`, after `session.started`.
pub(crate) fn spawn_session_start(session: &Arc<Session>, rid: &str, source: &'static str) {
    if hooks_for(session, HookEvent::SessionStart, None).is_empty() {
        return;
    }
    let (tx, rx) = tokio::sync::watch::channel(false);
    session
        .services
        .starting()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(session.id.clone(), rx);
    let (session, rid) = (session.clone(), rid.to_owned());
    tokio::spawn(async move {
        session_start(&session, &rid, source).await;
        session
            .services
            .starting()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&session.id);
        let _ = tx.send(true);
    });
}

/// Waits until the session's `SessionStart` hooks are done (or `cancel` fires).
pub(crate) async fn wait_session_start(session: &Session, cancel: &CancellationToken) {
    let rx = session
        .services
        .starting()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&session.id)
        .cloned();
    if let Some(mut rx) = rx {
        tokio::select! {
            _ = rx.wait_for(|done| *done) => {}
            _ = cancel.cancelled() => {}
        }
    }
}

/// Runs the `SessionStart` hooks and keeps their context for the system prompt
/// (replacing an earlier one).
async fn session_start(session: &Session, rid: &str, source: &str) {
    let hooks = hooks_for(session, HookEvent::SessionStart, None);
    if hooks.is_empty() {
        return;
    }
    let mut i = input(session, HookEvent::SessionStart, None, &session.cancel);
    i.source = Some(source.to_owned());
    let mut parts = Vec::new();
    for h in &hooks {
        let fut = h.session_start(&i);
        let cancel = &session.cancel;
        if let Some(Some(c)) =
            answer(session, rid, HookEvent::SessionStart, &**h, cancel, fut).await
        {
            parts.push(c);
        }
    }
    let mut d = session.data();
    match join(parts) {
        Some(c) => {
            d.state
                .extensions
                .insert(CONTEXT_KEY.to_owned(), serde_json::Value::String(c));
        }
        None => {
            d.state.extensions.remove(CONTEXT_KEY);
        }
    }
}

/// The `SessionStart` context for the system prompt.
pub(crate) fn session_context(session: &Session) -> Option<String> {
    session
        .data()
        .state
        .extensions
        .get(CONTEXT_KEY)
        .and_then(|v| v.as_str())
        .map(str::to_owned)
}

/// `UserPromptSubmit`: the context to add after the prompt, or the `PROMPT_BLOCKED`
/// error that ends the request.
pub(crate) async fn user_prompt_submit(
    session: &Session,
    rid: &str,
    prompt: &str,
    cancel: &CancellationToken,
) -> Result<Option<String>, ErrorPayload> {
    let hooks = hooks_for(session, HookEvent::UserPromptSubmit, None);
    if hooks.is_empty() {
        return Ok(None);
    }
    // A hook may change files: the request's checkpoint comes first.
    crate::session::checkpoints::settle(session, rid, cancel).await;
    let mut i = input(session, HookEvent::UserPromptSubmit, Some(rid), cancel);
    i.prompt = Some(prompt.to_owned());
    let mut parts = Vec::new();
    for h in &hooks {
        let fut = h.user_prompt_submit(&i);
        match answer(session, rid, HookEvent::UserPromptSubmit, &**h, cancel, fut).await {
            Some(PromptVerdict::Block { reason }) => {
                return Err(ErrorPayload::new(
                    ErrorCode::PromptBlocked,
                    format!("a hook blocked the prompt: {reason}"),
                )
                .with_detail("hook", HookEvent::UserPromptSubmit.as_str())
                .with_detail("command", h.name())
                .with_detail("reason", reason));
            }
            Some(PromptVerdict::Continue { context: Some(c) }) => parts.push(c),
            _ => {}
        }
    }
    Ok(join(parts))
}

/// The history message that carries a `UserPromptSubmit` hook's context.
pub(crate) fn context_message(context: String) -> Message {
    Message::User {
        text: format!("Context from a UserPromptSubmit hook:\n{context}"),
        images: Vec::new(),
    }
}

/// What the `PreToolUse` hooks decided.
#[derive(Debug)]
pub(crate) enum PreTool {
    /// No objection, arguments unchanged.
    Continue,
    /// Run with these arguments (to be decoded and gated again).
    Rewrite(ToolCallRequest),
    /// Refused: `tool.call.skipped` with this error, and this text for the model.
    Deny(ErrorPayload, String),
}

/// `PreToolUse`.
/// `workspace`: the folder the call works in (the hooks' `cwd`).
pub(crate) async fn pre_tool_use(
    session: &Session,
    rid: &str,
    call: &ToolCallRequest,
    workspace: &Path,
    cancel: &CancellationToken,
) -> PreTool {
    let hooks = hooks_for(session, HookEvent::PreToolUse, Some(&call.name));
    if hooks.is_empty() {
        return PreTool::Continue;
    }
    let mut i = input(session, HookEvent::PreToolUse, Some(rid), cancel);
    i.cwd = workspace.display().to_string();
    i.tool_name = Some(call.name.clone());
    let mut arguments = call.arguments.clone();
    let mut rewritten = false;
    for h in &hooks {
        i.tool_input = Some(arguments.clone());
        let fut = h.pre_tool_use(&i);
        match answer(session, rid, HookEvent::PreToolUse, &**h, cancel, fut).await {
            Some(ToolVerdict::Deny { reason }) => {
                let error = ErrorPayload::new(
                    ErrorCode::ToolPermissionDenied,
                    format!("a hook denied {}: {reason}", call.name),
                )
                .with_detail("toolName", call.name.clone())
                .with_detail("hook", HookEvent::PreToolUse.as_str())
                .with_detail("command", h.name())
                .with_detail("reason", reason);
                let text = format!(
                    "{}: {} Do not retry the same call; ask the user or try another way.",
                    error.code, error.message
                );
                return PreTool::Deny(error, text);
            }
            Some(ToolVerdict::Rewrite { arguments: a }) => {
                arguments = a;
                rewritten = true;
            }
            _ => {}
        }
    }
    if !rewritten || arguments == call.arguments {
        return PreTool::Continue;
    }
    PreTool::Rewrite(ToolCallRequest {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments,
    })
}

/// `PostToolUse`: the content the model reads, with the hooks' notes added.
pub(crate) async fn post_tool_use(
    session: &Session,
    rid: &str,
    call: &ToolCallRequest,
    workspace: &Path,
    content: (String, bool),
    cancel: &CancellationToken,
) -> (String, bool) {
    let hooks = hooks_for(session, HookEvent::PostToolUse, Some(&call.name));
    if hooks.is_empty() || cancel.is_cancelled() {
        return content;
    }
    let (text, is_error) = content;
    let mut i = input(session, HookEvent::PostToolUse, Some(rid), cancel);
    i.cwd = workspace.display().to_string();
    i.tool_name = Some(call.name.clone());
    i.tool_input = Some(call.arguments.clone());
    i.tool_response = Some(
        serde_json::from_str(&text).unwrap_or_else(|_| serde_json::Value::String(text.clone())),
    );
    i.tool_error = Some(is_error);
    let mut notes = Vec::new();
    for h in &hooks {
        let fut = h.post_tool_use(&i);
        if let Some(Some(n)) = answer(session, rid, HookEvent::PostToolUse, &**h, cancel, fut).await
        {
            notes.push(n);
        }
    }
    match join(notes) {
        Some(n) => (
            format!("{text}\n\nNote from a PostToolUse hook: {n}"),
            is_error,
        ),
        None => (text, is_error),
    }
}

/// `Stop`: the reason to go on, when a hook asks and the request may (`may_continue`:
/// the model finished its answer).
pub(crate) async fn stop(
    session: &Session,
    rid: &str,
    reason: StopReason,
    final_text: Option<&str>,
    stop_hook_active: bool,
    cancel: &CancellationToken,
) -> Option<String> {
    let hooks = hooks_for(session, HookEvent::Stop, None);
    if hooks.is_empty() || cancel.is_cancelled() {
        return None;
    }
    let mut i = input(session, HookEvent::Stop, Some(rid), cancel);
    i.stop_reason = Some(reason.clone());
    i.final_text = final_text.map(str::to_owned);
    i.stop_hook_active = Some(stop_hook_active);
    let mut reasons = Vec::new();
    for h in &hooks {
        let fut = h.stop(&i);
        if let Some(StopVerdict::Continue { reason }) =
            answer(session, rid, HookEvent::Stop, &**h, cancel, fut).await
        {
            reasons.push(reason);
        }
    }
    join(reasons).filter(|_| matches!(reason, StopReason::EndTurn | StopReason::MaxTokens))
}

/// The history message that carries a `Stop` hook's request to go on.
pub(crate) fn continue_message(reason: String) -> Message {
    Message::User {
        text: format!("A Stop hook asks you to continue: {reason}"),
        images: Vec::new(),
    }
}
