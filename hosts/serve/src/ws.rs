//! The remote listener: the daemon's protocol over WebSocket (`ws://`, or `wss://` with
//! rustls), one envelope or command per text frame, for clients on other machines and
//! in browsers.
//!
//! An upgrade is refused (HTTP 403) when it carries an `Origin` that is not allowed,
//! and (HTTP 401, `WWW-Authenticate: Bearer`) when its `Authorization: Bearer` token is
//! wrong, expired or revoked; an upgrade without `Authorization` (a browser) must send
//! `{"type": "auth", "token": …}` as its first message within the auth time, else it
//! is closed with code 4401 and the reason. Nothing of any session is sent before the
//! token is accepted. Then the connection is the same as a Unix socket's
//! ([`crate::conn::run`]), with the token's role checked before each command.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use keel_bridge::Incoming;
use keel_envelope::codec::{self, Limits};
use keel_envelope::error::ErrorCategory;
use keel_envelope::remote::AuthMessage;
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_kernel::Kernel;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{header, StatusCode};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{error::CapacityError, Bytes, Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

use crate::access::Access;
use crate::conn::{
    self, Activity, ConnectionEnd, ConnectionOptions, Input, Output, Reader, Remote,
};
use crate::settings::RemoteOptions;
use crate::tokens::{AuthFailure, TokenRecord, TokenWatch};
use crate::ServeError;

/// How long the TLS and HTTP upgrade of a new connection may take.
const HANDSHAKE_WAIT: Duration = Duration::from_secs(10);
/// Connections at most between their TCP accept and their token's acceptance.
const MAX_UNAUTHENTICATED: usize = 64;
/// The close code of a refused or lost token.
pub const CLOSE_UNAUTHORIZED: u16 = 4401;

/// The bound remote listener.
pub struct RemoteListener {
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RemoteListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteListener")
            .field("addr", &self.tcp.local_addr().ok())
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Shared {
    options: RemoteOptions,
    tokens: TokenWatch,
    unauthenticated: Arc<Semaphore>,
}

/// Binds the remote listener: loads the certificate and key for `wss://`, binds the
/// TCP port and starts watching the token store.
pub async fn bind_remote(options: RemoteOptions) -> Result<RemoteListener, ServeError> {
    let tls = match &options.tls {
        Some((cert, key)) => Some(TlsAcceptor::from(
            crate::tls::server_config(cert, key).map_err(ServeError::Tls)?,
        )),
        None => None,
    };
    let tcp = TcpListener::bind((options.listen.host.as_str(), options.listen.port))
        .await
        .map_err(|source| ServeError::Listen {
            addr: options.listen.to_string(),
            source,
        })?;
    let tokens = TokenWatch::start(options.tokens.clone());
    Ok(RemoteListener {
        tcp,
        tls,
        shared: Arc::new(Shared {
            options,
            tokens,
            unauthenticated: Arc::new(Semaphore::new(MAX_UNAUTHENTICATED)),
        }),
    })
}

impl RemoteListener {
    /// The bound address (the port chosen for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// The URL clients connect to.
    pub fn url(&self) -> String {
        let port = self
            .local_addr()
            .map_or(self.shared.options.listen.port, |a| a.port());
        self.shared.options.listen.url_with_port(port)
    }

    pub(crate) async fn accept(&self) -> std::io::Result<(TcpStream, SocketAddr)> {
        self.tcp.accept().await
    }

    /// Serves one accepted TCP connection to its end.
    pub(crate) fn serve(
        &self,
        kernel: Kernel,
        tcp: TcpStream,
        peer: SocketAddr,
        options: ConnectionOptions,
        stop: CancellationToken,
    ) -> impl std::future::Future<Output = ConnectionEnd> + Send + 'static {
        let shared = self.shared.clone();
        let tls = self.tls.clone();
        async move {
            let Ok(permit) = shared.unauthenticated.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "too many remote connections waiting to authenticate; dropped");
                return ConnectionEnd::OutputClosed;
            };
            let _ = tcp.set_nodelay(true);
            match tls {
                None => serve_ws(tcp, shared, permit, kernel, peer, options, stop).await,
                Some(acceptor) => {
                    match tokio::time::timeout(HANDSHAKE_WAIT, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            serve_ws(stream, shared, permit, kernel, peer, options, stop).await
                        }
                        Ok(Err(e)) => {
                            tracing::info!(%peer, error = %e, "remote TLS handshake failed");
                            ConnectionEnd::OutputClosed
                        }
                        Err(_) => {
                            tracing::info!(%peer, "remote TLS handshake timed out");
                            ConnectionEnd::OutputClosed
                        }
                    }
                }
            }
        }
    }
}

