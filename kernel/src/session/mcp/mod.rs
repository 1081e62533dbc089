//! A session's MCP servers: their start, state and stop; their tools as entries of
//! the session's overlay. The client itself is the `keel-mcp` crate.
//!
//! Servers start when the session starts (in the background: `session.start` is
//! answered at once), and a request's first model call waits for those still
//! starting, each for at most its start time limit. A server that cannot start is
//! reported by a `warning` (`MCP_SERVER_UNAVAILABLE`) on the stream of the command
//! that started the session, shows as `failed` in `mcp.list`, and the session goes on
//! without it. A server that dies is restarted once by the next call of one of its
//! tools; if that start fails too, its tools answer `MCP_SERVER_UNAVAILABLE` at once.
//! Servers stop when the session closes.

mod call;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_envelope::error::Severity;
use keel_envelope::host::{McpServerInfo, McpServerState, McpToolInfo, McpTrust};
use keel_envelope::types::PermissionLevel;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use keel_mcp::Connection;
use keel_tools::{ApprovalRequirement, PlanBehavior, ToolSpec};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::base::mcp_config::{McpServerConfig, McpTransport};

use crate::session::registry::{Decoder, Entry, Handler, Origin};
use crate::session::Session;

/// Longest tool name the providers accept.
const MAX_NAME: usize = 64;

/// Where a server came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerOrigin {
    /// The configuration file.
    Config,
    /// `session.start` / `session.resume`.
    Session,
}

#[derive(Debug, Clone)]
enum Phase {
    /// Starting (or restarting).
    Starting,
    Ready(Arc<Connection>),
    /// Failed; `retried` once the one restart has been spent.
    Failed {
        reason: String,
        retried: bool,
    },
}

/// One MCP server of a session.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) config: McpServerConfig,
    origin: ServerOrigin,
    phase: watch::Sender<Phase>,
    tools: Mutex<Vec<McpToolInfo>>,
}

/// A name the providers accept: letters, digits, `_` and `-`.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `mcp__SERVER__TOOL`, sanitised, at most 64 characters (a longer one keeps its start
/// and a hash of the whole name).
pub(crate) fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("mcp__{}__{}", sanitize(server), sanitize(tool));
    if full.len() <= MAX_NAME {
        return full;
    }
    // FNV-1a: stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{server}\0{tool}").bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}_{:08x}", &full[..MAX_NAME - 9], h as u32)
}

impl Server {
    fn state(&self) -> Phase {
        self.phase.borrow().clone()
    }

    fn startup_timeout(&self, session: &Session) -> Duration {
        self.config
            .startup_timeout
            .unwrap_or(session.services.config().mcp_startup_timeout)
    }

    pub(crate) fn call_timeout(&self, session: &Session) -> Duration {
        self.config
            .call_timeout
            .unwrap_or(session.services.config().mcp_call_timeout)
    }

    fn info(&self) -> McpServerInfo {
        let (state, reason) = match self.state() {
            Phase::Starting => (McpServerState::Starting, None),
            Phase::Ready(_) => (McpServerState::Ready, None),
            Phase::Failed { reason, .. } => (McpServerState::Failed, Some(reason)),
        };
        McpServerInfo::new(
            self.config.name.clone(),
            self.config.transport.kind().to_owned(),
            self.config.trust.clone(),
            match self.origin {
                ServerOrigin::Config => "config",
                ServerOrigin::Session => "session",
            }
            .to_owned(),
            state,
            self.tools.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        )
        .reason(reason)
    }

    /// The error of a call that cannot reach the server.
    fn unavailable(&self, reason: &str) -> ErrorPayload {
        ErrorPayload::new(
            ErrorCode::McpServerUnavailable,
            format!(
                "the MCP server `{}` is unavailable: {reason}",
                self.config.name
            ),
        )
        .with_detail("server", self.config.name.clone())
        .with_detail("reason", reason.to_owned())
    }

    /// Marks a server whose connection broke; the next call restarts it once.
    pub(crate) fn mark_failed(&self, reason: &str) {
        self.phase.send_modify(|p| {
            if let Phase::Ready(_) = p {
                *p = Phase::Failed {
                    reason: reason.to_owned(),
                    retried: false,
                };
            }
        });
    }

