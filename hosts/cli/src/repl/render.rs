//! What the REPL prints: colors, streamed text (the model's Markdown rendered block by
//! block, see `crate::markdown`), tool lines with a spinner, diffs and plans.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use keel_envelope::types::{PlanStep, StepStatus};
use serde_json::Value;

use crate::markdown::{strip_controls, MarkdownStream, RenderOptions};

/// Colors on or off. Off when `NO_COLOR` is set (to anything but the empty string) or
/// stdout is not a terminal.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    color: bool,
}

impl Style {
    /// Decides from the environment and stdout.
    pub(crate) fn detect() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            color: !no_color && std::io::stdout().is_terminal(),
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub(crate) fn dim(self, t: &str) -> String {
        self.paint("2", t)
    }
    pub(crate) fn bold(self, t: &str) -> String {
        self.paint("1", t)
    }
    pub(crate) fn red(self, t: &str) -> String {
        self.paint("31", t)
    }
    pub(crate) fn green(self, t: &str) -> String {
        self.paint("32", t)
    }
    pub(crate) fn yellow(self, t: &str) -> String {
        self.paint("33", t)
    }
    pub(crate) fn cyan(self, t: &str) -> String {
        self.paint("36", t)
    }
    pub(crate) fn magenta(self, t: &str) -> String {
        self.paint("35", t)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    Thought,
    Text,
}

/// The terminal output with the little state streaming needs: whether the cursor is
/// mid-line, which kind of text is streaming, and whether a spinner line is drawn.
#[derive(Debug)]
pub(crate) struct Screen {
    pub(crate) style: Style,
    tty: bool,
    width: usize,
    at_line_start: bool,
    block: Block,
    spinner_drawn: bool,
    /// The assistant's Markdown being streamed.
    markdown: MarkdownStream,
}

impl Screen {
    pub(crate) fn new() -> Self {
        let style = Style::detect();
        let tty = std::io::stdout().is_terminal();
        let mut screen = Screen {
            style,
            tty,
            width: 80,
            at_line_start: true,
            block: Block::None,
            spinner_drawn: false,
            markdown: MarkdownStream::new(RenderOptions {
                color: style.color,
                width: None,
            }),
        };
        screen.set_width(80);
        screen
    }

    /// Sets the terminal width (columns), used to keep the spinner on one line and to
    /// wrap text and fit tables (on a terminal only).
    pub(crate) fn set_width(&mut self, width: usize) {
        self.width = width.clamp(20, 1000);
        self.markdown.set_options(RenderOptions {
            color: self.style.color,
            width: self.tty.then_some(self.width),
        });
    }

    /// Whether a spinner may be drawn now without breaking a line of text.
    pub(crate) fn can_spin(&self) -> bool {
        self.at_line_start || self.spinner_drawn
    }

    /// Whether stdout is a terminal (spinner and redraws only then).
    pub(crate) fn is_tty(&self) -> bool {
        self.tty
    }

    fn out(&self, s: &str) {
        let s = sanitize(s);
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(s.as_bytes());
        let _ = o.flush();
    }

    fn end_line(&mut self) {
        if !self.at_line_start {
            self.out("\n");
            self.at_line_start = true;
        }
    }

    /// Streams assistant text: its Markdown is rendered block by block as each block
    /// closes; the unfinished tail is printed when the text ends ([`Self::end_block`]).
    pub(crate) fn text(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        if self.block != Block::Text {
            self.spinner_clear();
            self.end_line();
            self.block = Block::Text;
        }
        let rendered = self.markdown.push(s);
        self.print_rendered(&rendered);
    }

    fn print_rendered(&mut self, rendered: &str) {
        if rendered.is_empty() {
            return;
        }
        self.spinner_clear();
        self.end_line();
        self.out(rendered);
        self.at_line_start = rendered.ends_with('\n');
    }

    /// Prints the buffered end of the assistant's text.
    fn flush_text(&mut self) {
        if self.markdown.is_pending() {
            let rest = self.markdown.finish();
            self.print_rendered(&rest);
        } else {
            // The next message starts without a blank line.
            let _ = self.markdown.finish();
        }
    }

