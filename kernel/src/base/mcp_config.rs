//! An MCP server's settings, and their checks (shared by the configuration file and
//! `session.start {mcpServers}`).

use std::time::Duration;

use keel_envelope::host::{McpServerSpec, McpTrust};
use keel_envelope::{ErrorCode, ErrorPayload};

pub use keel_mcp::Transport as McpTransport;

/// One MCP server of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// Its name (tools appear as `mcp__NAME__TOOL`).
    pub name: String,
    /// How to reach it. A stdio server without a working directory runs in the
    /// session's workspace.
    pub transport: McpTransport,
    /// How the gate treats its tools.
    pub trust: McpTrust,
    /// Overrides [`crate::KernelConfig::mcp_startup_timeout`].
    pub startup_timeout: Option<Duration>,
    /// Overrides [`crate::KernelConfig::mcp_call_timeout`].
    pub call_timeout: Option<Duration>,
}

/// The pieces of a server's settings, as written by a user or a host.
#[derive(Debug, Clone, Default)]
pub struct McpServerParts {
    /// The name.
    pub name: String,
    /// `stdio`, `http` or none.
    pub transport: Option<String>,
    /// A stdio server's program.
    pub command: Option<String>,
    /// Its arguments.
    pub args: Option<Vec<String>>,
    /// Its extra environment.
    pub env: Option<Vec<(String, String)>>,
    /// An HTTP server's endpoint.
    pub url: Option<String>,
    /// Its headers.
    pub headers: Option<Vec<(String, String)>>,
    /// The trust (default `ask`).
    pub trust: Option<McpTrust>,
}

/// A bad setting: the field it is about (`url`, `command`, …; empty for the server as
/// a whole) and why.
pub type PartError = (&'static str, String);

impl McpServerParts {
    /// Checks the settings: a name; exactly one of `command` (stdio) and `url`
    /// (streamable HTTP); no HTTP settings on a stdio server and the other way round;
    /// a usable URL and headers; environment variable names without `=`.
    pub fn check(self) -> Result<McpServerConfig, PartError> {
        if self.name.trim().is_empty() {
            return Err(("name", "the server's name is empty".into()));
        }
        let kind = match (self.transport.as_deref(), &self.command, &self.url) {
            (Some("sse"), _, _) => {
                return Err((
                    "type",
                    "the legacy SSE transport is not supported: use streamable HTTP (`type: \"http\"` with `url`)".into(),
                ))
            }
            (Some(t), _, _) if t != "stdio" && t != "http" => {
                return Err(("type", format!("unknown transport {t:?}: use \"stdio\" or \"http\"")))
            }
            (_, Some(_), Some(_)) => {
                return Err((
                    "",
                    "give either `command` (a stdio server) or `url` (a streamable HTTP server), not both".into(),
                ))
            }
            (Some("http"), Some(_), None) => {
                return Err(("url", "an http server needs `url`, not `command`".into()))
            }
            (Some("stdio"), None, Some(_)) => {
                return Err(("command", "a stdio server needs `command`, not `url`".into()))
            }
            (_, Some(_), None) => "stdio",
            (_, None, Some(_)) => "http",
            (_, None, None) => {
                return Err((
                    "",
                    "needs either `command` (a stdio server) or `url` (a streamable HTTP server)".into(),
                ))
            }
        };
        let transport = if kind == "stdio" {
            if self.headers.is_some() {
                return Err((
                    "headers",
                    "`headers` is for http servers; a stdio server takes `env`".into(),
                ));
            }
            let command = self.command.unwrap_or_default();
            if command.trim().is_empty() {
                return Err(("command", "the command is empty".into()));
            }
            let env = self.env.unwrap_or_default();
            for (k, _) in &env {
                if k.is_empty() || k.contains('=') || k.contains('\0') {
                    return Err((
                        "env",
                        format!("{k:?} is not a valid environment variable name"),
                    ));
                }
            }
            McpTransport::Stdio {
                command,
                args: self.args.unwrap_or_default(),
                env,
                cwd: None,
            }
        } else {
            if self.args.is_some() {
                return Err(("args", "`args` is for stdio servers".into()));
            }
            if self.env.is_some() {
                return Err((
                    "env",
                    "`env` is for stdio servers; an http server takes `headers`".into(),
                ));
            }
            let url = self.url.unwrap_or_default();
            keel_mcp::check_url(&url).map_err(|e| ("url", e))?;
            let headers = self.headers.unwrap_or_default();
            keel_mcp::check_headers(&headers).map_err(|e| ("headers", e))?;
            McpTransport::Http { url, headers }
        };
        Ok(McpServerConfig {
            name: self.name,
            transport,
            trust: self.trust.unwrap_or_default(),
            startup_timeout: None,
            call_timeout: None,
        })
    }
}

/// Checks the `mcpServers` of a command; errors name the field
/// (`payload.mcpServers[i].url`).
pub(crate) fn from_specs(specs: &[McpServerSpec]) -> Result<Vec<McpServerConfig>, ErrorPayload> {
    let mut out: Vec<McpServerConfig> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let pairs = |v: &Option<Vec<keel_envelope::host::NameValue>>| {
            v.as_ref().map(|l| {
                l.iter()
                    .map(|p| (p.name.clone(), p.value.clone()))
                    .collect()
            })
        };
        let parts = McpServerParts {
            name: s.name.clone(),
            transport: s.transport.clone(),
            command: s.command.clone(),
            args: s.args.clone(),
            env: pairs(&s.env),
            url: s.url.clone(),
            headers: pairs(&s.headers),
            trust: s.trust.clone(),
        };
        let config = parts.check().map_err(|(field, why)| {
            let at = if field.is_empty() {
                format!("payload.mcpServers[{i}]")
            } else {
                format!("payload.mcpServers[{i}].{field}")
            };
            ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("MCP server {:?}: {why}", s.name),
            )
            .with_detail("field", at)
        })?;
        if out.iter().any(|c| c.name == config.name) {
            return Err(ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("two MCP servers are named {:?}", config.name),
            )
            .with_detail("field", format!("payload.mcpServers[{i}].name")));
        }
        out.push(config);
    }
    Ok(out)
}
