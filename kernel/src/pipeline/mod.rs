//! The tool-call pipeline. Every call of every entry of the registry goes through the
//! same steps, in this order:
//!
//! 1. decode: the arguments are JSON, the tool exists (and is in the caller's scope),
//!    and the arguments fit the entry's typed shape — else `tool.call.skipped`; then
//!    the `PreToolUse` hooks, which may deny the call or rewrite its arguments (decoded
//!    again, and gated below like any others: a hook is no way around the gate);
//! 2. gate: the entry's row of the permission table decides allow / ask / deny —
//!    deny is `tool.call.skipped`;
//! 3. approval wait, when the gate asks — a denial or timeout is `tool.call.skipped`;
//! 4. checkpoint: when the verdict's level is above read (or the call spawns a
//!    sub-agent), the workspace is checkpointed ([`crate::session::checkpoints`]) so a rewind can
//!    put it back as it was just before the call; the request's own checkpoint,
//!    taken beside its first model call, is waited for first;
//! 5. run: `tool.call.started` with the verdict's level, the entry's handler (or the
//!    stage that takes the call over) with its own child cancellation token, streamed
//!    `tool.call.progress`, then `tool.call.completed` or `tool.call.failed` with the
//!    real duration;
//! 6. the `PostToolUse` hooks may add a note; the result goes back to the caller,
//!    which puts it into the history.
//!
//! An interrupt always lands: once the request's token fires, a handler gets a short
//! grace period to stop by itself (killing its processes), and is then dropped, which
//! kills whatever it still holds. The call ends with `tool.call.failed` INTERRUPTED
//! and the caller with [`Interrupted`].

pub(crate) mod approval;
pub mod gate;
pub(crate) mod hooks;
pub(crate) mod host_tools;
pub(crate) mod kernel_tools;
pub(crate) mod patch_preview;
pub(crate) mod skills;
pub(crate) mod task_graph;

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_envelope::events::{
    ToolCallCompleted, ToolCallFailed, ToolCallProgress, ToolCallSkipped, ToolCallStarted,
};
use keel_envelope::ids::IdKind;
use keel_envelope::tools::Decision;
use keel_envelope::types::PermissionMode;
use keel_envelope::{ErrorCode, ErrorPayload, Event, Meta, Source};
use keel_telemetry::ToolOutcome;
use keel_tools::{ProgressStream, ToolContext};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::base::model::ToolCallRequest;
use crate::base::probe::Point;
use crate::base::trace;
use crate::pipeline::hooks::PreTool;
use crate::session::registry::{Args, CallCx, CallScope, Entry, Handler, Origin};
use crate::session::Session;

/// Marker: the request was interrupted.
#[derive(Debug)]
pub(crate) struct Interrupted;

/// How long a cancelled handler may take to stop by itself before it is dropped.
const GRACE: Duration = Duration::from_millis(25);

/// The content the model sees for a call, and whether it is an error.
pub(crate) type CallContent = (String, bool);

fn refusal_text(error: &ErrorPayload) -> String {
    format!("{}: {}", error.code, error.message)
}

/// How a call ended, for its `execute_tool` span.
#[derive(Debug)]
struct Told {
    outcome: ToolOutcome,
    error: Option<String>,
}

impl Told {
    fn set(&mut self, outcome: ToolOutcome, error: &ErrorPayload) {
        self.outcome = outcome;
        self.error = Some(trace::error_type(error).to_owned());
    }
}

/// Runs one tool call through the pipeline. `scope` limits the tools (a sub-agent's
/// subset; `None` allows every entry) and may give the call a folder of its own to
/// work in (a sub-agent in its own worktree: the gate, the jail, shell commands and
/// hooks see that folder; no stage takes the call over and the session's workspace
/// is not checkpointed, since the call cannot change it). The call is one
/// `execute_tool` span, entered while it runs: its approval wait, hooks, MCP call
/// and a sub-agent it spawns hang under it.
pub(crate) async fn run_call(
    session: &Arc<Session>,
    rid: &str,
    call: &ToolCallRequest,
    cancel: &CancellationToken,
    scope: CallScope<'_>,
) -> Result<CallContent, Interrupted> {
    let span = session
        .services
        .telemetry()
        .execute_tool(keel_telemetry::ToolStart {
            name: &call.name,
            call_id: &call.id,
            tool_type: None,
            parent: keel_telemetry::Parent::Current,
        });
    span.arguments(|| call.arguments.to_string());
    let mut told = Told {
        outcome: ToolOutcome::Ok,
        error: None,
    };
    let work = run_traced(session, rid, call, cancel, scope, &span, &mut told);
    let r = tracing::Instrument::instrument(work, span.span().clone()).await;
    match &r {
        Ok((text, _)) => {
            span.result(|| text.clone());
            span.finish(told.outcome, told.error.as_deref());
        }
        Err(Interrupted) => span.finish(ToolOutcome::Cancelled, None),
    }
    r
}

