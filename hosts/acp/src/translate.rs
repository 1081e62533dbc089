//! Keel envelopes to ACP `session/update` payloads. Pure translation: no decisions.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use keel_envelope::events::ApprovalRequested;
use keel_envelope::types::{PermissionMode, StepStatus};
use keel_envelope::{Envelope, Event};
use serde_json::{json, Map, Value};

/// The ACP mode list: exactly Keel's four permission modes.
pub fn modes_state(current: PermissionMode) -> Value {
    let available: Vec<Value> = PermissionMode::ALL
        .iter()
        .map(|m| {
            let (name, description) = mode_text(*m);
            json!({"id": m.as_str(), "name": name, "description": description})
        })
        .collect();
    json!({"currentModeId": current.as_str(), "availableModes": available})
}

fn mode_text(mode: PermissionMode) -> (&'static str, &'static str) {
    match mode {
        PermissionMode::Ask => (
            "Ask",
            "Reads run; edits, writes and commands ask for permission first.",
        ),
        PermissionMode::AutoEdit => (
            "Auto-edit",
            "Edits and writes inside the workspace run; commands still ask.",
        ),
        PermissionMode::Auto => (
            "Auto",
            "Everything runs without asking; the deny list still applies.",
        ),
        PermissionMode::Plan => (
            "Plan",
            "Read-only: only read tools run until a plan is approved.",
        ),
    }
}

/// The envelope fields carried in every update's `_meta`.
pub fn meta_of(env: &Envelope, replay: bool) -> Value {
    let mut keel = Map::new();
    keel.insert("eventId".into(), json!(env.event_id));
    keel.insert("requestId".into(), json!(env.request_id));
    keel.insert("sequence".into(), json!(env.sequence));
    keel.insert("type".into(), json!(env.type_name()));
    if replay {
        keel.insert("replay".into(), json!(true));
    }
    json!({ "keel": Value::Object(keel) })
}

/// The ACP tool kind of a Keel tool.
pub fn tool_kind(name: &str) -> &'static str {
    match name {
        "read_file" | "list_dir" => "read",
        "search_files" => "search",
        "edit_file" | "write_file" => "edit",
        "run_shell" | "git" => "execute",
        "propose_plan" | "update_plan" => "think",
        _ => "other",
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
pub fn tool_locations(workspace: &Path, name: &str, args: &Value) -> Vec<Value> {
    match name {
        "read_file" | "edit_file" | "write_file" | "list_dir" => {
            let Some(p) = arg(args, "path").or(if name == "list_dir" { Some(".") } else { None })
            else {
                return Vec::new();
            };
            let mut loc = json!({"path": absolute(workspace, p).display().to_string()});
            if name == "read_file" {
                if let Some(line) = args.get("offset").and_then(Value::as_u64) {
                    loc["line"] = json!(line);
                }
            }
            vec![loc]
        }
        "search_files" => arg(args, "path")
            .map(|p| vec![json!({"path": absolute(workspace, p).display().to_string()})])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn text_content(text: impl Into<String>) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text.into()}})
}

