//! A session's life: `session.start`, `session.resume` (also of a session already
//! open: its state and the replay of what the host missed), `session.close`,
//! `session.watch` and `session.unwatch`, and the close of every session at shutdown.
//!
//! `session.watch` and `session.resume` read the session's log with its emitter held:
//! no event slips between the log that was read and the live stream that follows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_envelope::commands::{
    SessionClose, SessionResume, SessionStart, SessionUnwatch, SessionWatch,
};
use keel_envelope::events::{
    MaterializedWorkspace, RequestCancelled, SessionClosed, SessionInterrupted,
    SessionOwnerChanged, SessionResumed, SessionStarted, SessionUnwatched, SessionWatched,
};
use keel_envelope::host::McpServerSpec;
use keel_envelope::ids::IdKind;
use keel_envelope::types::Cursor;
use keel_envelope::worktree::{AdditionalRoot, Isolation};
use keel_envelope::{Envelope, ErrorCode, ErrorPayload, Event, Sequencer};

use super::{invalid, Cx};
use crate::base::emit::EmitGuard;
use crate::base::limits::session_extensions;
use crate::base::mcp_config::{from_specs, McpServerConfig};
use crate::base::model::Message;
use crate::base::replay::{after_cursor, last_cursor, pending_prompts, unfinished_requests};
use crate::base::store::PersistedSession;
use crate::pipeline::hooks::spawn_session_start;
use crate::session::materialize;
use crate::session::mcp::{McpServers, ServerOrigin};
use crate::session::open::Sessions;
use crate::session::overlay::Overlay;
use crate::session::queue::Queued;
use crate::session::roots;
use crate::session::services::Services;
use crate::session::worktree;
use crate::session::Session;

/// Where `session.start` and `session.resume` take the extra roots.
const ROOTS_FIELD: &str = "payload.additionalRoots";

/// `session.start`.
pub(crate) async fn start(cx: &Cx<'_>, p: &SessionStart) -> Result<(), ErrorPayload> {
    let id = cx.services.next_id(IdKind::Session);
    open_new(cx, p.clone(), id).await.map(|_| ())
}

/// Starts session `id` and answers `session.started` on the command's stream.
pub(crate) async fn open_new(
    cx: &Cx<'_>,
    opts: SessionStart,
    id: String,
) -> Result<Arc<Session>, ErrorPayload> {
    let services = cx.services;
    let admission = cx.open.admit()?;
    let workspace = resolve_workspace(cx, opts.workspace_path.as_deref())?;
    let mut model = services.model(opts.model.as_deref())?;
    let extensions = session_extensions(&opts)?;
    let mcp = from_specs(opts.mcp_servers.as_deref().unwrap_or_default())?;
    let host = crate::pipeline::host_tools::entries(
        opts.host_tools.as_deref().unwrap_or_default(),
        "payload.hostTools",
    )?;
    // A host tool whose name is taken refuses the session before it exists.
    Overlay::default().set_host(services.registry(), host.clone())?;
    if let Some(path) = opts.record.as_deref() {
        model = Arc::new(crate::base::record::RecordingModel::new(model, path)?);
    }
    let isolation = worktree::isolation(
        opts.isolation.as_ref(),
        &services.config().worktrees.isolation,
        "payload.isolation",
    )?;
    if opts.base_ref.is_some() && isolation != Isolation::Worktree {
        return Err(invalid(
            "`baseRef` needs `isolation: \"worktree\"`",
            "payload.baseRef",
        ));
    }
    let given_roots = opts.additional_roots.as_deref().unwrap_or_default();
    let extra = roots::check(&workspace, given_roots, ROOTS_FIELD)?;
    // The worktree is made last, once everything else was accepted.
    let made = match isolation {
        Isolation::Worktree => {
            Some(worktree::create(services, &id, &id, &workspace, opts.base_ref.as_deref()).await?)
        }
        _ => None,
    };
    let workspace = made
        .as_ref()
        .map_or(workspace, |m| m.created().workspace.clone());
    // The roots again, against the worktree the session works in (none may hold it).
    let extra = match (made, roots::check(&workspace, given_roots, ROOTS_FIELD)) {
        (None, _) => (extra, None),
        (Some(m), Ok(again)) => (again, Some(m)),
        (Some(m), Err(e)) => {
            m.discard().await;
            return Err(e);
        }
    };
    let (extra, made) = extra;
    let now = services.now();
    let mut state = PersistedSession {
        session_id: id.clone(),
        title: opts.title,
        workspace: workspace.display().to_string(),
        model: model.id(),
        mode: opts
            .permission_mode
            .unwrap_or(services.config().permission_mode.clone()),
        rules: Default::default(),
        session_keys: Vec::new(),
        session_deny: Vec::new(),
        history: Default::default(),
        plan: None,
        usage: Default::default(),
        created_at: now,
        updated_at: now,
        closed: false,
        extensions,
        request_marks: Vec::new(),
    };
    if let Some(m) = &made {
        worktree::keep_in(&mut state, &worktree::info_of(m.created()));
    }
    roots::keep_in(&mut state, &extra);
    let claimed =
        services
            .claim(&id)
            .and_then(|(lease, _)| match services.store().save_state(&state) {
                Ok(()) => Ok(lease),
                Err(e) => {
                    let _ = services.store().unclaim(&id);
                    Err(e)
                }
            });
    let lease = match claimed {
        Ok(lease) => lease,
        Err(e) => {
            if let Some(m) = made {
                // Not a session: its worktree goes again.
                m.discard().await;
            }
            return Err(e);
        }
    };
    if let Some(m) = made {
        m.keep().await;
    }
    let session = Session::new(services.clone(), state, model, Sequencer::new(), lease);
    session.tools.set_host(services.registry(), host)?;
    let session = admission.insert(&id, session);
    tracing::info!(session_id = %id, workspace = %session.workspace.display(), "session started");
    emit_started(&session, cx.rid).await;
    crate::pipeline::skills::load(&session, cx.rid).await;
    spawn_session_start(&session, cx.rid, "startup");
    start_mcp(cx, &session, mcp);
    Ok(session)
}

