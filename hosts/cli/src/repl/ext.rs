//! Slash commands of the optional extensions: review mode, patch preview, the task
//! graph, sub-agents and background tasks. Each sends one kernel command and shows
//! its answer; a refusal is one line with its stable code.

use std::time::Duration;

use keel_envelope::commands::{
    BackgroundHistoryCmd, BackgroundListCmd, BackgroundStopCmd, ChecklistUpdate, CommandPayload,
    NodeUpdates, PatchApply, PatchReject, PatchSummaryCmd, ReviewDecision, ReviewEnter,
    ReviewResolve, ReviewStatusCmd, ReviewSubmit, SubAgentGetCmd, SubAgentListCmd,
    TaskGraphAdvance, TaskGraphStateCmd, TaskGraphUpdateNode,
};
use keel_envelope::ext::{
    BackgroundStatus, BackgroundTask, GraphStatus, NodeStatus, Patch, PatchOp, ReviewState,
    ReviewStatus, SubAgentInfo, SubAgentStatus, TaskGraph,
};
use keel_envelope::{ErrorPayload, Event};

use super::render::{self, Style};
use super::Repl;

/// How long a command may take to answer.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// The sub-commands offered by Tab after each extension command.
const SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "/review",
        &["enter", "comment", "check", "approve", "reject"],
    ),
    ("/patches", &["apply", "reject"]),
    ("/preview", &["on", "off"]),
    ("/graph", &["advance", "done", "fail", "skip"]),
    ("/background", &["stop", "log"]),
];

/// Completes the first argument of an extension command: the offset where the
/// candidates go and the candidates, or `None` when `head` is not such a line.
pub(crate) fn complete_args(head: &str) -> Option<(usize, Vec<String>)> {
    let (cmd, rest) = head.split_once(' ')?;
    let (_, subs) = SUBCOMMANDS.iter().find(|(c, _)| *c == cmd)?;
    if rest.contains(' ') {
        return Some((head.len(), Vec::new()));
    }
    let found = subs
        .iter()
        .filter(|s| s.starts_with(rest))
        .map(|s| (*s).to_owned())
        .collect();
    Some((cmd.len() + 1, found))
}

/// One line for a refusal: the stable code, then the message.
pub(crate) fn error_text(e: &ErrorPayload) -> String {
    format!("{}: {}", e.code, e.message)
}

/// The first word of `arg` and the rest, trimmed.
fn split_word(arg: &str) -> (&str, &str) {
    match arg.split_once(char::is_whitespace) {
        Some((w, r)) => (w, r.trim()),
        None => (arg, ""),
    }
}

fn optional(text: &str) -> Option<String> {
    (!text.is_empty()).then(|| text.to_owned())
}

fn review_status_name(s: ReviewStatus) -> &'static str {
    match s {
        ReviewStatus::Pending => "pending",
        ReviewStatus::Approved => "approved",
        ReviewStatus::Rejected => "rejected",
        _ => "unknown",
    }
}

fn node_status_name(s: NodeStatus) -> &'static str {
    match s {
        NodeStatus::Pending => "pending",
        NodeStatus::Ready => "ready",
        NodeStatus::Running => "running",
        NodeStatus::Completed => "completed",
        NodeStatus::Failed => "failed",
        NodeStatus::Skipped => "skipped",
        _ => "unknown",
    }
}

fn graph_status_name(s: GraphStatus) -> &'static str {
    match s {
        GraphStatus::Active => "active",
        GraphStatus::Completed => "completed",
        GraphStatus::Failed => "failed",
        _ => "unknown",
    }
}

fn op_name(op: PatchOp) -> &'static str {
    match op {
        PatchOp::Create => "create",
        PatchOp::Modify => "modify",
        PatchOp::Delete => "delete",
        _ => "unknown",
    }
}

