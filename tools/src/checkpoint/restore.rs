//! Putting the workspace back in the state of a checkpoint, path by path for the paths
//! that differ only: paths created since removed,
//! deleted paths recreated, modified files rewritten (atomically), modes and links
//! restored. Never writes through a symbolic link, never outside the root, never in
//! `.git` (no manifest holds such a path).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde::Serialize;

use super::git::Repo;
use super::manifest::{parent_of, Entry, Kind, Manifest};
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

/// Where restored contents come from: the store, or git for files recorded by blob id.
pub(crate) struct Contents<'a> {
    pub objects: &'a mut Objects,
    pub git: Option<&'a mut Repo>,
}

impl Contents<'_> {
    fn bytes(&mut self, kind: &Kind) -> Result<Vec<u8>, String> {
        match kind {
            Kind::File { hash } => self
                .objects
                .get(hash)
                .map_err(|e| format!("content not available: {e}")),
            Kind::Git { oid } => match self.git.as_deref_mut() {
                Some(g) => g
                    .read_blob(oid)
                    .map_err(|e| format!("content not available from git: {e}")),
                None => Err("content not available: the git repository is gone".into()),
            },
            _ => Err("not a file".into()),
        }
    }
}

/// Applies `targets` (each differing path and its entry in the checkpoint, `None`:
/// absent there) over `current` (the workspace as just looked at). Paths not named are
/// the same in both and are not touched.
pub(crate) fn apply(
    walker: &Walker,
    targets: &BTreeMap<String, Option<Entry>>,
    current: &Manifest,
    contents: &mut Contents<'_>,
) -> RestoreReport {
    let mut report = RestoreReport::default();

    // 1. Directories we must write into but may not: owner write and search for now;
    //    their modes are put back last.
    let mut opened: BTreeMap<String, u32> = BTreeMap::new();
    for path in targets.keys() {
        let parent = parent_of(path);
        if parent.is_empty() || opened.contains_key(parent) {
            continue;
        }
        if let Ok(meta) = fs::symlink_metadata(walker.abs(parent)) {
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() && mode & 0o300 != 0o300 {
                let _ = fs::set_permissions(
                    walker.abs(parent),
                    fs::Permissions::from_mode(mode | 0o700),
                );
                opened.insert(parent.to_string(), mode);
            }
        }
    }

    // 2. Remove, deepest first, what the target does not have (created since) or has
    //    as another type. A path that only became visible later (an ignore rule
    //    changed) is kept.
    for (path, t) in targets.iter().rev() {
        let Some(cur) = current.get(path) else {
            continue;
        };
        let remove = match t {
            None => !cur.appeared,
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
                if t.is_none() {
                    report.done(path, RestoreAction::Removed);
                }
                // Else replaced below by the target's type, and reported then.
            }
            Err(e) if meta.is_dir() => report.failed(
                path,
                format!("directory not removed: it holds files checkpoints do not track ({e})"),
            ),
            Err(e) => report.failed(path, format!("not removed: {e}")),
        }
    }

    // 3. Create and rewrite, parents first.
    for (path, t) in targets {
        let Some(t) = t else { continue };
        let cur = current.get(path);
        if let Err(reason) = put_back(walker, contents, path, t, cur, &mut report) {
            report.failed(path, reason);
        }
    }

    // 4. Directory modes, deepest first: the target's, and the ones opened in step 1.
    let mut modes: BTreeMap<String, u32> = opened;
    for (path, t) in targets {
        if let Some(t) = t.as_ref().filter(|t| t.is_dir()) {
            modes.insert(path.clone(), t.mode);
        }
    }
    for (path, mode) in modes.iter().rev() {
        let abs = walker.abs(path);
        if let Ok(meta) = fs::symlink_metadata(&abs) {
            if meta.is_dir() && meta.permissions().mode() & 0o7777 != *mode {
                if let Err(e) = fs::set_permissions(&abs, fs::Permissions::from_mode(*mode)) {
                    report.failed(path, format!("mode not restored: {e}"));
                }
            }
        }
    }
    report
}

fn put_back(
    walker: &Walker,
    contents: &mut Contents<'_>,
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
        Kind::File { .. } | Kind::Git { .. } => {
            let same_bytes = cur.is_some_and(|c| c.kind == t.kind)
                && on_disk.as_ref().is_some_and(|m| m.is_file());
            if same_bytes {
                fs::set_permissions(&abs, fs::Permissions::from_mode(t.mode))
                    .map_err(|e| format!("mode not restored: {e}"))?;
            } else {
                let bytes = contents.bytes(&t.kind)?;
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
    // Not synced: a restore saves files as an editor does (a rename over the old
    // file, which ext4, XFS and btrfs order after the new data); a disk sync per file
    // would make a restore cost what the disk's latency is, times the files.
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode))?;
    tmp.persist(abs).map_err(|e| e.error)?;
    Ok(())
}
