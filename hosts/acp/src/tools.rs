//! How Keel's tool calls look to an ACP client: kind, title, file locations, and the
//! content shown for a preview or a result (text, or diffs built from unified diffs).

use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, Diff, ToolCallContent, ToolCallLocation, ToolKind,
};
use keel_envelope::events::ApprovalRequested;
use serde_json::Value;

/// The ACP tool kind of a Keel tool.
pub fn tool_kind(name: &str) -> ToolKind {
    match name {
        "read_file" | "list_dir" => ToolKind::Read,
        "search_files" => ToolKind::Search,
        "edit_file" | "write_file" => ToolKind::Edit,
        "run_shell" | "git" => ToolKind::Execute,
        "propose_plan" | "update_plan" => ToolKind::Think,
        _ => ToolKind::Other,
    }
}

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A short human title for a tool call.
pub fn tool_title(name: &str, args: &Value) -> String {
    match name {
        "read_file" => format!("Read {}", arg(args, "path").unwrap_or("file")),
        "list_dir" => format!("List {}", arg(args, "path").unwrap_or(".")),
        "search_files" => format!("Search for {:?}", arg(args, "query").unwrap_or("")),
        "edit_file" => format!("Edit {}", arg(args, "path").unwrap_or("file")),
        "write_file" => format!("Write {}", arg(args, "path").unwrap_or("file")),
        "run_shell" => format!("Run `{}`", arg(args, "command").unwrap_or("")),
        "git" => {
            let mut t = format!("git {}", arg(args, "command").unwrap_or(""));
            if let Some(list) = args.get("args").and_then(Value::as_array) {
                for a in list.iter().filter_map(Value::as_str) {
                    t.push(' ');
                    t.push_str(a);
                }
            }
            t
        }
        "propose_plan" => "Propose a plan".into(),
        "update_plan" => "Update the plan".into(),
        "ask_user" => "Ask the user".into(),
        other => other.to_owned(),
    }
}

fn absolute(workspace: &Path, p: &str) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace.join(path)
    }
}

