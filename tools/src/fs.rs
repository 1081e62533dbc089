//! `read_file`, `list_dir`, `edit_file` and `write_file`.

use std::io::BufRead;

use keel_envelope::tools::{
    DirEntry, EditFileArgs, EntryKind, FileChangeResult, ListDirArgs, ListDirResult, ReadFileArgs,
    ReadFileResult, WriteFileArgs,
};
use keel_envelope::{ErrorCode, ErrorPayload};

use crate::edit::{apply_edits, atomic_write, unified_diff};
use crate::jail::{self, ResolvedPath};
use crate::ToolContext;

/// Largest number of lines `read_file` returns when no `limit` is given.
pub const READ_DEFAULT_LINES: u64 = 2000;
/// Largest number of bytes of content `read_file` returns.
pub const READ_MAX_BYTES: usize = 256 * 1024;
/// Largest file `edit_file` and `write_file` handle.
pub const EDIT_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Default `list_dir` depth.
pub const LIST_DEFAULT_DEPTH: u32 = 2;
/// Largest `list_dir` depth.
pub const LIST_MAX_DEPTH: u32 = 16;
/// Largest number of `list_dir` entries.
pub const LIST_MAX_ENTRIES: usize = 1000;

/// Parses tool arguments, reporting the failing field.
pub fn parse_args<T: serde::de::DeserializeOwned>(
    tool: &str,
    args: serde_json::Value,
) -> Result<T, ErrorPayload> {
    let args = if args.is_null() {
        serde_json::Value::Object(Default::default())
    } else {
        args
    };
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("{tool}: invalid arguments: {}", e.inner()),
        )
        .with_detail("tool", tool)
        .with_detail("field", path)
    })
}

fn exec_failed(message: impl Into<String>, path: &str) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::ToolExecutionFailed, message).with_detail("path", path)
}

/// Resolves a path the call reads: in the workspace or one of the session's extra
/// roots, elsewhere only with an elevated call.
pub fn resolve_read(ctx: &ToolContext, raw: &str) -> Result<ResolvedPath, ErrorPayload> {
    let r = jail::resolve_in(&ctx.workspace, &ctx.roots, raw)?;
    if !r.inside && !ctx.elevated {
        return Err(ErrorPayload::new(
            ErrorCode::PathOutsideWorkspace,
            format!(
                "`{raw}` is outside the workspace{}; reading it needs an elevated approval",
                roots_note(ctx)
            ),
        )
        .with_detail("path", raw));
    }
    Ok(r)
}

/// ` and its extra roots` when the session has some.
fn roots_note(ctx: &ToolContext) -> &'static str {
    if ctx.roots.is_empty() {
        ""
    } else {
        " and its extra roots"
    }
}

/// The refusal of a write to `r`, which is not [`ResolvedPath::writable`]: outside
/// every root, or in a `read` extra root. Both are `PATH_OUTSIDE_WORKSPACE`.
pub fn write_refused(ctx: &ToolContext, r: &ResolvedPath, raw: &str) -> ErrorPayload {
    match &r.extra {
        Some(root) if !root.writable => ErrorPayload::new(
            ErrorCode::PathOutsideWorkspace,
            format!(
                "`{raw}` is in the extra root `{}`, which the session may only read; writes there are not allowed",
                root.path.display()
            ),
        )
        .with_detail("path", raw)
        .with_detail("root", root.path.display().to_string())
        .with_detail("access", "read"),
        _ => ErrorPayload::new(
            ErrorCode::PathOutsideWorkspace,
            format!(
                "`{raw}` is outside the workspace{}; writes outside it are not allowed",
                roots_note(ctx)
            ),
        )
        .with_detail("path", raw),
    }
}

/// Resolves a path the call writes: always inside the workspace or a `write` extra
/// root.
pub fn resolve_write(ctx: &ToolContext, raw: &str) -> Result<ResolvedPath, ErrorPayload> {
    let r = jail::resolve_in(&ctx.workspace, &ctx.roots, raw)?;
    if !r.writable() {
        return Err(write_refused(ctx, &r, raw));
    }
    Ok(r)
}

