//! A stdio MCP server: its process (started through `keel_tools::spawn`, in its own
//! process group, stopped as a whole) and the JSON-lines transport over its stdin and
//! stdout.
//!
//! The transport reads each line with a bound ([`MAX_MESSAGE`]) and answers for the
//! server when what it wrote cannot be read, so that no call waits out its time
//! limit for an answer that will never be delivered:
//!
//! - a line longer than [`MAX_MESSAGE`] is dropped; the call it answers (its
//!   top-level `"id"`, found while the line streams past) fails at once with
//!   `answer_too_large`, naming the size; without an id, every call waiting then fails;
//! - a line that is not a JSON-RPC message (not JSON, or JSON without `"id"` nor
//!   `"method"`) fails every call waiting at that moment with `not_json_rpc`, quoting
//!   the line's start (the MCP stdio transport allows nothing else on stdout);
//! - an answer whose `"id"` is a waiting call's but whose body is not a valid MCP
//!   result fails that call with `invalid_answer`.
//!
//! Such failures are delivered to `rmcp` as JSON-RPC errors carrying
//! `{"keel": {"reason": …}}` in their data, which `Connection::call` turns into
//! [`crate::CallError::Protocol`]. Blank lines and notifications of unknown methods
//! are skipped.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ClientNotification, ErrorCode, ErrorData, JsonRpcMessage, RequestId};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

/// The longest line (one JSON-RPC message) read from a server: 16 MiB, as `rmcp`'s
/// own transports.
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// How long a closed server gets to exit by itself, then after `SIGTERM`.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The marker a synthesized error carries in its data.
const MARKER: &str = "keel";

/// The reason of a failure synthesized by the transport, if `e` is one.
pub(crate) fn synthesized_reason(e: &ErrorData) -> Option<&str> {
    e.data.as_ref()?.get(MARKER)?.get("reason")?.as_str()
}

/// A started server process: the leader of its own process group.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: tokio::process::Child,
    group: Option<Pid>,
}

impl ServerProcess {
    pub(crate) fn new(child: tokio::process::Child) -> Self {
        let group = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .and_then(Pid::from_raw);
        Self { child, group }
    }

    /// Whether the leader has exited (it is not reaped: its group id stays ours).
    fn exited(&self) -> bool {
        let Some(pid) = self.group else { return true };
        matches!(
            rustix::process::waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG
            ),
            Ok(Some(_)) | Err(_)
        )
    }

    async fn exits_within(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.exited() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    fn signal_group(&self, sig: Signal) {
        if let Some(g) = self.group {
            let _ = rustix::process::kill_process_group(g, sig);
        }
    }

    /// Stops a server whose stdin was closed: it gets [`STOP_GRACE`] to exit, then
    /// `SIGTERM`, then `SIGKILL`; whatever is left of its group is killed before the
    /// leader is reaped.
    async fn stop(mut self) {
        if !self.exits_within(STOP_GRACE).await {
            self.signal_group(Signal::TERM);
            self.exits_within(STOP_GRACE).await;
        }
        self.signal_group(Signal::KILL);
        let _ = self.child.wait().await;
        self.group = None;
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Not stopped gracefully: the whole group now (the leader is reaped by tokio,
        // `kill_on_drop`).
        self.signal_group(Signal::KILL);
    }
}

/// Finds a JSON object's top-level `"id"` as its bytes stream past.
#[derive(Debug, Default)]
struct IdScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1: the key being read, or the one whose value comes next.
    key: Vec<u8>,
    reading_key: bool,
    after_colon: bool,
    /// The raw value of `"id"` while it is read, and when done.
    value: Vec<u8>,
    reading_value: bool,
    value_is_string: bool,
    found: Option<RequestId>,
    /// Whether the object has a top-level `"method"` (a request or notification).
    has_method: bool,
}

impl IdScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.step(b);
        }
    }

    fn finish_value(&mut self) {
        self.reading_value = false;
        let raw = String::from_utf8_lossy(&self.value).into_owned();
        self.value.clear();
        if self.found.is_some() {
            return;
        }
        self.found = if self.value_is_string {
            Some(RequestId::String(raw.into()))
        } else {
            raw.trim().parse::<i64>().ok().map(RequestId::Number)
        };
    }

    fn step(&mut self, b: u8) {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
                return;
            } else if b == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                    self.has_method |= self.key == b"method";
                } else if self.reading_value {
                    self.finish_value();
                }
                return;
            }
            if self.reading_key && self.key.len() < 16 {
                self.key.push(b);
            } else if self.reading_value && self.value.len() < 256 {
                self.value.push(b);
            }
            return;
        }
        if self.reading_value {
            // A number ends at the first byte that is not part of it.
            if b.is_ascii_digit() || b == b'-' || b == b'+' || b == b'.' || b == b'e' {
                if self.value.len() < 64 {
                    self.value.push(b);
                }
                return;
            }
            self.finish_value();
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && !self.after_colon {
                    self.reading_key = true;
                    self.key.clear();
                } else if self.depth == 1 && self.after_colon && self.key == b"id" {
                    self.reading_value = true;
                    self.value_is_string = true;
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.after_colon = false;
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b':' if self.depth == 1 => self.after_colon = true,
            b',' if self.depth == 1 => {
                self.after_colon = false;
                self.key.clear();
            }
            b if self.depth == 1
                && self.after_colon
                && self.key == b"id"
                && (b.is_ascii_digit() || b == b'-') =>
            {
                self.reading_value = true;
                self.value_is_string = false;
                self.value.push(b);
            }
            _ => {}
        }
    }
}