/// File locations touched by a call (file tools only).
pub fn tool_locations(workspace: &Path, name: &str, args: &Value) -> Vec<ToolCallLocation> {
    match name {
        "read_file" | "edit_file" | "write_file" | "list_dir" => {
            let Some(p) = arg(args, "path").or(if name == "list_dir" { Some(".") } else { None })
            else {
                return Vec::new();
            };
            let mut loc = ToolCallLocation::new(absolute(workspace, p));
            if name == "read_file" {
                if let Some(line) = args
                    .get("offset")
                    .and_then(Value::as_u64)
                    .and_then(|l| u32::try_from(l).ok())
                {
                    loc = loc.line(line);
                }
            }
            vec![loc]
        }
        "search_files" => arg(args, "path")
            .map(|p| vec![ToolCallLocation::new(absolute(workspace, p))])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// A text content item.
pub fn text_content(text: impl Into<String>) -> ToolCallContent {
    ToolCallContent::Content(Content::new(ContentBlock::from(text.into())))
}

/// Splits a unified diff into `diff` contents, one per hunk: the old side (context
/// and removed lines) and the new side (context and added lines).
pub fn diff_contents(path: &Path, unified: &str) -> Vec<ToolCallContent> {
    let mut out = Vec::new();
    let mut old = String::new();
    let mut new = String::new();
    let mut in_hunk = false;
    let flush = |old: &mut String, new: &mut String, out: &mut Vec<ToolCallContent>| {
        if !old.is_empty() || !new.is_empty() {
            let diff = Diff::new(path, std::mem::take(new)).old_text(std::mem::take(old));
            out.push(ToolCallContent::Diff(diff));
        }
    };
    for line in unified.split_inclusive('\n') {
        if line.starts_with("@@") {
            flush(&mut old, &mut new, &mut out);
            in_hunk = true;
            continue;
        }
        if !in_hunk {
            continue;
        }
        if let Some(rest) = line.strip_prefix('-') {
            old.push_str(rest);
        } else if let Some(rest) = line.strip_prefix('+') {
            new.push_str(rest);
        } else if let Some(rest) = line.strip_prefix(' ') {
            old.push_str(rest);
            new.push_str(rest);
        } else if line.starts_with('\\') {
            // "\ No newline at end of file": drop the newline just added.
            if old.ends_with('\n') {
                old.pop();
            }
            if new.ends_with('\n') {
                new.pop();
            }
        }
    }
    flush(&mut old, &mut new, &mut out);
    out
}

/// Contents shown for a finished call.
pub fn result_contents(
    workspace: &Path,
    name: &str,
    args: &Value,
    result: &Value,
) -> Vec<ToolCallContent> {
    let path_of = |r: &Value| {
        arg(r, "path")
            .or_else(|| arg(args, "path"))
            .map(|p| absolute(workspace, p))
            .unwrap_or_default()
    };
    match name {
        "write_file" | "edit_file" => {
            let path = path_of(result);
            if name == "write_file" && result.get("created").and_then(Value::as_bool) == Some(true)
            {
                if let Some(content) = arg(args, "content") {
                    return vec![ToolCallContent::Diff(Diff::new(path, content))];
                }
            }
            let diffs = diff_contents(&path, arg(result, "diff").unwrap_or(""));
            if diffs.is_empty() {
                vec![text_content("No change.")]
            } else {
                diffs
            }
        }
        "read_file" => vec![text_content(arg(result, "content").unwrap_or(""))],
        "list_dir" => {
            let mut text = String::new();
            for e in result
                .get("entries")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                text.push_str(arg(e, "path").unwrap_or(""));
                if arg(e, "kind") == Some("dir") {
                    text.push('/');
                }
                text.push('\n');
            }
            vec![text_content(text)]
        }
        "search_files" => {
            let mut text = String::new();
            for m in result
                .get("matches")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                text.push_str(arg(m, "path").unwrap_or(""));
                if let Some(l) = m.get("line").and_then(Value::as_u64) {
                    text.push_str(&format!(":{l}"));
                }
                text.push_str(": ");
                text.push_str(arg(m, "snippet").unwrap_or("").trim_end());
                text.push('\n');
            }
            vec![text_content(text)]
        }
        "run_shell" => {
            let mut text = String::new();
            text.push_str(arg(result, "stdout").unwrap_or(""));
            let stderr = arg(result, "stderr").unwrap_or("");
            if !stderr.is_empty() {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(stderr);
            }
            if let Some(code) = result.get("exitCode").and_then(Value::as_i64) {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&format!("(exit code {code})"));
            }
            vec![text_content(text)]
        }
        _ => match result {
            Value::String(s) => vec![text_content(s.clone())],
            Value::Null => Vec::new(),
            other => vec![text_content(
                serde_json::to_string_pretty(other).unwrap_or_default(),
            )],
        },
    }
}

/// What a permission request shows: a diff for edits and writes, else the preview text.
pub fn preview_contents(workspace: &Path, a: &ApprovalRequested) -> Vec<ToolCallContent> {
    if a.preview.is_empty() {
        return Vec::new();
    }
    if matches!(a.tool_name.as_str(), "write_file" | "edit_file") {
        let path = arg(&a.arguments, "path")
            .map(|p| absolute(workspace, p))
            .unwrap_or_default();
        let diffs = diff_contents(&path, &a.preview);
        if !diffs.is_empty() {
            return diffs;
        }
    }
    vec![text_content(a.preview.clone())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_diffs_become_old_and_new_text() {
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
        let c = serde_json::to_value(diff_contents(Path::new("/w/f"), d)).unwrap_or_default();
        assert_eq!(c.as_array().map(Vec::len), Some(1));
        assert_eq!(c[0]["type"], "diff");
        assert_eq!(c[0]["oldText"], "a\nb\n");
        assert_eq!(c[0]["newText"], "a\nc\n");
        assert_eq!(c[0]["path"], "/w/f");
    }

    #[test]
    fn kinds_follow_the_tools() {
        let kinds = [
            "read_file",
            "search_files",
            "write_file",
            "git",
            "update_plan",
            "x",
        ]
        .map(|n| serde_json::to_value(tool_kind(n)).unwrap_or_default());
        assert_eq!(
            kinds,
            ["read", "search", "edit", "execute", "think", "other"].map(serde_json::Value::from)
        );
    }
}
