//! The model server driver: a local fake HTTP server speaking the providers' wire
//! formats. It listens on 127.0.0.1, answers each model call (every request but a
//! `GET`) with the next queued [`FakeResponse`], records every request, and can hold a
//! response on a [`Gate`], stall until the client disconnects, or cut the connection
//! mid-body.
//!
//! Endpoints read with `GET` (a model list, llama.cpp's `/props`) are answered by
//! [`FakeServer::route`], the same response every time, and an endpoint without a
//! route gets `404` as from a server that does not have it: they never take a queued
//! response, and are recorded apart ([`FakeServer::endpoint_requests`]). A
//! [`FakeServer::refuse`] check can answer a model call in the queue's place, as a
//! server refusing a body it cannot read does (see [`openai::refuse_malformed_arguments`]).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use keel_testsupport::model_server::{openai, FakeResponse, FakeServer};
//! let server = FakeServer::start([FakeResponse::sse(openai::text_stream(&["Hel", "lo"]))]).await?;
//! let base_url = format!("{}/v1", server.base_url()); // OPENAI_BASE_URL
//! # let _ = base_url; Ok(()) }
//! ```

pub mod anthropic;
pub mod openai;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;

/// A request the server received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// `POST`, `GET`, …
    pub method: String,
    /// The request target, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lower-cased, in order received.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// A header's value (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// A latch a test opens to let a held response go on.
#[derive(Debug, Clone)]
pub struct Gate(Arc<watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self(Arc::new(watch::channel(false).0))
    }

    /// Opens the gate (idempotent).
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    async fn wait(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

/// One step of a streamed (chunked) body.
#[derive(Debug, Clone)]
pub enum Part {
    /// Bytes sent as one HTTP chunk and flushed.
    Bytes(Vec<u8>),
    /// Wait until the gate opens.
    Wait(Gate),
    /// Wait this long.
    Pause(Duration),
    /// Send nothing more and keep the connection open until the client closes it;
    /// the server then counts a disconnect (see [`FakeServer::wait_for_disconnects`]).
    Stall,
    /// Close the connection at once, without ending the chunked body.
    Cut,
}

impl Part {
    /// Raw text as one chunk.
    pub fn text(s: impl Into<String>) -> Self {
        Part::Bytes(s.into().into_bytes())
    }

    /// `data: <json>\n\n`.
    pub fn data(json: &Value) -> Self {
        Part::text(format!("data: {json}\n\n"))
    }

    /// `event: <name>\ndata: <json>\n\n`.
    pub fn event(name: &str, json: &Value) -> Self {
        Part::text(format!("event: {name}\ndata: {json}\n\n"))
    }
}

/// Splits `text` into chunks of `size` bytes (cutting through JSON and multi-byte
/// UTF-8 characters alike).
pub fn split_bytes(text: &str, size: usize) -> Vec<Part> {
    text.as_bytes()
        .chunks(size.max(1))
        .map(|c| Part::Bytes(c.to_vec()))
        .collect()
}

#[derive(Debug, Clone)]
enum Body {
    Full(Vec<u8>),
    Chunked(Vec<Part>),
    Silent,
}

/// A response the server sends.
#[derive(Debug, Clone)]
pub struct FakeResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
}

impl FakeResponse {
    /// A complete body with `Content-Length`.
    pub fn full(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: Body::Full(body.into()),
        }
    }

    /// A JSON body.
    pub fn json(status: u16, body: &Value) -> Self {
        Self::full(status, "application/json", body.to_string())
    }

    /// A `200 text/event-stream` response of the given SSE text, in chunks of 7
    /// bytes (so chunk boundaries fall inside JSON and UTF-8 characters).
    pub fn sse(text: impl AsRef<str>) -> Self {
        Self::sse_parts(split_bytes(text.as_ref(), 7))
    }

    /// A `200 text/event-stream` response made of the given parts.
    pub fn sse_parts(parts: Vec<Part>) -> Self {
        Self {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/event-stream".into()),
                ("cache-control".into(), "no-cache".into()),
            ],
            body: Body::Chunked(parts),
        }
    }

    /// No response at all, not even a status line: the server keeps the connection
    /// open until the client closes it, then counts a disconnect.
    pub fn silent() -> Self {
        Self {
            status: 0,
            headers: Vec::new(),
            body: Body::Silent,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// A check of a model call's request: `Some` answers it in the queue's place.
pub type Check = Arc<dyn Fn(&RecordedRequest) -> Option<FakeResponse> + Send + Sync>;

#[derive(Default)]
struct Shared {
    responses: Mutex<VecDeque<FakeResponse>>,
    requests: Mutex<Vec<RecordedRequest>>,
    routes: Mutex<Vec<(String, String, FakeResponse)>>,
    endpoint_requests: Mutex<Vec<RecordedRequest>>,
    check: Mutex<Option<Check>>,
    disconnects: AtomicUsize,
    changed: Notify,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("requests", &lock(&self.requests).len())
            .field("endpoint_requests", &lock(&self.endpoint_requests).len())
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn bump(&self) {
        self.changed.notify_waiters();
    }
}

/// The fake server. Dropping it stops it and closes its connections.
#[derive(Debug)]
pub struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    tasks: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(t) = self.tasks.take() {
            t.abort();
        }
    }
}

