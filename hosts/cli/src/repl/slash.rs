//! Slash commands.

use std::time::Duration;

use keel_envelope::commands::{CommandPayload, ContextCompact, SetTitle, WhenBusy};
use keel_envelope::types::{PermissionMode, SessionState};
use keel_envelope::{Envelope, Event};

use super::render;
use super::Repl;

/// A slash command: its name, its arguments and what it does.
#[derive(Debug)]
pub(crate) struct SlashCommand {
    pub(crate) name: &'static str,
    pub(crate) args: &'static str,
    pub(crate) help: &'static str,
}

/// Every slash command, in the order `/help` lists them.
pub(crate) const COMMANDS: &[SlashCommand] = &[
    SlashCommand {
        name: "/help",
        args: "",
        help: "list the commands and keys",
    },
    SlashCommand {
        name: "/status",
        args: "",
        help: "session id, mode, model, state, usage",
    },
    SlashCommand {
        name: "/mode",
        args: "[ask|auto-edit|auto|plan]",
        help: "show or change the permission mode",
    },
    SlashCommand {
        name: "/model",
        args: "[provider:model]",
        help: "show the model and the configured ones, or switch",
    },
    SlashCommand {
        name: "/plan",
        args: "",
        help: "show the plan as a checklist",
    },
    SlashCommand {
        name: "/usage",
        args: "",
        help: "token usage of the session and the context size",
    },
    SlashCommand {
        name: "/compact",
        args: "",
        help: "compact the context now (summarised by the model)",
    },
    SlashCommand {
        name: "/abort",
        args: "",
        help: "interrupt the running request",
    },
    SlashCommand {
        name: "/queue",
        args: "",
        help: "show queued requests",
    },
    SlashCommand {
        name: "/steer",
        args: "<text>",
        help: "send a message that joins the running request (else runs now)",
    },
    SlashCommand {
        name: "/rewind",
        args: "[<n> [files|chat]]",
        help: "list the checkpoints, or go back to one (files and conversation)",
    },
    SlashCommand {
        name: "/undo",
        args: "",
        help: "undo the last request: its file changes and its conversation",
    },
    SlashCommand {
        name: "/fork",
        args: "[<n>]",
        help: "continue in a copy of this session (up to checkpoint n's request)",
    },
    SlashCommand {
        name: "/btw",
        args: "<question>",
        help: "ask a side question (no tools, not kept), also while a request runs",
    },
    SlashCommand {
        name: "/rules",
        args: "[allow|deny <rule>]",
        help: "list the allow and deny rules; add one for this session",
    },
    SlashCommand {
        name: "/title",
        args: "[text]",
        help: "show the session's title, or rename it",
    },
    SlashCommand {
        name: "/review",
        args: "[enter <reason> [--blocking] | comment <text> | check <itemId> | approve [summary] | reject [summary]]",
        help: "show the review, start one, comment, tick a checklist item, or resolve it",
    },
    SlashCommand {
        name: "/patches",
        args: "[apply <patchId> | reject <patchId> [reason]]",
        help: "list pending patches with their diffs, or apply or reject one",
    },
    SlashCommand {
        name: "/preview",
        args: "[on|off]",
        help: "propose the model's edits as patches instead of writing them",
    },
    SlashCommand {
        name: "/graph",
        args: "[advance | done <nodeId> | fail <nodeId> | skip <nodeId>]",
        help: "show the task graph, promote ready nodes, or finish a node",
    },
    SlashCommand {
        name: "/agents",
        args: "[<subAgentId>]",
        help: "list sub-agents, or show one",
    },
    SlashCommand {
        name: "/background",
        args: "[stop <taskId> | log <taskId>]",
        help: "list background tasks, stop one, or show its output",
    },
    SlashCommand {
        name: "/mcp",
        args: "",
        help: "MCP servers of the session: state and tools",
    },
    SlashCommand {
        name: "/skills",
        args: "",
        help: "skills and custom commands found, and files skipped",
    },
    SlashCommand {
        name: "/sessions",
        args: "",
        help: "list stored sessions",
    },
    SlashCommand {
        name: "/resume",
        args: "<id>",
        help: "switch to a stored session (a unique prefix of its id is enough)",
    },
    SlashCommand {
        name: "/new",
        args: "",
        help: "start a new session here (same mode and model); this one stays stored",
    },
    SlashCommand {
        name: "/clear",
        args: "",
        help: "clear the screen (the conversation is kept; /new starts afresh)",
    },
    SlashCommand {
        name: "/quit",
        args: "",
        help: "close the session and exit (also /exit, Ctrl-D)",
    },
];