    /// Streams a thought summary, dimmed.
    pub(crate) fn thought(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        let s = &*strip_controls(s);
        if self.block != Block::Thought {
            self.flush_text();
        }
        self.spinner_clear();
        if self.block != Block::Thought {
            self.end_line();
            self.block = Block::Thought;
            self.out(&self.style.dim("thinking: "));
            self.at_line_start = false;
        }
        // Dim each piece; keep the terminal's state clean between pieces.
        let painted = s
            .split('\n')
            .map(|p| self.style.dim(p))
            .collect::<Vec<_>>()
            .join("\n");
        self.out(&painted);
        self.at_line_start = s.ends_with('\n');
    }

    /// Ends any streamed block so the next output starts on its own line.
    pub(crate) fn end_block(&mut self) {
        self.flush_text();
        self.spinner_clear();
        self.end_line();
        self.block = Block::None;
    }

    /// Prints whole lines (a trailing newline is added).
    pub(crate) fn line(&mut self, s: &str) {
        self.end_block();
        self.out(s);
        self.out("\n");
        self.at_line_start = true;
    }

    /// Draws (or redraws) the spinner line; only on a terminal.
    /// The text is cut to the terminal's width first (so that `\r` can redraw it), then
    /// painted with `paint`.
    pub(crate) fn spinner(&mut self, plain: &str, paint: fn(Style, &str) -> String) {
        if !self.tty {
            return;
        }
        if !self.spinner_drawn {
            self.end_line();
            self.block = Block::None;
        }
        let shown = paint(self.style, &fit_width(plain, self.width.saturating_sub(1)));
        self.out(&format!("\r\x1b[2K{shown}"));
        self.spinner_drawn = true;
        self.at_line_start = false;
    }

    /// After a line typed while output runs: the terminal echoed it and moved to a new
    /// line. A spinner line holding the echo is removed (the caller prints the line
    /// cleanly).
    pub(crate) fn after_typed_line(&mut self) {
        if self.spinner_drawn {
            self.out("\x1b[1A\r\x1b[2K");
            self.spinner_drawn = false;
        }
        self.at_line_start = true;
        self.block = Block::None;
    }

    /// Removes the spinner line, if drawn.
    pub(crate) fn spinner_clear(&mut self) {
        if self.spinner_drawn {
            self.out("\r\x1b[2K");
            self.spinner_drawn = false;
            self.at_line_start = true;
        }
    }
}

/// Makes text from the model, tools and files safe to print: control characters are
/// dropped except newline, tab and carriage return, and escape sequences except the
/// few this module writes itself (colors `ESC[…m`, clear line `ESC[2K`, line up
/// `ESC[1A`). So a model cannot set the window title, move the cursor or write to the
/// clipboard through the terminal.
pub(crate) fn sanitize(s: &str) -> std::borrow::Cow<'_, str> {
    let clean = |c: char| !c.is_control() || matches!(c, '\n' | '\t' | '\r');
    if s.chars().all(clean) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if c == '\x1b' {
            let seq = rest.get(1..).unwrap_or("");
            if let Some(params) = seq.strip_prefix('[') {
                let n = params
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == ';')
                    .count();
                let fin = params.get(n..).and_then(|r| r.chars().next());
                let keep = match fin {
                    Some('m') => true,
                    Some('K') => &params[..n] == "2",
                    Some('A') => &params[..n] == "1",
                    _ => false,
                };
                if keep {
                    let len = 2 + n + 1;
                    out.push_str(&rest[..len]);
                    rest = &rest[len..];
                    continue;
                }
            }
            rest = &rest[1..];
            continue;
        }
        if clean(c) {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    std::borrow::Cow::Owned(out)
}

/// Cuts `s` to at most `max` characters, marking the cut with `…`.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Cuts `s` to at most `cols` terminal columns (wide characters count twice).
pub(crate) fn fit_width(s: &str, cols: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > cols {
            break;
        }
        used += w;
        out.push(c);
    }
    out
}

/// The first line of `s`, cut to `max` characters.
pub(crate) fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let more = s.lines().filter(|l| !l.trim().is_empty()).count() > 1;
    let t = truncate(line.trim(), max);
    if more && !t.ends_with('…') {
        format!("{t} …")
    } else {
        t
    }
}