impl FakeServer {
    /// Starts a server on an ephemeral 127.0.0.1 port with these responses queued.
    pub async fn start(responses: impl IntoIterator<Item = FakeResponse>) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        lock(&shared.responses).extend(responses);
        let s = shared.clone();
        let tasks = tokio::spawn(async move {
            let mut set = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                set.spawn(serve(stream, s.clone()));
                while set.try_join_next().is_some() {}
            }
        });
        Ok(Self {
            addr,
            shared,
            tasks: Some(tasks),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues another response.
    pub fn push(&self, response: FakeResponse) {
        lock(&self.shared.responses).push_back(response);
    }

    /// Answers every `method` request of `path` (without its query) with `response`,
    /// each time; a later route of the same method and path replaces it.
    pub fn route(&self, method: &str, path: &str, response: FakeResponse) {
        let mut routes = lock(&self.shared.routes);
        routes.retain(|(m, p, _)| !(m.eq_ignore_ascii_case(method) && p == path));
        routes.push((method.to_ascii_uppercase(), path.to_owned(), response));
    }

    /// Answers a model call with what `check` returns for it, when it returns
    /// something, instead of the next queued response (which stays queued).
    pub fn refuse(
        &self,
        check: impl Fn(&RecordedRequest) -> Option<FakeResponse> + Send + Sync + 'static,
    ) {
        *lock(&self.shared.check) = Some(Arc::new(check));
    }

    /// The model calls received so far (every request but those of
    /// [`endpoint_requests`](Self::endpoint_requests)), refused ones included.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The requests answered by a route, or by `404` for a `GET` without one.
    pub fn endpoint_requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.endpoint_requests).clone()
    }

    /// How many stalled or silent connections the client has closed.
    pub fn disconnects(&self) -> usize {
        self.shared.disconnects.load(Ordering::SeqCst)
    }

    /// Waits until `n` stalled or silent connections were closed by the client.
    pub async fn wait_for_disconnects(&self, n: usize) {
        loop {
            let notified = self.shared.changed.notified();
            if self.disconnects() >= n {
                return;
            }
            notified.await;
        }
    }

    /// Waits until `n` requests were received.
    pub async fn wait_for_requests(&self, n: usize) {
        loop {
            let notified = self.shared.changed.notified();
            if lock(&self.shared.requests).len() >= n {
                return;
            }
            notified.await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn read_request(stream: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
        let n = stream.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        })
        .collect();
    let len = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    body.truncate(len);
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
    })
}

/// Reads until the client closes the connection, then counts a disconnect.
async fn wait_for_close(stream: &mut TcpStream, shared: &Shared) {
    let mut tmp = [0u8; 1024];
    loop {
        match stream.read(&mut tmp).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    shared.disconnects.fetch_add(1, Ordering::SeqCst);
    shared.bump();
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// The route's response for `request`, a `404` for a `GET` without one, or `None`
/// for a model call.
fn endpoint_response(shared: &Shared, request: &RecordedRequest) -> Option<FakeResponse> {
    let path = request.path.split('?').next().unwrap_or_default();
    let routed = lock(&shared.routes)
        .iter()
        .find(|(m, p, _)| *m == request.method && p == path)
        .map(|(_, _, r)| r.clone());
    routed.or_else(|| {
        (request.method == "GET").then(|| {
            FakeResponse::json(
                404,
                &serde_json::json!({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}),
            )
        })
    })
}

async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    if let Some(response) = endpoint_response(&shared, &request) {
        lock(&shared.endpoint_requests).push(request);
        shared.bump();
        let _ = write_response(&mut stream, response, &shared).await;
        return;
    }
    let check = lock(&shared.check).clone();
    let refused = check.and_then(|c| c(&request));
    lock(&shared.requests).push(request);
    shared.bump();
    if let Some(response) = refused {
        let _ = write_response(&mut stream, response, &shared).await;
        return;
    }
    let response = lock(&shared.responses).pop_front().unwrap_or_else(|| {
        FakeResponse::json(
            400,
            &serde_json::json!({"error": {"message": "the fake server has no response queued", "type": "invalid_request_error"}}),
        )
    });
    let _ = write_response(&mut stream, response, &shared).await;
}

async fn write_response(
    stream: &mut TcpStream,
    response: FakeResponse,
    shared: &Shared,
) -> std::io::Result<()> {
    if let Body::Silent = response.body {
        wait_for_close(stream, shared).await;
        return Ok(());
    }
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        response.status,
        reason(response.status)
    );
    for (k, v) in &response.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("connection: close\r\n");
    match response.body {
        Body::Full(body) => {
            head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body).await?;
            stream.flush().await?;
        }
        Body::Chunked(parts) => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.flush().await?;
            for part in parts {
                match part {
                    Part::Bytes(b) => {
                        if b.is_empty() {
                            continue;
                        }
                        stream
                            .write_all(format!("{:x}\r\n", b.len()).as_bytes())
                            .await?;
                        stream.write_all(&b).await?;
                        stream.write_all(b"\r\n").await?;
                        stream.flush().await?;
                    }
                    Part::Wait(g) => g.wait().await,
                    Part::Pause(d) => tokio::time::sleep(d).await,
                    Part::Stall => {
                        wait_for_close(stream, shared).await;
                        return Ok(());
                    }
                    Part::Cut => return Ok(()),
                }
            }
            stream.write_all(b"0\r\n\r\n").await?;
            stream.flush().await?;
        }
        Body::Silent => {}
    }
    let _ = stream.shutdown().await;
    Ok(())
}