    /// The server's row of the permission table, for one of its tools.
    fn spec(&self, name: &str, tool: &keel_mcp::McpTool) -> ToolSpec {
        let (level, plan, approval) = match self.config.trust {
            McpTrust::Read => (
                PermissionLevel::Read,
                PlanBehavior::Allowed,
                ApprovalRequirement::Never,
            ),
            // Ask, and a trust this version does not know.
            _ => (
                PermissionLevel::Execute,
                PlanBehavior::Denied,
                ApprovalRequirement::Always,
            ),
        };
        let description = if tool.description.trim().is_empty() {
            format!(
                "The tool `{}` of the MCP server `{}`.",
                tool.name, self.config.name
            )
        } else {
            tool.description.clone()
        };
        let parameters = match &tool.input_schema {
            serde_json::Value::Object(m) if !m.is_empty() => tool.input_schema.clone(),
            _ => serde_json::json!({"type": "object", "properties": {}}),
        };
        ToolSpec::custom(name, description, parameters, level, plan, approval)
            .with_action_type("mcp.call")
    }

    /// Starts (or restarts) the server in the background, once its phase is
    /// `Starting`; the phase says when it is done. Warnings go to `report` (a
    /// requestId) when given.
    fn spawn_start(
        self: &Arc<Self>,
        session: &Arc<Session>,
        stop: &CancellationToken,
        retry: bool,
        report: Option<String>,
    ) {
        let me = self.clone();
        let session = session.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let limit = me.startup_timeout(&session);
            let connect = Connection::connect(&me.config.name, &me.config.transport);
            let outcome = tokio::select! {
                _ = stop.cancelled() => Err("the session closed".to_owned()),
                r = tokio::time::timeout(limit, connect) => match r {
                    Ok(r) => r,
                    Err(_) => Err(format!(
                        "it did not start within {} s (its start time limit)",
                        limit.as_secs_f64()
                    )),
                },
            };
            let mut warnings = Vec::new();
            match outcome {
                Ok(conn) => {
                    let conn = Arc::new(conn);
                    let mut entries = Vec::new();
                    let mut infos = Vec::new();
                    for t in conn.tools() {
                        let name = tool_name(&me.config.name, &t.name);
                        entries.push(Entry {
                            spec: me.spec(&name, t),
                            origin: Origin::Mcp,
                            handler: Handler::Kernel(Arc::new(call::McpCall {
                                server: me.clone(),
                                tool: t.name.clone(),
                            })),
                            decoder: Decoder::Row,
                        });
                        infos.push(McpToolInfo::new(
                            name,
                            t.name.clone(),
                            t.description.clone(),
                        ));
                    }
                    let refused = session.tools.set_mcp(
                        session.services.registry(),
                        &me.config.name,
                        entries,
                    );
                    infos.retain(|i| {
                        !refused
                            .iter()
                            .any(|r| r.details.get("toolName") == Some(&i.name.clone().into()))
                    });
                    for r in refused {
                        warnings.push(
                            r.with_detail("server", me.config.name.clone())
                                .severity(Severity::Warning),
                        );
                    }
                    *me.tools.lock().unwrap_or_else(|p| p.into_inner()) = infos;
                    if stop.is_cancelled() {
                        conn.close();
                        me.phase.send_replace(Phase::Failed {
                            reason: "the session closed".into(),
                            retried: true,
                        });
                    } else {
                        me.phase.send_replace(Phase::Ready(conn));
                    }
                }
                Err(reason) => {
                    tracing::warn!(server = %me.config.name, %reason, "MCP server did not start");
                    warnings.push(me.unavailable(&reason).severity(Severity::Warning));
                    me.phase.send_replace(Phase::Failed {
                        reason,
                        retried: retry,
                    });
                }
            }
            if let Some(rid) = report {
                for w in warnings {
                    session.emitter.emit(&rid, Event::Warning(w)).await;
                }
            }
        });
    }

    /// The live connection, restarting a failed server once. Waits (cancellably)
    /// while the server starts.
    pub(crate) async fn connection(
        self: &Arc<Self>,
        session: &Arc<Session>,
        cancel: &CancellationToken,
    ) -> Result<Option<Arc<Connection>>, ErrorPayload> {
        let mut rx = self.phase.subscribe();
        loop {
            let phase = rx.borrow_and_update().clone();
            match phase {
                Phase::Ready(conn) if !conn.is_closed() => return Ok(Some(conn)),
                Phase::Ready(_) => self.mark_failed("the server exited"),
                Phase::Failed { reason, retried } => {
                    if retried || session.mcp.stop.is_cancelled() {
                        return Err(self.unavailable(&reason));
                    }
                    // One caller claims the restart; the others wait for it.
                    let claimed = self.phase.send_if_modified(|p| {
                        let again = matches!(p, Phase::Failed { retried: false, .. });
                        if again {
                            *p = Phase::Starting;
                        }
                        again
                    });
                    if claimed {
                        tracing::info!(server = %self.config.name, %reason, "restarting MCP server");
                        self.spawn_start(session, &session.mcp.stop, true, None);
                    }
                }
                Phase::Starting => {
                    tokio::select! {
                        _ = cancel.cancelled() => return Ok(None),
                        r = rx.changed() => {
                            if r.is_err() {
                                return Err(self.unavailable("the session closed"));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The MCP servers of one session.
#[derive(Debug, Default)]
pub(crate) struct McpServers {
    servers: Mutex<Vec<Arc<Server>>>,
    /// Fired when the session closes: starts stop, servers are closed.
    stop: CancellationToken,
}

impl McpServers {
    /// Adds servers and starts them in the background; start failures and tool-name
    /// clashes become warnings on `report`'s stream. A server whose name is already
    /// taken is skipped (the first one stays).
    pub(crate) fn start(
        session: &Arc<Session>,
        configs: Vec<McpServerConfig>,
        origin: ServerOrigin,
        report: &str,
    ) {
        let this = &session.mcp;
        for mut config in configs {
            if let McpTransport::Stdio { cwd, .. } = &mut config.transport {
                if cwd.is_none() {
                    *cwd = Some(session.workspace.clone());
                }
            }
            let server = {
                let mut servers = this.servers.lock().unwrap_or_else(|p| p.into_inner());
                if servers.iter().any(|s| s.config.name == config.name) {
                    tracing::warn!(server = %config.name, "an MCP server of that name is already running; the new one is ignored");
                    continue;
                }
                let server = Arc::new(Server {
                    config,
                    origin,
                    phase: watch::channel(Phase::Starting).0,
                    tools: Mutex::new(Vec::new()),
                });
                servers.push(server.clone());
                server
            };
            server.spawn_start(session, &this.stop, false, Some(report.to_owned()));
        }
    }

    fn all(&self) -> Vec<Arc<Server>> {
        self.servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until no server is starting (each start has its own time limit), or
    /// `cancel` fires.
    pub(crate) async fn wait_started(&self, cancel: &CancellationToken) {
        for server in self.all() {
            let mut rx = server.phase.subscribe();
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = rx.wait_for(|p| !matches!(p, Phase::Starting)) => {}
            }
        }
    }

    /// `mcp.list`: each server's state and tools, configured ones first.
    pub(crate) fn list(&self) -> Vec<McpServerInfo> {
        let mut out: Vec<(ServerOrigin, McpServerInfo)> =
            self.all().iter().map(|s| (s.origin, s.info())).collect();
        out.sort_by(|a, b| {
            (a.0 != ServerOrigin::Config)
                .cmp(&(b.0 != ServerOrigin::Config))
                .then_with(|| a.1.name.cmp(&b.1.name))
        });
        out.into_iter().map(|(_, i)| i).collect()
    }

    /// The configurations of the servers given with `session.start` /
    /// `session.resume` (not the configured ones), for a fork to start them too.
    pub(crate) fn session_configs(&self) -> Vec<McpServerConfig> {
        self.all()
            .iter()
            .filter(|s| s.origin == ServerOrigin::Session)
            .map(|s| s.config.clone())
            .collect()
    }

    /// Stops every server (the session is closing).
    pub(crate) fn stop_all(&self) {
        self.stop.cancel();
        for server in self.all() {
            let phase = server.phase.send_replace(Phase::Failed {
                reason: "the session closed".into(),
                retried: true,
            });
            if let Phase::Ready(conn) = phase {
                conn.close();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_sanitised_and_bounded() {
        assert_eq!(tool_name("files", "read"), "mcp__files__read");
        assert_eq!(tool_name("my server", "a.b/c"), "mcp__my_server__a_b_c");
        let long = tool_name("server", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert!(long.starts_with("mcp__server__xxx"));
        assert_ne!(long, tool_name("server", &"x".repeat(101)));
        assert_eq!(long, tool_name("server", &"x".repeat(100)));
    }
}