/// What the main loop does after a command.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Quit,
}

/// Whether a line is a slash command rather than a message: `/word …` where the word
/// has no further `/` (so `/etc/hosts is odd` is a message).
pub(crate) fn is_command(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('/') else {
        return false;
    };
    let word = rest.split_whitespace().next().unwrap_or("");
    !word.is_empty() && !word.contains('/') && !line.starts_with("//")
}

/// Edit distance, for suggestions.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Commands close to an unknown `name`.
pub(crate) fn suggestions(name: &str) -> Vec<&'static str> {
    let name = name.to_ascii_lowercase();
    let mut found: Vec<(usize, &'static str)> = COMMANDS
        .iter()
        .map(|c| c.name)
        .chain(["/exit"])
        .filter_map(|c| {
            let d = distance(&name, c);
            let prefix = name.len() > 2 && (c.starts_with(&name) || name.starts_with(c));
            (d <= 2 || prefix).then_some((d, c))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, c)| c).take(3).collect()
}

fn ago(now_ms: u64, then_ms: u64) -> String {
    let s = now_ms.saturating_sub(then_ms) / 1000;
    match s {
        0..=59 => format!("{s}s ago"),
        60..=3599 => format!("{}m ago", s / 60),
        3600..=86_399 => format!("{}h ago", s / 3600),
        _ => format!("{}d ago", s / 86_400),
    }
}

fn state_name(s: SessionState) -> &'static str {
    match s {
        SessionState::Idle => "idle",
        SessionState::Running => "running",
        SessionState::WaitingApproval => "waiting for an answer",
        SessionState::Closed => "closed",
        _ => "unknown",
    }
}

