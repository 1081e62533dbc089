//! Skills and custom commands: `skills.list` and `commands.list`, what the session
//! found when it opened ([`crate::pipeline::skills`]). A host shows them (a command
//! palette, `/skills`) and expands a custom command's template itself.

use std::sync::Arc;

use keel_envelope::commands::{CommandsListCmd, SkillsListCmd};
use keel_envelope::events::{CommandsList, SkillsList};
use keel_envelope::host::{CustomCommandInfo, SkillInfo};
use keel_envelope::{ErrorPayload, Event};

use super::Cx;
use crate::session::Session;

/// `skills.list`.
pub(crate) async fn list_skills(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &SkillsListCmd,
) -> Result<(), ErrorPayload> {
    let skills: Vec<SkillInfo> = session
        .skills
        .catalog()
        .map(|c| {
            c.skills
                .items
                .iter()
                .map(|s| {
                    SkillInfo::new(
                        &s.name,
                        &s.description,
                        s.source.as_str(),
                        s.path.display().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    session
        .emitter
        .emit(cx.rid, Event::SkillsList(SkillsList::new(skills)))
        .await;
    Ok(())
}

/// `commands.list`.
pub(crate) async fn list_commands(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &CommandsListCmd,
) -> Result<(), ErrorPayload> {
    let commands: Vec<CustomCommandInfo> = session
        .skills
        .catalog()
        .map(|c| {
            c.commands
                .items
                .iter()
                .map(|m| {
                    let mut info = CustomCommandInfo::new(
                        &m.name,
                        m.source.as_str(),
                        m.path.display().to_string(),
                        &m.template,
                    );
                    info.description = m.description.clone();
                    info.argument_hint = m.argument_hint.clone();
                    info
                })
                .collect()
        })
        .unwrap_or_default();
    session
        .emitter
        .emit(cx.rid, Event::CommandsList(CommandsList::new(commands)))
        .await;
    Ok(())
}
