//! A real MCP server for tests, written with `rmcp`: the `keel-mcp-test-server`
//! binary serves it on stdio, and [`serve_http`] serves it over streamable HTTP on
//! loopback inside the test process.
//!
//! Its tools: `echo {text}`, `add {a, b}` (text and structured result), `image` (a
//! PNG and a caption), `fail {message}` (a tool error, `isError: true`),
//! `protocol_error` (a JSON-RPC error), `dotted.name` (a name that needs sanitising),
//! `hang` (waits until cancelled), and on stdio only `crash` (the process exits in
//! the middle of the call), `big {bytes}` (a text answer of that many bytes),
//! `garbage` (writes lines that are not JSON-RPC on stdout instead of answering) and
//! `stderr_flood {bytes}` (writes that much to stderr, in lines, then answers). What it sees — its start, each call, each cancellation
//! notification — is appended as lines to a journal (a file for the binary, a shared
//! list in-process), so tests can check what reached the server.

#![allow(missing_docs)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, ErrorData, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServerHandler;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// What this test process logs: one global `tracing` subscriber (installed on first
/// call) writing to memory. One for the whole process, because a subscriber set for a
/// scope misses the events of callsites first reached by other tests' threads.
pub fn captured_log() -> &'static Mutex<Vec<u8>> {
    static LOG: std::sync::OnceLock<&'static Mutex<Vec<u8>>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let buf: &'static Mutex<Vec<u8>> = Box::leak(Box::new(Mutex::new(Vec::new())));
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || LogSink(buf))
            .with_ansi(false)
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        buf
    })
}

struct LogSink(&'static Mutex<Vec<u8>>);

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A 1×1 PNG.
pub const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// Where the server writes what it sees.
#[derive(Debug, Clone)]
pub enum Journal {
    /// Lines appended to a file.
    File(PathBuf),
    /// Lines kept in memory.
    Memory(Arc<Mutex<Vec<String>>>),
    /// Nowhere.
    None,
}

impl Journal {
    pub fn write(&self, line: &str) {
        match self {
            Journal::File(path) => {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                {
                    let _ = writeln!(f, "{line}");
                }
            }
            Journal::Memory(lines) => lines
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(line.to_owned()),
            Journal::None => {}
        }
    }

    /// The lines written so far.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Journal::File(path) => std::fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect(),
            Journal::Memory(lines) => lines.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            Journal::None => Vec::new(),
        }
    }
}

/// The test server.
#[derive(Debug, Clone)]
pub struct TestServer {
    journal: Journal,
    /// Whether `crash` may end the process (stdio only).
    may_exit: bool,
}

impl TestServer {
    /// A server writing to `journal`; `may_exit` offers the `crash` tool.
    pub fn new(journal: Journal, may_exit: bool) -> Self {
        journal.write("start");
        Self { journal, may_exit }
    }
}

fn schema(v: Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    })
}

fn tools(may_exit: bool) -> Vec<Tool> {
    let text =
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});
    let none = json!({"type": "object", "properties": {}});
    let mut out = vec![
        Tool::new("echo", "Echoes the text back.", schema(text)),
        Tool::new(
            "add",
            "Adds two numbers.",
            schema(
                json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
            ),
        ),
        Tool::new("image", "Returns a small image.", schema(none.clone())),
        Tool::new(
            "fail",
            "Always fails with the given message.",
            schema(json!({"type": "object", "properties": {"message": {"type": "string"}}})),
        ),
        Tool::new(
            "protocol_error",
            "Answers with a JSON-RPC error.",
            schema(none.clone()),
        ),
        Tool::new(
            "dotted.name",
            "A tool whose name has a dot.",
            schema(none.clone()),
        ),
        Tool::new(
            "hang",
            "Never answers; stops when the call is cancelled.",
            schema(none.clone()),
        ),
    ];
    if may_exit {
        let bytes = json!({"type": "object", "properties": {"bytes": {"type": "integer"}}});
        out.push(Tool::new(
            "crash",
            "Exits the server in the middle of the call.",
            schema(none.clone()),
        ));
        out.push(Tool::new(
            "big",
            "Answers with a text of `bytes` bytes.",
            schema(bytes.clone()),
        ));
        out.push(Tool::new(
            "garbage",
            "Writes lines that are not JSON-RPC instead of answering.",
            schema(none),
        ));
        out.push(Tool::new(
            "stderr_flood",
            "Writes `bytes` bytes to stderr, then answers.",
            schema(bytes),
        ));
    }
    out
}