/// Whether two ids name the same request (a number and its decimal string do).
fn same_id(a: &RequestId, b: &RequestId) -> bool {
    match (a, b) {
        (RequestId::Number(x), RequestId::Number(y)) => x == y,
        (RequestId::String(x), RequestId::String(y)) => x == y,
        (RequestId::Number(n), RequestId::String(s))
        | (RequestId::String(s), RequestId::Number(n)) => s.parse::<i64>().ok() == Some(*n),
    }
}

enum Read {
    Line,
    Oversized {
        bytes: usize,
        id: Option<RequestId>,
        has_method: bool,
    },
    Eof,
}

/// Which waiting calls an unreadable line fails.
enum Target<'a> {
    /// This call, if it waits.
    One(&'a RequestId),
    /// Every waiting call.
    All,
}

type Pending = Arc<Mutex<Vec<RequestId>>>;

/// The transport of one stdio server.
pub(crate) struct StdioTransport {
    name: String,
    read: BufReader<ChildStdout>,
    line: Vec<u8>,
    /// Bytes of the current line past [`MAX_MESSAGE`] (then the line is dropped).
    over: usize,
    scan: IdScan,
    write: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    pending: Pending,
    queued: VecDeque<RxJsonRpcMessage<RoleClient>>,
    process: Option<ServerProcess>,
}

impl StdioTransport {
    pub(crate) fn new(
        name: &str,
        stdout: ChildStdout,
        stdin: ChildStdin,
        process: ServerProcess,
    ) -> Self {
        Self {
            name: name.to_owned(),
            read: BufReader::with_capacity(64 * 1024, stdout),
            line: Vec::new(),
            over: 0,
            scan: IdScan::default(),
            write: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            pending: Arc::default(),
            queued: VecDeque::new(),
            process: Some(process),
        }
    }

    /// Reads one line, bounded. Cancel-safe: the partial line stays in `self`.
    async fn read_line(&mut self) -> std::io::Result<Read> {
        loop {
            let (used, done) = {
                let buf = self.read.fill_buf().await?;
                if buf.is_empty() {
                    return Ok(Read::Eof);
                }
                let end = buf.iter().position(|b| *b == b'\n');
                let take = end.map_or(buf.len(), |i| i + 1);
                let part = &buf[..end.unwrap_or(buf.len())];
                self.scan.feed(part);
                let room = MAX_MESSAGE.saturating_sub(self.line.len());
                if self.over == 0 && part.len() <= room {
                    self.line.extend_from_slice(part);
                } else {
                    self.over += part.len().saturating_sub(room);
                    self.line.extend_from_slice(&part[..part.len().min(room)]);
                }
                (take, end.is_some())
            };
            self.read.consume(used);
            if done {
                let scan = std::mem::take(&mut self.scan);
                if self.over > 0 {
                    let bytes = self.line.len() + self.over;
                    self.line.clear();
                    self.over = 0;
                    return Ok(Read::Oversized {
                        bytes,
                        id: scan.found,
                        has_method: scan.has_method,
                    });
                }
                return Ok(Read::Line);
            }
        }
    }