fn resolve_workspace(cx: &Cx<'_>, path: Option<&str>) -> Result<PathBuf, ErrorPayload> {
    const FIELD: &str = "payload.workspacePath";
    let raw = match path {
        Some(p) => PathBuf::from(p),
        None => cx
            .services
            .config()
            .workspace
            .clone()
            .ok_or_else(|| invalid("no workspace: give `workspacePath`", FIELD))?,
    };
    let canon = std::fs::canonicalize(&raw).map_err(|e| {
        invalid(
            &format!("workspace {} is not usable: {e}", raw.display()),
            FIELD,
        )
    })?;
    if !canon.is_dir() {
        return Err(invalid(
            &format!("workspace {} is not a directory", raw.display()),
            FIELD,
        ));
    }
    Ok(canon)
}

async fn emit_started(session: &Session, request_id: &str) {
    let ev = {
        let d = session.data();
        SessionStarted::new(
            session.id.clone(),
            d.state.workspace.clone(),
            d.state.mode.clone(),
            d.state.model.clone(),
            d.state.created_at,
        )
        .title(d.state.title.clone())
        .worktree(worktree::of_state(&d.state))
        .additional_roots(roots::wire(&d.roots))
    };
    session
        .emitter
        .emit(request_id, Event::SessionStarted(ev))
        .await;
}

/// Starts the session's MCP servers: those given with the command first (a
/// configured server of the same name is then left out), then the configured
/// ones. Start problems are reported on the command's stream.
pub(crate) fn start_mcp(cx: &Cx<'_>, session: &Arc<Session>, given: Vec<McpServerConfig>) {
    McpServers::start(session, given, ServerOrigin::Session, cx.rid);
    McpServers::start(
        session,
        cx.services.config().mcp_servers.clone(),
        ServerOrigin::Config,
        cx.rid,
    );
}

/// `session.resume`.
pub(crate) async fn resume(cx: &Cx<'_>, p: &SessionResume) -> Result<(), ErrorPayload> {
    let mcp = p.mcp_servers.as_deref().unwrap_or_default();
    reopen(
        cx,
        &p.session_id,
        p.after_sequence.as_ref(),
        mcp,
        p.additional_roots.as_deref(),
        p.materialize_to.as_deref(),
    )
    .await
    .map(|_| ())
}