/// `120ms`, `1.2s`, `1m05s`.
pub(crate) fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        let s = ms / 1000;
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// A short label of a tool call's arguments: the command, the path, the query.
pub(crate) fn tool_label(tool: &str, args: &Value) -> String {
    let s = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
    let label = match tool {
        "run_shell" => s("command"),
        "read_file" | "list_dir" | "write_file" | "edit_file" => s("path"),
        "search_files" => s("query").map(|q| match s("path") {
            Some(p) => format!("{q:?} in {p}"),
            None => format!("{q:?}"),
        }),
        "git" => s("command").map(|c| {
            let rest: Vec<String> = args
                .get("args")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            if rest.is_empty() {
                c
            } else {
                format!("{c} {}", rest.join(" "))
            }
        }),
        _ => None,
    };
    let label = label.unwrap_or_else(|| match args {
        Value::Object(m) if m.is_empty() => String::new(),
        Value::Null => String::new(),
        other => other.to_string(),
    });
    first_line(&label, 60)
}

/// A one-line summary of a tool's result.
pub(crate) fn result_summary(tool: &str, result: &Value) -> String {
    let n = |k: &str| result.get(k).and_then(Value::as_u64);
    let arr = |k: &str| result.get(k).and_then(Value::as_array).map(Vec::len);
    let flag = |k: &str| result.get(k).and_then(Value::as_bool).unwrap_or(false);
    match tool {
        "read_file" => {
            let lines = n("lineCount").unwrap_or(0);
            match n("totalLines") {
                Some(t) if t > lines => format!("{lines} of {t} lines"),
                _ => format!("{lines} lines"),
            }
        }
        "list_dir" => {
            let e = arr("entries").unwrap_or(0);
            let noun = if e == 1 { "entry" } else { "entries" };
            let cut = if flag("truncated") { " (cut)" } else { "" };
            format!("{e} {noun}{cut}")
        }
        "search_files" => {
            let m = arr("matches").unwrap_or(0);
            let f = n("filesSearched").unwrap_or(0);
            let more = if flag("truncated") { "+" } else { "" };
            format!(
                "{m}{more} match{} in {f} file{}",
                if m == 1 { "" } else { "es" },
                if f == 1 { "" } else { "s" }
            )
        }
        "write_file" | "edit_file" => {
            let path = result.get("path").and_then(Value::as_str).unwrap_or("");
            let added = result.pointer("/stats/added").and_then(Value::as_u64);
            let removed = result.pointer("/stats/removed").and_then(Value::as_u64);
            if let Some(id) = result.get("patchId").and_then(Value::as_str) {
                return format!(
                    "{path} not written: proposed as {id} (+{} -{})",
                    added.unwrap_or(0),
                    removed.unwrap_or(0)
                );
            }
            let verb = if flag("created") {
                "created"
            } else {
                "updated"
            };
            format!(
                "{verb} {path} (+{} -{})",
                added.unwrap_or(0),
                removed.unwrap_or(0)
            )
        }
        _ => {
            if result.get("exitCode").is_some() || result.get("stdout").is_some() {
                let code = result.get("exitCode").and_then(Value::as_i64);
                let head = if flag("timedOut") {
                    "timed out".to_owned()
                } else {
                    match code {
                        Some(c) => format!("exit {c}"),
                        None => "no exit code".to_owned(),
                    }
                };
                let out = result.get("stdout").and_then(Value::as_str).unwrap_or("");
                let err = result.get("stderr").and_then(Value::as_str).unwrap_or("");
                let body = if out.trim().is_empty() { err } else { out };
                if body.trim().is_empty() {
                    head
                } else {
                    format!("{head}: {}", first_line(body, 60))
                }
            } else {
                match result {
                    Value::String(s) => first_line(s, 70),
                    Value::Null => String::new(),
                    other => match other.get("message").and_then(Value::as_str) {
                        Some(m) => first_line(m, 70),
                        None => truncate(&other.to_string(), 70),
                    },
                }
            }
        }
    }
}

/// Whether `text` looks like a unified diff.
pub(crate) fn looks_like_diff(text: &str) -> bool {
    text.starts_with("--- ") || text.starts_with("diff ") || text.contains("\n@@ ")
}

/// A unified diff, colored and indented; long diffs are cut after `max_lines`.
pub(crate) fn diff(style: Style, text: &str, max_lines: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for l in lines.iter().take(max_lines) {
        let painted = if l.starts_with("+++") || l.starts_with("---") {
            style.bold(l)
        } else if l.starts_with("@@") {
            style.cyan(l)
        } else if l.starts_with('+') {
            style.green(l)
        } else if l.starts_with('-') {
            style.red(l)
        } else {
            (*l).to_owned()
        };
        out.push(format!("    {painted}"));
    }
    if lines.len() > max_lines {
        out.push(style.dim(&format!("    … {} more lines", lines.len() - max_lines)));
    }
    out.join("\n")
}