    /// Answers waiting calls with an error.
    fn fail(&mut self, target: Target<'_>, reason: &'static str, message: String) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let ids: Vec<RequestId> = match target {
            Target::One(id) => match pending.iter().position(|p| same_id(p, id)) {
                Some(i) => vec![pending.remove(i)],
                None => Vec::new(),
            },
            Target::All => std::mem::take(&mut *pending),
        };
        drop(pending);
        if ids.is_empty() {
            tracing::warn!(server = %self.name, reason, "{message} (no call was waiting)");
            return;
        }
        tracing::warn!(server = %self.name, reason, calls = ids.len(), "{message}");
        let data = serde_json::json!({ MARKER: { "reason": reason } });
        for id in ids {
            let error = ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                Cow::Owned(message.clone()),
                Some(data.clone()),
            );
            self.queued
                .push_back(JsonRpcMessage::error(error, Some(id)));
        }
    }

    /// Turns a complete line into a message, or answers for it.
    fn handle_line(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = std::mem::take(&mut self.line);
        let mut text: &[u8] = &line;
        text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let parsed = serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(text);
        let message = match parsed {
            Ok(m) => m,
            Err(e) => {
                let value = serde_json::from_slice::<serde_json::Value>(text).ok();
                let object = value.as_ref().and_then(|v| v.as_object());
                let id = object
                    .and_then(|o| o.get("id"))
                    .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
                let method = object.and_then(|o| o.get("method"));
                match (object, id, method) {
                    // A notification (or a request) rmcp does not know: skipped.
                    (Some(_), None, Some(_)) | (Some(_), Some(_), Some(_)) => {
                        tracing::debug!(server = %self.name, "skipped a message: {e}");
                    }
                    (Some(_), Some(id), None) => self.fail(
                        Target::One(&id),
                        "invalid_answer",
                        format!("the server's answer is not a valid MCP result: {e}"),
                    ),
                    _ => {
                        let shown: String =
                            String::from_utf8_lossy(text).chars().take(120).collect();
                        self.fail(
                            Target::All,
                            "not_json_rpc",
                            format!(
                                "the server wrote a line that is not a JSON-RPC message on its stdout: {shown:?}"
                            ),
                        );
                    }
                }
                return None;
            }
        };
        let answered = match &message {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        if let Some(id) = answered {
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|p| !same_id(p, &id));
        }
        Some(message)
    }
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

impl Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            match &item {
                JsonRpcMessage::Request(r) => pending.push(r.id.clone()),
                JsonRpcMessage::Notification(n) => {
                    if let ClientNotification::CancelledNotification(c) = &n.notification {
                        if let Some(id) = &c.params.request_id {
                            pending.retain(|p| !same_id(p, id));
                        }
                    }
                }
                _ => {}
            }
        }
        let write = self.write.clone();
        let bytes = serde_json::to_vec(&item).map(|mut b| {
            b.push(b'\n');
            b
        });
        async move {
            let bytes = bytes.map_err(std::io::Error::other)?;
            let mut w = write.lock().await;
            let Some(stdin) = w.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the server's stdin is closed",
                ));
            };
            stdin.write_all(&bytes).await?;
            stdin.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(m) = self.queued.pop_front() {
                return Some(m);
            }
            match self.read_line().await {
                Ok(Read::Line) => {
                    if let Some(m) = self.handle_line() {
                        return Some(m);
                    }
                }
                Ok(Read::Oversized {
                    bytes,
                    id,
                    has_method,
                }) => {
                    let message = format!(
                        "the server's answer is {}, more than the {} a message may be; it was dropped",
                        mib(bytes),
                        mib(MAX_MESSAGE)
                    );
                    match (&id, has_method) {
                        (Some(id), false) => {
                            self.fail(Target::One(id), "answer_too_large", message)
                        }
                        // A request or notification of the server: nobody waits for it.
                        (_, true) => tracing::warn!(
                            server = %self.name,
                            "dropped a message of {} from the server (over {})",
                            mib(bytes),
                            mib(MAX_MESSAGE)
                        ),
                        (None, false) => self.fail(Target::All, "answer_too_large", message),
                    }
                }
                Ok(Read::Eof) => return None,
                Err(e) => {
                    tracing::warn!(server = %self.name, "reading the server's stdout failed: {e}");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Closing stdin asks the server to exit; then it is stopped as a whole.
        drop(self.write.lock().await.take());
        if let Some(p) = self.process.take() {
            p.stop().await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(line: &str) -> Option<RequestId> {
        let mut s = IdScan::default();
        // Fed in small pieces, as a pipe delivers them.
        for chunk in line.as_bytes().chunks(3) {
            s.feed(chunk);
        }
        if s.reading_value {
            s.finish_value();
        }
        s.found
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(
            scan(r#"{"jsonrpc":"2.0","id":42,"result":{"id":7}}"#),
            Some(RequestId::Number(42))
        );
        assert_eq!(
            scan(
                r#"{"result":{"content":[{"text":"\"id\":9 }"}],"id":3},"jsonrpc":"2.0","id":12}"#
            ),
            Some(RequestId::Number(12))
        );
        assert_eq!(
            scan(r#"{ "id" : "req-1", "result": {} }"#),
            Some(RequestId::String("req-1".into()))
        );
        assert_eq!(scan(r#"{"result":{"id":1}}"#), None);
        let mut s = IdScan::default();
        s.feed(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"id":1}}"#);
        assert!(s.has_method && s.found.is_none());
        assert_eq!(scan("not json at all"), None);
    }

    #[test]
    fn numbers_and_their_strings_are_the_same_id() {
        assert!(same_id(
            &RequestId::Number(3),
            &RequestId::String("3".into())
        ));
        assert!(!same_id(&RequestId::Number(3), &RequestId::Number(4)));
    }
}
