//! Exact-replacement edits, unified diffs and atomic writes, shared by `edit_file`,
//! `write_file` and the approval preview.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use keel_envelope::tools::{DiffStats, Edit};
use keel_envelope::{ErrorCode, ErrorPayload};
use similar::{ChangeTag, TextDiff};

/// Applies `edits` in order to `content`. Each `oldText` must occur exactly once
/// (unless `replaceAll`); on any failure nothing is applied. When the file uses CRLF
/// line endings and an edit uses LF, the edit is converted so the file keeps CRLF.
/// Returns the new content and the number of replacements.
pub fn apply_edits(content: &str, edits: &[Edit]) -> Result<(String, u64), ErrorPayload> {
    if edits.is_empty() {
        return Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            "`edits` is empty; give at least one {oldText, newText}",
        )
        .with_detail("field", "edits"));
    }
    let crlf = content.contains("\r\n");
    let mut out = content.to_owned();
    let mut count = 0u64;
    for (i, edit) in edits.iter().enumerate() {
        if edit.old_text.is_empty() {
            return Err(ErrorPayload::new(
                ErrorCode::ToolArgumentsInvalid,
                format!("edit {i}: `oldText` is empty"),
            )
            .with_detail("edit", i));
        }
        let (old, new) = if crlf && !edit.old_text.contains("\r\n") && edit.old_text.contains('\n')
        {
            (
                edit.old_text.replace('\n', "\r\n"),
                edit.new_text.replace("\r\n", "\n").replace('\n', "\r\n"),
            )
        } else if crlf && !edit.new_text.contains("\r\n") && edit.new_text.contains('\n') {
            (edit.old_text.clone(), edit.new_text.replace('\n', "\r\n"))
        } else {
            (edit.old_text.clone(), edit.new_text.clone())
        };
        let n = out.matches(old.as_str()).count() as u64;
        if n == 0 {
            return Err(ErrorPayload::new(
                ErrorCode::ToolExecutionFailed,
                format!("edit {i}: `oldText` was not found in the file (it must match exactly, including whitespace); no edit was applied"),
            )
            .with_detail("edit", i));
        }
        let all = edit.replace_all.unwrap_or(false);
        if n > 1 && !all {
            return Err(ErrorPayload::new(
                ErrorCode::ToolExecutionFailed,
                format!("edit {i}: `oldText` matches {n} times; add surrounding text to make it unique or set `replaceAll`; no edit was applied"),
            )
            .with_detail("edit", i)
            .with_detail("matches", n));
        }
        out = if all {
            out.replace(old.as_str(), &new)
        } else {
            out.replacen(old.as_str(), &new, 1)
        };
        count += n;
    }
    Ok((out, count))
}

/// A unified diff from `old` to `new` with `a/` and `b/` headers, and its line counts.
pub fn unified_diff(path: &str, old: &str, new: &str) -> (String, DiffStats) {
    let diff = TextDiff::from_lines(old, new);
    let mut stats = DiffStats::default();
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => stats.added += 1,
            ChangeTag::Delete => stats.removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    (text, stats)
}

/// The process's file mode creation mask, read from `/proc/self/status` (`Umask:`,
/// Linux 4.7 and later) without changing it (the `umask` call both reads and sets it,
/// for every thread); `0o022` where it cannot be read.
pub fn process_umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// The mode of a file this process creates: `0666 & !umask`, as `open(2)` gives.
pub fn new_file_mode() -> u32 {
    0o666 & !process_umask()
}

