//! `keel exec "<prompt>"`: one request, headless.
//!
//! Exit codes: 0 the request completed; 1 it failed (model or tool error, turn
//! limit); 2 bad usage or set-up; 3 a call was denied (an approval was needed and
//! nobody can answer in exec mode, or the gate refused it); 130 interrupted (Ctrl-C).

use keel_envelope::commands::{CommandPayload, PlanReject, SessionStart};
use keel_envelope::types::{ApprovalDecision, StopReason};
use keel_envelope::{codec, ErrorCode, Event};

use crate::cli::{ExecArgs, SessionArgs};
use crate::interrupt::CtrlC;
use crate::render::{colors, width, Renderer};
use crate::setup;

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: the request failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: bad usage.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: a call was denied.
pub const EXIT_DENIED: i32 = 3;
/// Exit code: the answer was cut by the output cap (`stopReason: "max_tokens"`).
pub const EXIT_TRUNCATED: i32 = 4;
/// Exit code: interrupted.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Runs `keel exec`; returns the exit code.
pub fn run(args: ExecArgs) -> i32 {
    let ExecArgs {
        prompt,
        json,
        record,
        isolation,
        session: common,
    } = args;
    let json = json.json;
    let prompt = match prompt.as_deref() {
        Some("-") | None => match prompt_from_stdin(prompt.is_some()) {
            Ok(p) => p,
            Err(why) => {
                eprintln!("keel exec: {why}");
                return EXIT_USAGE;
            }
        },
        Some(p) => p.to_owned(),
    };
    if prompt.trim().is_empty() {
        eprintln!("keel exec: the prompt is empty");
        return EXIT_USAGE;
    }
    // One thread runs the request (the blocking pool beside it does the file work): a
    // headless request is one stream of work, and worker threads would only hand it
    // to each other (docs/performance.md, cost per model call).
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel exec: cannot start the runtime: {e}");
            return EXIT_FAILED;
        }
    };
    rt.block_on(exec(common, prompt, json, record, isolation))
}

/// The message for a prompt: a custom command's expanded template for `/NAME …`, a
/// skill's instructions for `/skill:NAME …` (said on stderr unless `json`), else the
/// prompt itself. An unknown or unreadable skill is a usage error.
fn slash_prompt(runtime: &setup::Runtime, prompt: &str, json: bool) -> Result<String, i32> {
    if !prompt.starts_with('/') {
        return Ok(prompt.to_owned());
    }
    let reserved = crate::repl::reserved_commands_str();
    let catalog = runtime.skills.catalog(&runtime.workspace, &reserved);
    match catalog.expand_slash(prompt.trim_end()) {
        Ok(Some(s)) => {
            tracing::info!(name = %s.name, path = %s.path.display(), "exec: slash command expanded");
            if !json {
                eprintln!(
                    "keel exec: {} from {}",
                    prompt.split_whitespace().next().unwrap_or(""),
                    s.path.display()
                );
            }
            Ok(s.text)
        }
        Ok(None) => Ok(prompt.to_owned()),
        Err(e) => {
            eprintln!("keel exec: {e}");
            Err(EXIT_USAGE)
        }
    }
}

/// The longest prompt read from standard input, in bytes (the bridge's line limit).
pub const MAX_STDIN_PROMPT_BYTES: u64 = 4 * 1024 * 1024;

