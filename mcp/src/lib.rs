//! Keel's MCP client: one connection to one Model Context Protocol server, over stdio
//! (a child process) or streamable HTTP, with the official Rust SDK (`rmcp`).
//!
//! It knows nothing of sessions, the permission gate or events: it starts a server,
//! lists its tools, calls one, and reports what went wrong in two kinds —
//! [`CallError::Closed`] (the server is gone: it exited, or its connection broke) and
//! [`CallError::Failed`] (the server answered the call with an error). Dropping a
//! call's future sends MCP's `notifications/cancelled` for it; dropping or closing a
//! [`Connection`] stops the server (a stdio server's whole process group is killed).
//! A stdio server's stderr goes to the log (`tracing`, target `keel_mcp::server`),
//! never to this process's stdout, within bounds ([`stderr`]). A stdio server is
//! started by `keel_tools::spawn` (it dies with this process) and read through a
//! transport that fails a call at once when its answer cannot be read ([`stdio`]:
//! [`CallError::Protocol`]).

mod content;
pub mod stderr;
pub mod stdio;
#[cfg(feature = "testing")]
pub mod testing;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Once;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, JsonObject,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ServiceError, ServiceExt};

pub use content::{CallOutput, ContentSummary, RESULT_CAP};

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A program speaking MCP on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables (this process's environment is inherited).
        env: Vec<(String, String)>,
        /// Its working directory (default: this process's).
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// The endpoint, `http://` or `https://`.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
    },
}

impl Transport {
    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// A tool as the server describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// Its name on the server.
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: serde_json::Value,
}

/// Why a call did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The server is gone (exited, connection closed or broken); the reason.
    Closed(String),
    /// The server answered with a JSON-RPC error (unknown tool, bad arguments, an
    /// internal error); its message.
    Failed(String),
    /// The server's answer could not be read (see [`stdio`]): `reason` is
    /// `answer_too_large`, `not_json_rpc` or `invalid_answer`.
    Protocol {
        /// The stable reason.
        reason: String,
        /// What happened, for people.
        message: String,
    },
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Closed(r) => write!(f, "the server is gone: {r}"),
            CallError::Failed(r) => write!(f, "the server answered with an error: {r}"),
            CallError::Protocol { message, .. } => write!(f, "{message}"),
        }
    }
}

/// A connected server: initialized, with its tools listed.
pub struct Connection {
    name: String,
    service: RunningService<RoleClient, ClientConfig>,
    tools: Vec<McpTool>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("name", &self.name)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("keel", env!("CARGO_PKG_VERSION")),
    )
}

/// The HTTP client's TLS needs one process-wide crypto provider.
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one already: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn header_map(
    headers: &[(String, String)],
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, String> {
    let mut out = HashMap::new();
    for (name, value) in headers {
        let n = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("{name:?} is not a valid HTTP header name"))?;
        let v = http::HeaderValue::from_str(value).map_err(|_| {
            format!("the value of header {name:?} is not a valid HTTP header value")
        })?;
        out.insert(n, v);
    }
    Ok(out)
}

/// Checks a URL for [`Transport::Http`]: `http://` or `https://` with a host.
pub fn check_url(url: &str) -> Result<(), String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| format!("{url:?} is not a valid URL: {e}"))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => return Err(format!("{url:?} is not an http:// or https:// URL")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("{url:?} has no host"));
    }
    Ok(())
}

/// Checks HTTP headers for [`Transport::Http`].
pub fn check_headers(headers: &[(String, String)]) -> Result<(), String> {
    header_map(headers).map(|_| ())
}

fn describe(e: &ServiceError) -> String {
    match e {
        ServiceError::TransportClosed => "the connection closed (the server exited?)".to_owned(),
        other => other.to_string(),
    }
}

impl Connection {
    /// Starts the server (`name` labels its log lines), initializes the MCP session and
    /// lists its tools. Has no time limit of its own: wrap it in one (dropping the
    /// future stops whatever it started).
    pub async fn connect(name: &str, transport: &Transport) -> Result<Connection, String> {
        let service = match transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    // Its own process group, killed as a whole; killed when dropped.
                    .process_group(0)
                    .kill_on_drop(true);
                for (k, v) in env {
                    cmd.env(k, v);
                }
                if let Some(dir) = cwd {
                    cmd.current_dir(dir);
                }
                let mut child = keel_tools::spawn::spawn(cmd, keel_tools::spawn::Tie::default())
                    .map_err(|e| format!("could not start `{command}`: {e}"))?;
                let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                    return Err(format!("could not start `{command}`: no pipes"));
                };
                if let Some(err) = child.stderr.take() {
                    tokio::spawn(stderr::pump(name.to_owned(), err));
                }
                let transport = stdio::StdioTransport::new(
                    name,
                    stdout,
                    stdin,
                    stdio::ServerProcess::new(child),
                );
                client_info()
                    .serve(transport)
                    .await
                    .map_err(|e| format!("the MCP handshake failed: {e}"))?
            }
            Transport::Http { url, headers } => {
                check_url(url)?;
                install_crypto_provider();
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(header_map(headers)?);
                let transport = StreamableHttpClientTransport::from_config(config);
                client_info()
                    .serve(transport)
                    .await
                    .map_err(|e| format!("the MCP handshake with {url} failed: {e}"))?
            }
        };
        let listed = service
            .list_all_tools()
            .await
            .map_err(|e| format!("listing its tools failed: {}", describe(&e)))?;
        let tools = listed
            .into_iter()
            .map(|t| McpTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            })
            .collect();
        tracing::info!(
            server = name,
            transport = transport.kind(),
            "MCP server ready"
        );
        Ok(Connection {
            name: name.to_owned(),
            service,
            tools,
        })
    }

    /// The server's tools, as listed when it started.
    pub fn tools(&self) -> &[McpTool] {
        &self.tools
    }

    /// Whether the connection is gone (the server exited or the transport broke).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.is_transport_closed()
    }

    /// Calls `tool` with `arguments` (a JSON object; anything else is sent as no
    /// arguments). Dropping the future cancels the call (MCP's
    /// `notifications/cancelled`).
    pub async fn call(
        &self,
        tool: &str,
        arguments: &serde_json::Value,
    ) -> Result<CallOutput, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let serde_json::Value::Object(map) = arguments {
            let args: JsonObject = map.clone();
            params = params.with_arguments(args);
        }
        match self.service.call_tool(params).await {
            Ok(result) => Ok(CallOutput::from_result(&result)),
            Err(ServiceError::McpError(e)) => match stdio::synthesized_reason(&e) {
                Some(reason) => Err(CallError::Protocol {
                    reason: reason.to_owned(),
                    message: e.message.to_string(),
                }),
                None => Err(CallError::Failed(e.message.to_string())),
            },
            Err(e @ (ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                Err(CallError::Closed(describe(&e)))
            }
            Err(e) if self.is_closed() => Err(CallError::Closed(describe(&e))),
            Err(e) => Err(CallError::Failed(e.to_string())),
        }
    }

    /// Stops the server: closes the connection (a stdio server gets its stdin closed,
    /// 3 s to exit, then SIGTERM, then SIGKILL for its process group, in the
    /// background).
    pub fn close(&self) {
        self.service.cancellation_token().cancel();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}
