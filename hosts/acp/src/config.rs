//! What a client can set on a session: the permission mode (as ACP's `modes` and as
//! the `mode` config option) and the model (the `model` config option).
//!
//! ACP prefers config options to the older `modes`; a client that reads config
//! options ignores `modes`, so the mode is offered both ways.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode,
    SessionModeState,
};
use keel_envelope::types::{ModelInfo, PermissionMode};

/// The id of the mode config option.
pub const MODE_OPTION: &str = "mode";
/// The id of the model config option.
pub const MODEL_OPTION: &str = "model";

/// The ACP mode list: exactly Keel's four permission modes.
pub fn modes_state(current: PermissionMode) -> SessionModeState {
    let available = PermissionMode::ALL
        .iter()
        .map(|m| {
            let (name, description) = mode_text(m.clone());
            SessionMode::new(m.as_str().to_owned(), name).description(description.to_owned())
        })
        .collect();
    SessionModeState::new(current.as_str().to_owned(), available)
}

fn mode_text(mode: PermissionMode) -> (&'static str, &'static str) {
    match mode {
        PermissionMode::Ask => (
            "Ask",
            "Reads run; edits, writes and commands ask for permission first.",
        ),
        PermissionMode::AutoEdit => (
            "Auto-edit",
            "Edits and writes inside the workspace run; commands still ask.",
        ),
        PermissionMode::Auto => (
            "Auto",
            "Everything runs without asking; the deny list still applies.",
        ),
        PermissionMode::Plan => (
            "Plan",
            "Read-only: only read tools run until a plan is approved.",
        ),
        _ => ("Other", "A mode this version of Keel does not know."),
    }
}

/// The models offered: the configured ones, with the session's own added first when
/// the list lacks it.
pub fn model_choices(configured: &[ModelInfo], current: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = configured
        .iter()
        .map(|m| (m.id.clone(), m.display_name.clone()))
        .collect();
    if !out.iter().any(|(id, _)| id == current) {
        out.insert(0, (current.to_owned(), current.to_owned()));
    }
    out
}

/// Every config option with its current value: `mode`, then `model`.
pub fn config_options(
    mode: PermissionMode,
    model: &str,
    configured: &[ModelInfo],
) -> Vec<SessionConfigOption> {
    let modes: Vec<SessionConfigSelectOption> = PermissionMode::ALL
        .iter()
        .map(|m| {
            let (name, description) = mode_text(m.clone());
            SessionConfigSelectOption::new(m.as_str(), name).description(description.to_owned())
        })
        .collect();
    let models: Vec<SessionConfigSelectOption> = model_choices(configured, model)
        .into_iter()
        .map(|(id, name)| SessionConfigSelectOption::new(id, name))
        .collect();
    vec![
        SessionConfigOption::select(MODE_OPTION, "Mode", mode.as_str().to_owned(), modes)
            .description("When Keel asks before running a tool.".to_owned())
            .category(SessionConfigOptionCategory::Mode),
        SessionConfigOption::select(MODEL_OPTION, "Model", model.to_owned(), models)
            .description(
                "The model that answers; changes apply while the session is idle.".to_owned(),
            )
            .category(SessionConfigOptionCategory::Model),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_keels_four() {
        let m = serde_json::to_value(modes_state(PermissionMode::Plan)).unwrap_or_default();
        assert_eq!(m["currentModeId"], "plan");
        let ids: Vec<&str> = m["availableModes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["id"].as_str())
            .collect();
        assert_eq!(ids, ["ask", "auto-edit", "auto", "plan"]);
    }

    #[test]
    fn the_model_option_lists_the_configured_models_and_the_current_one() {
        let configured = vec![ModelInfo::new(
            "openai:gpt-4o-mini",
            "GPT-4o mini",
            "openai",
            false,
        )];
        let opts = serde_json::to_value(config_options(
            PermissionMode::Ask,
            "scripted:demo",
            &configured,
        ))
        .unwrap_or_default();
        assert_eq!(opts[1]["id"], "model");
        assert_eq!(opts[1]["type"], "select");
        assert_eq!(opts[1]["category"], "model");
        assert_eq!(opts[1]["currentValue"], "scripted:demo");
        let values: Vec<&str> = opts[1]["options"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["value"].as_str())
            .collect();
        assert_eq!(values, ["scripted:demo", "openai:gpt-4o-mini"]);
        assert_eq!(opts[0]["currentValue"], "ask");
    }
}
