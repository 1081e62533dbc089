//! `keel doctor`'s MCP checks: each configured server is started (stdio) or reached
//! (streamable HTTP) and asked for its tools, within the time limit, then closed.
//! Header values and environment values are never printed.

use std::path::Path;
use std::time::Duration;

use keel_config::Config;
use keel_kernel::mcp::{McpServerConfig, McpTransport};

use crate::doctor_cmd::Check;

/// One check per configured MCP server (the user's and a trusted project's), in the
/// configuration's order. A server that does not answer is a warning: sessions run
/// without its tools.
pub async fn mcp_checks(config: &Config, workspace: Option<&Path>, limit: Duration) -> Vec<Check> {
    let mut checks = Vec::new();
    for server in &config.mcp_servers {
        checks.push(mcp_check(server, workspace, limit).await);
    }
    checks
}

async fn mcp_check(server: &McpServerConfig, workspace: Option<&Path>, limit: Duration) -> Check {
    let name = format!("mcp {}", server.name);
    let mut transport = server.transport.clone();
    // As in a session: a stdio server without a directory runs in the workspace.
    if let (McpTransport::Stdio { cwd, .. }, Some(ws)) = (&mut transport, workspace) {
        if cwd.is_none() {
            *cwd = Some(ws.to_path_buf());
        }
    }
    let (place, fix) = match &transport {
        McpTransport::Stdio { command, .. } => (
            format!("stdio `{command}`"),
            format!(
                "check `command` and `args` of [mcpServers.{}] in the configuration, and run the command by hand to see its error",
                server.name
            ),
        ),
        McpTransport::Http { url, .. } => (
            format!("http {url}"),
            format!(
                "check that the server runs at that URL, and the `headers` of [mcpServers.{}] (e.g. its Authorization)",
                server.name
            ),
        ),
    };
    let limit = server.startup_timeout.unwrap_or(limit);
    let connected = tokio::time::timeout(
        limit,
        keel_mcp::Connection::connect(&server.name, &transport),
    )
    .await;
    match connected {
        Ok(Ok(conn)) => {
            let tools: Vec<&str> = conn.tools().iter().map(|t| t.name.as_str()).collect();
            let shown = match tools.len() {
                0 => "no tools".to_owned(),
                n if n <= 8 => format!("{n} tools: {}", tools.join(", ")),
                n => format!("{n} tools: {}, …", tools[..8].join(", ")),
            };
            conn.close();
            Check::ok(name, format!("{place} answers; {shown}"))
        }
        Ok(Err(e)) => Check::warn(name, format!("{place}: {e}"), fix),
        Err(_) => Check::warn(
            name,
            format!(
                "{place} did not finish the MCP handshake within {} ms",
                limit.as_millis()
            ),
            format!("{fix}; or raise --timeout (or its startupTimeout)"),
        ),
    }
}
