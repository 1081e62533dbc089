//! `/resume` and `/new`: switching the REPL to another session, stored or new. The
//! session left is closed here (in the daemon it goes on, unwatched by this REPL).

use super::link::Opened;
use super::{render, Repl};

/// The ids `given` names among `ids`: itself when it is one, else every id it starts.
pub(super) fn named_ids<'a>(
    ids: impl Iterator<Item = &'a str> + Clone,
    given: &str,
) -> Vec<&'a str> {
    match ids.clone().find(|id| *id == given) {
        Some(id) => vec![id],
        None => ids.filter(|id| id.starts_with(given)).collect(),
    }
}

impl Repl {
    pub(super) fn resume(&mut self, arg: &str) {
        if arg.is_empty() {
            self.warn_line("usage: /resume <session id> (see /sessions)");
            return;
        }
        let ids: Vec<String> = match self.rt.block_on(self.kernel.list_sessions()) {
            Ok(l) => l.into_iter().map(|s| s.session_id).collect(),
            Err(e) => {
                self.error_line(&e.message);
                return;
            }
        };
        let id = match named_ids(ids.iter().map(String::as_str), arg).as_slice() {
            [one] => (*one).to_owned(),
            [] => {
                self.warn_line(&format!("no session {arg:?} (see /sessions)"));
                return;
            }
            many => {
                self.warn_line(&format!(
                    "{arg:?} starts {} sessions; give more of the id",
                    many.len()
                ));
                return;
            }
        };
        if id == self.session.id() {
            self.screen.line("already in this session");
            return;
        }
        let opened = match self.rt.block_on(self.kernel.open(&id)) {
            Ok(x) => x,
            Err(e) => {
                self.error_line(&e.message);
                return;
            }
        };
        let resumed = opened.resumed.clone();
        self.switch_to(opened);
        let st = self.screen.style;
        match resumed {
            Some(p) => {
                self.screen.line(&format!(
                    "resumed {} ({} messages, {} mode, {})",
                    p.session.session_id,
                    p.message_count,
                    p.session.permission_mode.as_str(),
                    p.session.model
                ));
                if !p.summary.is_empty() {
                    self.screen.line(&st.dim(&format!("  {}", p.summary)));
                }
                if let Some(plan) = p.plan {
                    let body = render::plan(st, &plan.steps);
                    self.screen.line(&body);
                }
                self.apply_saved_rules(Some(p.rules));
            }
            None => self.screen.line(&format!("resumed {id}")),
        }
    }

    /// Starts a new session in the workspace with this session's mode and model, and
    /// switches to it; the one left stays stored (`/resume` goes back).
    pub(super) fn new_session(&mut self) {
        let now = self.session.state().session;
        let started = self.rt.block_on(self.kernel.start(
            &now.workspace,
            now.permission_mode.clone(),
            &now.model,
        ));
        match started {
            Ok(opened) => {
                let left = now.session_id.clone();
                self.switch_to(opened);
                self.screen.line(&format!(
                    "new session {} ({} mode, {}); the previous one is kept: /resume {left}",
                    self.session.id(),
                    now.permission_mode.as_str(),
                    now.model
                ));
                self.apply_saved_rules(None);
            }
            Err(e) => self.error_line(&e.message),
        }
    }

    /// Makes `opened` the REPL's session and closes the one it had.
    fn switch_to(&mut self, opened: Opened) {
        let old = std::mem::replace(&mut self.session, opened.session);
        if let Some(events) = opened.events {
            self.events = events;
        }
        self.context = None;
        if let Err(e) = self.rt.block_on(old.close()) {
            self.warn_line(&format!(
                "the previous session did not close cleanly: {}",
                e.message
            ));
        }
    }
}