async fn run_traced(
    session: &Arc<Session>,
    rid: &str,
    call: &ToolCallRequest,
    cancel: &CancellationToken,
    call_scope: CallScope<'_>,
    span: &keel_telemetry::ToolCall,
    told: &mut Told,
) -> Result<CallContent, Interrupted> {
    let scope = call_scope.tools;
    let workspace = call_scope.workspace.unwrap_or(&session.workspace);
    let tool_call_id = session.services.next_id(IdKind::ToolCall);
    // 1. Decode.
    let (entry, args) = match decode(session, call, scope) {
        Ok(decoded) => decoded,
        Err(error) => {
            tracing::debug!(tool = %call.name, code = %error.code, "tool call not decoded");
            told.set(ToolOutcome::Error, &error);
            skip(session, rid, &tool_call_id, &call.name, error.clone()).await;
            return Ok((refusal_text(&error), true));
        }
    };
    span.tool_type(if entry.origin == Origin::Mcp {
        "extension"
    } else {
        "function"
    });
    // Hooks: PreToolUse may deny the call, or rewrite its arguments, which are then
    // decoded again and gated like any call's.
    let rewritten;
    let (call, entry, args) =
        match crate::pipeline::hooks::pre_tool_use(session, rid, call, workspace, cancel).await {
            PreTool::Continue => (call, entry, args),
            PreTool::Deny(error, text) => {
                told.set(ToolOutcome::Denied, &error);
                skip(session, rid, &tool_call_id, &call.name, error).await;
                return Ok((text, true));
            }
            PreTool::Rewrite(c) => {
                rewritten = c;
                match decode(session, &rewritten, scope) {
                    Ok((entry, args)) => (&rewritten, entry, args),
                    Err(error) => {
                        let error = error.with_detail("rewrittenBy", "PreToolUse");
                        told.set(ToolOutcome::Error, &error);
                        skip(session, rid, &tool_call_id, &call.name, error.clone()).await;
                        return Ok((refusal_text(&error), true));
                    }
                }
            }
        };
    session.probe(Point::BeforeGate, rid).await;
    // 2. Gate.
    let (verdict, mode) = {
        let d = session.data();
        let v = gate::decide(
            session,
            &d,
            workspace,
            &entry.spec,
            &call.arguments,
            args.tool_args(),
        );
        (v, d.state.mode.clone())
    };
    tracing::debug!(tool = %call.name, tool_call_id = %tool_call_id, decision = ?verdict.decision(), level = ?verdict.level(), risk = ?verdict.risk(), "gate");
    span.decision(verdict.decision().as_str(), Some(verdict.level().as_str()));
    match verdict.decision() {
        Decision::Allow => {}
        // 3. Approval.
        Decision::Ask => {
            let approved = crate::pipeline::approval::request(
                session,
                rid,
                &tool_call_id,
                call,
                &verdict,
                cancel,
            )
            .await?;
            if !approved {
                let error = ErrorPayload::new(
                    ErrorCode::ToolPermissionDenied,
                    format!("the user did not approve {}", call.name),
                )
                .with_detail("toolName", call.name.clone());
                told.set(ToolOutcome::Denied, &error);
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
        // Deny (the gate decides no other value).
        _ => {
            let error = verdict.deny_error(&call.name);
            told.set(ToolOutcome::Denied, &error);
            skip(session, rid, &tool_call_id, &call.name, error.clone()).await;
            return Ok((refusal_text(&error), true));
        }
    }
    if cancel.is_cancelled() {
        return Err(Interrupted);
    }
    // 4. Checkpoint the workspace when the call may change files (a call working
    // in a folder of its own cannot).
    if call_scope.workspace.is_none()
        && crate::session::checkpoints::may_change_files(verdict.level(), &call.name)
    {
        let call_point = (tool_call_id.as_str(), call.name.as_str());
        if let Some(w) =
            crate::session::checkpoints::checkpoint(session, rid, call_point, cancel).await
        {
            session.emitter.emit(rid, Event::Warning(w)).await;
        }
        if cancel.is_cancelled() {
            return Err(Interrupted);
        }
    }
    // 5. Run.
    let call_cancel = cancel.child_token();
    let cx = CallCx {
        session,
        rid,
        tool_call_id: &tool_call_id,
        call,
        cancel: &call_cancel,
        verdict: &verdict,
        scope,
        workspace,
        mode,
    };
    let own_folder = call_scope.workspace.is_some();
    let content = run(&cx, &entry, args, own_folder, told).await?;
    // Hooks: PostToolUse may add a note for the model.
    Ok(crate::pipeline::hooks::post_tool_use(session, rid, call, workspace, content, cancel).await)
}

/// Step 1: the call names a tool in scope, and its arguments are JSON of its shape,
/// decoded here once for the gate and the handler.
fn decode(
    session: &Session,
    call: &ToolCallRequest,
    scope: Option<&[String]>,
) -> Result<(Entry, Args), ErrorPayload> {
    if let Some(raw) = call.arguments.get("__invalid_json") {
        // The history sends the call back with `{}` as its arguments: what the model
        // wrote is quoted here, for it to see (at most 500 characters).
        let text = raw.as_str().unwrap_or_default();
        let quoted: String = text.chars().take(500).collect();
        let cut = if quoted.len() < text.len() { "…" } else { "" };
        return Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!(
                "the arguments of {} are not valid JSON (cut short, or malformed): {quoted}{cut}; the call was not run and is kept in the history with {{}} as its arguments",
                call.name
            ),
        )
        .with_detail("arguments", raw.clone()));
    }
    let in_scope = scope.is_none_or(|names| names.iter().any(|n| n == &call.name));
    let entry = session
        .tool(&call.name)
        .filter(|_| in_scope)
        .ok_or_else(|| {
            let message = if in_scope {
                format!("there is no tool named {:?}", call.name)
            } else {
                format!("the tool {:?} is not available here", call.name)
            };
            ErrorPayload::new(ErrorCode::ToolNotRegistered, message)
                .with_detail("toolName", call.name.clone())
        })?;
    let args = entry.decode(&call.arguments).map_err(|e| {
        ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("bad arguments for {}: {e}", call.name),
        )
        .with_detail("toolName", call.name.clone())
    })?;
    Ok((entry, args))
}