/// Whether the bytes look binary (a NUL byte, or not UTF-8 apart from a cut final
/// character).
pub fn looks_binary(head: &[u8]) -> bool {
    if head.contains(&0) {
        return true;
    }
    match std::str::from_utf8(head) {
        Ok(_) => false,
        Err(e) => e.error_len().is_some(),
    }
}

/// `read_file`.
pub fn read_file(args: ReadFileArgs, ctx: &ToolContext) -> Result<ReadFileResult, ErrorPayload> {
    let r = resolve_read(ctx, &args.path)?;
    if !r.exists {
        return Err(exec_failed(
            format!("`{}` does not exist", args.path),
            &args.path,
        ));
    }
    if r.is_dir {
        return Err(exec_failed(
            format!("`{}` is a directory; use list_dir", args.path),
            &args.path,
        ));
    }
    let offset = args.offset.unwrap_or(1);
    if offset == 0 {
        return Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            "`offset` is 1-based; use 1 for the first line",
        )
        .with_detail("field", "offset"));
    }
    if args.limit == Some(0) {
        return Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            "`limit` must be at least 1",
        )
        .with_detail("field", "limit"));
    }
    let limit = args.limit.unwrap_or(READ_DEFAULT_LINES);
    let file = jail::open_regular(&r.abs)
        .map_err(|e| exec_failed(format!("cannot open `{}`: {e}", args.path), &args.path))?;
    let size_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, file);
    let head = reader
        .fill_buf()
        .map_err(|e| exec_failed(format!("cannot read `{}`: {e}", args.path), &args.path))?;
    let head_len = head.len().min(8192);
    if looks_binary(&head[..head_len]) {
        return Err(exec_failed(
            format!(
                "`{}` is a binary file ({size_bytes} bytes); read_file only returns text",
                args.path
            ),
            &args.path,
        )
        .with_detail("binary", true));
    }
    let mut content = String::new();
    let mut total_lines = 0u64;
    let mut line_count = 0u64;
    let mut cut_by_size = false;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| exec_failed(format!("cannot read `{}`: {e}", args.path), &args.path))?;
        if n == 0 {
            break;
        }
        total_lines += 1;
        if total_lines < offset || line_count >= limit || cut_by_size {
            continue;
        }
        let text = match std::str::from_utf8(&buf) {
            Ok(t) => t,
            Err(_) => {
                return Err(exec_failed(format!("`{}` is not valid UTF-8 text (line {total_lines}); read_file only returns text", args.path), &args.path).with_detail("binary", true));
            }
        };
        if content.len() + text.len() > READ_MAX_BYTES {
            cut_by_size = true;
            continue;
        }
        content.push_str(text);
        line_count += 1;
    }
    let start_line = offset.min(total_lines.max(1));
    let truncated = cut_by_size || offset.saturating_add(line_count) <= total_lines;
    if truncated && line_count > 0 {
        let last = offset + line_count - 1;
        if !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&format!(
            "[truncated: showing lines {offset}-{last} of {total_lines}{}; call read_file with offset {} to read more]",
            if cut_by_size { ", output size limit reached" } else { "" },
            last + 1
        ));
    } else if truncated {
        content.push_str(&format!(
            "[truncated: no lines shown; the file has {total_lines} lines]"
        ));
    }
    Ok(ReadFileResult {
        path: r.display,
        content,
        start_line,
        line_count,
        total_lines,
        size_bytes,
        truncated,
    })
}

