//! `session.fork`: a new session with the parent's history up to a request (and, with
//! `files`, the workspace put back to that point, undoably, in the parent's
//! checkpoints), the parent's review, patches, task graph, budget limits, host tools
//! and MCP servers, and its extra roots (or those given). Its answer names the open sessions whose folder it shares. With
//! `isolation: "worktree"` the fork works in a worktree of its own, starting with the
//! parent's files as they are, and shares no folder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_envelope::commands::SessionFork;
use keel_envelope::events::SessionForked;
use keel_envelope::host::McpServerSpec;
use keel_envelope::ids::IdKind;
use keel_envelope::worktree::{Isolation, WorktreeInfo};
use keel_envelope::{ErrorCode, ErrorPayload, Event, Sequencer};

use super::lifecycle::start_mcp;
use super::{invalid, refuse_while_running, Cx};
use crate::base::limits::{fork_extension, EXT_KEY};
use crate::base::mcp_config::from_specs;
use crate::session::checkpoints::{marks, restore_files, shared_with};
use crate::session::roots;
use crate::session::worktree;
use crate::session::{closed, Data, Session};

/// Extension keys a fork copies (the plan, rules and mode are in the state itself).
const FORK_COPIES: &[&str] = &["review", "patches", "taskGraph", roots::EXT_KEY];

/// `session.fork`.
pub(crate) async fn fork(
    cx: &Cx<'_>,
    parent: &Arc<Session>,
    p: &SessionFork,
) -> Result<(), ErrorPayload> {
    open_fork(cx, parent, p, &[]).await.map(|_| ())
}