/// Opens stored session `id` (or answers from it when it is open already) and
/// replays the events after `after`. `extra`, when given, replaces the session's
/// extra roots (of an open session only while it is idle). A workspace that does not
/// exist on this node is made in `materialize_to` from the session's newest
/// checkpoint (what was made comes back with the session), else refused with
/// `WORKSPACE_MISSING`.
pub(crate) async fn reopen(
    cx: &Cx<'_>,
    id: &str,
    after: Option<&Cursor>,
    mcp_servers: &[McpServerSpec],
    extra: Option<&[AdditionalRoot]>,
    materialize_to: Option<&str>,
) -> Result<(Arc<Session>, Option<MaterializedWorkspace>), ErrorPayload> {
    let (services, rid) = (cx.services, cx.rid);
    if let Some(live) = cx.open.get(id) {
        if let Some(given) = extra {
            replace_roots(&live, given, rid).await?;
        }
        // Already open: answer with its state and replay what the host missed.
        answer_resumed(cx, &live, after).await?;
        return Ok((live, None));
    }
    let admission = cx.open.admit()?;
    let mcp = from_specs(mcp_servers)?;
    let not_found = || {
        ErrorPayload::new(
            ErrorCode::SessionNotFound,
            format!("no session {id:?} in the store"),
        )
        .with_detail("sessionId", id)
    };
    let Some(stored) = services.store().load_state(id)? else {
        return Err(not_found());
    };
    // A workspace missing here, and no folder to make it in: refused before the
    // lease is claimed (a takeover stays for the resume that can make it), unless
    // another node serves the session (then that is the answer).
    if materialize_to.is_none() && !Path::new(&stored.workspace).is_dir() {
        let elsewhere = services
            .store()
            .owner_of(id)?
            .is_some_and(|o| o.live && o.owner != services.node());
        if !elsewhere {
            return Err(materialize::missing(services, id, &stored.workspace));
        }
    }
    // Ours before anything is read: what the previous owner wrote is all there.
    let (lease, previous_owner) = services.claim(id)?;
    let loaded = (|| {
        let mut state = services.store().load_state(id)?.ok_or_else(not_found)?;
        if let Some(given) = extra {
            let checked = roots::check(Path::new(&state.workspace), given, ROOTS_FIELD)?;
            roots::keep_in(&mut state, &checked);
        }
        let log = services.store().load_events(id)?;
        let model = services.model_or_default(&state.model)?;
        Ok::<_, ErrorPayload>((state, log, model))
    })();
    let (mut state, log, model) = match loaded {
        Ok(l) => l,
        Err(e) => {
            let _ = services.store().unclaim(id);
            return Err(e);
        }
    };
    let materialized = if Path::new(&state.workspace).is_dir() {
        None
    } else {
        let made = match materialize_to {
            None => Err(materialize::missing(services, id, &state.workspace)),
            Some(raw) => match materialize::prepare(raw, "payload.materializeTo") {
                Ok((to, created)) => {
                    materialize::materialize(services, id, &state.workspace, to, created).await
                }
                Err(e) => Err(e),
            },
        };
        let saved = made.and_then(|m| {
            materialize::moved(&mut state, &m.workspace);
            services.store().save_state(&state).map(|()| m)
        });
        match saved {
            Ok(m) => Some(m),
            Err(e) => {
                let _ = services.store().unclaim(id);
                return Err(e);
            }
        }
    };
    let mut seq = Sequencer::new();
    for env in &log.events {
        seq.restore(&env.request_id, env.sequence);
    }
    state.model = model.id();
    state.closed = false;
    let epoch = lease.epoch();
    let fresh = Session::new(services.clone(), state, model, seq, lease);
    let session = admission.insert(id, fresh.clone());
    if !Arc::ptr_eq(&session, &fresh) {
        // Another resume of the same session won the race: answer from it.
        answer_resumed(cx, &session, after).await?;
        return Ok((session, None));
    }
    // The worktrees of sub-agents that a dead process left running are gone
    // before the answer.
    session.cleanups.settle().await;
    let mut g = session.emitter.lock().await;
    // Taken over from a node whose lease ran out: every watcher, here and on the
    // other nodes (the event is logged), learns who serves the session now.
    if let (Some(previous), Some(epoch)) = (&previous_owner, epoch) {
        tracing::info!(session_id = %id, previous_owner = %previous, epoch, "session taken over");
        g.emit(
            rid,
            Event::SessionOwnerChanged(SessionOwnerChanged::new(
                previous.clone(),
                services.node().to_owned(),
                epoch,
            )),
        )
        .await;
    }
    if log.torn_tail_dropped {
        g.emit(
            rid,
            Event::Warning(
                ErrorPayload::new(
                    ErrorCode::SessionPersistenceFailed,
                    "the last event of the log was torn (the process died while writing it) and was dropped",
                )
                .severity(keel_envelope::error::Severity::Warning),
            ),
        )
        .await;
    }
    emit_resumed(
        &session,
        &mut g,
        rid,
        &log.events,
        after,
        materialized.clone(),
    )
    .await?;
    // A request the previous process never finished (it died or was killed) gets
    // its terminal event now, so a host following that stream sees it end.
    for unfinished in unfinished_requests(&log.events) {
        g.emit(
            &unfinished,
            Event::SessionInterrupted(
                SessionInterrupted::new(
                    if previous_owner.is_some() {
                        "owner_lost"
                    } else {
                        "restart"
                    },
                    true,
                )
                .interrupted_request_id(unfinished.clone()),
            ),
        )
        .await;
    }
    drop(g);
    crate::pipeline::skills::load(&session, rid).await;
    spawn_session_start(&session, rid, "resume");
    start_mcp(cx, &session, mcp);
    Ok((session, materialized))
}

