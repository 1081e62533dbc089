//! Following a request: its events until its end, with approvals, plan decisions and
//! questions answered inline, a spinner while tools run, and Ctrl-C to interrupt.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use keel_envelope::commands::{CancelQueued, CommandPayload, RequestSend, WhenBusy};
use keel_envelope::events::{
    ApprovalRequested, AskRequested, PlanApprovalRequired, SessionCompleted, ToolCallCompleted,
};
use keel_envelope::types::{ApprovalDecision, PermissionMode, PlanStatus, RiskLevel, StopReason};
use keel_envelope::{Envelope, Event};
use keel_kernel::{ASK_USER, PROPOSE_PLAN, UPDATE_PLAN};
use rustyline::error::ReadlineError;

use super::render::{self, duration, result_summary, tool_label, Style};
use super::Repl;

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// How long to wait for `session.interrupted` before giving the prompt back anyway.
const INTERRUPT_GRACE: Duration = Duration::from_secs(15);

#[derive(Debug)]
struct ActiveTool {
    id: String,
    name: String,
    label: String,
    started: Instant,
}

/// What one request (and the requests typed while it runs) looks like so far.
#[derive(Debug)]
struct Turn {
    /// Our requests that have not ended; the first is the one running.
    waiting: Vec<String>,
    tools: Vec<ActiveTool>,
    /// Requests whose text was streamed (their `assistant.final` is then not repeated).
    streamed: HashSet<String>,
    /// Tool calls whose diff was shown in the approval prompt.
    previewed: HashSet<String>,
    /// Labels of calls seen in approval prompts (a denied call never starts).
    labels: HashMap<String, String>,
    interrupted_at: Option<Instant>,
    frame: usize,
    started: Instant,
    /// When something was last printed for the turn.
    last_output: Instant,
}

/// An answer typed in a prompt during a turn.
enum Answer {
    Line(String),
    /// Ctrl-C: the request is being interrupted.
    Interrupted,
    /// Input ended (Ctrl-D).
    End,
}

enum Step {
    Event(Option<Box<Envelope>>),
    CtrlC,
    Tick,
}

fn is_kernel_tool(name: &str) -> bool {
    name == PROPOSE_PLAN || name == UPDATE_PLAN || name == ASK_USER
}

impl Repl {
    /// Sends a message and follows it to its end.
    pub(super) fn send(&mut self, message: &str, when_busy: Option<WhenBusy>) {
        self.rt.block_on(self.ctrlc.drain());
        let req = RequestSend::new(message.to_owned())
            .when_busy(when_busy)
            .patch_preview(self.patch_preview);
        match self.rt.block_on(self.session.send_with(req)) {
            Ok(rid) => self.follow(rid),
            Err(e) => self.error_line(&format!("request refused: {}", super::ext::error_text(&e))),
        }
    }

    /// Reads events until every request in the turn has ended.
    pub(super) fn follow(&mut self, rid: String) {
        let mut t = Turn {
            waiting: vec![rid],
            tools: Vec::new(),
            streamed: HashSet::new(),
            previewed: HashSet::new(),
            labels: HashMap::new(),
            interrupted_at: None,
            frame: 0,
            started: Instant::now(),
            last_output: Instant::now(),
        };
        let mut tick = self.rt.block_on(async {
            let mut i = tokio::time::interval(Duration::from_millis(100));
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            i
        });
        while !t.waiting.is_empty() {
            let step = {
                let events = &mut self.events;
                let ctrlc = &mut self.ctrlc;
                self.rt.block_on(async {
                    tokio::select! {
                        ev = events.recv() => Step::Event(ev.map(Box::new)),
                        _ = ctrlc.recv() => Step::CtrlC,
                        _ = tick.tick() => Step::Tick,
                    }
                })
            };
            match step {
                Step::Event(None) => {
                    self.error_line("the runtime stopped");
                    break;
                }
                Step::Event(Some(env)) => self.on_event(&mut t, *env),
                Step::CtrlC => self.on_ctrl_c(&mut t),
                Step::Tick => {
                    for line in self.notices.take() {
                        self.screen.spinner_clear();
                        self.screen.line(&line);
                    }
                    self.draw_spinner(&mut t);
                    self.typed_during_turn(&mut t);
                    if t.interrupted_at
                        .is_some_and(|at| at.elapsed() > INTERRUPT_GRACE)
                    {
                        self.warn_line(
                            "the request did not confirm the interrupt; back to the prompt",
                        );
                        break;
                    }
                }
            }
        }
        self.screen.end_block();
        self.queued_text.clear();
    }