/// A new session with `parent`'s history up to `atRequestId` (also its workspace,
/// with `files`), its host tools and MCP servers; `mcp_servers` come first.
pub(crate) async fn open_fork(
    cx: &Cx<'_>,
    parent: &Arc<Session>,
    p: &SessionFork,
    mcp_servers: &[McpServerSpec],
) -> Result<Arc<Session>, ErrorPayload> {
    let (services, rid) = (cx.services, cx.rid);
    // The servers given with the fork are checked before anything is done.
    let given = from_specs(mcp_servers)?;
    let files = p.files.unwrap_or(false);
    if files && p.at_request_id.is_none() {
        return Err(invalid(
            "`files: true` needs `atRequestId` (the point to restore the workspace to)",
            "payload.atRequestId",
        ));
    }
    let isolation = worktree::isolation(
        p.isolation.as_ref(),
        &services.config().worktrees.isolation,
        "payload.isolation",
    )?;
    let isolated = isolation == Isolation::Worktree;
    if files && isolated {
        return Err(invalid(
            "`files: true` with `isolation: \"worktree\"` is not supported: the fork's worktree \
             starts with the parent's files as they are now",
            "payload.files",
        ));
    }
    if parent.data().state.closed {
        return Err(closed());
    }
    const ROOTS_FIELD: &str = "payload.additionalRoots";
    if let Some(given) = p.additional_roots.as_deref() {
        // Checked before anything is done (again against a worktree of its own).
        roots::check(&parent.workspace, given, ROOTS_FIELD)?;
    }
    // The point of the cut: before `atRequestId`, or before the running request.
    let running = parent.data().active.as_ref().map(|a| a.id.clone());
    let at = p.at_request_id.clone().or(running.clone());
    let cut = match &at {
        None => None,
        Some(r) => Some(
            marks(parent)
                .iter()
                .find(|m| &m.request_id == r)
                .map(|m| m.history_len)
                .ok_or_else(|| {
                    invalid(
                        &format!("no request {r:?} in this session"),
                        "payload.atRequestId",
                    )
                })?,
        ),
    };
    if files {
        if let Some(e) = refuse_while_running(parent, "a fork with `files: true`") {
            return Err(e);
        }
        let r = p.at_request_id.clone().unwrap_or_default();
        restore_files(parent, r, rid).await?;
    }
    let id = services.next_id(IdKind::Session);
    let now = services.now();
    let admission = cx.open.admit()?;
    let mut state = {
        let mut d = parent.data();
        let Data { state, ext, .. } = &mut *d;
        ext.save(&mut state.extensions);
        state.clone()
    };
    state.session_id = id.clone();
    state.created_at = now;
    state.updated_at = now;
    state.closed = false;
    if let Some(len) = cut {
        state.history.truncate(len);
    }
    state
        .request_marks
        .retain(|m| cut.is_none_or(|c| m.history_len < c));
    let budget = fork_extension(&state.extensions);
    state
        .extensions
        .retain(|k, _| FORK_COPIES.contains(&k.as_str()));
    if let Some(b) = budget {
        state.extensions.insert(EXT_KEY.to_owned(), b);
    }
    state.extensions.remove(worktree::EXT_KEY);
    let model = services.model_or_default(&state.model)?;
    let (lease, _) = services.claim(&id)?;
    let tree = match isolated {
        true => match isolated_tree(cx, parent, &id).await {
            Ok(t) => Some(t),
            Err(e) => {
                let _ = services.store().unclaim(&id);
                return Err(e);
            }
        },
        false => None,
    };
    let (tree, made) = match tree {
        Some((info, ws, made)) => (Some((info, ws)), Some(made)),
        None => (None, None),
    };
    if let Some((info, ws)) = &tree {
        state.workspace = ws.display().to_string();
        worktree::keep_in(&mut state, info);
    }
    let checked = p
        .additional_roots
        .as_deref()
        .map(|given| roots::check(Path::new(&state.workspace), given, ROOTS_FIELD))
        .transpose();
    let saved = checked.and_then(|checked| {
        if let Some(checked) = checked {
            roots::keep_in(&mut state, &checked);
        }
        services.store().save_state(&state)
    });
    if let Err(e) = saved {
        if let Some(m) = made {
            m.discard().await;
        }
        let _ = services.store().unclaim(&id);
        return Err(e);
    }
    if let Some(m) = made {
        m.keep().await;
    }
    let session = Session::new(services.clone(), state, model, Sequencer::new(), lease);
    // The parent's host tools (they were accepted beside the same kernel tools).
    session
        .tools
        .set_host(services.registry(), parent.tools.host_entries())?;
    let session = admission.insert(&id, session);
    // Without a worktree of its own the fork works in the parent's folder: the parent
    // first, then the others.
    let shared = match tree {
        Some(_) => None,
        None => {
            let mut shared = vec![parent.id.clone()];
            shared.extend(shared_with(parent, cx.open.loaded(), Some(&id)).await);
            Some(shared)
        }
    };
    session
        .emitter
        .emit(
            rid,
            Event::SessionForked(
                SessionForked::new(id, parent.id.clone())
                    .at_request_id(at)
                    .shared_with(shared)
                    .worktree(tree.map(|(info, _)| info)),
            ),
        )
        .await;
    crate::pipeline::skills::load(&session, rid).await;
    // The same MCP servers: those given with the fork, the parent's own (one of the
    // same name as a given one is left out), then the configured ones.
    let mut servers = given;
    for s in parent.mcp.session_configs() {
        if !servers.iter().any(|g| g.name == s.name) {
            servers.push(s);
        }
    }
    start_mcp(cx, &session, servers);
    Ok(session)
}

/// The fork's own worktree: made at the commit the parent's tree is on, then given
/// the parent's uncommitted changes (edits, new files, deletions), so it starts with
/// the parent's files as they are at the fork. Its worktree and the workspace in it.
async fn isolated_tree(
    cx: &Cx<'_>,
    parent: &Session,
    id: &str,
) -> Result<(WorktreeInfo, PathBuf, worktree::Made), ErrorPayload> {
    let made = worktree::create(cx.services, id, id, &parent.workspace, None).await?;
    let (from, to) = (parent.workspace.clone(), made.created().path.clone());
    let copied = tokio::task::spawn_blocking(move || keel_tools::worktree::overlay(&from, &to))
        .await
        .unwrap_or_else(|e| {
            Err(ErrorPayload::new(
                ErrorCode::RuntimeInternalError,
                format!("copying the parent's changes failed: {e}"),
            ))
        });
    if let Err(e) = copied {
        made.discard().await;
        return Err(e);
    }
    let info = worktree::info_of(made.created());
    let workspace = made.created().workspace.clone();
    Ok((info, workspace, made))
}