/// Replaces the extra roots of open session `session` with `given` (checked), if
/// they differ, while it is idle (else `SESSION_BUSY`), and saves them.
async fn replace_roots(
    session: &Session,
    given: &[AdditionalRoot],
    rid: &str,
) -> Result<(), ErrorPayload> {
    let checked = roots::check(&session.workspace, given, ROOTS_FIELD)?;
    if session.data().roots == checked {
        return Ok(());
    }
    if session.is_busy() {
        return Err(ErrorPayload::new(
            ErrorCode::SessionBusy,
            "the extra roots of an open session can only be replaced while it is idle",
        )
        .retryable(true)
        .with_detail("field", ROOTS_FIELD));
    }
    session.data().set_roots(checked);
    session.persist(rid).await;
    Ok(())
}

/// Answers the resume of an open session: its state and the replay, with its
/// emitter held while the log is read.
async fn answer_resumed(
    cx: &Cx<'_>,
    session: &Session,
    after: Option<&Cursor>,
) -> Result<(), ErrorPayload> {
    let mut g = session.emitter.lock().await;
    let log = cx.services.store().load_events(&session.id)?;
    emit_resumed(session, &mut g, cx.rid, &log.events, after, None).await
}

/// Emits `session.resumed` and the replay under `g`, the session's emitter held,
/// so no event of the session slips between the log that was read and the answer.
async fn emit_resumed(
    session: &Session,
    g: &mut EmitGuard<'_>,
    request_id: &str,
    log: &[Envelope],
    after: Option<&Cursor>,
    materialized: Option<MaterializedWorkspace>,
) -> Result<(), ErrorPayload> {
    let replay = after_cursor(log, after)?;
    let payload = {
        let d = session.data();
        let first_user = d.state.history.iter().find_map(|m| match m {
            Message::User { text, .. } => Some(text.clone()),
            _ => None,
        });
        let summary = match first_user {
            Some(t) => {
                let short: String = t.chars().take(80).collect();
                format!("{} messages; started with: {short}", d.state.history.len())
            }
            None => "no messages yet".to_owned(),
        };
        SessionResumed::new(
            session.info_of(&d),
            summary,
            d.state.history.len() as u32,
            d.state.rules.clone(),
            replay.len() as u32,
        )
        .plan(d.state.plan.clone())
        .last_cursor(last_cursor(log))
        .materialized(materialized)
    };
    g.emit(request_id, Event::SessionResumed(payload)).await;
    g.replay(request_id, replay).await;
    Ok(())
}

/// `session.close`.
pub(crate) async fn close(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &SessionClose,
) -> Result<(), ErrorPayload> {
    close_session(session, cx.rid, "requested").await;
    cx.open.remove(&session.id);
    release(cx.services, session, cx.rid).await;
    Ok(())
}