/// Writes `content` to `target` atomically: a temporary file in the same directory,
/// flushed and renamed over the target. An existing file's permissions are kept; a new
/// file gets [`new_file_mode`] (`0666 & !umask`, as a shell's `>` gives), not the
/// temporary file's private `0600`.
pub fn atomic_write(target: &Path, content: &[u8]) -> Result<(), ErrorPayload> {
    let fail = |what: &str, e: std::io::Error| {
        ErrorPayload::new(ErrorCode::ToolExecutionFailed, format!("{what}: {e}"))
            .with_detail("path", target.to_string_lossy().into_owned())
    };
    let dir = target.parent().ok_or_else(|| {
        ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            "the path has no parent directory",
        )
    })?;
    let perms = std::fs::metadata(target).ok().map(|m| m.permissions());
    let mut tmp = tempfile::Builder::new()
        .prefix(".keel-tmp-")
        .tempfile_in(dir)
        .map_err(|e| fail("cannot create a temporary file", e))?;
    tmp.write_all(content)
        .map_err(|e| fail("cannot write", e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| fail("cannot flush", e))?;
    let perms = perms.unwrap_or_else(|| std::fs::Permissions::from_mode(new_file_mode()));
    tmp.as_file()
        .set_permissions(perms)
        .map_err(|e| fail("cannot set the file's permissions", e))?;
    tmp.persist(target)
        .map_err(|e| fail("cannot replace the file", e.error))?;
    sweep_once(dir);
    Ok(())
}

/// How old a `.keel-tmp-*` file must be to count as the leftover of a write cut by a
/// crash (a write in flight takes far less).
const STALE_TMP: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Removes the leftovers of writes cut by a crash (`.keel-tmp-*` files older than
/// [`STALE_TMP`]) from `dir`, the first time this process writes there: one directory
/// listing per directory and process, not per write.
fn sweep_once(dir: &Path) {
    static SWEPT: std::sync::Mutex<Option<std::collections::HashSet<std::path::PathBuf>>> =
        std::sync::Mutex::new(None);
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|p| p.into_inner());
        if !swept
            .get_or_insert_with(Default::default)
            .insert(dir.to_path_buf())
        {
            return;
        }
    }
    let _ = sweep_stale(dir, STALE_TMP);
}

/// Removes `.keel-tmp-*` regular files older than `age` from `dir`; returns how many.
pub(crate) fn sweep_stale(dir: &Path, age: std::time::Duration) -> std::io::Result<usize> {
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)?.flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .starts_with(".keel-tmp-")
        {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|d| d >= age);
        if meta.is_file() && old && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(old: &str, new: &str, all: bool) -> Edit {
        Edit {
            old_text: old.into(),
            new_text: new.into(),
            replace_all: Some(all),
        }
    }

    #[test]
    fn leftovers_of_cut_writes_are_swept_and_fresh_ones_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stale = dir.path().join(".keel-tmp-old");
        let fresh = dir.path().join(".keel-tmp-new");
        let other = dir.path().join("keep.txt");
        for p in [&stale, &fresh, &other] {
            std::fs::write(p, "x").expect("write");
        }
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for p in [&stale, &other] {
            std::fs::File::options()
                .write(true)
                .open(p)
                .and_then(|f| f.set_modified(hour_ago))
                .expect("set mtime");
        }
        // The first write in the directory sweeps it.
        atomic_write(&dir.path().join("a.txt"), b"a").expect("write");
        assert!(!stale.exists(), "a stale leftover is removed");
        assert!(fresh.exists(), "a write that may be in flight is kept");
        assert!(other.exists(), "other files are never touched");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).expect("read"),
            "a"
        );
    }

    #[test]
    fn edits_are_all_or_nothing_and_keep_crlf() {
        let (out, n) = apply_edits("a\r\nb\r\nc\r\n", &[e("a\nb", "x\ny", false)]).expect("test");
        assert_eq!(out, "x\r\ny\r\nc\r\n");
        assert_eq!(n, 1);
        assert!(apply_edits("aa", &[e("a", "b", false)]).is_err());
        assert_eq!(
            apply_edits("aa", &[e("a", "b", true)]).expect("test").0,
            "bb"
        );
        assert!(apply_edits("abc", &[e("a", "x", false), e("zzz", "y", false)]).is_err());
        let (d, s) = unified_diff("f", "a\nb\n", "a\nc\n");
        assert!(d.contains("-b\n+c"));
        assert_eq!((s.added, s.removed), (1, 1));
    }
}
