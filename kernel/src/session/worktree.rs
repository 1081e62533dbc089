//! A session's isolated workspace: the git worktree made for it
//! (`keel_tools::worktree`, run on the blocking pool), and what its stored state
//! keeps of it (`extensions.worktree`, the protocol's `WorktreeInfo`).
//!
//! A session in a worktree is an ordinary session whose workspace is in the
//! worktree: the jail, checkpoints, shell commands and `AGENTS.md` all follow from
//! `Session::workspace`, so nothing else needs to know.

use std::path::{Path, PathBuf};

use keel_envelope::worktree::{Isolation, WorktreeInfo};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::worktree::{self as wt, CreateRequest, Created, Removed};

use crate::base::store::PersistedSession;
use crate::session::services::Services;

/// The key of a session's worktree in its stored `extensions`.
pub(crate) const EXT_KEY: &str = "worktree";

/// The folder holding the worktrees.
pub(crate) fn folder(services: &Services) -> Result<PathBuf, ErrorPayload> {
    match &services.config().worktrees.dir {
        Some(d) => Ok(d.clone()),
        None => Ok(crate::base::config::default_store_dir()?.join("worktrees")),
    }
}

/// The isolation asked for, or the default; an unknown value is refused.
pub(crate) fn isolation(
    given: Option<&Isolation>,
    default: &Isolation,
    field: &str,
) -> Result<Isolation, ErrorPayload> {
    match given.unwrap_or(default) {
        Isolation::None => Ok(Isolation::None),
        Isolation::Worktree => Ok(Isolation::Worktree),
        other => Err(ErrorPayload::new(
            ErrorCode::RequestInvalid,
            format!(
                "isolation {:?} is not known: use \"none\" or \"worktree\"",
                other.as_str()
            ),
        )
        .with_detail("field", field)),
    }
}

/// The branch of a worktree owned by `id`.
pub(crate) fn branch_for(id: &str) -> String {
    format!("keel/{}", wt::short_id(id))
}

/// Makes a worktree named `name` of the repository holding `source`, on the blocking
/// pool; owned by `session_id`.
pub(crate) async fn create(
    services: &Services,
    name: &str,
    session_id: &str,
    source: &Path,
    base_ref: Option<&str>,
) -> Result<Created, ErrorPayload> {
    let folder = folder(services)?;
    let (name, session_id, source) = (name.to_owned(), session_id.to_owned(), source.to_owned());
    let base_ref = base_ref.map(str::to_owned);
    let branch = branch_for(&name);
    let now = services.now();
    tokio::task::spawn_blocking(move || {
        wt::create(
            &folder,
            &CreateRequest {
                name: &name,
                session_id: Some(&session_id),
                source: &source,
                branch: &branch,
                base_ref: base_ref.as_deref(),
                now,
            },
        )
    })
    .await
    .unwrap_or_else(|e| Err(joined(e)))
}

/// Removes worktree `name` on the blocking pool.
pub(crate) async fn remove(
    services: &Services,
    name: &str,
    force: bool,
) -> Result<Removed, ErrorPayload> {
    let folder = folder(services)?;
    let keep = services.config().worktrees.keep_branch;
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || wt::remove(&folder, &name, force, keep))
        .await
        .unwrap_or_else(|e| Err(joined(e)))
}

/// Every worktree of the folder, on the blocking pool.
pub(crate) async fn list(services: &Services) -> Result<Vec<WorktreeInfo>, ErrorPayload> {
    let folder = folder(services)?;
    tokio::task::spawn_blocking(move || wt::list(&folder))
        .await
        .map_err(joined)
}

/// The name of the worktree at `path` (or owned by `session_id`).
pub(crate) async fn find(
    services: &Services,
    path: Option<&str>,
    session_id: Option<&str>,
) -> Result<String, ErrorPayload> {
    let folder = folder(services)?;
    let (path, session_id) = (path.map(PathBuf::from), session_id.map(str::to_owned));
    tokio::task::spawn_blocking(move || {
        let found = match (&path, &session_id) {
            (Some(p), _) => wt::name_of(&folder, p).filter(|n| wt::record(&folder, n).is_some()),
            (None, Some(id)) => wt::records(&folder)
                .into_iter()
                .find(|r| r.session_id.as_deref() == Some(id.as_str()) && r.name == *id)
                .map(|r| r.name),
            (None, None) => {
                return Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    "give `path` or `sessionId`",
                )
                .with_detail("field", "payload.path"))
            }
        };
        found.ok_or_else(|| {
            let what = path
                .as_ref()
                .map(|p| format!("at {}", p.display()))
                .or_else(|| session_id.as_ref().map(|s| format!("of session {s}")))
                .unwrap_or_default();
            ErrorPayload::new(
                ErrorCode::WorktreeNotFound,
                format!("no worktree {what} is kept by this runtime"),
            )
        })
    })
    .await
    .unwrap_or_else(|e| Err(joined(e)))
}

fn joined(e: tokio::task::JoinError) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::RuntimeInternalError,
        format!("the worktree operation failed: {e}"),
    )
}

/// The protocol's view of a worktree made now.
pub(crate) fn info_of(c: &Created) -> WorktreeInfo {
    WorktreeInfo::new(
        c.path.display().to_string(),
        c.record.branch.clone(),
        c.record.repository.display().to_string(),
        c.record.base_commit.clone(),
        c.record.session_id.clone(),
        c.record.created_at,
    )
}

/// Records `info` as the session's worktree in its state.
pub(crate) fn keep_in(state: &mut PersistedSession, info: &WorktreeInfo) {
    if let Ok(v) = serde_json::to_value(info) {
        state.extensions.insert(EXT_KEY.to_owned(), v);
    }
}

/// The session's worktree, if it works in one.
pub(crate) fn of_state(state: &PersistedSession) -> Option<WorktreeInfo> {
    serde_json::from_value(state.extensions.get(EXT_KEY)?.clone()).ok()
}

/// The name (folder name) of a worktree.
pub(crate) fn name_of(info: &WorktreeInfo) -> Option<String> {
    Path::new(&info.path)
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
}
