//! Putting the workspace back in the state of a manifest: paths created since removed,
//! deleted paths recreated, modified files rewritten (atomically), modes and links
//! restored. Never writes through a symbolic link, never outside the root, never in
//! `.git` (no manifest holds such a path).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde::Serialize;

use super::manifest::{Entry, Kind, Manifest};
use super::objects::Objects;
use super::scan::Walker;

/// What a restore did to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RestoreAction {
    /// Created after the checkpoint: removed.
    Removed,
    /// Deleted after the checkpoint: recreated.
    Recreated,
    /// Modified after the checkpoint (content, mode or link target): put back.
    Reverted,
}

/// One restored path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoredPath {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    /// What was done.
    pub action: RestoreAction,
}

/// A path that could not be put back, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotRestorable {
    /// Relative to the workspace, `/`-separated.
    pub path: String,
    /// Why, for people.
    pub reason: String,
}

/// The result of a restore.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreReport {
    /// Paths restored (files and links; directories only when they failed).
    pub files: Vec<RestoredPath>,
    /// Paths left as they are.
    pub not_restorable: Vec<NotRestorable>,
}

impl RestoreReport {
    fn done(&mut self, path: &str, action: RestoreAction) {
        self.files.push(RestoredPath {
            path: path.to_string(),
            action,
        });
    }

    fn failed(&mut self, path: &str, reason: impl Into<String>) {
        self.not_restorable.push(NotRestorable {
            path: path.to_string(),
            reason: reason.into(),
        });
    }
}

/// Applies `target` (the manifest of checkpoint `target_seq`) over `current` (the
/// workspace as just scanned).
pub(crate) fn apply(
    walker: &Walker,
    target: &Manifest,
    target_seq: u64,
    current: &Manifest,
    objects: &Objects,
) -> RestoreReport {
    let mut report = RestoreReport::default();

    // 1. Remove, deepest first, what the target does not have (created since) or has
    //    as another type. A path that only became visible later (born 0, or before the
    //    target) is kept.
    for (path, cur) in current.iter().rev() {
        let remove = match target.get(path) {
            None => cur.born > target_seq,
            Some(t) => t.type_tag() != cur.type_tag(),
        };
        if !remove {
            continue;
        }
        let abs = walker.abs(path);
        if !safe_parents(walker, path) {
            report.failed(path, "a parent directory is now a link or missing");
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(&abs) else {
            continue;
        };
        let result = if meta.is_dir() {
            fs::remove_dir(&abs)
        } else {
            fs::remove_file(&abs)
        };
        match result {
            Ok(()) if meta.is_dir() => {}
            Ok(()) => {
                if target.contains_key(path) {
                    // Replaced below by the target's type; reported then.
                } else {
                    report.done(path, RestoreAction::Removed);
                }
            }
            Err(e) if meta.is_dir() => report.failed(
                path,
                format!("directory not removed: it holds files checkpoints do not track ({e})"),
            ),
            Err(e) => report.failed(path, format!("not removed: {e}")),
        }
    }

    // 2. Directories we must write into but may not: owner write and search for now;
    //    their modes are set last.
    for (path, t) in target {
        if !t.is_dir() {
            continue;
        }
        if let Ok(meta) = fs::symlink_metadata(walker.abs(path)) {
            let mode = meta.permissions().mode();
            if meta.is_dir() && mode & 0o300 != 0o300 {
                let _ = fs::set_permissions(
                    walker.abs(path),
                    fs::Permissions::from_mode((mode | 0o700) & 0o7777),
                );
            }
        }
    }

    // 3. Create and rewrite, parents first.
    for (path, t) in target {
        let cur = current.get(path);
        if let Err(reason) = put_back(walker, objects, path, t, cur, &mut report) {
            report.failed(path, reason);
        }
    }

    // 4. Directory modes, deepest first.
    for (path, t) in target.iter().rev() {
        if !t.is_dir() {
            continue;
        }
        let abs = walker.abs(path);
        if let Ok(meta) = fs::symlink_metadata(&abs) {
            if meta.is_dir() && meta.permissions().mode() & 0o7777 != t.mode {
                if let Err(e) = fs::set_permissions(&abs, fs::Permissions::from_mode(t.mode)) {
                    report.failed(path, format!("mode not restored: {e}"));
                }
            }
        }
    }
    report
}

fn put_back(
    walker: &Walker,
    objects: &Objects,
    path: &str,
    t: &Entry,
    cur: Option<&Entry>,
    report: &mut RestoreReport,
) -> Result<(), String> {
    let abs = walker.abs(path);
    let on_disk = fs::symlink_metadata(&abs).ok();
    let unchanged = on_disk.is_some() && cur.is_some_and(|c| c.same_content(t));
    if unchanged {
        return Ok(());
    }
    let action = if on_disk.is_none() || cur.is_none() {
        RestoreAction::Recreated
    } else {
        RestoreAction::Reverted
    };
    if !safe_parents(walker, path) {
        return Err("a parent directory is now a link or missing".into());
    }
    match &t.kind {
        Kind::Dir => {
            if !on_disk.as_ref().is_some_and(|m| m.is_dir()) {
                fs::create_dir(&abs).map_err(|e| format!("directory not created: {e}"))?;
            }
        }
        Kind::Unsaved { reason } => {
            return Err(format!("not saved: {}", reason.describe()));
        }
        Kind::File { hash } => {
            let same_bytes = cur.is_some_and(|c| c.kind == t.kind)
                && on_disk.as_ref().is_some_and(|m| m.is_file());
            if same_bytes {
                fs::set_permissions(&abs, fs::Permissions::from_mode(t.mode))
                    .map_err(|e| format!("mode not restored: {e}"))?;
            } else {
                let bytes = objects
                    .get(hash)
                    .map_err(|e| format!("content not available: {e}"))?;
                write_file(&abs, &bytes, t.mode).map_err(|e| format!("not written: {e}"))?;
            }
            report.done(path, action);
        }
        Kind::Symlink { target } => {
            if on_disk.as_ref().is_some_and(|m| !m.is_dir()) {
                fs::remove_file(&abs).map_err(|e| format!("not replaced: {e}"))?;
            }
            std::os::unix::fs::symlink(target, &abs)
                .map_err(|e| format!("link not created: {e}"))?;
            report.done(path, action);
        }
    }
    Ok(())
}

/// Every ancestor of `rel` below the root is a real directory (not a link).
fn safe_parents(walker: &Walker, rel: &str) -> bool {
    let mut dir = walker.root.clone();
    let mut parts: Vec<&str> = rel.split('/').collect();
    parts.pop();
    for part in parts {
        if part.is_empty() || part == "." || part == ".." || part == ".git" {
            return false;
        }
        dir.push(part);
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            _ => return false,
        }
    }
    true
}

/// Writes a file atomically with the given mode: a temporary file beside it, renamed
/// over the path (so a link at the path is replaced, never written through).
fn write_file(abs: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = abs
        .parent()
        .ok_or_else(|| io::Error::other("no parent directory"))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".keel-restore-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_data()?;
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode))?;
    tmp.persist(abs).map_err(|e| e.error)?;
    Ok(())
}