/// A plan as a checklist: `[x]` done, `[~]` in progress, `[ ]` pending.
pub(crate) fn plan(style: Style, steps: &[PlanStep]) -> String {
    if steps.is_empty() {
        return style.dim("  (no steps)");
    }
    steps
        .iter()
        .map(|s| match s.status {
            StepStatus::Completed => style.dim(&format!("  [x] {}", s.title)),
            StepStatus::InProgress => style.yellow(&format!("  [~] {}", s.title)),
            StepStatus::Pending => format!("  [ ] {}", s.title),
            _ => format!("  [?] {}", s.title),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A budget figure in words: "the request's tokens: 161000 of 200000".
fn budget_figure(b: &keel_envelope::budget::BudgetStatus) -> String {
    use keel_envelope::budget::{BudgetLimit, BudgetScope};
    let whose = match b.scope {
        BudgetScope::Session => "the session's",
        _ => "the request's",
    };
    let what = match &b.limit {
        BudgetLimit::ModelCalls => "model calls".to_owned(),
        BudgetLimit::Tokens => "tokens".to_owned(),
        BudgetLimit::CostUsd => {
            return format!("{whose} estimated cost: ${:.2} of ${:.2}", b.used, b.max)
        }
        BudgetLimit::WallTimeSecs => "seconds".to_owned(),
        BudgetLimit::ToolCalls => {
            format!("calls of {}", b.tool_name.as_deref().unwrap_or("a tool"))
        }
        other => other.as_str().to_owned(),
    };
    format!("{whose} {what}: {} of {}", b.used.round(), b.max.round())
}

/// The line for `budget.warning`.
pub(crate) fn budget_warning(b: &keel_envelope::budget::BudgetStatus) -> String {
    format!("budget: {} (80 % reached)", budget_figure(b))
}

/// The line for a request stopped by a limit (`stopReason: "max_turns"`).
pub(crate) fn budget_stop(b: Option<&keel_envelope::budget::BudgetStatus>) -> String {
    match b {
        Some(b) => format!("stopped: the limit was reached, {}", budget_figure(b)),
        None => "stopped: the request reached its maximum number of model turns".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(duration(Duration::from_millis(42)), "42ms");
        assert_eq!(duration(Duration::from_millis(1234)), "1.2s");
        assert_eq!(duration(Duration::from_secs(65)), "1m05s");
    }

    #[test]
    fn sanitize_keeps_colors_and_drops_the_rest() {
        assert_eq!(sanitize("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(sanitize("\x1b[32mok\x1b[0m"), "\x1b[32mok\x1b[0m");
        assert_eq!(sanitize("\r\x1b[2Kspin"), "\r\x1b[2Kspin");
        assert_eq!(sanitize("\x1b]0;pwned\x07title"), "]0;pwnedtitle");
        assert_eq!(sanitize("a\x1b[10;10Hb\x08c"), "a[10;10Hbc");
        assert_eq!(sanitize("\x1b"), "");
        assert_eq!(sanitize("\x1b[12"), "[12");
        assert_eq!(sanitize("é\u{9b}ü"), "éü");
    }

    #[test]
    fn fit_counts_columns() {
        assert_eq!(fit_width("abcdef", 3), "abc");
        assert_eq!(fit_width("日本語", 4), "日本");
    }

    #[test]
    fn truncate_marks_the_cut() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(first_line("\n one \ntwo", 10), "one …");
    }

    #[test]
    fn summaries_of_known_tools() {
        let v = serde_json::json!({"path":"a.md","created":true,"diff":"","stats":{"added":3,"removed":0},"replacements":0});
        assert_eq!(result_summary("write_file", &v), "created a.md (+3 -0)");
        let v = serde_json::json!({"exitCode":0,"stdout":"ok\nmore","stderr":""});
        assert_eq!(result_summary("run_shell", &v), "exit 0: ok …");
        assert_eq!(
            tool_label("run_shell", &serde_json::json!({"command":"ls -la"})),
            "ls -la"
        );
        assert_eq!(tool_label("x", &serde_json::json!({})), "");
    }

    #[test]
    fn plain_diff_without_color() {
        let s = Style { color: false };
        let d = diff(s, "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", 3);
        assert!(d.contains("    --- a/x"));
        assert!(d.contains("… 2 more lines"));
    }
}
