//! `keel doctor`'s check of the worktrees kept for isolated sessions: it counts
//! them, and finds and removes the leftovers of creations that a dead process left
//! half-made (their folder, git's entry, their branch when it has no commits, their
//! record). A worktree made for a session that was stored but whose record was not
//! yet marked ready when its process died is the session's: it is marked ready, not
//! removed. Without the store (a PostgreSQL store that does not open), such
//! worktrees are left alone.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel_config::{Config, EnvMap, StoreSetting};
use keel_kernel::store::{FileStore, Store};
use keel_tools::worktree;

use crate::doctor_cmd::Check;

/// The store sessions are kept in, to tell a session's worktree from a leftover
/// (`None`: it does not open within `limit`).
pub(crate) async fn store_for(
    flag: Option<&str>,
    env: &EnvMap,
    config: &Config,
    home: &Path,
    limit: Duration,
) -> Option<Arc<dyn Store>> {
    match crate::store_select::selected(flag, env, config).ok()? {
        None => Some(Arc::new(FileStore::new(home))),
        Some((StoreSetting::Dir(d), _)) => Some(Arc::new(FileStore::new(d))),
        Some((StoreSetting::Postgres(url), _)) => {
            let open =
                tokio::task::spawn_blocking(move || crate::store_select::open_postgres(&url));
            match tokio::time::timeout(limit + Duration::from_secs(10), open).await {
                Ok(Ok(Ok(s))) => Some(s),
                _ => None,
            }
        }
    }
}

/// The check: the worktree folder's state, leftovers removed.
pub fn worktrees_check(config: &Config, home: &Path, store: Option<&dyn Store>) -> Check {
    const NAME: &str = "worktrees";
    let folder = config
        .worktrees
        .dir
        .clone()
        .unwrap_or_else(|| home.join("worktrees"));
    let mut removed = Vec::new();
    let mut adopted = Vec::new();
    let mut failed = Vec::new();
    for r in worktree::leftovers(&folder) {
        if r.state == "made" {
            // Git made it: whether its session was stored decides.
            let stored = match (store, r.session_id.as_deref()) {
                (_, None) => Some(false),
                (None, Some(_)) => None,
                (Some(s), Some(id)) => s.load_state(id).ok().map(|s| s.is_some()),
            };
            match stored {
                Some(true) => {
                    match worktree::confirm(&folder, &r.name) {
                        Ok(()) => adopted.push(r.name),
                        Err(e) => failed.push(format!("{}: {}", r.name, e.message)),
                    }
                    continue;
                }
                Some(false) => {}
                None => {
                    failed.push(format!(
                        "{}: the session store cannot be read to tell whether session {} has it",
                        r.name,
                        r.session_id.as_deref().unwrap_or_default()
                    ));
                    continue;
                }
            }
        }
        match worktree::remove(&folder, &r.name, true, false) {
            Ok(_) => removed.push(r.name),
            Err(e) => failed.push(format!("{}: {}", r.name, e.message)),
        }
    }
    let kept = worktree::records(&folder).len();
    let mut summary = format!("{kept} kept in {}", folder.display());
    if !removed.is_empty() {
        summary.push_str(&format!(
            "; removed {} left half-made by a process that died: {}",
            removed.len(),
            removed.join(", ")
        ));
    }
    if !adopted.is_empty() {
        summary.push_str(&format!(
            "; marked ready {} whose session was stored: {}",
            adopted.len(),
            adopted.join(", ")
        ));
    }
    if failed.is_empty() {
        Check::ok(NAME, summary)
    } else {
        Check::warn(
            NAME,
            format!("{summary}; could not settle {}", failed.join("; ")),
            "make the session store reachable and run `keel doctor` again, or remove the named folders by hand and run `git worktree prune` in their repository",
        )
    }
}
