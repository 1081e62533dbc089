//! `/rules`: lists the session's allow and deny rules; `/rules allow <rule>` and
//! `/rules deny <rule>` add a rule for this session only (`session.set_rules`).
//!
//! A session allow rule joins the project's allow rules in the session but is never
//! written to the rules file; a session deny rule is the command's session-only `deny`
//! list. A deny rule beats every allow rule and "allow for session" approval.

use std::time::Duration;

use keel_envelope::commands::{CommandPayload, SetRules};
use keel_envelope::types::ApprovalRules;
use keel_envelope::Event;

use super::Repl;

const USAGE: &str = "usage: /rules | /rules allow <rule> | /rules deny <rule>   (a rule is a tool or tool(pattern), e.g. run_shell(rm *), edit_file(src/**))";

/// The rules added by `/rules` in this session.
#[derive(Debug, Default)]
pub(crate) struct SessionRules {
    /// Allow rules for this session only.
    pub(crate) allow: Vec<String>,
    /// Deny rules for this session only.
    pub(crate) deny: Vec<String>,
}

impl SessionRules {
    /// `rules` without the session-only allow rules: what may be saved to the file.
    pub(crate) fn lasting(&self, rules: &ApprovalRules) -> ApprovalRules {
        let mut out = rules.clone();
        out.always_allow_project.retain(|r| !self.allow.contains(r));
        out
    }
}

impl Repl {
    /// `/rules [allow|deny <rule>]`.
    pub(super) fn rules_command(&mut self, arg: &str) {
        let (verb, rule) = match arg.split_once(char::is_whitespace) {
            Some((v, r)) => (v, r.trim()),
            None => (arg, ""),
        };
        match verb {
            "" | "list" if rule.is_empty() => self.list_rules(),
            "allow" | "deny" if !rule.is_empty() => self.add_rule(verb == "deny", rule),
            _ => self.error_line(USAGE),
        }
    }

    fn list_rules(&mut self) {
        let rules = self.session.state().rules;
        let session_allow = &self.session_rules.allow;
        let project_allow: Vec<String> = rules
            .always_allow_project
            .iter()
            .filter(|r| !session_allow.contains(r))
            .cloned()
            .collect();
        let groups: [(&str, &[String]); 6] = [
            ("allow (this session)", session_allow),
            ("allow (project)", &project_allow),
            ("allow (global)", &rules.always_allow_global),
            ("deny (this session)", &self.session_rules.deny),
            ("deny (project)", &rules.always_deny_project),
            ("deny (global)", &rules.always_deny_global),
        ];
        let mut lines = Vec::new();
        for (label, list) in groups.iter().filter(|(_, l)| !l.is_empty()) {
            lines.push(format!("{label}: {}", list.join(", ")));
        }
        if lines.is_empty() {
            let none = self.screen.style.dim(
                "no rules: add one with /rules allow <rule> or /rules deny <rule>, or answer an approval with [a]",
            );
            self.screen.line(&none);
        }
        for l in lines {
            self.screen.line(&l);
        }
    }

    fn add_rule(&mut self, deny: bool, rule: &str) {
        if keel_tools::policy::Rule::parse(rule).is_none() {
            self.error_line(&format!("not a rule: {rule}; {USAGE}"));
            return;
        }
        let rules = self.session.state().rules;
        let mut session = SessionRules {
            allow: self.session_rules.allow.clone(),
            deny: self.session_rules.deny.clone(),
        };
        let mut allow_project = rules.always_allow_project.clone();
        if deny {
            if !session.deny.iter().any(|r| r == rule) {
                session.deny.push(rule.to_owned());
            }
        } else if !allow_project.iter().any(|r| r == rule) {
            allow_project.push(rule.to_owned());
            session.allow.push(rule.to_owned());
        }
        let payload = CommandPayload::SessionSetRules(
            SetRules::new()
                .always_allow_global(rules.always_allow_global)
                .always_allow_project(allow_project)
                .always_deny_global(rules.always_deny_global)
                .always_deny_project(rules.always_deny_project)
                .deny(session.deny.clone()),
        );
        let rid = match self.rt.block_on(self.session.command(payload)) {
            Ok(rid) => rid,
            Err(e) => {
                self.error_line(&format!("rule not added: {}", e.message));
                return;
            }
        };
        match self
            .await_reply(&rid, Duration::from_secs(10))
            .map(|e| e.event)
        {
            Some(Event::SessionRulesUpdated(_)) => {
                self.session_rules = session;
                let what = if deny { "denied" } else { "allowed" };
                self.screen
                    .line(&format!("{what} for this session: {rule}"));
            }
            Some(Event::Error(e)) => self.error_line(&format!("rule not added: {}", e.message)),
            _ => self.warn_line("no answer from the runtime"),
        }
    }
}