/// A review as a few lines.
pub(crate) fn review_lines(st: Style, r: &ReviewState, blocking_now: Option<bool>) -> Vec<String> {
    let status = review_status_name(r.status.clone());
    let painted = match r.status {
        ReviewStatus::Pending => st.yellow(status),
        ReviewStatus::Approved => st.green(status),
        ReviewStatus::Rejected => st.red(status),
        _ => st.dim(status),
    };
    let blocking = if blocking_now.unwrap_or(r.blocking && r.status == ReviewStatus::Pending) {
        " · blocking: messages are refused until it is resolved"
    } else if r.blocking {
        " · blocking"
    } else {
        ""
    };
    let mut out = vec![format!(
        "{} {} {painted}{}",
        st.bold("review"),
        r.review_id,
        st.dim(blocking)
    )];
    out.push(format!("  reason: {}", r.reason));
    for c in &r.checklist {
        let mark = if c.done { "[x]" } else { "[ ]" };
        let note = c
            .note
            .as_deref()
            .map(|n| format!(" — {n}"))
            .unwrap_or_default();
        out.push(format!(
            "  {mark} {} {}{note}",
            c.title,
            st.dim(&format!("({})", c.id))
        ));
    }
    for c in &r.comments {
        out.push(format!(
            "  {} {}",
            st.dim(&format!("{}:", c.author)),
            c.content
        ));
    }
    if let Some(s) = &r.summary {
        out.push(format!("  summary: {s}"));
    }
    out
}

/// A patch with its files: per-file stats and the colored diff.
pub(crate) fn patch_lines(st: Style, p: &Patch, max_diff_lines: usize) -> Vec<String> {
    let mut out = vec![format!(
        "{} {}  {} file(s) {} {}{}",
        st.bold("patch"),
        p.patch_id,
        p.stats.file_count,
        st.green(&format!("+{}", p.stats.added)),
        st.red(&format!("-{}", p.stats.removed)),
        p.reason
            .as_deref()
            .map(|r| st.dim(&format!("  ({r})")))
            .unwrap_or_default()
    )];
    for f in &p.files {
        out.push(format!(
            "  {} {} {} {}",
            st.dim(op_name(f.op.clone())),
            f.path,
            st.green(&format!("+{}", f.stats.added)),
            st.red(&format!("-{}", f.stats.removed))
        ));
        if !f.diff.is_empty() {
            out.push(render::diff(st, &f.diff, max_diff_lines));
        }
    }
    out
}

/// A graph as an indented list in its topological order: a node is indented under
/// the deepest of its dependencies.
pub(crate) fn graph_lines(st: Style, g: &TaskGraph) -> Vec<String> {
    let mut out = vec![format!(
        "{} {} {}{}",
        st.bold("task graph"),
        g.graph_id,
        st.dim(&format!("({})", graph_status_name(g.status.clone()))),
        g.title
            .as_deref()
            .map(|t| format!(": {t}"))
            .unwrap_or_default()
    )];
    let mut depth: std::collections::HashMap<&str, usize> = Default::default();
    for id in &g.order {
        let Some(n) = g.nodes.get(id) else { continue };
        let d = n
            .depends_on
            .iter()
            .filter_map(|p| depth.get(p.as_str()))
            .max()
            .map_or(0, |d| d + 1);
        depth.insert(id.as_str(), d);
        let status = node_status_name(n.status.clone());
        let painted = match n.status {
            NodeStatus::Completed => st.green(status),
            NodeStatus::Failed => st.red(status),
            NodeStatus::Running | NodeStatus::Ready => st.yellow(status),
            NodeStatus::Pending | NodeStatus::Skipped => st.dim(status),
            _ => st.dim(status),
        };
        let after = if n.depends_on.is_empty() {
            String::new()
        } else {
            st.dim(&format!(" (after {})", n.depends_on.join(", ")))
        };
        out.push(format!(
            "{}- {id} [{painted}] {}{after}",
            "  ".repeat(d + 1),
            n.title
        ));
    }
    out
}

fn sub_agent_line(st: Style, a: &SubAgentInfo) -> String {
    let status = match a.status {
        SubAgentStatus::Running => st.yellow("running"),
        SubAgentStatus::Completed => st.green("completed"),
        SubAgentStatus::Failed => st.red("failed"),
        _ => st.dim(a.status.as_str()),
    };
    format!(
        "  {} [{status}] {} {}",
        a.sub_agent_id,
        render::first_line(&a.task, 60),
        st.dim(&format!("({} turns)", a.turns))
    )
}

fn background_line(st: Style, t: &BackgroundTask) -> String {
    let status = match t.status {
        BackgroundStatus::Running => st.yellow("running"),
        BackgroundStatus::Exited => match t.exit_code {
            Some(0) => st.green("exited 0"),
            Some(c) => st.red(&format!("exited {c}")),
            None => st.dim("exited"),
        },
        BackgroundStatus::Stopped => st.dim("stopped"),
        _ => st.dim(t.status.as_str()),
    };
    format!(
        "  {} [{status}] {}",
        t.task_id,
        render::first_line(&t.command, 80)
    )
}

