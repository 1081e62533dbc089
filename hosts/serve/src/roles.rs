//! The roles of remote clients, in one table: which role each command type needs.
//!
//! [`requirement`] is that table (an exhaustive `match`, so a new command type does not
//! compile until it has a row); the connection's check, the role table of
//! `docs/protocol.md` ([`role_table_markdown`], checked by a test) and the tests that
//! send every command type with every role over a real WebSocket all read it.

use keel_envelope::CommandType;
use serde::{Deserialize, Serialize};

/// What a token lets a remote client do; each role may do everything the ones before
/// it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Lists, watches, reads state and makes read-only queries.
    Observer,
    /// Also answers approvals, plans and questions, and interrupts.
    Approver,
    /// May do everything.
    Controller,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 3] = [Role::Observer, Role::Approver, Role::Controller];

    /// The spelling on the command line, in the token store and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Observer => "observer",
            Role::Approver => "approver",
            Role::Controller => "controller",
        }
    }

    /// Parses [`Role::as_str`]'s spelling.
    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether this role may send a command that needs `needed`.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the table: the lowest role a command type needs, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirement {
    /// The lowest role allowed.
    pub role: Role,
    /// Why, in a few words (the table's last column).
    pub why: &'static str,
}

const fn needs(role: Role, why: &'static str) -> Requirement {
    Requirement { role, why }
}

/// The role table.
pub fn requirement(t: CommandType) -> Requirement {
    use CommandType as C;
    use Role::{Approver, Controller, Observer};
    match t {
        C::RuntimeShutdown => needs(Observer, "ends this connection only"),
        C::SessionList => needs(
            Observer,
            "lists sessions (a session-bound token sees its own)",
        ),
        C::SessionState => needs(Observer, "reads a session's state"),
        C::CheckpointList => needs(Observer, "reads the checkpoints"),
        C::ReviewStatus => needs(Observer, "reads the review"),
        C::PatchSummary => needs(Observer, "reads the patches"),
        C::TaskGraphState => needs(Observer, "reads the task graph"),
        C::SubAgentList | C::SubAgentGet => needs(Observer, "reads the sub-agents"),
        C::HarnessStatus => needs(
            Observer,
            "reads the runtime's status (filtered for a session-bound token)",
        ),
        C::BackgroundList | C::BackgroundGet | C::BackgroundHistory => {
            needs(Observer, "reads the background tasks and their output")
        }
        C::SessionWatch | C::SessionUnwatch => needs(
            Observer,
            "streams a session's events to this connection, or stops",
        ),
        C::McpList => needs(Observer, "reads the MCP servers"),
        C::SkillsList | C::CommandsList => needs(Observer, "reads the skills and custom commands"),
        C::WorktreeList => needs(
            Observer,
            "lists the worktrees (a session-bound token sees its session's)",
        ),
        C::ApprovalRespond => needs(Approver, "answers an approval"),
        C::PlanApprove | C::PlanReject => needs(Approver, "answers a plan"),
        C::AskRespond => needs(Approver, "answers a question"),
        C::PatchApply | C::PatchReject => needs(
            Approver,
            "answers a proposed patch (an edit's approval under patch preview)",
        ),
        C::ReviewResolve => needs(Approver, "answers a review"),
        C::RequestInterrupt => needs(Approver, "stops the running request"),
        C::RequestCancelQueued => needs(
            Approver,
            "removes a queued request: stops work, starts none",
        ),
        C::BackgroundStop => needs(Approver, "stops a background task: stops work, starts none"),
        C::SessionStart | C::SessionResume | C::SessionFork => needs(
            Controller,
            "opens a session (and may start its MCP servers)",
        ),
        C::SessionClose | C::SessionDelete => needs(Controller, "closes or deletes a session"),
        C::SessionRewind => needs(Controller, "rewrites files and the conversation"),
        C::WorktreeRemove => needs(
            Controller,
            "deletes a worktree's files (a session-bound token names its session)",
        ),
        C::RequestSend | C::RequestSide => needs(Controller, "sends a prompt to the model"),
        C::ContextCompact => needs(Controller, "rewrites the conversation"),
        C::SessionSetMode | C::SessionSetRules => {
            needs(Controller, "changes what tools may do without asking")
        }
        C::SessionSetModel => needs(Controller, "changes the model"),
        C::SessionLoadHistory => needs(Controller, "rewrites the conversation"),
        C::SessionSetTitle => needs(Controller, "changes the session"),
        C::ReviewEnter | C::ReviewSubmit => needs(Controller, "starts a review or writes to it"),
        C::PatchPropose => needs(Controller, "proposes file contents"),
        C::TaskGraphCreate | C::TaskGraphAddNode | C::TaskGraphUpdateNode | C::TaskGraphAdvance => {
            needs(Controller, "changes the task graph")
        }
        C::SessionSetHostTools | C::HostToolRespond => needs(
            Controller,
            "acts as the host: provides tools and their results",
        ),
        // A command type this table does not name yet: closed to all but a controller.
        _ => needs(Controller, "a command this table does not name"),
    }
}

/// The marker before the generated role table in `docs/protocol.md`.
pub const DOC_BEGIN: &str =
    "<!-- BEGIN GENERATED ROLES: do not edit; regenerate with KEEL_UPDATE_GENERATED=1 cargo test -p keel-serve --test serve roles_doc -->";
/// The marker after it.
pub const DOC_END: &str = "<!-- END GENERATED ROLES -->";

/// The role table as Markdown: one row per command type, in the protocol's order.
pub fn role_table_markdown() -> String {
    let mut out = String::from("| command | observer | approver | controller | why |\n");
    out.push_str("|---|:---:|:---:|:---:|---|\n");
    for &t in CommandType::ALL {
        let r = requirement(t);
        let mark = |role: Role| if role.allows(r.role) { "✓" } else { "—" };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            t.as_str(),
            mark(Role::Observer),
            mark(Role::Approver),
            mark(Role::Controller),
            r.why
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_parse_their_own_spelling() {
        assert!(Role::Controller.allows(Role::Approver));
        assert!(Role::Approver.allows(Role::Observer));
        assert!(!Role::Observer.allows(Role::Approver));
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert_eq!(Role::parse("admin"), None);
    }

    #[test]
    fn the_table_has_one_row_per_command_type() {
        let t = role_table_markdown();
        assert_eq!(t.lines().count(), CommandType::ALL.len() + 2);
        assert!(t.contains("| `request.send` | — | — | ✓ |"));
        assert!(t.contains("| `approval.respond` | — | ✓ | ✓ |"));
        assert!(t.contains("| `session.watch` | ✓ | ✓ | ✓ |"));
    }
}
