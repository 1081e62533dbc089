//! `/rewind`, `/undo`, `/fork` and `/btw`: checkpoints, rewinding files and
//! conversation, forking the session, and side questions.

use std::time::Duration;

use keel_envelope::commands::{
    CheckpointListCmd, CommandPayload, RequestSide, SessionFork, SessionRewind,
};
use keel_envelope::events::{CheckpointEntry, FileChangeKind, RewindAction, SessionRewound};
use keel_envelope::Event;

use super::Repl;

/// How long a side question may take before the prompt comes back.
const SIDE_WAIT: Duration = Duration::from_secs(300);

fn change_mark(c: FileChangeKind) -> &'static str {
    match c {
        FileChangeKind::Created => "+",
        FileChangeKind::Modified => "~",
        FileChangeKind::Deleted => "-",
        _ => "?",
    }
}

impl Repl {
    fn checkpoints(&mut self) -> Option<Vec<CheckpointEntry>> {
        let payload = CommandPayload::CheckpointList(CheckpointListCmd::new());
        let rid = self.send_command(payload)?;
        match self
            .await_reply(&rid, Duration::from_secs(30))
            .map(|e| e.event)
        {
            Some(Event::CheckpointList(l)) => {
                if let Some(why) = l.disabled_reason {
                    self.warn_line(&format!("no checkpoints in this session: {why}"));
                    return None;
                }
                Some(l.checkpoints)
            }
            Some(Event::Error(e)) => {
                self.error_line(&e.message);
                None
            }
            _ => {
                self.warn_line("no answer to checkpoint.list");
                None
            }
        }
    }