impl Repl {
    /// Sends an extension command; returns its answer and the events that followed it
    /// on the same request, or `None` after showing why there is none.
    fn ext_command(&mut self, payload: CommandPayload) -> Option<Vec<Event>> {
        let rid = match self.rt.block_on(self.session.command(payload)) {
            Ok(rid) => rid,
            Err(e) => {
                self.error_line(&error_text(&e));
                return None;
            }
        };
        let Some(first) = self.await_reply(&rid, ANSWER_WAIT) else {
            self.warn_line("no answer from the runtime");
            return None;
        };
        let mut events = vec![first.event];
        // Events the same command emitted after its answer (they are already queued).
        while let Some(env) = self.events.try_recv() {
            if env.request_id == rid {
                events.push(env.event);
            }
        }
        if let Some(Event::Error(e) | Event::RequestRejected(e)) = events.first() {
            let line = error_text(e);
            self.error_line(&line);
            return None;
        }
        Some(events)
    }

    fn lines(&mut self, lines: Vec<String>) {
        for l in lines {
            self.screen.line(&l);
        }
    }

    /// `/review [enter <reason> [--blocking] | comment <text> | check <itemId> | approve [summary] | reject [summary]]`.
    pub(super) fn review(&mut self, arg: &str) {
        let st = self.screen.style;
        let (sub, rest) = split_word(arg);
        let payload = match sub {
            "" => CommandPayload::ReviewStatus(ReviewStatusCmd::new()),
            "enter" => {
                let blocking = rest.split_whitespace().any(|w| w == "--blocking");
                let reason = rest
                    .split_whitespace()
                    .filter(|w| *w != "--blocking")
                    .collect::<Vec<_>>()
                    .join(" ");
                if reason.is_empty() {
                    self.warn_line("usage: /review enter <reason> [--blocking]");
                    return;
                }
                CommandPayload::ReviewEnter(ReviewEnter::new(reason).blocking(blocking))
            }
            "comment" if !rest.is_empty() => {
                CommandPayload::ReviewSubmit(ReviewSubmit::new().comment(rest.to_owned()))
            }
            "check" if !rest.is_empty() => CommandPayload::ReviewSubmit(
                ReviewSubmit::new()
                    .checklist_item(ChecklistUpdate::new(rest.to_owned()).done(true)),
            ),
            "approve" | "reject" => CommandPayload::ReviewResolve(
                ReviewResolve::new(if sub == "approve" {
                    ReviewDecision::Approved
                } else {
                    ReviewDecision::Rejected
                })
                .summary(optional(rest)),
            ),
            _ => {
                self.warn_line(
                    "usage: /review [enter <reason> [--blocking] | comment <text> | check <itemId> | approve [summary] | reject [summary]]",
                );
                return;
            }
        };
        let Some(events) = self.ext_command(payload) else {
            return;
        };
        match events.into_iter().next() {
            Some(Event::ReviewState(p)) => match p.review {
                Some(r) => {
                    let l = review_lines(st, &r, Some(p.blocking));
                    self.lines(l);
                }
                None => self
                    .screen
                    .line("no review (start one with /review enter <reason>)"),
            },
            Some(Event::ReviewRequested(p)) => {
                self.screen
                    .line(&format!("review {} started", p.review.review_id));
                let l = review_lines(st, &p.review, None);
                self.lines(l);
            }
            Some(Event::ReviewUpdated(p)) => {
                self.screen.line("review updated");
                let l = review_lines(st, &p.review, None);
                self.lines(l);
            }
            Some(Event::ReviewResolved(p)) => {
                let decision = p.review.decision.unwrap_or(p.review.status);
                self.screen.line(&format!(
                    "review {} {}",
                    p.review.review_id,
                    review_status_name(decision)
                ));
            }
            _ => {}
        }
    }

