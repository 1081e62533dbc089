//! Making a session's workspace again from its newest checkpoint, in a folder the host
//! names (`session.resume {materializeTo}`, `keel sessions import --workspace`): for a
//! session whose workspace does not exist on this node (made on another machine,
//! imported, or taken over from another node). The session's checkpoints move to the
//! store of the new folder (`keel_tools::checkpoint::CheckpointHome::materialize`), so
//! `checkpoint.list` and `session.rewind` go on there; files the checkpoints did not
//! keep are reported missing.

use std::path::{Path, PathBuf};

use keel_envelope::events::{MaterializedWorkspace, NotRestorableFile};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::checkpoint::{BundleError, CheckpointHome};

use crate::base::store::PersistedSession;
use crate::session::services::Services;

/// Where the checkpoint stores of session `id` are: the kernel's checkpoint
/// directory, else the session's own directory in the store (`None`: a store that
/// keeps no files, and no checkpoint directory).
pub(crate) fn checkpoint_home(services: &Services, id: &str) -> Option<PathBuf> {
    match &services.config().checkpoint_dir {
        Some(dir) => Some(dir.clone()),
        None => services
            .store()
            .session_dir(id)
            .map(|d| d.join("checkpoints")),
    }
}

fn invalid(message: String, field: &str) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message).with_detail("field", field)
}

/// `WORKSPACE_MISSING` for session `id`, whose workspace `workspace` is not here.
pub(crate) fn missing(services: &Services, id: &str, workspace: &str) -> ErrorPayload {
    let here = checkpoint_home(services, id)
        .map(|home| CheckpointHome::new(home).count_records(Path::new(workspace), id))
        .unwrap_or(0);
    // A store several nodes share may hold more (taken in when the workspace is made).
    let shared = services
        .store()
        .shared_checkpoints()
        .and_then(|s| s.last_checkpoint(id).ok())
        .unwrap_or(0);
    let checkpoints = here.max(usize::try_from(shared).unwrap_or(usize::MAX));
    let how = if checkpoints > 0 {
        format!(
            "resume it with `materializeTo` (an absolute path, absent or empty; from the command line `keel resume {id} --materialize-to DIR`) to make it again from its newest checkpoint ({checkpoints} kept)"
        )
    } else {
        "this node has none of its checkpoints to make it again from: import the session here (`keel sessions import FILE --workspace DIR`), or give the node the workspace (a shared filesystem)".to_owned()
    };
    ErrorPayload::new(
        ErrorCode::WorkspaceMissing,
        format!("the workspace {workspace} of session {id} does not exist on this node; {how}"),
    )
    .with_detail("sessionId", id)
    .with_detail("workspace", workspace)
    .with_detail("checkpoints", checkpoints)
}

/// Checks `raw` as a folder to make a workspace in: an absolute path that does not
/// exist or is an empty directory. Creates it; returns it canonical, and whether it
/// was created.
pub(crate) fn prepare(raw: &str, field: &str) -> Result<(PathBuf, bool), ErrorPayload> {
    let path = Path::new(raw);
    if !path.is_absolute() {
        return Err(invalid(
            format!(
                "{raw:?} is not an absolute path: name the folder to make the workspace in in full"
            ),
            field,
        ));
    }
    let created = match std::fs::read_dir(path) {
        Ok(mut rd) => {
            if rd.next().is_some() {
                return Err(invalid(
                    format!("{raw} is not empty: name a folder that does not exist or is empty"),
                    field,
                ));
            }
            false
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(path)
                .map_err(|e| invalid(format!("cannot create {raw}: {e}"), field))?;
            true
        }
        Err(e) => return Err(invalid(format!("{raw} cannot be used: {e}"), field)),
    };
    let canon = std::fs::canonicalize(path)
        .map_err(|e| invalid(format!("{raw} cannot be used: {e}"), field))?;
    Ok((canon, created))
}

/// Makes folder `to` (made ready by [`prepare`]) the workspace of session `id` from
/// its newest checkpoint, its checkpoints moving there from the store of `from` (its
/// workspace until now). On failure, a folder [`prepare`] created (`created`) is
/// removed again.
pub(crate) async fn materialize(
    services: &Services,
    id: &str,
    from: &str,
    to: PathBuf,
    created: bool,
) -> Result<MaterializedWorkspace, ErrorPayload> {
    let Some(home) = checkpoint_home(services, id) else {
        return Err(no_checkpoints(id, "the session store keeps no files"));
    };
    let (sid, from_path, target) = (id.to_owned(), PathBuf::from(from), to.clone());
    let store = services.store().clone();
    let done = tokio::task::spawn_blocking(move || {
        let home = CheckpointHome::new(home);
        // What a store several nodes share holds comes in first.
        if let Some(shared) = store.shared_checkpoints() {
            if let Err(e) =
                crate::session::shared_checkpoints::pull_into(shared, &home, &from_path, &sid)
            {
                tracing::warn!(session_id = %sid, error = %e.message, "taking checkpoints in from the shared store failed");
            }
        }
        home.materialize(&from_path, &target, &sid)
    })
    .await
    .map_err(|e| ErrorPayload::new(ErrorCode::RuntimeInternalError, e.to_string()))?;
    let cleanup = || {
        if created {
            let _ = std::fs::remove_dir_all(&to);
        }
    };
    let made = match done {
        Ok(Some(m)) => m,
        Ok(None) => {
            cleanup();
            return Err(no_checkpoints(
                id,
                "it has no checkpoint on this node or in the store",
            ));
        }
        Err(e) => {
            cleanup();
            let reason = match e {
                BundleError::Invalid(_) => "damaged",
                BundleError::Store(_) => "io",
            };
            return Err(ErrorPayload::new(
                ErrorCode::SessionPersistenceFailed,
                format!(
                    "the workspace of session {id} could not be made from its checkpoints: {e}"
                ),
            )
            .with_detail("reason", reason));
        }
    };
    tracing::info!(session_id = %id, from, to = %to.display(), checkpoint = %made.checkpoint_id, restored = made.report.files.len(), missing = made.report.not_restorable.len(), "workspace materialised");
    Ok(MaterializedWorkspace::new(
        to.display().to_string(),
        from.to_owned(),
        made.checkpoint_id,
        made.report.files.len() as u32,
        made.report
            .not_restorable
            .into_iter()
            .map(|n| NotRestorableFile::new(n.path, n.reason))
            .collect::<Vec<_>>(),
    ))
}

fn no_checkpoints(id: &str, why: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::CheckpointNotFound,
        format!("the workspace of session {id} cannot be made from its checkpoints: {why}"),
    )
    .with_detail("sessionId", id)
    .with_detail("reason", "no_checkpoints")
}

/// The state of a session whose workspace moved to `workspace`: a worktree it had
/// belongs to the old place and is forgotten.
pub(crate) fn moved(state: &mut PersistedSession, workspace: &str) {
    state.workspace = workspace.to_owned();
    state.extensions.remove(crate::session::worktree::EXT_KEY);
}