async fn skip(session: &Session, rid: &str, tool_call_id: &str, name: &str, error: ErrorPayload) {
    session
        .emitter
        .emit(
            rid,
            Event::ToolCallSkipped(ToolCallSkipped::new(
                tool_call_id.to_owned(),
                name.to_owned(),
                error,
            )),
        )
        .await;
}

/// Step 4: started, the handler or stage under the call's token, progress, the end.
async fn run(
    cx: &CallCx<'_>,
    entry: &Entry,
    args: Args,
    own_folder: bool,
    told: &mut Told,
) -> Result<CallContent, Interrupted> {
    let session = cx.session;
    // No tool starts without a live lease on the session, and none before its
    // `tool.call_started` was committed under that lease (the store fences it).
    if !session.lease.is_live() {
        return Err(Interrupted);
    }
    session
        .emitter
        .emit(
            cx.rid,
            Event::ToolCallStarted(ToolCallStarted::new(
                cx.tool_call_id.to_owned(),
                cx.call.name.clone(),
                cx.call.arguments.clone(),
                cx.verdict.level(),
            )),
        )
        .await;
    if session.lease.is_lost() {
        return Err(Interrupted);
    }
    session.probe(Point::ToolRunning, cx.rid).await;
    let (ptx, mut prx) = mpsc::unbounded_channel::<(ProgressStream, String)>();
    // The stages work in the session's workspace: a call with a folder of its own
    // runs as it is (an edit is written there; `background: true` is refused).
    let stage = match own_folder {
        true => None,
        false => session.services.registry().stage_for(session, &args),
    };
    // Results of the kernel's own runners put their `message` before the model.
    let prefer_message = stage.is_some() || matches!(entry.handler, Handler::Kernel(_));
    let started = Instant::now();
    // Boxed so that it can be dropped (and whatever it holds killed) right here.
    let mut fut = Box::pin(async {
        if let Some(stage) = stage {
            return stage.run(cx, args).await;
        }
        match &entry.handler {
            Handler::Kernel(h) => h.run(cx, args).await,
            Handler::Tool(tool) => {
                let ctx = ToolContext {
                    workspace: cx.workspace.to_path_buf(),
                    cancel: cx.cancel.clone(),
                    progress: Arc::new(move |stream, chunk| {
                        let _ = ptx.send((stream, chunk));
                    }),
                    elevated: cx.verdict.elevated(),
                    // In `auto` mode nobody reviews a command: no sandbox, no command.
                    sandbox: session
                        .services
                        .config()
                        .sandbox
                        .clone()
                        .required(cx.mode == PermissionMode::Auto),
                    roots: session.data().roots.clone(),
                };
                tool.run_decoded(args.into_tool_args(), &cx.call.arguments, ctx)
                    .await
            }
        }
    });
    let result = loop {
        tokio::select! {
            biased;
            r = &mut fut => break Some(r),
            Some((stream, chunk)) = prx.recv() => {
                emit_progress(session, cx.rid, cx.tool_call_id, stream, chunk).await;
            }
            _ = cx.cancel.cancelled() => {
                // Give the handler a moment to stop (and kill what it started); then
                // drop it, which kills whatever it still holds.
                break tokio::time::timeout(GRACE, &mut fut).await.ok();
            }
        }
    };
    drop(fut);
    while let Ok((stream, chunk)) = prx.try_recv() {
        emit_progress(session, cx.rid, cx.tool_call_id, stream, chunk).await;
    }
    let duration_ms = started.elapsed().as_millis() as u64;
    let meta = Some(Meta {
        duration_ms: Some(duration_ms),
        ..Meta::default()
    });
    let result = match result {
        Some(r) if !cx.cancel.is_cancelled() => r,
        _ => {
            // Stopped by the interrupt: close the call for hosts before the request's
            // `session.interrupted`.
            tracing::info!(tool = %cx.call.name, duration_ms, abandoned = result.is_none(), "tool call interrupted");
            let error = ErrorPayload::new(ErrorCode::Interrupted, "interrupted before it finished");
            emit_end(cx, Err(error), duration_ms, meta).await;
            return Err(Interrupted);
        }
    };
    if let Ok(value) = &result {
        warn_unsandboxed(session, cx.rid, value).await;
    }
    match &result {
        Ok(_) => tracing::debug!(tool = %cx.call.name, duration_ms, "tool call completed"),
        Err(e) => {
            tracing::info!(tool = %cx.call.name, duration_ms, code = %e.code, "tool call failed");
            let outcome = if e.code == ErrorCode::ToolTimeout {
                ToolOutcome::TimedOut
            } else {
                ToolOutcome::Error
            };
            told.set(outcome, e);
        }
    }
    let content = match &result {
        Ok(value) => (content_of(value, prefer_message), false),
        Err(error) => (refusal_text(error), true),
    };
    emit_end(cx, result, duration_ms, meta).await;
    Ok(content)
}