    /// `/patches [apply <patchId> | reject <patchId> [reason]]`.
    pub(super) fn patches(&mut self, arg: &str) {
        let st = self.screen.style;
        let (sub, rest) = split_word(arg);
        let (id, reason) = split_word(rest);
        let payload = match sub {
            "" => CommandPayload::PatchSummary(PatchSummaryCmd::new()),
            "apply" if !id.is_empty() && reason.is_empty() => {
                CommandPayload::PatchApply(PatchApply::new(id.to_owned()))
            }
            "reject" if !id.is_empty() => CommandPayload::PatchReject(
                PatchReject::new(id.to_owned()).reason(optional(reason)),
            ),
            _ => {
                self.warn_line("usage: /patches [apply <patchId> | reject <patchId> [reason]]");
                return;
            }
        };
        let Some(events) = self.ext_command(payload) else {
            return;
        };
        match events.into_iter().next() {
            Some(Event::PatchSummary(p)) => {
                if p.pending.is_empty() {
                    self.screen.line(&format!(
                        "no pending patches ({} resolved)",
                        p.history.len()
                    ));
                    return;
                }
                self.screen.line(&format!(
                    "{} pending patch(es): {} file(s) {} {}",
                    p.pending.len(),
                    p.totals.file_count,
                    st.green(&format!("+{}", p.totals.added)),
                    st.red(&format!("-{}", p.totals.removed))
                ));
                for patch in &p.pending {
                    let l = patch_lines(st, patch, 40);
                    self.lines(l);
                }
                self.screen.line(
                    &st.dim(
                        "apply one with /patches apply <id>, drop it with /patches reject <id>",
                    ),
                );
            }
            Some(Event::PatchApplied(p)) => {
                let files: Vec<&str> = p.patch.files.iter().map(|f| f.path.as_str()).collect();
                self.screen.line(&format!(
                    "{} patch {} applied: {}",
                    st.green("✓"),
                    p.patch.patch_id,
                    files.join(", ")
                ));
            }
            Some(Event::PatchRejected(p)) => {
                self.screen
                    .line(&format!("patch {} rejected", p.patch.patch_id));
            }
            _ => {}
        }
    }

    /// `/preview [on|off]`: whether this REPL's messages propose edits as patches.
    pub(super) fn preview(&mut self, arg: &str) {
        match arg {
            "" => {}
            "on" => self.patch_preview = Some(true),
            "off" => self.patch_preview = Some(false),
            _ => {
                self.warn_line("usage: /preview [on|off]");
                return;
            }
        }
        let on = self.patch_preview.unwrap_or(self.kernel.patch_preview());
        if on {
            self.screen.line(
                "patch preview: on (edits are proposed as patches; review them with /patches)",
            );
        } else {
            self.screen.line("patch preview: off (edits are written)");
        }
    }

    /// `/graph [advance | done <nodeId> | fail <nodeId> | skip <nodeId>]`.
    pub(super) fn graph(&mut self, arg: &str) {
        let st = self.screen.style;
        let (sub, rest) = split_word(arg);
        let status = match sub {
            "done" => Some(NodeStatus::Completed),
            "fail" => Some(NodeStatus::Failed),
            "skip" => Some(NodeStatus::Skipped),
            _ => None,
        };
        let payload = match (sub, status) {
            ("", _) => CommandPayload::TaskGraphState(TaskGraphStateCmd::new()),
            ("advance", _) if rest.is_empty() => {
                CommandPayload::TaskGraphAdvance(TaskGraphAdvance::new())
            }
            (_, Some(status)) if !rest.is_empty() && !rest.contains(char::is_whitespace) => {
                CommandPayload::TaskGraphUpdateNode(TaskGraphUpdateNode::new(
                    rest.to_owned(),
                    NodeUpdates::new().status(status),
                ))
            }
            _ => {
                self.warn_line(
                    "usage: /graph [advance | done <nodeId> | fail <nodeId> | skip <nodeId>]",
                );
                return;
            }
        };
        let Some(events) = self.ext_command(payload) else {
            return;
        };
        for ev in events {
            match ev {
                Event::TaskGraphState(p) => match p.graph {
                    Some(g) => {
                        let l = graph_lines(st, &g);
                        self.lines(l);
                    }
                    None => self.screen.line("no task graph"),
                },
                Event::TaskGraphAdvanced(p) => {
                    if p.became_ready.is_empty() {
                        self.screen.line("nothing became ready");
                    } else {
                        self.screen
                            .line(&format!("ready now: {}", p.became_ready.join(", ")));
                    }
                    let l = graph_lines(st, &p.graph);
                    self.lines(l);
                }
                Event::TaskGraphNodeCompleted(p)
                | Event::TaskGraphNodeFailed(p)
                | Event::TaskGraphNodeUpdated(p) => {
                    self.screen.line(&format!(
                        "node {} is {}",
                        p.node.id,
                        node_status_name(p.node.status)
                    ));
                }
                Event::TaskGraphCompleted(p) => {
                    let status = p
                        .graph
                        .as_ref()
                        .map_or("completed", |g| graph_status_name(g.status.clone()));
                    self.screen.line(&format!("task graph {status}"));
                }
                _ => {}
            }
        }
    }

