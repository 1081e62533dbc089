//! A session's isolated workspace: the git worktree made for it
//! (`keel_tools::worktree`, run on the blocking pool), and what its stored state
//! keeps of it (`extensions.worktree`, the protocol's `WorktreeInfo`).
//!
//! A session in a worktree is an ordinary session whose workspace is in the
//! worktree: the jail, checkpoints, shell commands and `AGENTS.md` all follow from
//! `Session::workspace`, so nothing else needs to know.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_envelope::worktree::{Isolation, WorktreeInfo};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::worktree::{self as wt, CreateRequest, Created, Removed};
use tokio::task::JoinHandle;

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

/// A worktree made for a session that is not yet stored: [`Made::keep`] once the
/// session that works in it is saved (its record becomes `ready`). Dropped without
/// it (the command was interrupted, or failed after), the worktree is taken back on
/// the blocking pool, tracked by the kernel's [`Cleanups`]; a process that dies in
/// between leaves a leftover that `keel doctor` removes.
#[derive(Debug)]
pub(crate) struct Made {
    created: Created,
    folder: PathBuf,
    name: String,
    cleanups: Cleanups,
    settled: bool,
}

impl Made {
    /// The worktree.
    pub(crate) fn created(&self) -> &Created {
        &self.created
    }

    /// The session working in it is saved: its record becomes `ready`.
    pub(crate) async fn keep(mut self) {
        self.settled = true;
        let (folder, name) = (self.folder.clone(), self.name.clone());
        let confirmed = tokio::task::spawn_blocking(move || wt::confirm(&folder, &name))
            .await
            .unwrap_or_else(|e| Err(joined(e)));
        if let Err(e) = confirmed {
            // The session is stored with it: left `made`, `keel doctor` would take it
            // for a leftover once this process is gone (a disk that refuses writes).
            tracing::warn!(worktree = %self.name, code = %e.code, message = %e.message, "a worktree's record was not marked ready");
        }
    }

    /// Takes the worktree back now (the command failed after it was made).
    pub(crate) async fn discard(mut self) {
        self.settled = true;
        let (folder, name) = (self.folder.clone(), self.name.clone());
        let _ = tokio::task::spawn_blocking(move || wt::discard(&folder, &name)).await;
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        self.settled = true;
        let (folder, name) = (self.folder.clone(), self.name.clone());
        let discard = move || {
            wt::discard(&folder, &name);
            tracing::info!(worktree = %name, "took back the worktree of a session start that was given up");
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => self.cleanups.track(rt.spawn_blocking(discard)),
            Err(_) => discard(),
        }
    }
}

