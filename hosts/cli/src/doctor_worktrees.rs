//! `keel doctor`'s check of the worktrees kept for isolated sessions: it counts
//! them, and finds and removes the leftovers of creations that a dead process left
//! half-made (their folder, git's entry, their branch when it has no commits, their
//! record).

use std::path::Path;

use keel_config::Config;
use keel_tools::worktree;

use crate::doctor_cmd::Check;

/// The check: the worktree folder's state, leftovers removed.
pub fn worktrees_check(config: &Config, home: &Path) -> Check {
    const NAME: &str = "worktrees";
    let folder = config
        .worktrees
        .dir
        .clone()
        .unwrap_or_else(|| home.join("worktrees"));
    let mut removed = Vec::new();
    let mut failed = Vec::new();
    for r in worktree::leftovers(&folder) {
        match worktree::remove(&folder, &r.name, true, false) {
            Ok(_) => removed.push(r.name),
            Err(e) => failed.push(format!("{}: {}", r.name, e.message)),
        }
    }
    let kept = worktree::records(&folder).len();
    let summary = format!(
        "{kept} kept in {}{}",
        folder.display(),
        if removed.is_empty() {
            String::new()
        } else {
            format!(
                "; removed {} left half-made by a process that died: {}",
                removed.len(),
                removed.join(", ")
            )
        }
    );
    if failed.is_empty() {
        Check::ok(NAME, summary)
    } else {
        Check::warn(
            NAME,
            format!("{summary}; could not remove {}", failed.join("; ")),
            "remove the named folders by hand, then run `git worktree prune` in their repository",
        )
    }
}