    /// `/agents [<subAgentId>]`.
    pub(super) fn agents(&mut self, arg: &str) {
        let st = self.screen.style;
        let payload = if arg.is_empty() {
            CommandPayload::SubAgentList(SubAgentListCmd::new())
        } else {
            CommandPayload::SubAgentGet(SubAgentGetCmd::new(arg.to_owned()))
        };
        let Some(events) = self.ext_command(payload) else {
            return;
        };
        match events.into_iter().next() {
            Some(Event::SubAgentList(p)) => {
                if p.active.is_empty() && p.recent.is_empty() {
                    self.screen.line("no sub-agents");
                    return;
                }
                for a in p.active.iter().chain(p.recent.iter()) {
                    let l = sub_agent_line(st, a);
                    self.screen.line(&l);
                }
            }
            Some(Event::SubAgentGet(p)) => {
                let a = p.sub_agent;
                let l = sub_agent_line(st, &a);
                self.screen.line(&l);
                self.screen.line(&format!("  task: {}", a.task));
                if !a.tools.is_empty() {
                    self.screen
                        .line(&format!("  tools: {}", a.tools.join(", ")));
                }
                self.screen.line(&format!(
                    "  tokens: {} in, {} out",
                    a.usage.input_tokens, a.usage.output_tokens
                ));
                if let Some(s) = &a.summary {
                    self.screen.line(&format!("  summary: {s}"));
                }
                if let Some(e) = &a.error {
                    let l = error_text(e);
                    self.error_line(&format!("  {l}"));
                }
            }
            _ => {}
        }
    }

    /// `/background [stop <taskId> | log <taskId>]`.
    pub(super) fn background(&mut self, arg: &str) {
        let st = self.screen.style;
        let (sub, id) = split_word(arg);
        let payload = match sub {
            "" => CommandPayload::BackgroundList(BackgroundListCmd::new()),
            "stop" if !id.is_empty() => {
                CommandPayload::BackgroundStop(BackgroundStopCmd::new(id.to_owned()))
            }
            "log" if !id.is_empty() => {
                CommandPayload::BackgroundHistory(BackgroundHistoryCmd::new(id.to_owned()))
            }
            _ => {
                self.warn_line("usage: /background [stop <taskId> | log <taskId>]");
                return;
            }
        };
        let Some(events) = self.ext_command(payload) else {
            return;
        };
        match events.into_iter().next() {
            Some(Event::BackgroundList(p)) => {
                if p.tasks.is_empty() {
                    self.screen.line("no background tasks");
                }
                for t in &p.tasks {
                    let l = background_line(st, t);
                    self.screen.line(&l);
                }
            }
            Some(Event::BackgroundStopped(p)) => {
                self.screen
                    .line(&format!("background task {} stopped", p.task.task_id));
            }
            Some(Event::BackgroundHistory(p)) => {
                if p.lines.is_empty() {
                    self.screen
                        .line(&format!("no output from {} yet", p.task_id));
                }
                for l in &p.lines {
                    let line = st.dim(&format!("  │ {}", render::truncate(l, 200)));
                    self.screen.line(&line);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands_complete() {
        assert_eq!(
            complete_args("/review a"),
            Some((8, vec!["approve".to_owned()]))
        );
        assert_eq!(
            complete_args("/patches "),
            Some((9, vec!["apply".to_owned(), "reject".to_owned()]))
        );
        assert_eq!(complete_args("/graph done n1"), Some((14, Vec::new())));
        assert_eq!(complete_args("/status x"), None);
        assert_eq!(complete_args("/review"), None);
    }

    #[test]
    fn words_split() {
        assert_eq!(split_word("reject p1 not now"), ("reject", "p1 not now"));
        assert_eq!(split_word("advance"), ("advance", ""));
        assert_eq!(split_word(""), ("", ""));
    }
}