    fn on_ctrl_c(&mut self, t: &mut Turn) {
        if t.interrupted_at.is_some() {
            // A second Ctrl-C: stop waiting. The session lives on.
            self.warn_line("stopped waiting; back to the prompt");
            t.waiting.clear();
            return;
        }
        self.interrupt_turn(t);
    }

    fn interrupt_turn(&mut self, t: &mut Turn) {
        t.interrupted_at = Some(Instant::now());
        self.screen.spinner_clear();
        // Over the terminal's own `^C` echo.
        let line = self.screen.style.yellow("^C interrupting…");
        let line = if self.screen.is_tty() {
            format!("\r{line}")
        } else {
            line
        };
        self.screen.line(&line);
        // Requests typed during this turn are dropped too: the prompt comes back.
        for queued in t.waiting.split_off(1.min(t.waiting.len())) {
            let _ = self
                .rt
                .block_on(self.session.command(CommandPayload::RequestCancelQueued(
                    CancelQueued::new(queued),
                )));
        }
        if let Err(e) = self.rt.block_on(self.session.interrupt()) {
            self.error_line(&e.message);
            t.waiting.clear();
        }
    }

    /// Whether an envelope belongs to the requests of this turn.
    fn ours(t: &Turn, env: &Envelope) -> bool {
        t.waiting.contains(&env.request_id)
            || env
                .meta
                .as_ref()
                .and_then(|m| m.reply_to.as_ref())
                .is_some_and(|r| t.waiting.contains(r))
    }

    fn done(t: &mut Turn, rid: &str) {
        t.waiting.retain(|w| w != rid);
        if t.waiting.is_empty() {
            t.tools.clear();
        }
    }