/// `list_dir`.
pub fn list_dir(args: ListDirArgs, ctx: &ToolContext) -> Result<ListDirResult, ErrorPayload> {
    let r = resolve_read(ctx, &args.path)?;
    if !r.exists {
        return Err(exec_failed(
            format!("`{}` does not exist", args.path),
            &args.path,
        ));
    }
    if !r.is_dir {
        return Err(exec_failed(
            format!("`{}` is not a directory", args.path),
            &args.path,
        ));
    }
    let depth = args.depth.unwrap_or(LIST_DEFAULT_DEPTH);
    if depth == 0 || depth > LIST_MAX_DEPTH {
        return Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("`depth` must be between 1 and {LIST_MAX_DEPTH}"),
        )
        .with_detail("field", "depth"));
    }
    let root = jail::canonical_root(&ctx.workspace);
    let walker = ignore::WalkBuilder::new(&r.abs)
        .max_depth(Some(depth as usize))
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    let mut entries = Vec::new();
    let mut truncated = false;
    for item in walker {
        let Ok(entry) = item else { continue };
        if entry.depth() == 0 {
            continue;
        }
        if entries.len() >= LIST_MAX_ENTRIES {
            truncated = true;
            break;
        }
        let ft = entry.file_type();
        let kind = match ft {
            Some(t) if t.is_symlink() => EntryKind::Symlink,
            Some(t) if t.is_dir() => EntryKind::Dir,
            Some(t) if t.is_file() => EntryKind::File,
            _ => EntryKind::Other,
        };
        let size = if kind == EntryKind::File {
            entry.metadata().map(|m| m.len()).unwrap_or(0)
        } else {
            0
        };
        entries.push(DirEntry {
            path: jail::relative_display(&root, entry.path()),
            kind,
            size,
            depth: entry.depth() as u32,
        });
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ListDirResult {
        path: r.display,
        entries,
        truncated,
    })
}

/// Reads a text file for editing (size-capped, UTF-8 only).
fn read_text_for_edit(r: &ResolvedPath, raw: &str) -> Result<String, ErrorPayload> {
    let md = std::fs::metadata(&r.abs)
        .map_err(|e| exec_failed(format!("cannot read `{raw}`: {e}"), raw))?;
    if md.len() > EDIT_MAX_BYTES {
        return Err(exec_failed(
            format!(
                "`{raw}` is {} bytes, over the {EDIT_MAX_BYTES}-byte edit limit",
                md.len()
            ),
            raw,
        ));
    }
    let bytes = jail::read_regular(&r.abs, EDIT_MAX_BYTES)
        .map_err(|e| exec_failed(format!("cannot read `{raw}`: {e}"), raw))?;
    if bytes.contains(&0) {
        return Err(exec_failed(
            format!("`{raw}` is a binary file; it cannot be edited as text"),
            raw,
        )
        .with_detail("binary", true));
    }
    String::from_utf8(bytes).map_err(|_| {
        exec_failed(
            format!("`{raw}` is not valid UTF-8 text; it cannot be edited as text"),
            raw,
        )
        .with_detail("binary", true)
    })
}

/// The new content `edit_file` would write, and the old one (for previews).
pub fn plan_edit(
    args: &EditFileArgs,
    ctx: &ToolContext,
) -> Result<(ResolvedPath, String, String, u64), ErrorPayload> {
    let r = resolve_write(ctx, &args.path)?;
    if !r.exists {
        return Err(exec_failed(
            format!(
                "`{}` does not exist; use write_file to create it",
                args.path
            ),
            &args.path,
        ));
    }
    if r.is_dir {
        return Err(exec_failed(
            format!("`{}` is a directory", args.path),
            &args.path,
        ));
    }
    let old = read_text_for_edit(&r, &args.path)?;
    let (new, n) = apply_edits(&old, &args.edits)?;
    Ok((r, old, new, n))
}

/// `edit_file`.
pub fn edit_file(args: EditFileArgs, ctx: &ToolContext) -> Result<FileChangeResult, ErrorPayload> {
    let (r, old, new, replacements) = plan_edit(&args, ctx)?;
    // Race-aware: re-resolve the parent's real path right before writing.
    let target = recheck_parent(ctx, &r, &args.path)?;
    atomic_write(&target, new.as_bytes())?;
    let (diff, stats) = unified_diff(&r.display, &old, &new);
    Ok(FileChangeResult {
        path: r.display,
        created: false,
        diff,
        stats,
        replacements,
    })
}