fn arg<'a>(request: &'a CallToolRequestParams, key: &str) -> Option<&'a Value> {
    request.arguments.as_ref().and_then(|a| a.get(key))
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools(self.may_exit)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        self.journal.write(&format!("call {name}"));
        let result = match name.as_str() {
            "echo" => {
                let text = arg(&request, "text").and_then(Value::as_str).unwrap_or("");
                CallToolResult::success(vec![ContentBlock::text(format!("echo: {text}"))])
            }
            "add" => {
                let a = arg(&request, "a").and_then(Value::as_f64).unwrap_or(0.0);
                let b = arg(&request, "b").and_then(Value::as_f64).unwrap_or(0.0);
                let mut r = CallToolResult::success(vec![ContentBlock::text(format!("{}", a + b))]);
                r.structured_content = Some(json!({"sum": a + b}));
                r
            }
            "image" => CallToolResult::success(vec![
                ContentBlock::text("a red dot"),
                ContentBlock::image(PNG_BASE64, "image/png"),
            ]),
            "fail" => {
                let m = arg(&request, "message")
                    .and_then(Value::as_str)
                    .unwrap_or("it failed");
                CallToolResult::error(vec![ContentBlock::text(m.to_owned())])
            }
            "protocol_error" => {
                return Err(ErrorData::internal_error("the test server refuses", None))
            }
            "dotted.name" => CallToolResult::success(vec![ContentBlock::text("dotted")]),
            "hang" => {
                self.journal.write("hanging");
                context.ct.cancelled().await;
                self.journal.write("hang cancelled");
                return Err(ErrorData::internal_error("cancelled", None));
            }
            "big" if self.may_exit => {
                let n = arg(&request, "bytes").and_then(Value::as_u64).unwrap_or(0);
                CallToolResult::success(vec![ContentBlock::text("x".repeat(n as usize))])
            }
            "garbage" if self.may_exit => {
                use std::io::Write;
                {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(b"this line is not JSON-RPC\n[1, 2, 3]\n");
                    let _ = out.flush();
                }
                context.ct.cancelled().await;
                return Err(ErrorData::internal_error("cancelled", None));
            }
            "stderr_flood" if self.may_exit => {
                use std::io::Write;
                let n = arg(&request, "bytes").and_then(Value::as_u64).unwrap_or(0);
                let line = format!("{}\n", "e".repeat(99));
                let mut err = std::io::stderr().lock();
                let mut left = n as usize;
                while left > 0 {
                    let k = left.min(line.len());
                    let _ = err.write_all(&line.as_bytes()[line.len() - k..]);
                    left -= k;
                }
                let _ = err.flush();
                CallToolResult::success(vec![ContentBlock::text(format!("flooded {n}"))])
            }
            "crash" if self.may_exit => {
                self.journal.write("crashing");
                eprintln!("keel-mcp-test-server: crashing on purpose");
                std::process::exit(3);
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool {other:?}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.journal.write(&format!(
            "notifications/cancelled {}",
            notification.reason.unwrap_or_default()
        ));
    }
}

/// A streamable HTTP server on loopback; stops when dropped.
#[derive(Debug)]
pub struct HttpServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it saw.
    pub journal: Journal,
    stop: CancellationToken,
}

impl HttpServer {
    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stops accepting connections and ends open ones.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serves a [`TestServer`] over streamable HTTP on `127.0.0.1` (a free port). Only
/// requests whose `Authorization` header is `required_auth` (when given) are served;
/// others get 401.
pub async fn serve_http(required_auth: Option<&str>) -> std::io::Result<HttpServer> {
    let journal = Journal::Memory(Arc::new(Mutex::new(Vec::new())));
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    let j = journal.clone();
    let service = StreamableHttpService::new(
        move || Ok(TestServer::new(j.clone(), false)),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let required = required_auth.map(str::to_owned);
    let journal_for_auth = journal.clone();
    let token = stop.clone();
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = token.cancelled() => break,
                a = listener.accept() => a,
            };
            let Ok((stream, _)) = accepted else { continue };
            let io = TokioIo::new(stream);
            let service = service.clone();
            let required = required.clone();
            let journal = journal_for_auth.clone();
            let token = token.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let mut service = service.clone();
                        let required = required.clone();
                        let journal = journal.clone();
                        async move {
                            let auth = req
                                .headers()
                                .get("authorization")
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned);
                            if let Some(want) = &required {
                                if auth.as_deref() != Some(want.as_str()) {
                                    journal.write("unauthorized request");
                                    let mut resp = hyper::Response::new(
                                        Full::new(Bytes::from_static(b"unauthorized")).boxed(),
                                    );
                                    *resp.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                                    return Ok::<_, Infallible>(resp);
                                }
                            }
                            tower_service::Service::call(&mut service, req).await
                        }
                    },
                );
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, svc);
                tokio::select! {
                    _ = conn => {}
                    _ = token.cancelled() => {}
                }
            });
        }
    });
    Ok(HttpServer {
        addr,
        journal,
        stop,
    })
}