    fn on_event(&mut self, t: &mut Turn, env: Envelope) {
        if let Some(i) = self.side_pending.iter().position(|r| *r == env.request_id) {
            self.side_pending.remove(i);
            self.show_side(env.event);
            return;
        }
        if !Self::ours(t, &env) {
            return;
        }
        let rid = env.request_id.clone();
        let st = self.screen.style;
        if !matches!(env.event, Event::UsageUpdated(_)) {
            t.last_output = Instant::now();
        }
        match env.event {
            Event::RequestAccepted(p) if p.from_queue => {
                let line = st.dim(&format!("▶ {}", render::first_line(&p.message, 60)));
                self.screen.line(&line);
            }
            Event::RequestQueued(p) => {
                let line = st.dim(&format!(
                    "queued (position {}); it runs when the current request ends",
                    p.position
                ));
                self.screen.line(&line);
            }
            Event::RequestSteered(p) => {
                if let Some(from) = env.meta.as_ref().and_then(|m| m.reply_to.clone()) {
                    t.waiting.retain(|w| *w != from);
                }
                if !t.waiting.contains(&p.target_request_id) {
                    t.waiting.push(p.target_request_id.clone());
                }
                self.screen
                    .line(&st.dim("↪ your message joins the running request"));
            }
            Event::RequestCancelled(p) => Self::done(t, &p.queued_request_id),
            Event::RequestRejected(e) => {
                self.error_line(&format!("request refused: {}", super::ext::error_text(&e)));
                Self::done(t, &rid);
            }
            Event::AssistantThoughtSummary(p) => self.screen.thought(&p.text),
            Event::AssistantDelta(p) => {
                t.streamed.insert(rid);
                self.screen.text(&p.text);
            }
            Event::AssistantMessage(p) => {
                t.streamed.insert(rid);
                self.screen.text(&p.text);
            }
            Event::AssistantFinal(p) if !t.streamed.contains(&rid) => {
                self.screen.text(&p.text);
            }
            Event::PlanUpdated(p) => {
                // A plan awaiting approval is shown by its approval prompt.
                let awaiting = self.session.state().plan.is_some_and(|pl| {
                    pl.plan_id == p.plan_id && pl.status == PlanStatus::AwaitingApproval
                });
                if awaiting {
                    return;
                }
                self.screen.line(&st.bold("plan"));
                let body = render::plan(st, &p.steps);
                self.screen.line(&body);
            }
            Event::PlanApprovalRequired(p) => self.plan_prompt(t, &p),
            Event::PlanApproved(p) => {
                let line = st.green(&format!(
                    "✓ plan approved; continuing in {} mode",
                    p.mode.as_str()
                ));
                self.screen.line(&line);
            }
            Event::PlanRejected(p) => {
                let fb = p.feedback.map(|f| format!(": {f}")).unwrap_or_default();
                let line = st.yellow(&format!("✗ plan rejected{fb}"));
                self.screen.line(&line);
            }
            Event::ToolCallStarted(p) => {
                if is_kernel_tool(&p.tool_name) {
                    return;
                }
                let label = tool_label(&p.tool_name, &p.arguments);
                if !self.screen.is_tty() {
                    let line = format!("→ {} {}", p.tool_name, label);
                    self.screen.line(line.trim_end());
                }
                t.tools.push(ActiveTool {
                    id: p.tool_call_id,
                    name: p.tool_name,
                    label,
                    started: Instant::now(),
                });
                self.draw_spinner(t);
            }
            Event::ToolCallProgress(p) if p.stream == "stdout" || p.stream == "stderr" => {
                for l in p.chunk.lines().filter(|l| !l.trim().is_empty()) {
                    let line = st.dim(&format!("  │ {}", render::truncate(l, 200)));
                    self.screen.line(&line);
                }
            }
            Event::ToolCallCompleted(p) => self.tool_completed(t, &p),
            Event::ToolCallFailed(p) => {
                let label = self.take_tool(t, &p.tool_call_id);
                if is_kernel_tool(&p.tool_name) {
                    return;
                }
                let line = format!(
                    "{} {} {}",
                    st.red("✗"),
                    st.bold(&p.tool_name),
                    head(&label, &duration(Duration::from_millis(p.duration_ms)))
                );
                self.screen.line(&line);
                let why = st.red(&format!("  {}", render::first_line(&p.error.message, 200)));
                self.screen.line(&why);
            }
            Event::ToolCallSkipped(p) => {
                let label = self.take_tool(t, &p.tool_call_id);
                let line = format!(
                    "{} {} {}{}",
                    st.yellow("⊘"),
                    st.bold(&p.tool_name),
                    if label.is_empty() {
                        String::new()
                    } else {
                        format!("{label} ")
                    },
                    st.yellow(&format!(
                        "skipped: {}",
                        render::first_line(&p.error.message, 120)
                    ))
                );
                self.screen.line(&line);
            }
            Event::PatchProposed(p) => {
                let line = st.dim(&format!(
                    "patch {} is pending: see it with /patches, write it with /patches apply {}",
                    p.patch.patch_id, p.patch.patch_id
                ));
                self.screen.line(&line);
            }
            Event::ApprovalRequested(p) => self.approval_prompt(t, &p),
            Event::ApprovalDenied(p) if p.reason != "user" => {
                let line = st.yellow(&format!("denied: {}", p.reason));
                self.screen.line(&line);
            }
            Event::ApprovalExpired(p) => {
                let line = st.yellow(&format!(
                    "approval expired ({}): the call was not run",
                    p.reason
                ));
                self.screen.line(&line);
            }
            Event::AskRequested(p) => self.ask_prompt(t, &p),
            Event::AskExpired(p) => {
                let line = st.yellow(&format!("question expired ({})", p.reason));
                self.screen.line(&line);
            }
            Event::CompactionStarted(_) => self.screen.line(&st.dim("compacting the context…")),
            Event::CompactionCompleted(p) => {
                let line = st.dim(&format!(
                    "context compacted: {} messages folded, {} → {} tokens{}",
                    p.messages_compacted,
                    p.tokens_before,
                    p.tokens_after,
                    if p.fallback { " (truncated)" } else { "" }
                ));
                self.screen.line(&line);
            }
            Event::UsageUpdated(p) => {
                self.context = Some((p.context_tokens, p.context_window));
            }
            Event::Warning(e) => self.warn_line(&format!("warning: {}", e.message)),
            Event::BudgetWarning(b) => self.warn_line(&render::budget_warning(&b)),
            Event::Error(e) => self.error_line(&format!("error: {}", e.message)),
            Event::SessionModeChanged(p) => {
                let line = st.dim(&format!(
                    "mode: {} → {}",
                    p.previous_mode.as_str(),
                    p.mode.as_str()
                ));
                self.screen.line(&line);
            }
            Event::SessionRulesUpdated(p) => {
                if p.source == "approval" {
                    self.save_rules(&p.rules);
                }
                let rules: Vec<&String> = p
                    .rules
                    .always_allow_project
                    .iter()
                    .chain(p.rules.always_allow_global.iter())
                    .collect();
                if !rules.is_empty() {
                    let list = rules
                        .iter()
                        .map(|r| r.as_str())
                        .collect::<Vec<_>>()
                        .join(", ");
                    let line = st.dim(&format!("always allowed now: {list}"));
                    self.screen.line(&line);
                }
            }
            Event::SessionCompleted(p) => {
                self.completed(&p);
                Self::done(t, &rid);
            }
            Event::SessionInterrupted(p) => {
                let target = p.interrupted_request_id.unwrap_or(rid);
                // A tool stopped by the interrupt gets no event of its own.
                for tool in std::mem::take(&mut t.tools) {
                    let line = format!(
                        "{} {} {}",
                        st.yellow("⏹"),
                        st.bold(&tool.name),
                        head(&tool.label, &duration(tool.started.elapsed()))
                    );
                    self.screen.line(&line);
                }
                self.screen.line(&st.yellow("⏹ interrupted"));
                Self::done(t, &target);
            }
            Event::SessionClosed(_) => {
                self.error_line("the session was closed");
                t.waiting.clear();
            }
            _ => {}
        }
    }