/// Re-resolves the parent directory of `r` and checks it is still inside the
/// workspace (or the `write` extra root it was in); returns the path to write.
fn recheck_parent(
    ctx: &ToolContext,
    r: &ResolvedPath,
    raw: &str,
) -> Result<std::path::PathBuf, ErrorPayload> {
    let root = match &r.extra {
        Some(extra) => extra.path.clone(),
        None => jail::canonical_root(&ctx.workspace),
    };
    let parent = r
        .abs
        .parent()
        .ok_or_else(|| exec_failed("the path has no parent directory", raw))?;
    let name = r
        .abs
        .file_name()
        .ok_or_else(|| exec_failed("the path has no file name", raw))?;
    let real_parent = std::fs::canonicalize(parent)
        .map_err(|e| exec_failed(format!("cannot resolve the parent of `{raw}`: {e}"), raw))?;
    if !real_parent.starts_with(&root) {
        return Err(ErrorPayload::new(
            ErrorCode::PathOutsideWorkspace,
            format!(
                "`{raw}` is outside the workspace{}; writes outside it are not allowed",
                roots_note(ctx)
            ),
        )
        .with_detail("path", raw));
    }
    let target = real_parent.join(name);
    if let Ok(md) = std::fs::symlink_metadata(&target) {
        if md.file_type().is_symlink() {
            // The name became a symlink after resolution; resolve again.
            let again = jail::resolve_in(&ctx.workspace, &ctx.roots, &target.to_string_lossy())?;
            if !again.writable() {
                let mut e = write_refused(ctx, &again, raw);
                if again.extra.is_none() {
                    e.message = format!("`{raw}` now points outside the workspace");
                }
                return Err(e);
            }
            return Ok(again.abs);
        }
        if !md.file_type().is_file() {
            return Err(exec_failed(format!("`{raw}` is not a regular file"), raw));
        }
    }
    Ok(target)
}

/// The old content `write_file` would replace (`None` when it creates the file).
pub fn plan_write(
    args: &WriteFileArgs,
    ctx: &ToolContext,
) -> Result<(ResolvedPath, Option<String>), ErrorPayload> {
    let r = resolve_write(ctx, &args.path)?;
    if r.is_dir {
        return Err(exec_failed(
            format!("`{}` is a directory", args.path),
            &args.path,
        ));
    }
    if r.display == "." || r.extra.as_ref().is_some_and(|x| x.path == r.abs) {
        return Err(exec_failed("the workspace root is not a file", &args.path));
    }
    let old = if r.exists {
        let md = std::fs::metadata(&r.abs)
            .map_err(|e| exec_failed(format!("cannot read `{}`: {e}", args.path), &args.path))?;
        if md.len() > EDIT_MAX_BYTES {
            Some(String::new())
        } else {
            let bytes = jail::read_regular(&r.abs, EDIT_MAX_BYTES).map_err(|e| {
                exec_failed(format!("cannot read `{}`: {e}", args.path), &args.path)
            })?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        }
    } else {
        None
    };
    Ok((r, old))
}

/// `write_file`.
pub fn write_file(
    args: WriteFileArgs,
    ctx: &ToolContext,
) -> Result<FileChangeResult, ErrorPayload> {
    let (r, old) = plan_write(&args, ctx)?;
    if let Some(parent) = r.abs.parent() {
        if !parent.exists() {
            // Parent folders are created only inside the workspace or a `write` root
            // (checked by resolve).
            std::fs::create_dir_all(parent).map_err(|e| {
                exec_failed(
                    format!("cannot create the folder for `{}`: {e}", args.path),
                    &args.path,
                )
            })?;
        }
    }
    let target = recheck_parent(ctx, &r, &args.path)?;
    atomic_write(&target, args.content.as_bytes())?;
    let (diff, stats) = unified_diff(&r.display, old.as_deref().unwrap_or(""), &args.content);
    Ok(FileChangeResult {
        path: r.display,
        created: old.is_none(),
        diff,
        stats,
        replacements: 0,
    })
}
