//! A client's transport to the daemon: lines on the Unix socket, or text messages on a
//! WebSocket (`ws://`, `wss://`) with the token sent as `Authorization: Bearer` on the
//! upgrade. [`crate::Client`] reads and writes through it the same way.

use std::path::Path;
use std::sync::Arc;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpStream, UnixStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{header, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

use crate::client::ConnectError;
use crate::settings::ListenAddr;

/// A byte stream a WebSocket runs on: TCP, or TLS over TCP.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

type Ws = WebSocketStream<Box<dyn Io>>;

/// The reading half.
pub(crate) enum LinkReader {
    Unix(Lines<BufReader<OwnedReadHalf>>),
    Ws(SplitStream<Ws>),
}

/// The writing half.
pub(crate) enum LinkWriter {
    Unix(OwnedWriteHalf),
    Ws(SplitSink<Ws, Message>),
}

fn ws_io(e: WsError) -> std::io::Error {
    match e {
        WsError::Io(e) => e,
        other => std::io::Error::other(other.to_string()),
    }
}

impl LinkReader {
    /// The next line or text message; `Ok(None)` at the end (a close frame's reason, if
    /// any, is in the `Err` of a close with a code other than normal).
    pub(crate) async fn next(&mut self) -> Result<Option<String>, String> {
        match self {
            LinkReader::Unix(lines) => lines.next_line().await.map_err(|e| e.to_string()),
            LinkReader::Ws(frames) => loop {
                match frames.next().await {
                    None | Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => {
                        return Ok(None)
                    }
                    Some(Err(e)) => return Err(e.to_string()),
                    Some(Ok(Message::Text(t))) => return Ok(Some(t.as_str().to_owned())),
                    Some(Ok(Message::Close(frame))) => {
                        return match frame {
                            Some(f) if !f.reason.is_empty() => Err(f.reason.as_str().to_owned()),
                            _ => Ok(None),
                        }
                    }
                    Some(Ok(_)) => continue,
                }
            },
        }
    }
}

impl LinkWriter {
    /// Writes one command line (without its newline: a text message on a WebSocket).
    pub(crate) async fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        match self {
            LinkWriter::Unix(w) => {
                w.write_all(line).await?;
                w.write_all(b"\n").await?;
                w.flush().await
            }
            LinkWriter::Ws(sink) => {
                let text = String::from_utf8(line.to_vec()).map_err(std::io::Error::other)?;
                sink.send(Message::text(text)).await.map_err(ws_io)
            }
        }
    }

    /// Ends the input the daemon reads.
    pub(crate) async fn close(&mut self) {
        match self {
            LinkWriter::Unix(w) => {
                let _ = w.shutdown().await;
            }
            LinkWriter::Ws(sink) => {
                let _ = sink.send(Message::Close(None)).await;
                let _ = sink.close().await;
            }
        }
    }
}

/// Opens the Unix socket.
pub(crate) async fn unix(path: &Path) -> Result<(LinkReader, LinkWriter), ConnectError> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(ConnectError::NotRunning)?;
    let (read, write) = stream.into_split();
    Ok((
        LinkReader::Unix(BufReader::with_capacity(64 * 1024, read).lines()),
        LinkWriter::Unix(write),
    ))
}

/// What refused an upgrade said (the JSON body of a 401 or 403).
fn refused(resp: &tokio_tungstenite::tungstenite::handshake::client::Response) -> ConnectError {
    let body = resp
        .body()
        .as_deref()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok());
    let field = |k: &str| {
        body.as_ref()
            .and_then(|b| b[k].as_str())
            .map(str::to_owned)
            .unwrap_or_default()
    };
    ConnectError::Refused {
        status: resp.status().as_u16(),
        reason: field("reason"),
        message: field("message"),
    }
}

/// Opens a WebSocket to `url` (`ws://HOST:PORT` or `wss://HOST:PORT`), sending `token`
/// with the upgrade; for `wss://`, the server's certificate must chain to the Mozilla
/// roots or to a certificate of `ca`.
pub(crate) async fn websocket(
    url: &str,
    token: &str,
    ca: Option<&Path>,
) -> Result<(LinkReader, LinkWriter), ConnectError> {
    let addr = ListenAddr::parse(url).map_err(ConnectError::BadAddress)?;
    let tcp = TcpStream::connect((addr.host.as_str(), addr.port))
        .await
        .map_err(ConnectError::NotRunning)?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Io> = if addr.tls {
        let config = crate::tls::client_config(ca).map_err(ConnectError::Tls)?;
        let name = rustls_pki_types::ServerName::try_from(addr.host.clone())
            .map_err(|e| ConnectError::BadAddress(format!("{}: {e}", addr.host)))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(&config))
            .connect(name, tcp)
            .await
            .map_err(|e| ConnectError::Tls(e.to_string()))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let mut request = addr
        .url_with_port(addr.port)
        .into_client_request()
        .map_err(|e| ConnectError::BadAddress(e.to_string()))?;
    let bearer = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
        ConnectError::BadAddress("the token holds characters a header cannot".into())
    })?;
    request.headers_mut().insert(header::AUTHORIZATION, bearer);
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    let (ws, _) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
        .await
        .map_err(|e| match e {
            WsError::Http(resp) => refused(&resp),
            other => ConnectError::NoReady(other.to_string()),
        })?;
    let (sink, frames) = ws.split();
    Ok((LinkReader::Ws(frames), LinkWriter::Ws(sink)))
}
