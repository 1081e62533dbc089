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

/// The prefix of a skill's command name.
pub(crate) const SKILL_PREFIX: &str = "skill:";

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
/// A skill that can no longer be read is an error (`-32602`) naming the file.
pub(crate) fn expand(catalog: &Catalog, text: String) -> Result<String, Error> {
    let Some(rest) = text.strip_prefix('/') else {
        return Ok(text);
    };
    let (name, args) = match rest.split_once(char::is_whitespace) {
        Some((n, a)) => (n, a),
        None => (rest, ""),
    };
    if let Some(skill) = name.strip_prefix(SKILL_PREFIX) {
        let Some(found) = catalog.skill(skill) else {
            return Err(invalid_params(format!(
                "unknown skill {skill:?}: the session's skills are in its available commands"
            )));
        };
        let activation = found
            .activate()
            .map_err(|w| invalid_params(w.to_string()))?;
        tracing::info!(skill = skill, path = %found.path.display(), "keel acp: skill activated by the person");
        return Ok(keel_skills::activation_prompt(&activation, args));
    }
    match catalog.command(name) {
        Some(c) => {
            tracing::info!(command = name, path = %c.path.display(), "keel acp: custom command");
            Ok(c.expand(args))
        }
        None => Ok(text),
    }
}