    fn take_tool(&mut self, t: &mut Turn, id: &str) -> String {
        self.screen.spinner_clear();
        match t.tools.iter().position(|a| a.id == id) {
            Some(i) => t.tools.remove(i).label,
            None => t.labels.get(id).cloned().unwrap_or_default(),
        }
    }

    fn tool_completed(&mut self, t: &mut Turn, p: &ToolCallCompleted) {
        let st = self.screen.style;
        let label = self.take_tool(t, &p.tool_call_id);
        if is_kernel_tool(&p.tool_name) {
            return;
        }
        let summary = result_summary(&p.tool_name, &p.result);
        let mut line = format!(
            "{} {} {}",
            st.green("✓"),
            st.bold(&p.tool_name),
            head(&label, &duration(Duration::from_millis(p.duration_ms)))
        );
        if !summary.is_empty() {
            line.push_str(&st.dim(&format!(" — {summary}")));
        }
        self.screen.line(&line);
        if matches!(p.tool_name.as_str(), "edit_file" | "write_file")
            && !t.previewed.contains(&p.tool_call_id)
        {
            if let Some(d) = p.result.get("diff").and_then(|d| d.as_str()) {
                if !d.trim().is_empty() {
                    let body = render::diff(st, d, 60);
                    self.screen.line(&body);
                }
            }
        }
    }

    fn completed(&mut self, p: &SessionCompleted) {
        let st = self.screen.style;
        self.screen.end_block();
        match p.stop_reason {
            StopReason::EndTurn | StopReason::Interrupted => {}
            StopReason::MaxTurns => self.warn_line(&render::budget_stop(p.budget.as_ref())),
            StopReason::Refusal => self.warn_line("the model refused"),
            StopReason::MaxTokens => self.warn_line(
                "the answer was cut at the output cap (maxOutputTokens); ask it to go on, or raise the cap",
            ),
            StopReason::Error => self.error_line("the request failed"),
            _ => self.warn_line(&format!("the request ended: {}", p.stop_reason)),
        }
        let tm = &p.telemetry;
        let parts = crate::render::telemetry_parts(tm);
        let line = st.dim(&format!("── {}", parts.join(" · ")));
        self.screen.line(&line);
    }

    fn draw_spinner(&mut self, t: &mut Turn) {
        t.frame = (t.frame + 1) % FRAMES.len();
        let Some(last) = t.tools.last() else {
            // Waiting for the model: a quiet spinner once nothing has come for a while.
            if t.interrupted_at.is_none()
                && !t.waiting.is_empty()
                && self.screen.can_spin()
                && t.last_output.elapsed() > Duration::from_millis(300)
            {
                let text = format!(
                    "{} waiting for the model {}",
                    FRAMES[t.frame],
                    duration(t.started.elapsed())
                );
                self.screen.spinner(&text, Style::dim);
            }
            return;
        };
        let more = if t.tools.len() > 1 {
            format!(" (+{} more)", t.tools.len() - 1)
        } else {
            String::new()
        };
        let text = format!(
            "{} {} {} {}{}",
            FRAMES[t.frame],
            last.name,
            last.label,
            duration(last.started.elapsed()),
            more
        );
        self.screen.spinner(&text, Style::cyan);
    }

