//! Sample events of MCP servers, host tools, skills and custom commands.

use keel_envelope::host::{
    CustomCommandInfo, HostToolApproval, HostToolSpec, McpServerInfo, McpServerState, McpToolInfo,
    McpTrust, SkillInfo,
};

use super::*;

/// A representative event of `t`, one of the MCP and host-tool event types.
pub fn sample_host_event(t: EventType) -> Event {
    match t {
        EventType::McpList => Event::McpList(ev::McpList::new(vec![
            McpServerInfo::new(
                s("files"),
                s("stdio"),
                McpTrust::Read,
                s("config"),
                McpServerState::Ready,
                vec![McpToolInfo::new(
                    s("mcp__files__read_text"),
                    s("read_text"),
                    s("Reads a text file."),
                )],
            ),
            McpServerInfo::new(
                s("tickets"),
                s("http"),
                McpTrust::Ask,
                s("session"),
                McpServerState::Failed,
                vec![],
            )
            .reason(s("it did not start within 30 s (its start time limit)")),
        ])),
        EventType::SkillsList => Event::SkillsList(ev::SkillsList::new(vec![SkillInfo::new(
            "release-notes",
            "Writes release notes from the changelog. Use when preparing a release.",
            "project",
            "/home/dev/project/.keel/skills/release-notes/SKILL.md",
        )])),
        EventType::CommandsList => {
            let mut review = CustomCommandInfo::new(
                "review",
                "project",
                "/home/dev/project/.keel/commands/review.md",
                "Review $ARGUMENTS for bugs and missing tests.\n",
            );
            review.description = Some(s("Review a file"));
            review.argument_hint = Some(s("<file>"));
            Event::CommandsList(ev::CommandsList::new(vec![review]))
        }
        EventType::SessionHostToolsUpdated => {
            Event::SessionHostToolsUpdated(ev::SessionHostToolsUpdated::new(vec![s("open_ticket")]))
        }
        EventType::HostToolRequested => Event::HostToolRequested(
            ev::HostToolRequested::new(
                s("tool_0004"),
                s("open_ticket"),
                json!({ "id": "KEEL-12" }),
            )
            .expires_at(T0 + 60_000),
        ),
        EventType::HostToolResponded => Event::HostToolResponded(ev::HostToolResponded::new(
            s("tool_0004"),
            s("open_ticket"),
            false,
        )),
        other => unreachable!("{other:?} is not an MCP, host-tool or skills event"),
    }
}

/// A host tool of the samples.
pub fn open_ticket() -> HostToolSpec {
    HostToolSpec::new(
        s("open_ticket"),
        s("Opens a ticket of the team's tracker by its id."),
        json!({
            "type": "object",
            "properties": { "id": { "type": "string" } },
            "required": ["id"]
        }),
        PermissionLevel::Read,
    )
    .approval(HostToolApproval::Never)
}
