//! Patch preview (seed 002 §8): proposed change sets, applied or rejected later.
//!
//! [`PatchBook`] is the pure state: pending patches and the history of resolved ones.
//! The file work (reading the current content, writing a patch) is in [`read_current`]
//! and [`write_patch`]; every path goes through the workspace jail and a patch is
//! written only if no file changed since it was proposed.

use std::path::Path;

use keel_envelope::ext::{Patch, PatchFile, PatchOp, PatchStats, PatchStatus};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::edit::{atomic_write, unified_diff};
use keel_tools::jail;
use serde::{Deserialize, Serialize};

/// How many resolved patches are kept.
pub(crate) const HISTORY_LIMIT: usize = 100;

/// Pending patches and resolved ones (oldest first).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PatchBook {
    pub(crate) pending: Vec<Patch>,
    pub(crate) history: Vec<Patch>,
}

/// The `origin` of a patch that brings back a sub-agent's changes.
pub(crate) const SUB_AGENT_ORIGIN: &str = "sub-agent";

/// The files of a patch from the changes of a sub-agent's worktree
/// (`keel_tools::worktree::diff_trees`), and the changed paths a patch cannot
/// carry, with why (patches hold text files only).
pub(crate) fn from_tree_changes(
    changes: Vec<keel_tools::worktree::TreeChange>,
) -> (Vec<PatchFile>, Vec<(String, &'static str)>) {
    use keel_tools::worktree::Side;
    fn text(side: Side) -> Result<Option<String>, &'static str> {
        match side {
            Side::Absent => Ok(None),
            Side::File(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| "binary"),
            Side::TooLarge(_) => Err("too large"),
            Side::Other => Err("not a regular file"),
        }
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for c in changes {
        match (text(c.before), text(c.after)) {
            (Ok(None), Ok(None)) => {}
            (Ok(before), Ok(after)) => {
                let index = files.len() as u32;
                files.push(file_change(index, &c.path, before, after));
            }
            (Err(why), _) | (_, Err(why)) => skipped.push((c.path, why)),
        }
    }
    (files, skipped)
}

/// One file change, with its diff and line counts.
pub(crate) fn file_change(
    index: u32,
    path: &str,
    before: Option<String>,
    after: Option<String>,
) -> PatchFile {
    let op = match (&before, &after) {
        (None, _) => PatchOp::Create,
        (Some(_), None) => PatchOp::Delete,
        (Some(_), Some(_)) => PatchOp::Modify,
    };
    let (diff, stats) = unified_diff(
        path,
        before.as_deref().unwrap_or(""),
        after.as_deref().unwrap_or(""),
    );
    PatchFile::new(index, path.to_owned(), op, diff, stats)
        .before(before)
        .after(after)
}

/// A pending patch over `files`.
pub(crate) fn new_patch(
    patch_id: String,
    origin: &str,
    reason: Option<String>,
    request_id: Option<String>,
    files: Vec<PatchFile>,
    now: u64,
) -> Patch {
    let stats = totals(
        files.iter().map(|f| (f.stats.added, f.stats.removed)),
        files.len(),
    );
    Patch::new(
        patch_id,
        PatchStatus::Pending,
        origin.to_owned(),
        now,
        files,
        stats,
    )
    .reason(reason)
    .request_id(request_id)
}

fn totals(lines: impl Iterator<Item = (u64, u64)>, count: usize) -> PatchStats {
    let mut s = PatchStats::new(count as u32, Default::default(), Default::default());
    for (a, r) in lines {
        s.added += a;
        s.removed += r;
    }
    s
}

/// The unknown patch error.
pub(crate) fn not_found(patch_id: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::PatchNotFound,
        format!("no pending patch {patch_id:?} (unknown, or already resolved)"),
    )
    .with_detail("patchId", patch_id)
}

impl PatchBook {
    /// Adds a pending patch.
    pub(crate) fn propose(&mut self, patch: Patch) {
        self.pending.push(patch);
    }

    /// Takes a pending patch out (to apply it); put it back with [`Self::restore`].
    pub(crate) fn take(&mut self, patch_id: &str) -> Result<Patch, ErrorPayload> {
        let pos = self
            .pending
            .iter()
            .position(|p| p.patch_id == patch_id)
            .ok_or_else(|| not_found(patch_id))?;
        Ok(self.pending.remove(pos))
    }