/// Makes a worktree named `name` of the repository holding `source` for session
/// `session_id` (about to be stored), on the blocking pool: to its end even if the
/// caller is dropped meanwhile, the worktree then taken back (see [`Made`]).
pub(crate) async fn create(
    services: &Services,
    name: &str,
    session_id: &str,
    source: &Path,
    base_ref: Option<&str>,
) -> Result<Made, ErrorPayload> {
    let folder = folder(services)?;
    let (name, session_id, source) = (name.to_owned(), session_id.to_owned(), source.to_owned());
    let base_ref = base_ref.map(str::to_owned);
    let branch = branch_for(&name);
    let now = services.now();
    let cleanups = services.cleanups().clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = tokio::task::spawn_blocking(move || {
        let made = wt::create(
            &folder,
            &CreateRequest {
                name: &name,
                session_id: Some(&session_id),
                source: &source,
                branch: &branch,
                base_ref: base_ref.as_deref(),
                now,
                held: true,
            },
        )
        .map(|created| Made {
            created,
            folder,
            name,
            cleanups,
            settled: false,
        });
        // Refused when the caller is gone: dropped here, the worktree goes again.
        let _ = tx.send(made);
    });
    services.cleanups().track(job);
    rx.await.unwrap_or_else(|_| {
        Err(ErrorPayload::new(
            ErrorCode::RuntimeInternalError,
            "making the worktree failed",
        ))
    })
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

/// Blocking work on sub-agents' worktrees that a request waits for before it ends
/// (`work::request`): a worktree still being made when an interrupt dropped the call
/// that asked for it, or being removed after. Nothing of a sub-agent's worktree
/// outlives the request that spawned it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Cleanups(Arc<Mutex<Vec<JoinHandle<()>>>>);

impl Cleanups {
    fn jobs(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `job` to be waited for.
    pub(crate) fn track(&self, job: JoinHandle<()>) {
        let mut jobs = self.jobs();
        jobs.retain(|j| !j.is_finished());
        jobs.push(job);
    }

    /// Waits until every job has ended (also those that jobs start meanwhile).
    pub(crate) async fn settle(&self) {
        loop {
            let jobs = std::mem::take(&mut *self.jobs());
            if jobs.is_empty() {
                return;
            }
            for j in jobs {
                let _ = j.await;
            }
        }
    }
}

/// A sub-agent's worktree: made at the commit its parent's tree is on, given the
/// parent's uncommitted changes, and its starting point recorded as a git tree
/// ([`wt::snapshot`]). Dropped without [`SubTree::finish`] (an interrupt, a failure
/// in between), it removes itself on the blocking pool, tracked by the session's
/// [`Cleanups`].
#[derive(Debug)]
pub(crate) struct SubTree {
    /// The worktree as the protocol shows it.
    pub(crate) info: WorktreeInfo,
    /// The sub-agent's workspace in it: the same folder as the parent's workspace is
    /// in its repository.
    pub(crate) workspace: PathBuf,
    /// The worktree's top folder.
    top: PathBuf,
    /// The workspace relative to the top (`""`: the top), `/`-separated.
    under: String,
    /// The tree of its files at the start.
    start: String,
    name: String,
    folder: PathBuf,
    keep_branch: bool,
    cleanups: Cleanups,
    removed: bool,
}

impl SubTree {
    fn remove_now(&mut self) -> Result<Removed, ErrorPayload> {
        self.removed = true;
        wt::remove(&self.folder, &self.name, true, self.keep_branch)
    }

    /// Records what changed in the worktree since it started (files under the
    /// workspace, each at most `max_bytes` read) and removes it, branch per the
    /// configuration's `keepBranch` (one with commits of its own is kept). Runs on
    /// the blocking pool to its end even if the caller is dropped meanwhile.
    pub(crate) async fn finish(
        mut self,
        max_bytes: u64,
    ) -> (
        Result<Vec<wt::TreeChange>, ErrorPayload>,
        Result<Removed, ErrorPayload>,
    ) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let cleanups = self.cleanups.clone();
        let job = tokio::task::spawn_blocking(move || {
            let changes = wt::snapshot(&self.top).and_then(|end| {
                wt::diff_trees(&self.top, &self.start, &end, &self.under, max_bytes)
            });
            let removed = self.remove_now();
            let _ = tx.send((changes, removed));
        });
        cleanups.track(job);
        rx.await.unwrap_or_else(|_| {
            let e = ErrorPayload::new(
                ErrorCode::RuntimeInternalError,
                "the sub-agent's worktree could not be read",
            );
            (Err(e.clone()), Err(e))
        })
    }
}

impl Drop for SubTree {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        self.removed = true;
        let (folder, name, keep) = (self.folder.clone(), self.name.clone(), self.keep_branch);
        let remove = move || {
            if let Err(e) = wt::remove(&folder, &name, true, keep) {
                tracing::warn!(worktree = %name, code = %e.code, message = %e.message, "a sub-agent's worktree was not removed");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => self.cleanups.track(rt.spawn_blocking(remove)),
            Err(_) => remove(),
        }
    }
}

/// Makes the worktree of sub-agent `name` of `session`: on the blocking pool, to its
/// end even if the caller is dropped meanwhile (the worktree then removes itself).
/// Outside git (or with git failing) it is `WORKTREE_UNAVAILABLE` and nothing is
/// left.
pub(crate) async fn sub_tree(
    session: &crate::session::Session,
    name: &str,
) -> Result<SubTree, ErrorPayload> {
    let services = &session.services;
    let folder = folder(services)?;
    let keep_branch = services.config().worktrees.keep_branch;
    let (name, owner) = (name.to_owned(), session.id.clone());
    let source = session.workspace.clone();
    let branch = branch_for(&name);
    let now = services.now();
    let cleanups = session.cleanups.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = tokio::task::spawn_blocking(move || {
        let made = wt::create(
            &folder,
            &CreateRequest {
                name: &name,
                session_id: Some(&owner),
                source: &source,
                branch: &branch,
                base_ref: None,
                now,
                held: false,
            },
        );
        let made = match made {
            Ok(m) => m,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let under = made
            .workspace
            .strip_prefix(&made.path)
            .map(|p| p.to_string_lossy().replace('\\', "/"))
            .unwrap_or_default();
        let mut tree = SubTree {
            info: info_of(&made),
            workspace: made.workspace.clone(),
            top: made.path.clone(),
            under,
            start: String::new(),
            name,
            folder,
            keep_branch,
            cleanups,
            removed: false,
        };
        // From here on a failure, or a caller gone, takes the worktree away again.
        match wt::overlay(&source, &tree.top).and_then(|_| wt::snapshot(&tree.top)) {
            Ok(start) => {
                tree.start = start;
                // Refused when the caller is gone: dropped, it removes itself.
                let _ = tx.send(Ok(tree));
            }
            Err(e) => {
                let _ = tree.remove_now();
                let _ = tx.send(Err(e));
            }
        }
    });
    session.cleanups.track(job);
    rx.await.unwrap_or_else(|_| {
        Err(ErrorPayload::new(
            ErrorCode::RuntimeInternalError,
            "making the sub-agent's worktree failed",
        ))
    })
}

/// Removes the worktrees of sub-agents that were running when the session was last
/// saved by a process that is gone (recorded as failed on load): on the blocking
/// pool, tracked by the session's [`Cleanups`], so its next request ends only after.
pub(crate) fn remove_orphans(session: &crate::session::Session, trees: Vec<WorktreeInfo>) {
    if trees.is_empty() {
        return;
    }
    let (Ok(folder), Ok(rt)) = (
        folder(&session.services),
        tokio::runtime::Handle::try_current(),
    ) else {
        return;
    };
    let keep = session.services.config().worktrees.keep_branch;
    let names: Vec<String> = trees.iter().filter_map(name_of).collect();
    let job = rt.spawn_blocking(move || {
        for name in names {
            match wt::remove(&folder, &name, true, keep) {
                Ok(_) => tracing::info!(worktree = %name, "removed the worktree of a sub-agent cut off by a restart"),
                Err(e) if e.code == ErrorCode::WorktreeNotFound => {}
                Err(e) => tracing::warn!(worktree = %name, code = %e.code, message = %e.message, "a sub-agent's worktree was not removed"),
            }
        }
    });
    session.cleanups.track(job);
}