impl Repl {
    /// Runs one slash command line.
    pub(super) fn slash(&mut self, line: &str) -> Flow {
        let (name, arg) = match line.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (line, ""),
        };
        match name {
            "/help" | "/?" => self.help(),
            "/quit" | "/exit" | "/q" => return Flow::Quit,
            "/status" => self.status(),
            "/mode" => self.mode(arg),
            "/model" => self.model(arg),
            "/plan" => self.show_plan(),
            "/usage" => self.usage(),
            "/compact" => self.compact(),
            "/abort" => self.abort(),
            "/queue" => self.show_queue(),
            "/steer" => {
                if arg.is_empty() {
                    self.warn_line("usage: /steer <text>");
                } else {
                    self.send(arg, Some(WhenBusy::Steer));
                }
            }
            "/title" => self.title(arg),
            "/rewind" => self.rewind(arg),
            "/undo" => self.undo(),
            "/fork" => self.fork(arg),
            "/btw" => self.btw(arg),
            "/rules" => self.rules_command(arg),
            "/review" => self.review(arg),
            "/patches" => self.patches(arg),
            "/preview" => self.preview(arg),
            "/graph" => self.graph(arg),
            "/agents" => self.agents(arg),
            "/background" => self.background(arg),
            "/mcp" => self.mcp(),
            "/skills" => self.skills_command(),
            "/sessions" => self.sessions(),
            "/resume" => self.resume(arg),
            "/new" => self.new_session(),
            "/clear" => {
                if self.editor.clear_screen().is_err() {
                    self.warn_line("could not clear the screen");
                }
            }
            other if self.run_custom(other, arg) => {}
            other => {
                let close = suggestions(other);
                let msg = if close.is_empty() {
                    format!("unknown command {other}. Type /help for the list of commands.")
                } else {
                    format!(
                        "unknown command {other}. Did you mean {}? Type /help for the list of commands.",
                        close.join(" or ")
                    )
                };
                self.warn_line(&msg);
            }
        }
        Flow::Continue
    }

    fn help(&mut self) {
        let st = self.screen.style;
        self.screen.line(&st.bold("commands"));
        for c in COMMANDS {
            let usage = if c.args.is_empty() {
                c.name.to_owned()
            } else {
                format!("{} {}", c.name, c.args)
            };
            if usage.chars().count() > 34 {
                // Long argument lists get the description on a line of its own.
                self.screen.line(&format!("  {usage}"));
                self.screen
                    .line(&format!("  {:<34} {}", "", st.dim(c.help)));
            } else {
                self.screen
                    .line(&format!("  {:<34} {}", usage, st.dim(c.help)));
            }
        }
        self.help_custom();
        self.screen.line(&st.bold("keys"));
        for (k, what) in [
            ("Enter", "send the message"),
            (
                "Ctrl-C",
                "interrupt the running request; twice at the prompt exits",
            ),
            ("Ctrl-D", "exit"),
            ("Up / Down, Ctrl-R", "history"),
            ("Tab", "complete a command or its sub-command"),
        ] {
            self.screen.line(&format!("  {k:<34} {}", st.dim(what)));
        }
        self.screen.line(&st.dim(
            "While a request runs, type a line and press Enter to queue it, or /steer <text>, /abort, /queue.",
        ));
    }

    /// Waits (briefly) for the event answering the command `rid`.
    pub(super) fn await_reply(&mut self, rid: &str, wait: Duration) -> Option<Envelope> {
        let events = &mut self.events;
        self.rt.block_on(async {
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                let env = tokio::time::timeout_at(deadline, events.recv())
                    .await
                    .ok()??;
                let reply = env.meta.as_ref().and_then(|m| m.reply_to.as_deref());
                if env.request_id == rid || reply == Some(rid) {
                    return Some(env);
                }
            }
        })
    }

    /// `/title`: shows the title; `/title <text>` sets it (`session.set_title`).
    fn title(&mut self, arg: &str) {
        let st = self.screen.style;
        if arg.is_empty() {
            match self.session.state().session.title {
                Some(t) => self.screen.line(&format!("title: {}", render::sanitize(&t))),
                None => self.screen.line(&st.dim(
                    "no title yet: one is made from your first message after it is answered, or set one with /title <text>",
                )),
            }
            return;
        }
        let payload = CommandPayload::SessionSetTitle(SetTitle::new(arg.to_owned()));
        let rid = match self.rt.block_on(self.session.command(payload)) {
            Ok(rid) => rid,
            Err(e) => {
                self.error_line(&format!("title not changed: {}", e.message));
                return;
            }
        };
        match self
            .await_reply(&rid, Duration::from_secs(10))
            .map(|e| e.event)
        {
            Some(Event::SessionTitleChanged(p)) => {
                let was = p
                    .previous_title
                    .map(|t| format!(" (was {})", render::sanitize(&t)))
                    .unwrap_or_default();
                self.screen.line(&format!(
                    "title: {}{}",
                    render::sanitize(&p.title),
                    st.dim(&was)
                ));
            }
            Some(Event::Error(e)) => self.error_line(&format!("title not changed: {}", e.message)),
            _ => self.warn_line("no answer from the runtime"),
        }
    }

    fn status(&mut self) {
        let st = self.screen.style;
        let s = self.session.state();
        let plan = match &s.plan {
            Some(p) => {
                let done = p
                    .steps
                    .iter()
                    .filter(|x| x.status == keel_envelope::types::StepStatus::Completed)
                    .count();
                format!("{} steps, {done} done", p.steps.len())
            }
            None => "none".to_owned(),
        };
        let rows = [
            ("session", s.session.session_id.clone()),
            (
                "title",
                s.session.title.clone().unwrap_or_else(|| "(none)".into()),
            ),
            ("workspace", s.session.workspace.clone()),
            ("mode", s.session.permission_mode.as_str().to_owned()),
            ("model", s.session.model.clone()),
            ("state", state_name(s.state).to_owned()),
            ("messages", s.message_count.to_string()),
            (
                "usage",
                format!(
                    "{} in / {} out tokens ({} cached)",
                    s.usage.input_tokens, s.usage.output_tokens, s.usage.cached_input_tokens
                ),
            ),
            ("context", self.context_line()),
            ("queued", s.queued_request_ids.len().to_string()),
            ("plan", plan),
        ];
        for (k, v) in rows {
            self.screen
                .line(&format!("  {} {v}", st.dim(&format!("{k:<10}"))));
        }
    }

    fn context_line(&self) -> String {
        match self.context {
            Some((used, window)) if window > 0 => format!(
                "{used} / {window} tokens ({}%)",
                used.saturating_mul(100) / window
            ),
            _ => "unknown until the first answer".to_owned(),
        }
    }

    fn mode(&mut self, arg: &str) {
        let current = self.session.state().session.permission_mode;
        if arg.is_empty() {
            let all = PermissionMode::ALL
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", ");
            self.screen
                .line(&format!("mode: {} (one of {all})", current.as_str()));
            return;
        }
        let Some(mode) = PermissionMode::parse(arg) else {
            self.warn_line(&format!(
                "unknown mode {arg:?}: use ask, auto-edit, auto or plan"
            ));
            return;
        };
        match self.rt.block_on(self.session.set_mode(mode.clone())) {
            Ok(rid) => {
                let reply = self.await_reply(&rid, Duration::from_secs(5));
                match reply.map(|e| e.event) {
                    Some(Event::SessionModeChanged(p)) => self.screen.line(&format!(
                        "mode: {} → {}",
                        p.previous_mode.as_str(),
                        p.mode.as_str()
                    )),
                    Some(Event::Error(e)) => self.error_line(&e.message),
                    _ => self.screen.line(&format!("mode: {}", mode.as_str())),
                }
            }
            Err(e) => self.error_line(&e.message),
        }
    }

    fn model(&mut self, arg: &str) {
        let st = self.screen.style;
        let current = self.session.state().session.model;
        if arg.is_empty() {
            self.screen.line(&format!("model: {current}"));
            let models = self.kernel.available_models();
            if !models.is_empty() {
                self.screen.line(&st.dim("configured models:"));
                for m in models {
                    let mark = if m.id == current { "*" } else { " " };
                    let name = if m.display_name != m.id {
                        format!("  {}", st.dim(&m.display_name))
                    } else {
                        String::new()
                    };
                    self.screen.line(&format!("  {mark} {}{name}", m.id));
                }
            }
            self.screen
                .line(&st.dim("switch with /model provider:model"));
            return;
        }
        match self.rt.block_on(self.session.set_model(arg)) {
            Ok(rid) => {
                let reply = self.await_reply(&rid, Duration::from_secs(10));
                match reply.map(|e| e.event) {
                    Some(Event::SessionModelChanged(p)) => self
                        .screen
                        .line(&format!("model: {} → {}", p.previous_model, p.model)),
                    Some(Event::Error(e)) => self.error_line(&e.message),
                    _ => {
                        let now = self.session.state().session.model;
                        self.screen.line(&format!("model: {now}"));
                    }
                }
            }
            Err(e) => self.error_line(&e.message),
        }
    }

    fn show_plan(&mut self) {
        let st = self.screen.style;
        match self.session.state().plan {
            Some(p) => {
                let status = format!("{:?}", p.status).to_ascii_lowercase();
                self.screen.line(&format!(
                    "{} {}",
                    st.bold("plan"),
                    st.dim(&format!("({status})"))
                ));
                if let Some(s) = &p.summary {
                    self.screen.line(&format!("  {s}"));
                }
                let body = render::plan(st, &p.steps);
                self.screen.line(&body);
            }
            None => self
                .screen
                .line("no plan yet (in plan mode the model proposes one before changing anything)"),
        }
    }

    fn usage(&mut self) {
        let u = self.session.state().usage;
        self.screen.line(&format!(
            "tokens: {} in ({} cached), {} out",
            u.input_tokens, u.cached_input_tokens, u.output_tokens
        ));
        let ctx = self.context_line();
        self.screen.line(&format!("context: {ctx}"));
    }

    fn compact(&mut self) {
        let st = self.screen.style;
        self.screen.line(&st.dim("compacting the context…"));
        let rid = match self.rt.block_on(
            self.session
                .command(CommandPayload::ContextCompact(ContextCompact::new())),
        ) {
            Ok(rid) => rid,
            Err(e) => {
                self.error_line(&e.message);
                return;
            }
        };
        loop {
            let Some(env) = self.await_reply(&rid, Duration::from_secs(5)) else {
                self.warn_line("no answer to the compaction");
                return;
            };
            match env.event {
                Event::CompactionCompleted(p) => {
                    let line = format!(
                        "context compacted: {} messages folded, {} → {} tokens{}",
                        p.messages_compacted,
                        p.tokens_before,
                        p.tokens_after,
                        if p.fallback {
                            " (plain truncation)"
                        } else {
                            ""
                        }
                    );
                    self.screen.line(&line);
                    return;
                }
                Event::Error(e) => {
                    self.error_line(&e.message);
                    return;
                }
                Event::Warning(e) => self.warn_line(&format!("warning: {}", e.message)),
                _ => {}
            }
        }
    }

    fn abort(&mut self) {
        match self.rt.block_on(self.session.interrupt()) {
            Ok(rid) => match self
                .await_reply(&rid, Duration::from_secs(10))
                .map(|e| e.event)
            {
                Some(Event::SessionInterrupted(p)) if !p.was_running => {
                    self.screen.line("nothing is running")
                }
                Some(Event::SessionInterrupted(_)) => {
                    let l = self.screen.style.yellow("⏹ interrupted");
                    self.screen.line(&l)
                }
                _ => self.screen.line("interrupt sent"),
            },
            Err(e) => self.error_line(&e.message),
        }
    }

    /// `/queue`.
    pub(super) fn show_queue(&mut self) {
        let s = self.session.state();
        match &s.active_request_id {
            Some(a) => self.screen.line(&format!("running: {a}")),
            None => self.screen.line("running: nothing"),
        }
        if s.queued_request_ids.is_empty() {
            self.screen.line("queued: none");
        } else {
            for (i, q) in s.queued_request_ids.iter().enumerate() {
                let line = match self.queued_text.get(q) {
                    Some(text) => {
                        format!("queued {}: {} ({q})", i + 1, render::first_line(text, 60))
                    }
                    None => format!("queued {}: {q}", i + 1),
                };
                self.screen.line(&line);
            }
        }
    }

    /// `/mcp`: each server's state (a failed one with its reason) and its tools.
    fn mcp(&mut self) {
        use keel_envelope::host::McpServerState as S;
        let st = self.screen.style;
        let servers = self.session.mcp_servers();
        if servers.is_empty() {
            self.screen.line(
                "no MCP servers (configure them under [mcpServers.NAME] in $KEEL_HOME/config.toml)",
            );
            return;
        }
        for s in servers {
            let (mark, state) = match s.state {
                S::Ready => (st.green("●"), format!("ready, {} tools", s.tools.len())),
                S::Starting => (st.yellow("…"), "starting".to_owned()),
                S::Failed => (
                    st.red("✗"),
                    format!("failed: {}", s.reason.as_deref().unwrap_or("unknown")),
                ),
                _ => (st.dim("?"), s.state.as_str().to_owned()),
            };
            let trust = format!("{:?}", s.trust).to_ascii_lowercase();
            self.screen.line(&format!(
                "{mark} {}  {}",
                st.bold(&s.name),
                st.dim(&format!("{} · trust {trust} · {}", s.transport, s.origin))
            ));
            self.screen.line(&format!("    {state}"));
            for t in &s.tools {
                self.screen.line(&format!("    {}", st.dim(&t.name)));
            }
        }
    }

    fn sessions(&mut self) {
        let st = self.screen.style;
        let list = match self.rt.block_on(self.kernel.list_sessions()) {
            Ok(l) => l,
            Err(e) => {
                self.error_line(&e.message);
                return;
            }
        };
        if list.is_empty() {
            self.screen.line("no sessions");
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let me = self.session.id().to_owned();
        for s in list.iter().take(30) {
            let mark = if s.session_id == me { "*" } else { " " };
            let title = s.title.clone().unwrap_or_else(|| "(untitled)".into());
            let line = format!(
                "{mark} {}  {}  {}  {}  {}",
                s.session_id,
                st.dim(&format!("{:>8}", ago(now, s.updated_at))),
                st.dim(&format!("{:<9}", s.permission_mode.as_str())),
                st.dim(state_name(s.state.clone())),
                title
            );
            self.screen.line(&line);
        }
        if list.len() > 30 {
            self.screen
                .line(&st.dim(&format!("… and {} older", list.len() - 30)));
        }
        self.screen.line(&st.dim("resume one with /resume <id>"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_messages() {
        assert!(is_command("/help"));
        assert!(is_command("/mode plan"));
        assert!(!is_command("/etc/hosts looks odd"));
        assert!(!is_command("//not a command"));
        assert!(!is_command("/"));
        assert!(!is_command("hello"));
    }

    #[test]
    fn close_matches() {
        assert_eq!(suggestions("/stauts"), vec!["/status"]);
        assert!(suggestions("/mdoe").contains(&"/mode"));
        assert!(suggestions("/sess").contains(&"/sessions"));
        assert!(suggestions("/zzzzzzzz").is_empty());
    }
}