    /// Puts a taken patch back where pending patches go.
    pub(crate) fn restore(&mut self, patch: Patch) {
        let pos = self
            .pending
            .iter()
            .position(|p| p.proposed_at > patch.proposed_at)
            .unwrap_or(self.pending.len());
        self.pending.insert(pos, patch);
    }

    /// Records a taken patch as resolved; returns it.
    pub(crate) fn resolve(
        &mut self,
        mut patch: Patch,
        status: PatchStatus,
        by: &str,
        reason: Option<String>,
        now: u64,
    ) -> Patch {
        patch.status = status;
        patch.resolved_at = Some(now);
        patch.resolved_by = Some(by.to_owned());
        if reason.is_some() {
            patch.reason = reason;
        }
        self.history.push(patch.clone());
        if self.history.len() > HISTORY_LIMIT {
            let extra = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..extra);
        }
        patch
    }

    /// Totals over pending patches.
    pub(crate) fn totals(&self) -> PatchStats {
        let files = self.pending.iter().map(|p| p.files.len()).sum();
        totals(
            self.pending
                .iter()
                .map(|p| (p.stats.added, p.stats.removed)),
            files,
        )
    }

    /// Whether nothing was ever proposed (nothing to persist).
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.history.is_empty()
    }
}

fn outside(raw: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::PathOutsideWorkspace,
        format!("`{raw}` is outside the workspace; patches cannot touch it"),
    )
    .with_detail("path", raw)
}

/// Resolves `raw` inside the workspace or one of the `write` extra roots: its
/// display path, its real path, and its current text (`None` when it does not exist).
pub(crate) fn read_current(
    workspace: &Path,
    roots: &jail::Roots,
    raw: &str,
) -> Result<(String, std::path::PathBuf, Option<String>), ErrorPayload> {
    let r = jail::resolve_in(workspace, roots, raw)?;
    if !r.inside {
        return Err(outside(raw));
    }
    if let Some(root) = r.extra.as_ref().filter(|x| !x.writable) {
        return Err(ErrorPayload::new(
            ErrorCode::PathOutsideWorkspace,
            format!(
                "`{raw}` is in the extra root `{}`, which the session may only read; patches cannot touch it",
                root.path.display()
            ),
        )
        .with_detail("path", raw)
        .with_detail("root", root.path.display().to_string())
        .with_detail("access", "read"));
    }
    if r.is_dir || r.display == "." || r.extra.as_ref().is_some_and(|x| x.path == r.abs) {
        return Err(ErrorPayload::new(
            ErrorCode::RequestInvalid,
            format!("`{raw}` is a directory"),
        )
        .with_detail("path", raw));
    }
    let text = if r.exists {
        let bytes = jail::read_regular(&r.abs, keel_tools::fs::EDIT_MAX_BYTES).map_err(|e| {
            ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("cannot read `{raw}`: {e}"),
            )
            .with_detail("path", raw)
        })?;
        Some(String::from_utf8(bytes).map_err(|_| {
            ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("`{raw}` is not UTF-8 text; patches handle text files only"),
            )
            .with_detail("path", raw)
        })?)
    } else {
        None
    };
    Ok((r.display, r.abs, text))
}