/// What the upgrade's headers said.
#[derive(Debug)]
enum Upgrade {
    /// A good token in `Authorization`.
    Granted(TokenRecord),
    /// No `Authorization`: the first message must be `auth`.
    AuthMessage,
    /// Refused, with the reason.
    Refused(&'static str),
}

fn refusal(status: StatusCode, reason: &str, message: &str) -> ErrorResponse {
    let body = serde_json::json!({ "reason": reason, "message": message }).to_string();
    let mut r = ErrorResponse::new(Some(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::UNAUTHORIZED {
        let value = format!(
            "Bearer realm=\"keel\", error=\"invalid_token\", error_description=\"{reason}\""
        );
        if let Ok(v) = header::HeaderValue::from_str(&value) {
            h.insert(header::WWW_AUTHENTICATE, v);
        }
    }
    r
}

/// Checks the upgrade request: its `Origin`, then its `Authorization`.
fn check_upgrade(shared: &Shared, req: &Request) -> Result<Upgrade, ErrorResponse> {
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let allowed = origin
            .to_str()
            .is_ok_and(|o| shared.options.origin_allowed(o));
        if !allowed {
            return Err(refusal(
                StatusCode::FORBIDDEN,
                "origin_refused",
                "this origin may not connect (serve.allowedOrigins)",
            ));
        }
    }
    let Some(auth) = req.headers().get(header::AUTHORIZATION) else {
        return Ok(Upgrade::AuthMessage);
    };
    let token = auth
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .unwrap_or("");
    match shared.tokens.store().verify(token) {
        Ok(record) => Ok(Upgrade::Granted(record)),
        Err(f) => {
            if let AuthFailure::Store(e) = &f {
                tracing::error!(error = %e, "the token store cannot be used");
            }
            let status = if matches!(f, AuthFailure::Store(_)) {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::UNAUTHORIZED
            };
            Err(refusal(status, f.reason(), f.message()))
        }
    }
}

fn ws_config(limit: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(limit))
        .max_frame_size(Some(limit))
}

/// Reads the first message of a browser: `auth`, within the auth time.
async fn first_auth<S>(
    stream: &mut SplitStream<WebSocketStream<S>>,
    shared: &Shared,
) -> Result<TokenRecord, &'static str>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let read = async {
        loop {
            match stream.next().await {
                Some(Ok(Message::Text(t))) => {
                    let Ok(m) = serde_json::from_str::<AuthMessage>(t.as_str()) else {
                        return Err(AuthFailure::Missing.reason());
                    };
                    return shared
                        .tokens
                        .store()
                        .verify(&m.token)
                        .map_err(|f| f.reason());
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                _ => return Err(AuthFailure::Missing.reason()),
            }
        }
    };
    match tokio::time::timeout(shared.options.auth_timeout, read).await {
        Ok(r) => r,
        Err(_) => Err("auth_timeout"),
    }
}

