//! `[mcpServers.NAME]`: the MCP servers every session starts with.

use std::collections::BTreeMap;
use std::time::Duration;

use keel_envelope::error::ErrorPayload;
use keel_envelope::host::McpTrust;
use keel_kernel::mcp::{McpServerConfig, McpServerParts};
use serde::Deserialize;

/// `[mcpServers.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawMcpServer {
    #[serde(rename = "type")]
    transport: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "keel_envelope::wire::strict::opt")]
    trust: Option<McpTrust>,
    startup_timeout_secs: Option<u64>,
    tool_timeout_secs: Option<u64>,
    enabled: Option<bool>,
}

/// Checks one file's servers and merges them into `out` by name: an entry replaces
/// an earlier file's entry of the same name, `enabled = false` removes it; `out`
/// stays in name order. A bad entry is an error naming its key
/// (`mcpServers.NAME.url`) and changes nothing.
pub(crate) fn merge(
    out: &mut Vec<McpServerConfig>,
    raw: BTreeMap<String, RawMcpServer>,
    invalid: &dyn Fn(&str, String) -> ErrorPayload,
) -> Result<(), ErrorPayload> {
    let mut merged: BTreeMap<String, McpServerConfig> =
        out.drain(..).map(|s| (s.name.clone(), s)).collect();
    let checked = servers(raw, invalid);
    let checked = match checked {
        Ok(c) => c,
        Err(e) => {
            out.extend(merged.into_values());
            return Err(e);
        }
    };
    for (name, server) in checked {
        match server {
            Some(s) => merged.insert(name, s),
            None => merged.remove(&name),
        };
    }
    out.extend(merged.into_values());
    Ok(())
}

/// Checks the servers, by name; `None` for a disabled one.
fn servers(
    raw: BTreeMap<String, RawMcpServer>,
    invalid: &dyn Fn(&str, String) -> ErrorPayload,
) -> Result<Vec<(String, Option<McpServerConfig>)>, ErrorPayload> {
    let mut out = Vec::new();
    for (name, raw) in raw {
        if raw.enabled == Some(false) {
            out.push((name, None));
            continue;
        }
        if raw.startup_timeout_secs == Some(0) {
            return Err(invalid(
                &format!("mcpServers.{name}.startupTimeoutSecs"),
                "must be at least 1".to_owned(),
            ));
        }
        let pairs = |m: Option<BTreeMap<String, String>>| {
            m.map(|m| m.into_iter().collect::<Vec<(String, String)>>())
        };
        let parts = McpServerParts {
            name: name.clone(),
            transport: raw.transport,
            command: raw.command,
            args: raw.args,
            env: pairs(raw.env),
            url: raw.url,
            headers: pairs(raw.headers),
            trust: raw.trust,
        };
        let mut server = parts.check().map_err(|(field, why)| {
            let key = if field.is_empty() {
                format!("mcpServers.{name}")
            } else {
                format!("mcpServers.{name}.{field}")
            };
            invalid(&key, why)
        })?;
        server.startup_timeout = raw.startup_timeout_secs.map(Duration::from_secs);
        server.call_timeout = raw.tool_timeout_secs.map(Duration::from_secs);
        out.push((name, Some(server)));
    }
    Ok(out)
}
