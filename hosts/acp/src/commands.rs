//! Custom commands and skills as ACP slash commands: announced with
//! `available_commands_update` once a session is open, and expanded when a prompt
//! starts with one (`/NAME arguments`, `/skill:NAME request`).

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionUpdate,
    UnstructuredCommandInput,
};
use agent_client_protocol::Error;
use keel_skills::Catalog;
use serde_json::json;

use crate::error::invalid_params;

use keel_skills::SKILL_COMMAND_PREFIX as SKILL_PREFIX;

/// Where a session's commands come from.
#[derive(Debug, Clone)]
pub(crate) struct Commands {
    pub(crate) settings: keel_skills::Settings,
    /// Names a custom command may not take (the REPL's own commands).
    pub(crate) reserved: Vec<String>,
}

impl Commands {
    /// The catalog of `workspace`; its warnings go to the log.
    pub(crate) fn catalog(&self, workspace: &std::path::Path) -> Catalog {
        let reserved: Vec<&str> = self.reserved.iter().map(String::as_str).collect();
        let catalog = self.settings.catalog(workspace, &reserved);
        for w in catalog.warnings() {
            tracing::warn!(kind = w.kind.as_str(), "keel acp: {w}");
        }
        catalog
    }
}

fn meta(
    kind: &str,
    source: keel_skills::Source,
    path: &std::path::Path,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert(
        "keel".into(),
        json!({"kind": kind, "source": source.as_str(), "path": path.display().to_string()}),
    );
    m
}

/// The `available_commands_update` of a catalog: the custom commands by name, then
/// the skills as `skill:NAME`.
pub(crate) fn update(catalog: &Catalog) -> SessionUpdate {
    let mut list: Vec<AvailableCommand> = catalog
        .commands
        .items
        .iter()
        .map(|c| {
            let hint = c
                .argument_hint
                .clone()
                .unwrap_or_else(|| "arguments".into());
            AvailableCommand::new(c.name.clone(), c.summary())
                .input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(hint),
                ))
                .meta(meta("command", c.source, &c.path))
        })
        .collect();
    list.extend(catalog.skills.items.iter().map(|s| {
        AvailableCommand::new(format!("{SKILL_PREFIX}{}", s.name), s.description.clone())
            .input(AvailableCommandInput::Unstructured(
                UnstructuredCommandInput::new("what to do with the skill (optional)"),
            ))
            .meta(meta("skill", s.source, &s.path))
    }));
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(list))
}

/// The prompt for the kernel: a prompt whose text starts with `/NAME` of a custom
/// command becomes its expanded template, one that starts with `/skill:NAME` the
/// skill's instructions and the rest as the request; any other text is kept as it is.
/// An unknown skill, or one that can no longer be read, is an error (`-32602`).
pub(crate) fn expand(catalog: &Catalog, text: String) -> Result<String, Error> {
    let expanded = catalog.expand_slash(&text).map_err(|e| match e {
        keel_skills::SlashError::UnknownSkill(_) => invalid_params(format!(
            "{e}: the session's skills are in its available commands (`skill:NAME`)"
        )),
        e => invalid_params(e.to_string()),
    })?;
    match expanded {
        Some(s) => {
            tracing::info!(kind = ?s.kind, name = %s.name, path = %s.path.display(), "keel acp: slash command expanded");
            Ok(s.text)
        }
        None => Ok(text),
    }
}