async fn serve_ws<S>(
    stream: S,
    shared: Arc<Shared>,
    permit: tokio::sync::OwnedSemaphorePermit,
    kernel: Kernel,
    peer: SocketAddr,
    options: ConnectionOptions,
    stop: CancellationToken,
) -> ConnectionEnd
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limit = options
        .max_line_bytes
        .unwrap_or(codec::DEFAULT_MAX_LINE_BYTES);
    let verdict = Arc::new(Mutex::new(None::<Upgrade>));
    let callback = {
        let verdict = verdict.clone();
        let shared = shared.clone();
        move |req: &Request, resp: Response| {
            let r = check_upgrade(&shared, req);
            let mut v = verdict.lock().unwrap_or_else(|p| p.into_inner());
            match r {
                Ok(u) => {
                    *v = Some(u);
                    Ok(resp)
                }
                Err(e) => {
                    let reason = e
                        .body()
                        .as_deref()
                        .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok())
                        .and_then(|b| b["reason"].as_str().map(reason_static))
                        .unwrap_or("refused");
                    *v = Some(Upgrade::Refused(reason));
                    Err(e)
                }
            }
        }
    };
    let upgraded = tokio::time::timeout(
        HANDSHAKE_WAIT,
        tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(ws_config(limit))),
    )
    .await;
    let taken = verdict.lock().unwrap_or_else(|p| p.into_inner()).take();
    let ws = match upgraded {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => {
            match taken {
                Some(Upgrade::Refused(reason)) => {
                    tracing::info!(%peer, reason, "remote upgrade refused")
                }
                _ => tracing::info!(%peer, error = %e, "remote upgrade failed"),
            }
            return ConnectionEnd::OutputClosed;
        }
        Err(_) => {
            tracing::info!(%peer, "remote upgrade timed out");
            return ConnectionEnd::OutputClosed;
        }
    };
    let (mut sink, mut frames) = ws.split();
    let record = match taken {
        Some(Upgrade::Granted(r)) => r,
        _ => match first_auth(&mut frames, &shared).await {
            Ok(r) => r,
            Err(reason) => {
                tracing::info!(%peer, reason, "remote client refused");
                let close = CloseFrame {
                    code: CloseCode::from(CLOSE_UNAUTHORIZED),
                    reason: reason.into(),
                };
                let _ = tokio::time::timeout(Duration::from_secs(2), async {
                    let _ = sink.send(Message::Close(Some(close))).await;
                    let _ = sink.close().await;
                })
                .await;
                return ConnectionEnd::OutputClosed;
            }
        },
    };
    drop(permit);
    tracing::info!(
        %peer,
        token = %record.id,
        role = record.role.as_str(),
        session = record.session.as_deref().unwrap_or(""),
        "remote client authenticated"
    );
    let access = Arc::new(Access::new(
        &record,
        Some(shared.tokens.subscribe(&record.id)),
    ));
    let heard = Activity::new();
    let (tx, rx) = mpsc::channel::<Input>(1);
    let task = tokio::spawn(read_frames(frames, tx, heard.clone(), limit));
    let remote = Remote {
        access,
        ping: shared.options.ping_interval,
        heard,
    };
    conn::run(
        kernel,
        Reader { rx, task },
        WsOutput { sink },
        &options,
        stop,
        Some(remote),
    )
    .await
}

/// The reason strings `check_upgrade` can give, as `'static`.
fn reason_static(r: &str) -> &'static str {
    [
        "origin_refused",
        "token_missing",
        "token_unknown",
        "token_expired",
        "token_revoked",
        "token_store_unusable",
    ]
    .into_iter()
    .find(|s| *s == r)
    .unwrap_or("refused")
}

fn too_long(size: usize, limit: usize) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::RequestInvalid,
        format!("message of {size} bytes exceeds the limit of {limit} bytes"),
    )
    .category(ErrorCategory::Bridge)
    .with_detail("reason", "message_too_long")
    .with_detail("limit", limit as u64)
    .with_detail("size", size as u64)
}