/// Writes a patch: every file is checked against its `before` first (a changed file
/// refuses the whole patch with `PATCH_CONFLICT`), then each file is replaced
/// atomically (temporary file + rename) or deleted.
pub(crate) fn write_patch(
    workspace: &Path,
    roots: &jail::Roots,
    patch: &Patch,
) -> Result<(), ErrorPayload> {
    let mut targets = Vec::with_capacity(patch.files.len());
    for f in &patch.files {
        let (_, abs, now) = read_current(workspace, roots, &f.path)?;
        if now != f.before {
            return Err(ErrorPayload::new(
                ErrorCode::PatchConflict,
                format!(
                    "`{}` changed since patch {} was proposed; propose it again",
                    f.path, patch.patch_id
                ),
            )
            .with_detail("patchId", patch.patch_id.clone())
            .with_detail("path", f.path.clone()));
        }
        targets.push(abs);
    }
    let root = jail::canonical_root(workspace);
    for (f, abs) in patch.files.iter().zip(targets) {
        let fail = |e: std::io::Error| {
            ErrorPayload::new(
                ErrorCode::ToolExecutionFailed,
                format!("cannot write `{}`: {e}", f.path),
            )
            .with_detail("path", f.path.clone())
        };
        match &f.after {
            Some(text) => {
                if let Some(parent) = abs.parent() {
                    if !parent.exists() {
                        std::fs::create_dir_all(parent).map_err(fail)?;
                    }
                    // The parent may have been swapped for a link since resolution.
                    let real = std::fs::canonicalize(parent).map_err(fail)?;
                    let in_root = roots
                        .holding(&real)
                        .is_some_and(|r| r.writable && abs.starts_with(&r.path));
                    if !real.starts_with(&root) && !in_root {
                        return Err(outside(&f.path));
                    }
                }
                atomic_write(&abs, text.as_bytes())?;
            }
            None => {
                if abs.exists() {
                    std::fs::remove_file(&abs).map_err(fail)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn files_get_ops_diffs_and_counts() {
        let f = file_change(0, "a.txt", Some("a\nb\n".into()), Some("a\nc\nd\n".into()));
        assert_eq!(f.op, PatchOp::Modify);
        assert_eq!((f.stats.added, f.stats.removed), (2, 1));
        assert!(f.diff.contains("-b") && f.diff.contains("+c"));
        assert_eq!(
            file_change(0, "n", None, Some("x\n".into())).op,
            PatchOp::Create
        );
        let d = file_change(0, "d", Some("x\ny\n".into()), None);
        assert_eq!((d.op, d.stats.removed), (PatchOp::Delete, 2));
    }

    #[test]
    fn conflicts_and_escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        let f = file_change(0, "a.txt", Some("one\n".into()), Some("two\n".into()));
        let p = new_patch("patch_1".into(), "host", None, None, vec![f], 1);
        std::fs::write(dir.path().join("a.txt"), "changed\n").unwrap();
        assert_eq!(
            write_patch(dir.path(), &jail::Roots::none(), &p)
                .unwrap_err()
                .code,
            ErrorCode::PatchConflict
        );
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        write_patch(dir.path(), &jail::Roots::none(), &p).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "two\n"
        );
        assert_eq!(
            read_current(dir.path(), &jail::Roots::none(), "../x")
                .unwrap_err()
                .code,
            ErrorCode::PathOutsideWorkspace
        );
    }

    proptest! {
        /// Random propose / apply / reject sequences: a patch is pending or in the
        /// history, never both; resolved patches never come back; totals add up.
        #[test]
        fn the_book_keeps_patches_in_one_place(ops in proptest::collection::vec((0u8..3, 0usize..6), 0..50)) {
            let mut book = PatchBook::default();
            let mut next = 0u64;
            for (kind, pick) in ops {
                next += 1;
                match kind {
                    0 => {
                        let f = file_change(0, "f", Some("a\n".repeat(pick)), Some("b\n".into()));
                        book.propose(new_patch(format!("patch_{next}"), "host", None, None, vec![f], next));
                    }
                    _ => {
                        let id = book.pending.get(pick).map(|p| p.patch_id.clone()).unwrap_or_else(|| "patch_x".into());
                        match book.take(&id) {
                            Ok(p) => {
                                let status = if kind == 1 { PatchStatus::Applied } else { PatchStatus::Rejected };
                                let r = book.resolve(p, status.clone(), "host", None, next);
                                prop_assert_eq!(r.status, status);
                                prop_assert!(book.take(&id).is_err());
                            }
                            Err(e) => prop_assert_eq!(e.code, ErrorCode::PatchNotFound),
                        }
                    }
                }
                for p in &book.pending {
                    prop_assert_eq!(p.status.clone(), PatchStatus::Pending);
                    prop_assert!(!book.history.iter().any(|h| h.patch_id == p.patch_id));
                }
                prop_assert!(book.history.iter().all(|h| h.status != PatchStatus::Pending && h.resolved_at.is_some()));
                let t = book.totals();
                prop_assert_eq!(t.added, book.pending.iter().map(|p| p.stats.added).sum::<u64>());
                prop_assert_eq!(t.file_count as usize, book.pending.len());
            }
        }
    }
}