/// Splits a unified diff into `diff` contents, one per hunk: the old side (context
/// and removed lines) and the new side (context and added lines).
pub fn diff_contents(path: &str, unified: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut old = String::new();
    let mut new = String::new();
    let mut in_hunk = false;
    let flush = |old: &mut String, new: &mut String, out: &mut Vec<Value>| {
        if !old.is_empty() || !new.is_empty() {
            out.push(json!({
                "type": "diff",
                "path": path,
                "oldText": std::mem::take(old),
                "newText": std::mem::take(new),
            }));
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
fn result_contents(workspace: &Path, name: &str, args: &Value, result: &Value) -> Vec<Value> {
    let path_of = |r: &Value| {
        arg(r, "path")
            .or_else(|| arg(args, "path"))
            .map(|p| absolute(workspace, p).display().to_string())
            .unwrap_or_default()
    };
    match name {
        "write_file" | "edit_file" => {
            let path = path_of(result);
            if name == "write_file" && result.get("created").and_then(Value::as_bool) == Some(true)
            {
                if let Some(content) = arg(args, "content") {
                    return vec![json!({
                        "type": "diff", "path": path, "oldText": null, "newText": content
                    })];
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

/// The `toolCall` of a permission request, with the preview as content.
pub fn permission_tool_call(workspace: &Path, a: &ApprovalRequested) -> Value {
    let mut call = json!({
        "toolCallId": a.tool_call_id,
        "title": tool_title(&a.tool_name, &a.arguments),
        "kind": tool_kind(&a.tool_name),
        "status": "pending",
        "rawInput": a.arguments,
        "locations": tool_locations(workspace, &a.tool_name, &a.arguments),
    });
    let content = preview_contents(workspace, a);
    if !content.is_empty() {
        call["content"] = Value::Array(content);
    }
    call
}

fn preview_contents(workspace: &Path, a: &ApprovalRequested) -> Vec<Value> {
    if a.preview.is_empty() {
        return Vec::new();
    }
    if matches!(a.tool_name.as_str(), "write_file" | "edit_file") {
        let path = arg(&a.arguments, "path")
            .map(|p| absolute(workspace, p).display().to_string())
            .unwrap_or_default();
        let diffs = diff_contents(&path, &a.preview);
        if !diffs.is_empty() {
            return diffs;
        }
    }
    vec![text_content(a.preview.clone())]
}

/// Per-session translation state: which calls the client already knows.
#[derive(Debug)]
pub struct Translator {
    workspace: PathBuf,
    calls: HashMap<String, (String, Value)>,
}

fn plan_entries(steps: &[keel_envelope::types::PlanStep]) -> Vec<Value> {
    steps
        .iter()
        .map(|s| {
            json!({
                "content": s.title,
                "priority": "medium",
                "status": match s.status {
                    StepStatus::Pending => "pending",
                    StepStatus::InProgress => "in_progress",
                    StepStatus::Completed => "completed",
                },
            })
        })
        .collect()
}

impl Translator {
    /// A translator for a session rooted at `workspace`.
    pub fn new(workspace: PathBuf) -> Self {
        Self {
            workspace,
            calls: HashMap::new(),
        }
    }

    fn announce(
        &mut self,
        id: &str,
        name: &str,
        args: &Value,
        status: &str,
        content: Option<Vec<Value>>,
    ) -> Value {
        if self.calls.contains_key(id) {
            let mut u =
                json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status});
            if let Some(c) = content {
                u["content"] = Value::Array(c);
            }
            return u;
        }
        self.calls
            .insert(id.to_owned(), (name.to_owned(), args.clone()));
        let mut u = json!({
            "sessionUpdate": "tool_call",
            "toolCallId": id,
            "title": tool_title(name, args),
            "kind": tool_kind(name),
            "status": status,
            "rawInput": args,
            "locations": tool_locations(&self.workspace, name, args),
        });
        if let Some(c) = content {
            u["content"] = Value::Array(c);
        }
        u
    }

    /// The ACP updates for one envelope (none for events ACP has no place for).
    /// `replay`: the envelope comes from the stored log (user prompts are shown).
    pub fn translate(&mut self, env: &Envelope, replay: bool) -> Vec<Value> {
        let mut updates = match &env.event {
            Event::RequestAccepted(p) if replay => vec![json!({
                "sessionUpdate": "user_message_chunk",
                "content": {"type": "text", "text": p.message},
            })],
            Event::AssistantDelta(p) => vec![json!({
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": p.text},
            })],
            Event::AssistantMessage(p) => vec![json!({
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": p.text},
            })],
            Event::AssistantThoughtSummary(p) => vec![json!({
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": p.text},
            })],
            Event::ApprovalRequested(a) => {
                let content = preview_contents(&self.workspace, a);
                vec![self.announce(
                    &a.tool_call_id,
                    &a.tool_name,
                    &a.arguments,
                    "pending",
                    (!content.is_empty()).then_some(content),
                )]
            }
            Event::ToolCallStarted(p) => {
                vec![self.announce(
                    &p.tool_call_id,
                    &p.tool_name,
                    &p.arguments,
                    "in_progress",
                    None,
                )]
            }
            Event::ToolCallProgress(p) if self.calls.contains_key(&p.tool_call_id) => {
                vec![json!({
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": p.tool_call_id,
                    "status": "in_progress",
                    "content": [text_content(p.chunk.clone())],
                })]
            }
            Event::ToolCallCompleted(p) => {
                let args = self
                    .calls
                    .get(&p.tool_call_id)
                    .map(|(_, a)| a.clone())
                    .unwrap_or(Value::Null);
                let content = result_contents(&self.workspace, &p.tool_name, &args, &p.result);
                let mut u = self.announce(
                    &p.tool_call_id,
                    &p.tool_name,
                    &args,
                    "completed",
                    Some(content),
                );
                u["rawOutput"] = p.result.clone();
                vec![u]
            }
            Event::ToolCallFailed(p) => {
                let args = self
                    .calls
                    .get(&p.tool_call_id)
                    .map(|(_, a)| a.clone())
                    .unwrap_or(Value::Null);
                let mut u = self.announce(
                    &p.tool_call_id,
                    &p.tool_name,
                    &args,
                    "failed",
                    Some(vec![text_content(p.error.message.clone())]),
                );
                u["rawOutput"] = serde_json::to_value(&p.error).unwrap_or(Value::Null);
                vec![u]
            }
            Event::ToolCallSkipped(p) => {
                let args = self
                    .calls
                    .get(&p.tool_call_id)
                    .map(|(_, a)| a.clone())
                    .unwrap_or(Value::Null);
                let mut u = self.announce(
                    &p.tool_call_id,
                    &p.tool_name,
                    &args,
                    "failed",
                    Some(vec![text_content(p.error.message.clone())]),
                );
                u["rawOutput"] = serde_json::to_value(&p.error).unwrap_or(Value::Null);
                vec![u]
            }
            Event::PlanUpdated(p) => vec![json!({
                "sessionUpdate": "plan",
                "entries": plan_entries(&p.steps),
            })],
            Event::PlanApprovalRequired(p) => vec![json!({
                "sessionUpdate": "plan",
                "entries": plan_entries(&p.steps),
            })],
            Event::SessionModeChanged(p) => vec![json!({
                "sessionUpdate": "current_mode_update",
                "currentModeId": p.mode.as_str(),
            })],
            Event::UsageUpdated(p) => vec![json!({
                "sessionUpdate": "usage_update",
                "used": p.context_tokens,
                "size": p.context_window,
            })],
            _ => Vec::new(),
        };
        let meta = meta_of(env, replay);
        for u in &mut updates {
            u["_meta"] = meta.clone();
        }
        updates
    }
}

/// Formats milliseconds since the epoch as RFC 3339 (UTC).
pub fn iso8601(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_diffs_become_old_and_new_text() {
        let d = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
        let c = diff_contents("/w/f", d);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0]["oldText"], "a\nb\n");
        assert_eq!(c[0]["newText"], "a\nc\n");
        assert_eq!(c[0]["path"], "/w/f");
    }

    #[test]
    fn dates_are_rfc3339() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn modes_are_keels_four() {
        let m = modes_state(PermissionMode::Plan);
        assert_eq!(m["currentModeId"], "plan");
        let ids: Vec<&str> = m["availableModes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["id"].as_str())
            .collect();
        assert_eq!(ids, ["ask", "auto-edit", "auto", "plan"]);
    }
}