/// Reads the prompt from standard input (`keel exec -`, or no prompt with input piped
/// in). Without a prompt argument a terminal is not read: it is a usage error.
fn prompt_from_stdin(asked: bool) -> Result<String, String> {
    use std::io::{IsTerminal, Read};
    let stdin = std::io::stdin();
    if !asked && stdin.is_terminal() {
        return Err(
            "no prompt: give one (`keel exec \"…\"`), or pipe it in (`… | keel exec -`)".into(),
        );
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .take(MAX_STDIN_PROMPT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the prompt from standard input: {e}"))?;
    if bytes.len() as u64 > MAX_STDIN_PROMPT_BYTES {
        return Err(format!(
            "the prompt on standard input is over {MAX_STDIN_PROMPT_BYTES} bytes"
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "the prompt on standard input is not UTF-8 text (at byte {})",
            e.utf8_error().valid_up_to()
        )
    })
}

async fn exec(
    common: SessionArgs,
    prompt: String,
    json: bool,
    record: Option<std::path::PathBuf>,
    isolation: crate::cli::WorktreeArg,
) -> i32 {
    // One listener for the whole run: a Ctrl-C that arrives while an envelope is
    // written is kept for the next turn of the loop below.
    let mut ctrlc = CtrlC::install();
    let runtime = match setup::runtime(&common) {
        Ok(r) => r,
        Err(e) => {
            setup::report(&e);
            return EXIT_USAGE;
        }
    };
    if runtime.model_spec.is_none() {
        eprintln!("keel: {}", setup::NO_MODEL);
        return EXIT_USAGE;
    }
    let message = match slash_prompt(&runtime, &prompt, json) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let kernel = runtime.kernel.clone();
    let start = kernel.start_session(
        SessionStart::new()
            .permission_mode(common.mode.mode)
            .title(prompt.chars().take(60).collect::<String>())
            .record(record.map(|p| p.display().to_string()))
            .isolation(isolation.isolation())
            .base_ref(isolation.base_ref.clone()),
    );
    // Ctrl-C while the session starts (its worktree being made) gives the start up:
    // what it made is taken back before the exit.
    let started = tokio::select! {
        s = start => s,
        _ = ctrlc.recv() => {
            tracing::info!("Ctrl-C: giving up the session's start");
            kernel.shutdown("interrupted").await;
            eprintln!("keel: interrupted while the session was starting");
            return EXIT_INTERRUPTED;
        }
    };
    let (session, mut events) = match started {
        Ok(s) => s,
        Err(e) => {
            setup::report(&e);
            return EXIT_USAGE;
        }
    };
    let mut renderer = Renderer::new(colors(), width());
    let rid = match session.send(message).await {
        Ok(r) => r,
        Err(e) => {
            setup::report(&e);
            return EXIT_FAILED;
        }
    };
    tracing::info!(session_id = %session.id(), request_id = %rid, json, "exec request sent");
    let mut denied = false;
    let mut code = EXIT_FAILED;
    let mut interrupted = false;
    // With --json, the lines of the events already there are written together: one
    // write for what a call's events queued at once, and always before waiting.
    let mut lines = Vec::new();
    let mut next = None;
    loop {
        // A Ctrl-C is noticed between events that are ready too, not only while
        // waiting (a long stream may never leave the queue empty).
        let (env, pressed) = match next.take() {
            Some(env) => {
                let pressed = tokio::select! {
                    biased;
                    _ = ctrlc.recv(), if !interrupted => true,
                    () = std::future::ready(()) => false,
                };
                (Some(env), pressed)
            }
            None => {
                write_out(&mut lines);
                tokio::select! {
                    e = events.recv() => match e { Some(e) => (Some(e), false), None => break },
                    _ = ctrlc.recv(), if !interrupted => (None, true),
                }
            }
        };
        if pressed {
            tracing::info!(request_id = %rid, "Ctrl-C: interrupting the request");
            interrupted = true;
            let _ = session.interrupt().await;
        }
        let Some(env) = env else { continue };
        if json {
            lines.extend_from_slice(&codec::encode_line(&env));
            if lines.len() >= 64 * 1024 {
                write_out(&mut lines);
            }
        } else {
            renderer.print(&env);
        }
        match &env.event {
            Event::ApprovalRequested(a) => {
                eprintln!(
                    "keel exec: {} needs approval ({}); nobody can approve in exec mode, so it is denied. Re-run with --mode auto-edit or --mode auto to allow it.",
                    a.tool_name, a.reason
                );
                denied = true;
                let _ = session
                    .respond_approval(&a.approval_id, ApprovalDecision::Deny)
                    .await;
            }
            Event::PlanApprovalRequired(p) => {
                eprintln!("keel exec: the plan needs approval; nobody can approve in exec mode, so it is rejected.");
                denied = true;
                let _ = session
                    .command(CommandPayload::PlanReject(PlanReject::new(p.plan_id.clone()).feedback(Some("Running headless: nobody can approve a plan. Stop and summarise the plan.".into()))))
                    .await;
            }
            Event::AskRequested(a) => {
                let _ = session
                    .answer_ask(
                        &a.ask_id,
                        "(no user is available: running headless; decide yourself)",
                    )
                    .await;
            }
            Event::ToolCallSkipped(s)
                if matches!(
                    s.error.code,
                    ErrorCode::ToolPermissionDenied | ErrorCode::PlanApprovalRequired
                ) =>
            {
                denied = true;
            }
            Event::SessionCompleted(c) if env.request_id == rid => {
                code = match c.stop_reason {
                    StopReason::EndTurn if denied => EXIT_DENIED,
                    StopReason::EndTurn | StopReason::Refusal => EXIT_OK,
                    StopReason::MaxTokens => EXIT_TRUNCATED,
                    StopReason::Interrupted => EXIT_INTERRUPTED,
                    StopReason::MaxTurns | StopReason::Error => EXIT_FAILED,
                    _ => EXIT_FAILED,
                };
                break;
            }
            Event::SessionInterrupted(i)
                if i.interrupted_request_id.as_deref() == Some(rid.as_str()) =>
            {
                code = EXIT_INTERRUPTED;
                break;
            }
            Event::RequestRejected(_) if env.request_id == rid => {
                code = EXIT_FAILED;
                break;
            }
            _ => {}
        }
        next = events.try_recv();
    }
    // With --json, the terminal event's line goes out once the session is closed
    // (saved, its log synced) and the runtime shut down, with the close's own events:
    // a reader that sees it can rely on the session being on disk, and the process
    // ends right after it.
    let _ = session.close().await;
    while let Some(env) = events.try_recv() {
        if json {
            lines.extend_from_slice(&codec::encode_line(&env));
        }
    }
    kernel.shutdown("exec").await;
    write_out(&mut lines);
    code
}

/// Writes `lines` to stdout in one write, flushed, and empties it.
fn write_out(lines: &mut Vec<u8>) {
    use std::io::Write;
    if lines.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(lines);
    let _ = out.flush();
    lines.clear();
}
