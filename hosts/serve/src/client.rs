//! A client of the daemon, on its Unix socket or over WebSocket: connects, checks
//! `runtime.ready`, sends commands and matches each with its answer, and hands every
//! other envelope to its owner in order.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_envelope::commands::CommandPayload;
use keel_envelope::events::RuntimeReady;
use keel_envelope::{codec, Command, Envelope, ErrorCode, ErrorPayload, Event, Source};
use tokio::sync::{mpsc, oneshot};

use crate::link::{LinkReader, LinkWriter};

/// How long a client waits for `runtime.ready` after connecting.
const READY_WAIT: Duration = Duration::from_secs(10);

/// Why a client could not connect.
#[derive(Debug)]
pub enum ConnectError {
    /// Nothing listens on the path (no file, or connection refused).
    NotRunning(std::io::Error),
    /// The connection closed or stayed silent before `runtime.ready`.
    NoReady(String),
    /// The daemon speaks another protocol major version.
    VersionMismatch(String),
    /// The WebSocket address cannot be used.
    BadAddress(String),
    /// TLS could not be set up or the server's certificate is not trusted.
    Tls(String),
    /// The daemon refused the upgrade (HTTP `status`): a wrong, expired or revoked
    /// token (401), an origin not allowed (403).
    Refused {
        /// The HTTP status.
        status: u16,
        /// The stable reason (`token_unknown`, `token_expired`, `token_revoked`, …).
        reason: String,
        /// The daemon's sentence.
        message: String,
    },
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::NotRunning(e) => write!(f, "no keel daemon answers: {e}"),
            ConnectError::NoReady(why) => {
                write!(f, "the keel daemon did not say it was ready: {why}")
            }
            ConnectError::VersionMismatch(v) => write!(
                f,
                "the keel daemon speaks protocol {v}; this client speaks {}",
                keel_envelope::PROTOCOL_VERSION
            ),
            ConnectError::BadAddress(why) => write!(f, "{why}"),
            ConnectError::Tls(why) => write!(f, "TLS failed: {why}"),
            ConnectError::Refused {
                status,
                reason,
                message,
            } => {
                if message.is_empty() {
                    write!(f, "the keel daemon refused the connection (HTTP {status})")
                } else {
                    write!(f, "the keel daemon refused the connection: {message} ({reason}, HTTP {status})")
                }
            }
        }
    }
}

impl std::error::Error for ConnectError {}

/// A connected client: the client, the `runtime.ready` payload, and every envelope
/// that is not a private answer, in order.
pub type Connected = (Client, RuntimeReady, mpsc::UnboundedReceiver<Envelope>);

struct Pending {
    tx: oneshot::Sender<Result<Envelope, ErrorPayload>>,
    /// The answer is for the caller alone, not for the event stream.
    private: bool,
}

struct Inner {
    writer: tokio::sync::Mutex<LinkWriter>,
    pending: Mutex<HashMap<String, Pending>>,
    counter: AtomicU64,
    prefix: String,
    /// Why the connection ended, once it has.
    closed: Mutex<Option<String>>,
}

/// A connection to the daemon. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

fn disconnected(why: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::RuntimeInternalError,
        format!("the connection to the keel daemon closed ({why})"),
    )
    .category(keel_envelope::error::ErrorCategory::Bridge)
    .with_detail("reason", "disconnected")
}

/// A request-id prefix no other client of the daemon uses: the process id, a counter
/// of this process's clients, and the time.
fn client_prefix() -> String {
    static CLIENTS: AtomicU64 = AtomicU64::new(0);
    let n = CLIENTS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!("cli_{}_{n}_{nanos:x}", std::process::id())
}

/// Whether `env` can answer a pending command (an expiry caused by an interrupt
/// answers nothing; replayed events answer nothing).
fn answer_key(env: &Envelope, pending: &HashMap<String, Pending>) -> Option<String> {
    if env.meta.as_ref().and_then(|m| m.replay) == Some(true) {
        return None;
    }
    if matches!(env.event, Event::ApprovalExpired(_) | Event::AskExpired(_)) {
        return None;
    }
    if pending.contains_key(&env.request_id) {
        return Some(env.request_id.clone());
    }
    env.reply_to()
        .filter(|r| pending.contains_key(*r))
        .map(str::to_owned)
}

impl Client {
    /// Connects to the daemon at `path` and waits for its `runtime.ready`. Returns the
    /// client, the `runtime.ready` payload, and the stream of every envelope that is not
    /// the private answer of [`Client::query`], in order; the stream ends with the
    /// connection.
    pub async fn connect(path: &Path) -> Result<Connected, ConnectError> {
        let (read, write) = crate::link::unix(path).await?;
        Self::start(read, write).await
    }

    /// Connects to a daemon's remote listener (`ws://HOST:PORT`, `wss://HOST:PORT`)
    /// with `token`; for `wss://` the certificate must chain to the Mozilla roots or to
    /// one in the PEM file `ca`. As [`Client::connect`] otherwise: the connection gets
    /// what the token's role and session allow.
    pub async fn connect_remote(
        url: &str,
        token: &str,
        ca: Option<&Path>,
    ) -> Result<Connected, ConnectError> {
        let (read, write) = crate::link::websocket(url, token, ca).await?;
        Self::start(read, write).await
    }