/// Reads frames: each text frame is one command line; pings and pongs only show that
/// the peer is there.
async fn read_frames<S>(
    mut frames: SplitStream<WebSocketStream<S>>,
    tx: mpsc::Sender<Input>,
    heard: Activity,
    limit: usize,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let limits = Limits {
        max_line_bytes: limit,
    };
    loop {
        let msg = match frames.next().await {
            None | Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => {
                let _ = tx.send(Input::Line(Incoming::Eof)).await;
                return;
            }
            Some(Err(WsError::Capacity(CapacityError::MessageTooLong { size, max_size }))) => {
                tracing::warn!(size, limit = max_size, "remote message too long");
                let refused = Incoming::Refused {
                    session_id: None,
                    request_id: None,
                    error: Box::new(too_long(size, max_size)),
                };
                if tx.send(Input::Line(refused)).await.is_ok() {
                    let _ = tx.send(Input::End(ConnectionEnd::TooBig)).await;
                }
                return;
            }
            Some(Err(e)) => {
                let _ = tx
                    .send(Input::Line(Incoming::Failed(std::io::Error::other(
                        e.to_string(),
                    ))))
                    .await;
                return;
            }
            Some(Ok(m)) => m,
        };
        heard.touch();
        let inc = match msg {
            Message::Text(t) => match codec::decode_command(t.as_bytes(), limits) {
                Ok(cmd) => Incoming::Command(Box::new(cmd)),
                Err(e) => {
                    tracing::warn!(
                        code = e.error.code.as_str(),
                        message = %e.error.message,
                        "remote message refused"
                    );
                    Incoming::Refused {
                        session_id: e.session_id,
                        request_id: e.request_id,
                        error: Box::new(e.error),
                    }
                }
            },
            Message::Binary(b) => Incoming::Refused {
                session_id: None,
                request_id: None,
                error: Box::new(
                    ErrorPayload::new(
                        ErrorCode::RequestInvalid,
                        format!(
                            "a binary message of {} bytes: commands travel as text messages",
                            b.len()
                        ),
                    )
                    .category(ErrorCategory::Bridge)
                    .with_detail("reason", "binary_message"),
                ),
            },
            Message::Close(_) => Incoming::Eof,
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
        };
        let last = matches!(inc, Incoming::Eof);
        if tx.send(Input::Line(inc)).await.is_err() || last {
            return;
        }
    }
}

/// The output of a WebSocket: one text message per envelope.
struct WsOutput<S> {
    sink: SplitSink<WebSocketStream<S>, Message>,
}

fn ws_io(e: WsError) -> std::io::Error {
    match e {
        WsError::Io(e) => e,
        other => std::io::Error::other(other.to_string()),
    }
}

/// The close code that goes with a last line's reason.
fn close_code(reason: Option<&str>) -> CloseCode {
    match reason {
        Some("idle" | "shutdown") => CloseCode::Away,
        Some("too_slow") => CloseCode::Policy,
        Some("message_too_big") => CloseCode::Size,
        Some("token_revoked" | "token_expired") => CloseCode::from(CLOSE_UNAUTHORIZED),
        _ => CloseCode::Normal,
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> Output for WsOutput<S> {
    async fn send(&mut self, line: &[u8]) -> std::io::Result<()> {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let text = String::from_utf8(body.to_vec()).map_err(std::io::Error::other)?;
        self.sink.feed(Message::text(text)).await.map_err(ws_io)
    }
    async fn flush(&mut self) -> std::io::Result<()> {
        self.sink.flush().await.map_err(ws_io)
    }
    async fn ping(&mut self) -> std::io::Result<()> {
        self.sink
            .send(Message::Ping(Bytes::new()))
            .await
            .map_err(ws_io)
    }
    async fn finish(&mut self, reason: Option<&str>) {
        let frame = CloseFrame {
            code: close_code(reason),
            reason: reason.unwrap_or("").to_owned().into(),
        };
        let _ = self.sink.send(Message::Close(Some(frame))).await;
        let _ = self.sink.close().await;
    }
}
