//! A plain-text view of envelopes, as a person reads a session (used by `demo` and
//! `exec` without `--json`). The model's Markdown is rendered as it streams
//! (`crate::markdown`); everything printed goes through the REPL's sanitizer, so text
//! from the model or a tool cannot drive the terminal.

use std::io::{IsTerminal, Write};

use crate::markdown::{strip_controls, MarkdownStream, RenderOptions};

use keel_envelope::types::StepStatus;
use keel_envelope::{Envelope, Event};

/// Whether to use ANSI colors: stdout is a terminal and `NO_COLOR` is unset or empty.
pub fn colors() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// The width to render Markdown to: the terminal's, when stdout is one.
pub fn width() -> Option<usize> {
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return None;
    }
    terminal_size::terminal_size_of(&stdout)
        .map(|(w, _)| usize::from(w.0).clamp(20, 1000))
        .or(Some(80))
}

/// Renders envelopes one by one; keeps track of an open line of streamed text.
#[derive(Debug)]
pub struct Renderer {
    /// Use ANSI colors.
    pub color: bool,
    in_text: bool,
    in_thought: bool,
    markdown: MarkdownStream,
}

impl Renderer {
    /// A renderer, writing Markdown for `width` columns (`None`: no wrapping).
    pub fn new(color: bool, width: Option<usize>) -> Self {
        Self {
            color,
            in_text: false,
            in_thought: false,
            markdown: MarkdownStream::new(RenderOptions { color, width }),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    fn end_text(&mut self, out: &mut String) {
        if self.in_text {
            out.push_str(&self.markdown.finish());
            self.in_text = false;
        }
        if self.in_thought {
            if self.color {
                out.push_str("\x1b[0m");
            }
            out.push('\n');
            self.in_thought = false;
        }
    }

    /// Colors a unified diff line by line.
    pub fn diff(&self, diff: &str) -> String {
        diff.lines()
            .map(|l| {
                if l.starts_with("+++") || l.starts_with("---") {
                    self.paint("1", l)
                } else if l.starts_with('+') {
                    self.paint("32", l)
                } else if l.starts_with('-') {
                    self.paint("31", l)
                } else if l.starts_with("@@") {
                    self.paint("36", l)
                } else {
                    l.to_owned()
                }
            })
            .map(|l| format!("    {l}\n"))
            .collect()
    }

    /// The text for one envelope (may be empty).
    pub fn render(&mut self, env: &Envelope) -> String {
        let mut out = String::new();
        match &env.event {
            Event::AssistantDelta(d) => {
                if self.in_thought {
                    self.end_text(&mut out);
                }
                out.push_str(&self.markdown.push(&d.text));
                self.in_text = true;
                return out;
            }
            Event::AssistantThoughtSummary(t) => {
                if !self.in_thought {
                    self.end_text(&mut out);
                    out.push_str(&self.paint("2;3", "  (thinking) "));
                    self.in_thought = true;
                }
                out.push_str(&self.paint("2;3", &strip_controls(&t.text)));
                return out;
            }
            Event::ToolCallStarted(t) => {
                self.end_text(&mut out);
                let args = serde_json::to_string(&t.arguments).unwrap_or_default();
                let args: String = args.chars().take(100).collect();
                out.push_str(&format!(
                    "  {} {} {}\n",
                    self.paint("33", "▸"),
                    self.paint("1", &t.tool_name),
                    args
                ));
            }
            Event::ToolCallProgress(p) => {
                for line in p.chunk.lines() {
                    out.push_str(&self.paint("2", &format!("    │ {line}")));
                    out.push('\n');
                }
            }
            Event::ToolCallCompleted(t) => {
                self.end_text(&mut out);
                out.push_str(&format!(
                    "  {} {} ({} ms)\n",
                    self.paint("32", "✓"),
                    t.tool_name,
                    t.duration_ms
                ));
                if let Some(diff) = t.result.get("diff").and_then(|d| d.as_str()) {
                    out.push_str(&self.diff(diff));
                }
                if let Some(code) = t.result.get("exitCode") {
                    let stdout = t
                        .result
                        .get("stdout")
                        .and_then(|s| s.as_str())
                        .unwrap_or("");
                    out.push_str(&format!("    exit {code}: {}\n", stdout.trim()));
                }
            }
            Event::ToolCallFailed(t) => {
                self.end_text(&mut out);
                out.push_str(&format!(
                    "  {} {}: {}\n",
                    self.paint("31", "✗"),
                    t.tool_name,
                    t.error
                ));
            }
            Event::ToolCallSkipped(t) => {
                self.end_text(&mut out);
                out.push_str(&format!(
                    "  {} {} skipped: {}\n",
                    self.paint("31", "⊘"),
                    t.tool_name,
                    t.error
                ));
            }
            Event::ApprovalRequested(a) => {
                self.end_text(&mut out);
                out.push_str(&format!(
                    "  {} {} wants to run ({} risk): {}\n",
                    self.paint("35", "?"),
                    self.paint("1", &a.tool_name),
                    format!("{:?}", a.risk_level).to_lowercase(),
                    a.reason
                ));
                if a.preview.contains("\n@@") || a.preview.starts_with("---") {
                    out.push_str(&self.diff(&a.preview));
                } else if !a.preview.is_empty() {
                    out.push_str(&format!("    $ {}\n", a.preview));
                }
            }
            Event::ApprovalGranted(a) => {
                let decision = serde_json::to_value(a.decision.clone()).unwrap_or_default();
                out.push_str(&format!(
                    "  {} approved ({})\n",
                    self.paint("32", "→"),
                    decision.as_str().unwrap_or("")
                ));
            }
            Event::ApprovalDenied(_) => {
                out.push_str(&format!("  {} denied\n", self.paint("31", "→")))
            }
            Event::ApprovalExpired(a) => out.push_str(&format!(
                "  {} approval expired ({})\n",
                self.paint("31", "→"),
                a.reason
            )),
            Event::PlanUpdated(p) => {
                self.end_text(&mut out);
                out.push_str("  Plan:\n");
                for s in &p.steps {
                    let mark = match s.status {
                        StepStatus::Completed => "[x]",
                        StepStatus::InProgress => "[~]",
                        StepStatus::Pending => "[ ]",
                        _ => "[?]",
                    };
                    out.push_str(&format!("    {mark} {}\n", s.title));
                }
            }
            Event::PlanApprovalRequired(p) => {
                self.end_text(&mut out);
                out.push_str(&format!(
                    "  {} the plan needs approval: {}\n",
                    self.paint("35", "?"),
                    p.summary.as_deref().unwrap_or("")
                ));
            }
            Event::PlanApproved(p) => out.push_str(&format!(
                "  {} plan approved; mode {}\n",
                self.paint("32", "→"),
                p.mode.as_str()
            )),
            Event::PlanRejected(_) => {
                out.push_str(&format!("  {} plan rejected\n", self.paint("31", "→")))
            }
            Event::Warning(w) => {
                self.end_text(&mut out);
                out.push_str(&self.paint("33", &format!("  warning: {}", w.message)));
                out.push('\n');
            }
            Event::Error(e) | Event::RequestRejected(e) => {
                self.end_text(&mut out);
                out.push_str(&self.paint("31", &format!("  error: {e}")));
                out.push('\n');
            }
            Event::SessionInterrupted(_) => {
                self.end_text(&mut out);
                out.push_str("  (interrupted)\n");
            }
            Event::SessionCompleted(c) => {
                self.end_text(&mut out);
                out.push_str(&self.paint(
                    "2",
                    &format!("  — {}", telemetry_parts(&c.telemetry).join(", ")),
                ));
                out.push('\n');
            }
            _ => {}
        }
        out
    }

    /// Renders and writes to stdout.
    pub fn print(&mut self, env: &Envelope) {
        let text = self.render(env);
        let text = crate::repl::render::sanitize(&text);
        if !text.is_empty() {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(text.as_bytes());
            let _ = stdout.flush();
        }
    }
}

/// The request's figures as short phrases: time, model calls, tool calls, tokens
/// (with the cached share), and how full the context was.
pub(crate) fn telemetry_parts(tm: &keel_envelope::types::Telemetry) -> Vec<String> {
    let plural = |n: u32, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    let mut parts = vec![crate::repl::render::duration(
        std::time::Duration::from_millis(tm.elapsed_ms),
    )];
    if tm.turns > 0 {
        parts.push(plural(tm.turns, "model call"));
    }
    if tm.tool_calls > 0 {
        parts.push(plural(tm.tool_calls, "tool call"));
    }
    if tm.input_tokens + tm.output_tokens > 0 {
        let cached = if tm.cached_input_tokens > 0 {
            format!(" ({} cached)", tm.cached_input_tokens)
        } else {
            String::new()
        };
        parts.push(format!(
            "{} in{cached} / {} out tokens",
            tm.input_tokens, tm.output_tokens
        ));
    }
    if let Some(pct) = (tm.context_tokens * 100).checked_div(tm.context_window) {
        parts.push(format!("context {pct}% of {}", tm.context_window));
    }
    parts
}
