//! The checkpoint an export records: the workspace of a stored session as it is now,
//! taken outside any open session's book (`keel sessions export`,
//! [`crate::kernel::portable`]).

use std::path::Path;

use keel_tools::checkpoint::{CheckpointConfig, CheckpointError, CheckpointHome};

use crate::session::checkpoints::Meta;

/// Records the workspace of stored session `id` as it is now, as checkpoint
/// `checkpoint_id` of the session (its `requestId` the session's last request's,
/// `historyLen` the whole conversation), for an export: so that the newest checkpoint
/// the export carries is the workspace as exported. Only when the workspace exists
/// here, no process holds the session open (its own book would be writing), and it
/// changed since the session's last checkpoint (or it has none). On the blocking
/// pool. `Ok(false)`: nothing recorded; a workspace over the file limit records
/// nothing either.
pub(crate) fn record_for_export(
    home: &Path,
    workspace: &Path,
    id: &str,
    checkpoint_id: &str,
    state: &crate::base::store::PersistedSession,
) -> Result<bool, CheckpointError> {
    if !workspace.is_dir() {
        return Ok(false);
    }
    let home = CheckpointHome::new(home);
    if home.open_sessions(workspace).iter().any(|s| s == id) {
        return Ok(false);
    }
    let config = CheckpointConfig {
        watch: false,
        ..CheckpointConfig::default()
    };
    let mut engine = home.open(workspace, id, config)?;
    let changed = engine.list().is_empty() || !engine.pending_changes()?.is_empty();
    if !changed {
        return Ok(false);
    }
    let meta = Meta {
        request_id: state
            .request_marks
            .last()
            .map(|m| m.request_id.clone())
            .unwrap_or_default(),
        tool_call_id: None,
        tool_name: None,
        history_len: state.history.len(),
        before_rewind: None,
    };
    let value = serde_json::to_value(&meta).unwrap_or_default();
    match engine.checkpoint(checkpoint_id, value) {
        Ok(_) => Ok(true),
        Err(CheckpointError::TooManyFiles { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}