/// Interrupts the session's work, drops its queue, waits for its runner, stops its
/// background tasks and MCP servers, and emits `session.closed`.
pub(crate) async fn close_session(session: &Session, rid: &str, reason: &str) {
    let turnover = session.turnover.lock().await;
    let (queued, runner, active) = {
        let mut d = session.data();
        let queued: Vec<Queued> = d.queue.drain(..).collect();
        let active = match &mut d.active {
            Some(a) => {
                if a.interrupt_reply.is_none() {
                    a.interrupt_reply = Some(rid.to_owned());
                }
                a.cancel.cancel();
                true
            }
            None => false,
        };
        (queued, d.runner.take(), active)
    };
    drop(turnover);
    for q in queued {
        session
            .emitter
            .emit_reply(
                &q.id,
                Some(rid),
                Event::RequestCancelled(RequestCancelled::new(q.id.clone())),
            )
            .await;
    }
    if let Some(runner) = runner {
        if active {
            let _ = runner.await;
        }
    }
    crate::work::process::stop_all(session).await;
    session.mcp.stop_all();
    // Closed: other processes see it so, and its checkpoints may be pruned first.
    crate::session::checkpoints::release(session).await;
    session.data().state.closed = true;
    session.persist(rid).await;
    session
        .emitter
        .emit(
            rid,
            Event::SessionClosed(SessionClosed::new(reason.to_owned())),
        )
        .await;
    session.cancel.cancel();
}

/// Lets the store close what it holds open for a closed session; a failure is a
/// warning on `rid`'s stream.
pub(crate) async fn release(services: &Services, session: &Session, rid: &str) {
    if let Err(e) = services.store().release(&session.id) {
        let warning = e.severity(keel_envelope::error::Severity::Warning);
        session.emitter.emit(rid, Event::Warning(warning)).await;
    }
    if session.lease.is_leased() && !session.lease.is_lost() {
        if let Err(e) = services.store().unclaim(&session.id) {
            tracing::warn!(session_id = %session.id, code = %e.code, message = %e.message, "releasing the session's lease failed");
        }
    }
}

/// Closes every open session (those unloaded while idle too), each on a request id
/// of its own, then stops the kernel and flushes the store.
pub(crate) async fn close_all(services: &Services, open: &Sessions, reason: &str) {
    open.reload_all();
    for s in open.drain() {
        let rid = services.next_id(IdKind::Request);
        close_session(&s, &rid, reason).await;
        release(services, &s, &rid).await;
    }
    services.cancel().cancel();
    let _ = services.store().flush();
}

/// `session.watch`: under the session's emitter, so that no event slips between the
/// log read here and the live stream, answers with `session.watched`, replays the
/// events after the cursor and the running request's pending prompts.
pub(crate) async fn watch(cx: &Cx<'_>, p: &SessionWatch) -> Result<(), ErrorPayload> {
    let Some(session) = cx.open.get(&p.session_id) else {
        // Not served here: from the shared store, wherever its owner is.
        return super::watch_remote::watch(cx, p).await;
    };
    let mut g = session.emitter.lock().await;
    let log = cx.services.store().load_events(&p.session_id)?.events;
    let replay = after_cursor(&log, p.after_sequence.as_ref())?;
    let snapshot = session.snapshot();
    let pending = match &snapshot.active_request_id {
        Some(active) => pending_prompts(&log, active, replay),
        None => Vec::new(),
    };
    let answer = SessionWatched::new(snapshot.session, (replay.len() + pending.len()) as u32)
        .active_request_id(snapshot.active_request_id)
        .last_cursor(last_cursor(&log));
    g.emit_unlogged(cx.rid, Event::SessionWatched(answer)).await;
    g.replay(cx.rid, replay).await;
    g.replay(cx.rid, &pending).await;
    Ok(())
}

/// `session.unwatch`: answered on the command's stream (not logged); the answer
/// ends the watch of the watcher that sent it.
pub(crate) async fn unwatch(cx: &Cx<'_>, p: &SessionUnwatch) -> Result<(), ErrorPayload> {
    let ev = Event::SessionUnwatched(SessionUnwatched::new(p.session_id.clone()));
    match cx.open.get(&p.session_id) {
        Some(s) => {
            s.emitter.lock().await.emit_unlogged(cx.rid, ev).await;
        }
        None => {
            cx.services
                .emitter()
                .emit_as(Some(p.session_id.clone()), cx.rid, ev)
                .await;
        }
    }
    Ok(())
}