    /// `/rewind`: lists the points; `/rewind <n> [files|chat]` goes back to one.
    pub(super) fn rewind(&mut self, arg: &str) {
        let Some(points) = self.checkpoints() else {
            return;
        };
        if points.is_empty() {
            self.screen.line("no checkpoints yet");
            return;
        }
        let mut words = arg.split_whitespace();
        let Some(pick) = words.next() else {
            let st = self.screen.style;
            for (i, p) in points.iter().enumerate() {
                let what = match (&p.tool_name, &p.before_rewind_to) {
                    (_, Some(to)) => format!("before the rewind to {to} (undoes it)"),
                    (Some(t), None) => format!("before {t} in {}", p.request_id),
                    (None, None) => format!("before request {}", p.request_id),
                };
                let changed: Vec<String> = p
                    .files_changed
                    .iter()
                    .take(4)
                    .map(|c| format!("{}{}", change_mark(c.change.clone()), c.path))
                    .collect();
                let more = p.files_changed.len().saturating_sub(4);
                let tail = if more > 0 {
                    format!(" … {more} more")
                } else {
                    String::new()
                };
                self.screen.line(&format!(
                    "{:>3}  {what}  {}{tail}",
                    i + 1,
                    st.dim(&changed.join(" "))
                ));
            }
            self.screen.line(&st.dim(
                "go back with /rewind <n> [files|chat] (both by default); later points stay listed",
            ));
            return;
        };
        let Some(point) = pick
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| points.get(i))
        else {
            self.warn_line(&format!("no point {pick:?}: pick a number from /rewind"));
            return;
        };
        let (files, conversation) = match words.next() {
            None | Some("both") => (true, true),
            Some("files") => (true, false),
            Some("chat") | Some("conversation") => (false, true),
            Some(other) => {
                self.warn_line(&format!("usage: /rewind <n> [files|chat], not {other:?}"));
                return;
            }
        };
        // Either field takes any checkpoint's id.
        let (req, call) = match &point.tool_call_id {
            Some(_) => (None, Some(point.checkpoint_id.clone())),
            None => (Some(point.checkpoint_id.clone()), None),
        };
        self.send_rewind(req, call, files, conversation);
    }

    /// `/undo`: files and conversation back to before the last request.
    pub(super) fn undo(&mut self) {
        let Some(points) = self.checkpoints() else {
            return;
        };
        let Some(last) = points
            .iter()
            .rev()
            .find(|p| p.tool_call_id.is_none() && p.before_rewind_to.is_none())
        else {
            self.screen.line("nothing to undo");
            return;
        };
        let rid = last.request_id.clone();
        self.send_rewind(Some(rid), None, true, true);
    }

    fn send_rewind(
        &mut self,
        to_request_id: Option<String>,
        to_tool_call_id: Option<String>,
        files: bool,
        conversation: bool,
    ) {
        let payload = CommandPayload::SessionRewind(
            SessionRewind::new()
                .to_request_id(to_request_id)
                .to_tool_call_id(to_tool_call_id)
                .files(files)
                .conversation(conversation),
        );
        let Some(rid) = self.send_command(payload) else {
            return;
        };
        match self
            .await_reply(&rid, Duration::from_secs(60))
            .map(|e| e.event)
        {
            Some(Event::SessionRewound(r)) => self.show_rewound(&r),
            Some(Event::Error(e)) => self.error_line(&e.message),
            _ => self.warn_line("no answer to the rewind"),
        }
    }

    fn show_rewound(&mut self, r: &SessionRewound) {
        let st = self.screen.style;
        for f in &r.files {
            let what = match f.action {
                RewindAction::Removed => "removed",
                RewindAction::Recreated => "recreated",
                RewindAction::Reverted => "reverted",
                _ => f.action.as_str(),
            };
            self.screen
                .line(&format!("  {:<10} {}", st.dim(what), f.path));
        }
        for n in &r.not_restorable {
            self.warn_line(&format!("  not restored: {} ({})", n.path, n.reason));
        }
        let convo = if r.conversation_cut {
            "; conversation cut back"
        } else {
            ""
        };
        self.screen.line(&format!(
            "rewound {} file{}{convo}",
            r.files.len(),
            if r.files.len() == 1 { "" } else { "s" }
        ));
        if let Some(shared) = &r.shared_with {
            self.warn_line(&format!(
                "this folder is shared with {}: their files were rewound too",
                shared.join(", ")
            ));
        }
        for c in r.changed_by_others.iter().flatten().take(10) {
            self.warn_line(&format!(
                "  {}{} had been changed by {}",
                change_mark(c.change.clone()),
                c.path,
                c.session_id
            ));
        }
        if r.undo_checkpoint_id.is_some() && !r.files.is_empty() {
            self.screen.line(&st.dim(
                "undo it with /rewind: the point \"before the rewind\" brings the files back",
            ));
        }
    }

    /// `/fork [n]`: a new session with this one's history (up to point n's request),
    /// which the REPL switches to.
    pub(super) fn fork(&mut self, arg: &str) {
        let at_request_id = if arg.is_empty() {
            None
        } else {
            let Some(points) = self.checkpoints() else {
                return;
            };
            let found = arg
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|i| points.get(i));
            match found {
                Some(p) => Some(p.request_id.clone()),
                None => {
                    self.warn_line(&format!("no point {arg:?}: pick a number from /rewind"));
                    return;
                }
            }
        };
        let payload = CommandPayload::SessionFork(
            SessionFork::new().at_request_id(at_request_id).files(false),
        );
        let super::link::Backend::Local(kernel) = &self.kernel else {
            self.fork_remote(payload);
            return;
        };
        let kernel = kernel.clone();
        let mut all = kernel.subscribe();
        let Some(rid) = self.send_command(payload) else {
            return;
        };
        let forked = self.rt.block_on(async {
            loop {
                match tokio::time::timeout(Duration::from_secs(10), all.recv()).await {
                    Ok(Some(env)) if env.request_id == rid => return Some(env.event),
                    Ok(Some(_)) => {}
                    _ => return None,
                }
            }
        });
        let Some(id) = self.forked_id(forked) else {
            return;
        };
        let Some(handle) = kernel.session_handle(&id) else {
            self.error_line("the fork is not open");
            return;
        };
        let parent = self.session.id().to_owned();
        self.events = super::link::Events::Local(handle.subscribe());
        self.session = super::link::Session::Local(handle);
        self.context = None;
        self.screen.line(&format!(
            "forked {parent} into {id} ({} messages); the parent stays as it was (/resume {parent}); both work in this folder, so file changes and rewinds reach both",
            self.session.state().message_count
        ));
    }

    /// The fork's id from the answer to `session.fork`; otherwise says what went wrong.
    fn forked_id(&mut self, answer: Option<Event>) -> Option<String> {
        match answer {
            Some(Event::SessionForked(f)) => Some(f.session_id),
            Some(Event::Error(e)) => {
                self.error_line(&e.message);
                None
            }
            _ => {
                self.warn_line("no answer to the fork");
                None
            }
        }
    }

    /// `/fork` over the daemon: the connection that forks watches the fork from its
    /// `session.forked` on; the REPL switches to it and stops watching the parent,
    /// which goes on in the daemon.
    fn fork_remote(&mut self, payload: CommandPayload) {
        let Some(rid) = self.send_command(payload) else {
            return;
        };
        let answer = self
            .await_reply(&rid, Duration::from_secs(30))
            .map(|e| e.event);
        let Some(id) = self.forked_id(answer) else {
            return;
        };
        let super::link::Backend::Remote(remote) = &self.kernel else {
            return;
        };
        let forked = {
            let _guard = self.rt.enter();
            super::link::Session::remote(remote.client.clone(), id.clone())
        };
        let parent = std::mem::replace(&mut self.session, forked);
        self.context = None;
        if let Err(e) = self.rt.block_on(parent.close()) {
            self.warn_line(&format!(
                "the parent session is still watched: {}",
                e.message
            ));
        }
        self.screen.line(&format!(
            "forked {} into {id} ({} messages); the parent goes on in the daemon (/resume {})",
            parent.id(),
            self.session.state().message_count,
            parent.id()
        ));
    }

    /// Sends a session command; returns its request id, or says why it was refused.
    fn send_command(&mut self, payload: CommandPayload) -> Option<String> {
        match self.rt.block_on(self.session.command(payload)) {
            Ok(rid) => Some(rid),
            Err(e) => {
                self.error_line(&e.message);
                None
            }
        }
    }

    /// Sends a side question; returns its request id.
    pub(super) fn btw_send(&mut self, question: &str) -> Option<String> {
        self.send_command(CommandPayload::RequestSide(RequestSide::new(
            question.to_owned(),
        )))
    }

    /// `/btw <question>` at the prompt: asks and waits for the answer.
    pub(super) fn btw(&mut self, question: &str) {
        if question.is_empty() {
            self.warn_line("usage: /btw <question>");
            return;
        }
        let Some(rid) = self.btw_send(question) else {
            return;
        };
        self.screen
            .line(&self.screen.style.dim("asking on the side…"));
        match self.await_reply(&rid, SIDE_WAIT).map(|e| e.event) {
            Some(ev) => self.show_side(ev),
            None => self.warn_line("no answer to the side question"),
        }
    }

    /// Shows the answer (or error) of a side question.
    pub(super) fn show_side(&mut self, ev: Event) {
        match ev {
            Event::SideAnswered(a) => {
                let st = self.screen.style;
                self.screen.line(&st.bold("btw:"));
                for line in a.text.lines() {
                    self.screen.line(&format!("  {line}"));
                }
            }
            Event::Error(e) => self.error_line(&format!("side question: {}", e.message)),
            _ => {}
        }
    }
}