    /// A line typed while the turn runs: `/abort`, `/steer <text>`, `/queue`, or a
    /// message that waits in the queue.
    fn typed_during_turn(&mut self, t: &mut Turn) {
        let Some(line) = self.typeahead.poll_line() else {
            return;
        };
        self.screen.after_typed_line();
        let line = line.trim();
        if line.is_empty() {
            return;
        }
        let echo = self.screen.style.dim(&format!("› {line}"));
        self.screen.line(&echo);
        let _ = self.editor.add_history_entry(line);
        let (cmd, rest) = match line.split_once(char::is_whitespace) {
            Some((c, r)) => (c, r.trim()),
            None => (line, ""),
        };
        match cmd {
            "/abort" => self.interrupt_turn(t),
            "/btw" if !rest.is_empty() => {
                if let Some(rid) = self.btw_send(rest) {
                    self.side_pending.push(rid);
                }
            }
            "/queue" => self.show_queue(),
            "/steer" if !rest.is_empty() => {
                let req = RequestSend::new(rest.to_owned())
                    .when_busy(WhenBusy::Steer)
                    .patch_preview(self.patch_preview);
                if let Err(e) = self.rt.block_on(self.session.send_with(req)) {
                    self.error_line(&e.message);
                }
            }
            c if c.starts_with('/') && !c[1..].contains('/') => {
                self.warn_line("while a request runs: /abort, /steer <text>, /queue, /btw <question>, or type a message to queue it");
            }
            _ => {
                let req = RequestSend::new(line.to_owned())
                    .when_busy(WhenBusy::Queue)
                    .patch_preview(self.patch_preview);
                match self.rt.block_on(self.session.send_with(req)) {
                    Ok(rid) => {
                        self.queued_text.insert(rid.clone(), line.to_owned());
                        t.waiting.push(rid);
                    }
                    Err(e) => self.error_line(&e.message),
                }
            }
        }
    }

    /// Reads one answer line during a turn. Ctrl-C interrupts the request (done here).
    fn ask_line(&mut self, t: &mut Turn, prompt: &str) -> Answer {
        self.screen.end_block();
        let styled = self.screen.style.bold(prompt);
        match self.editor.readline(&(prompt, styled.as_str())) {
            Ok(l) => Answer::Line(l.trim().to_owned()),
            Err(ReadlineError::Interrupted) => {
                self.interrupt_turn(t);
                Answer::Interrupted
            }
            Err(_) => Answer::End,
        }
    }

    fn approval_prompt(&mut self, t: &mut Turn, p: &ApprovalRequested) {
        let st = self.screen.style;
        self.screen.spinner_clear();
        let risk = match p.risk_level {
            RiskLevel::Low => st.green("low"),
            RiskLevel::Medium => st.yellow("medium"),
            RiskLevel::High => st.red("high"),
            _ => st.red(p.risk_level.as_str()),
        };
        let label = tool_label(&p.tool_name, &p.arguments);
        t.labels.insert(p.tool_call_id.clone(), label.clone());
        let title = format!(
            "{} {} {}",
            st.yellow("⚠ approval needed:"),
            st.bold(&p.tool_name),
            label
        );
        self.screen.line(title.trim_end());
        self.screen
            .line(&format!("  risk {risk} · {} · {}", p.action_type, p.reason));
        if let Some(cmd) = &p.command {
            let line = format!("  {} {}", st.dim("$"), st.bold(cmd));
            self.screen.line(&line);
        }
        if render::looks_like_diff(&p.preview) {
            let body = render::diff(st, &p.preview, 80);
            self.screen.line(&body);
            t.previewed.insert(p.tool_call_id.clone());
        } else if !p.preview.trim().is_empty() && Some(p.preview.trim()) != p.command.as_deref() {
            for l in p.preview.lines().take(40) {
                self.screen.line(&format!("    {l}"));
            }
        }
        let choices: Vec<(&str, ApprovalDecision, &str)> = [
            ("y", ApprovalDecision::AllowOnce, "allow once"),
            (
                "s",
                ApprovalDecision::AllowSession,
                "allow for this session",
            ),
            (
                "a",
                ApprovalDecision::AllowAlwaysProject,
                "always allow in this project",
            ),
            ("n", ApprovalDecision::Deny, "deny"),
        ]
        .into_iter()
        .filter(|(_, d, _)| p.decisions.is_empty() || p.decisions.contains(d))
        .collect();
        let menu = choices
            .iter()
            .map(|(k, _, what)| format!("[{}] {what}", st.bold(k)))
            .collect::<Vec<_>>()
            .join("  ");
        self.screen.line(&format!("  {menu}"));
        let keys = choices
            .iter()
            .map(|(k, _, _)| *k)
            .collect::<Vec<_>>()
            .join("/");
        let prompt = format!("allow? [{keys}] ");
        let decision = loop {
            let answer = match self.ask_line(t, &prompt) {
                Answer::Line(a) => a,
                Answer::Interrupted => return,
                Answer::End => break ApprovalDecision::Deny,
            };
            let key = answer.to_ascii_lowercase();
            let key = match key.as_str() {
                "yes" => "y",
                "no" => "n",
                "session" => "s",
                "always" => "a",
                k => k,
            };
            if let Some((_, d, _)) = choices.iter().find(|(k, _, _)| *k == key) {
                break d.clone();
            }
            self.warn_line(&format!("answer one of {keys}"));
        };
        if let Err(e) = self.rt.block_on(
            self.session
                .respond_approval(&p.approval_id, decision.clone()),
        ) {
            self.error_line(&e.message);
        } else if decision == ApprovalDecision::Deny {
            self.screen.line(&st.yellow("denied"));
        }
    }