    async fn start(mut lines: LinkReader, write: LinkWriter) -> Result<Connected, ConnectError> {
        let first = match tokio::time::timeout(READY_WAIT, lines.next()).await {
            Err(_) => return Err(ConnectError::NoReady("no line in time".into())),
            Ok(Err(e)) => return Err(ConnectError::NoReady(e)),
            Ok(Ok(None)) => return Err(ConnectError::NoReady("the connection closed".into())),
            Ok(Ok(Some(l))) => l,
        };
        let ready = match codec::decode_envelope(first.as_bytes()) {
            Ok(Envelope {
                event: Event::RuntimeReady(r),
                ..
            }) => r,
            Ok(other) => {
                return Err(ConnectError::NoReady(format!(
                    "the first line is {}",
                    other.type_name()
                )))
            }
            Err(e) => return Err(ConnectError::NoReady(e.message)),
        };
        let major = ready.protocol_version.split('.').next().unwrap_or("");
        if major != keel_envelope::PROTOCOL_MAJOR.to_string() {
            return Err(ConnectError::VersionMismatch(ready.protocol_version));
        }
        let inner = Arc::new(Inner {
            writer: tokio::sync::Mutex::new(write),
            pending: Mutex::new(HashMap::new()),
            counter: AtomicU64::new(0),
            prefix: client_prefix(),
            closed: Mutex::new(None),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let reader = inner.clone();
        tokio::spawn(async move {
            let mut why = "the daemon closed the connection".to_owned();
            let mut stopped = false;
            loop {
                let line = match lines.next().await {
                    Ok(Some(l)) => l,
                    Ok(None) => break,
                    Err(e) => {
                        if !stopped {
                            why = e;
                        }
                        break;
                    }
                };
                let env = match codec::decode_envelope(line.as_bytes()) {
                    Ok(env) => env,
                    Err(e) => {
                        tracing::warn!(error = %e.message, "daemon line is not an envelope");
                        continue;
                    }
                };
                if env.source == Source::Bridge {
                    if let Event::RuntimeStopped(s) = &env.event {
                        why = s.reason.clone();
                        stopped = true;
                    }
                }
                let answered = {
                    let mut pending = reader.pending.lock().unwrap_or_else(|p| p.into_inner());
                    answer_key(&env, &pending).and_then(|k| pending.remove(&k).map(|p| (k, p)))
                };
                let mut forward = true;
                if let Some((key, p)) = answered {
                    forward = !(p.private && env.request_id == key);
                    let refused = matches!(env.event, Event::Error(_) | Event::RequestRejected(_))
                        && env.request_id == key;
                    let result = match &env.event {
                        Event::Error(e) | Event::RequestRejected(e) if refused => Err(e.clone()),
                        _ => Ok(env.clone()),
                    };
                    let _ = p.tx.send(result);
                }
                if forward {
                    // The owner may have stopped reading; answers still flow.
                    let _ = tx.send(env);
                }
            }
            *reader.closed.lock().unwrap_or_else(|p| p.into_inner()) = Some(why.clone());
            let pending: Vec<Pending> = reader
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .drain()
                .map(|(_, p)| p)
                .collect();
            for p in pending {
                let _ = p.tx.send(Err(disconnected(&why)));
            }
        });
        Ok((Client { inner }, ready, rx))
    }

    /// A fresh request id, unique to this client.
    pub fn next_request_id(&self) -> String {
        let n = self.inner.counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}_{n}", self.inner.prefix)
    }

    /// Why the connection ended (`runtime.stopped`'s reason, or the error), once it has.
    pub fn closed(&self) -> Option<String> {
        self.inner
            .closed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Sends a command and waits for its answer (docs/protocol.md rule 4); an `error`
    /// or `request.rejected` answer is an `Err`. The answer also goes to the stream.
    pub async fn request(
        &self,
        session_id: Option<&str>,
        payload: CommandPayload,
    ) -> Result<Envelope, ErrorPayload> {
        let cmd = Command::new(
            self.next_request_id(),
            session_id.map(str::to_owned),
            payload,
        );
        self.send(cmd, false).await
    }

    /// As [`Client::request`], but the answer goes to the caller alone.
    pub async fn query(
        &self,
        session_id: Option<&str>,
        payload: CommandPayload,
    ) -> Result<Envelope, ErrorPayload> {
        let cmd = Command::new(
            self.next_request_id(),
            session_id.map(str::to_owned),
            payload,
        );
        self.send(cmd, true).await
    }

    /// Sends a command built by the caller and waits for its answer.
    pub async fn send(&self, cmd: Command, private: bool) -> Result<Envelope, ErrorPayload> {
        if let Some(why) = self.closed() {
            return Err(disconnected(&why));
        }
        let (tx, rx) = oneshot::channel();
        let rid = cmd.request_id.clone();
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(rid.clone(), Pending { tx, private });
        let line = serde_json::to_vec(&cmd).unwrap_or_default();
        let written = self.inner.writer.lock().await.write_line(&line).await;
        if let Err(e) = written {
            self.inner
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&rid);
            return Err(disconnected(&e.to_string()));
        }
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(disconnected(
                &self.closed().unwrap_or_else(|| "no answer".into()),
            )),
        }
    }

    /// Writes one raw line (tests and tools).
    pub async fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
        self.inner.writer.lock().await.write_line(line).await
    }

    /// Ends the connection's input (the daemon answers with `runtime.stopped` and
    /// closes); the daemon and its sessions go on.
    pub async fn close(&self) {
        self.inner.writer.lock().await.close().await;
    }
}
