//! Exact-replacement edits, unified diffs and atomic writes, shared by `edit_file`,
//! `write_file` and the approval preview.

use std::io::Write;
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

/// Writes `content` to `target` atomically: a temporary file in the same directory,
/// flushed and renamed over the target. An existing file's permissions are kept.
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
    if let Some(p) = perms {
        std::fs::set_permissions(tmp.path(), p).map_err(|e| fail("cannot keep permissions", e))?;
    }
    tmp.persist(target)
        .map_err(|e| fail("cannot replace the file", e.error))?;
    Ok(())
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