    fn plan_prompt(&mut self, t: &mut Turn, p: &PlanApprovalRequired) {
        let st = self.screen.style;
        self.screen.line(&st.bold("plan proposed"));
        if let Some(s) = &p.summary {
            self.screen.line(&format!("  {s}"));
        }
        let body = render::plan(st, &p.steps);
        self.screen.line(&body);
        let menu = format!(
            "  [{}] approve, then ask before changes  [{}] approve, auto-edit  [{}] approve, auto  [{}] reject with feedback",
            st.bold("y"),
            st.bold("e"),
            st.bold("a"),
            st.bold("n")
        );
        self.screen.line(&menu);
        loop {
            let answer = match self.ask_line(t, "approve the plan? [y/e/a/n] ") {
                Answer::Line(a) => a,
                Answer::Interrupted => return,
                Answer::End => "n".to_owned(),
            };
            let mode = match answer.to_ascii_lowercase().as_str() {
                "y" | "yes" => Some(PermissionMode::Ask),
                "e" => Some(PermissionMode::AutoEdit),
                "a" => Some(PermissionMode::Auto),
                "n" | "no" => None,
                _ => {
                    self.warn_line("answer y, e, a or n");
                    continue;
                }
            };
            let result = match mode {
                Some(m) => self
                    .rt
                    .block_on(self.session.approve_plan(&p.plan_id, Some(m))),
                None => {
                    let feedback = match self.ask_line(t, "feedback (Enter for none)> ") {
                        Answer::Line(f) => f,
                        Answer::Interrupted => return,
                        Answer::End => String::new(),
                    };
                    let feedback = (!feedback.is_empty()).then_some(feedback);
                    self.rt
                        .block_on(self.session.reject_plan(&p.plan_id, feedback))
                }
            };
            if let Err(e) = result {
                self.error_line(&e.message);
            }
            return;
        }
    }

    fn ask_prompt(&mut self, t: &mut Turn, p: &AskRequested) {
        let st = self.screen.style;
        let q = format!("{} {}", st.magenta("?"), st.bold(&p.question));
        self.screen.line(&q);
        for (i, c) in p.candidates.iter().enumerate() {
            self.screen.line(&format!("  {}. {c}", i + 1));
        }
        let prompt = if p.candidates.is_empty() {
            "answer> ".to_owned()
        } else {
            format!("answer (1-{} or text)> ", p.candidates.len())
        };
        let answer = loop {
            let a = match self.ask_line(t, &prompt) {
                Answer::Line(a) => a,
                Answer::Interrupted => return,
                Answer::End => {
                    // Input ended: nobody can answer, so stop the request.
                    self.interrupt_turn(t);
                    return;
                }
            };
            if a.is_empty() {
                self.warn_line("type an answer (Ctrl-C interrupts the request)");
                continue;
            }
            match a.parse::<usize>() {
                Ok(n) if (1..=p.candidates.len()).contains(&n) => {
                    break p.candidates[n - 1].clone()
                }
                _ => break a,
            }
        };
        if let Err(e) = self.rt.block_on(self.session.answer_ask(&p.ask_id, answer)) {
            self.error_line(&e.message);
        }
    }
}

/// `label (1.2s)`, or `(1.2s)` without a label.
fn head(label: &str, took: &str) -> String {
    if label.is_empty() {
        format!("({took})")
    } else {
        format!("{label} ({took})")
    }
}