/// The text the model sees for a successful result.
fn content_of(value: &serde_json::Value, prefer_message: bool) -> String {
    match value.get("message").and_then(|m| m.as_str()) {
        Some(m) if prefer_message => m.to_owned(),
        _ => serde_json::to_string(value).unwrap_or_default(),
    }
}

async fn emit_end(
    cx: &CallCx<'_>,
    result: Result<serde_json::Value, ErrorPayload>,
    duration_ms: u64,
    meta: Option<Meta>,
) {
    let event = match result {
        Ok(value) => Event::ToolCallCompleted(ToolCallCompleted::new(
            cx.tool_call_id.to_owned(),
            cx.call.name.clone(),
            value,
            duration_ms,
        )),
        Err(error) => Event::ToolCallFailed(ToolCallFailed::new(
            cx.tool_call_id.to_owned(),
            cx.call.name.clone(),
            error,
            duration_ms,
        )),
    };
    cx.session
        .emitter
        .emit_with(cx.rid, event, Source::Runtime, meta)
        .await;
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
            Event::ToolCallProgress(ToolCallProgress::new(
                tool_call_id.to_owned(),
                stream.as_str().to_owned(),
                chunk,
            )),
            Source::Tool,
            None,
        )
        .await;
}

/// Says once per session that shell commands run without the OS sandbox although
/// it is enabled (bubblewrap missing or unusable).
async fn warn_unsandboxed(session: &Session, rid: &str, result: &serde_json::Value) {
    let config = &session.services.config().sandbox;
    if config.effective_mode() == keel_tools::SandboxMode::Off
        || result.get("sandboxed") != Some(&serde_json::Value::Bool(false))
    {
        return;
    }
    let first = {
        let mut d = session.data();
        !std::mem::replace(&mut d.sandbox_warned, true)
    };
    if first {
        let reason = keel_tools::sandbox_report(config).reason;
        let warning = ErrorPayload::new(
            ErrorCode::ToolExecutionFailed,
            format!("shell commands run without the OS sandbox: {reason}"),
        )
        .severity(keel_envelope::error::Severity::Warning)
        .with_detail("reason", "sandbox_unavailable");
        session.emitter.emit(rid, Event::Warning(warning)).await;
    }
}
