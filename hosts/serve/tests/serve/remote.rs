//! The remote listener with real WebSocket clients (tokio-tungstenite) on loopback: a
//! daemon with its socket and a `ws://` (or `wss://`) listener, tokens made in a
//! temporary KEEL_HOME, and a raw client that sees every frame.

use super::*;
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
pub use keel_envelope::ErrorCode;
use keel_serve::roles::Role;
use keel_serve::tokens::{NewToken, Secret, TokenRecord, TokenStore};
pub use keel_serve::{Bind, ListenAddr, RemoteOptions, ServeConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Every wait of these tests ends here at the latest (a hang guard, not a timing).
pub const HANG: Duration = Duration::from_secs(120);

/// A daemon with a remote listener.
#[allow(missing_debug_implementations)]
pub struct Remote {
    pub url: String,
    pub socket: PathBuf,
    pub store: TokenStore,
    pub stop: CancellationToken,
    pub task: tokio::task::JoinHandle<keel_serve::StopCause>,
    pub _home: tempfile::TempDir,
    pub _dir: tempfile::TempDir,
    pub _ws: tempfile::TempDir,
    pub _store: tempfile::TempDir,
}

impl Remote {
    /// A token of `role`, optionally bound to `session`.
    pub fn token(&self, role: Role, session: Option<&str>) -> (Secret, TokenRecord) {
        self.store
            .create(NewToken {
                role,
                session: session.map(str::to_owned),
                expires_in: None,
                name: None,
            })
            .unwrap()
    }

    pub async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
    }
}

/// Starts a daemon on `ws://127.0.0.1:0` (`tweak` may change the remote options, e.g.
/// for TLS or origins).
pub async fn remote(
    turns: Vec<Turn>,
    connection: ConnectionOptions,
    tweak: impl FnOnce(&mut RemoteOptions),
) -> Remote {
    let (kernel, _model, ws, store_dir) = kernel(turns);
    let home = tempfile::tempdir().unwrap();
    let dir = socket_dir();
    let socket = dir.path().join("keel.sock");
    let store = TokenStore::in_home(home.path());
    let mut options = ServeConfig::default()
        .remote(
            ListenAddr::parse("ws://127.0.0.1:0").unwrap(),
            store.clone(),
        )
        .unwrap();
    tweak(&mut options);
    let listener = match keel_serve::bind(&socket).await.unwrap() {
        Bind::Listening(l) => l,
        Bind::AlreadyRunning(p) => panic!("a daemon on {}", p.display()),
    };
    let remote = keel_serve::bind_remote(options).await.unwrap();
    let url = remote.url();
    let stop = CancellationToken::new();
    let serve = ServeOptions {
        socket: socket.clone(),
        connection,
        exit_when_idle: None,
    };
    let task = {
        let (k, s) = (kernel.clone(), stop.clone());
        tokio::spawn(
            async move { keel_serve::run_with(k, listener, Some(remote), &serve, s).await },
        )
    };
    Remote {
        url,
        socket,
        store,
        stop,
        task,
        _home: home,
        _dir: dir,
        _ws: ws,
        _store: store_dir,
    }
}

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// What a raw client reads.
#[derive(Debug)]
pub enum Frame {
    Envelope(Box<Envelope>),
    Close(Option<(u16, String)>),
    /// The connection ended without a close frame.
    Gone,
}

/// A raw WebSocket client.
#[allow(missing_debug_implementations)]
pub struct Ws {
    sink: SplitSink<WebSocketStream<Box<dyn Io>>, Message>,
    frames: SplitStream<WebSocketStream<Box<dyn Io>>>,
    counter: u64,
}

/// Upgrades on `stream` with extra headers; the HTTP error of a refused upgrade as
/// `Err((status, body))`.
pub async fn upgrade(
    url: &str,
    stream: Box<dyn Io>,
    headers: &[(&str, String)],
) -> Result<Ws, (u16, String)> {
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    match tokio_tungstenite::client_async(req, stream).await {
        Ok((ws, _)) => {
            let (sink, frames) = ws.split();
            Ok(Ws {
                sink,
                frames,
                counter: 0,
            })
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            let body = resp
                .body()
                .as_deref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            let www = resp
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            Err((resp.status().as_u16(), format!("{body} {www}")))
        }
        Err(e) => panic!("upgrade failed: {e}"),
    }
}

pub fn tcp_addr(url: &str) -> String {
    url.trim_start_matches("ws://")
        .trim_start_matches("wss://")
        .to_owned()
}

/// Opens a plain connection with extra headers.
pub async fn open(url: &str, headers: &[(&str, String)]) -> Result<Ws, (u16, String)> {
    let tcp = tokio::net::TcpStream::connect(tcp_addr(url)).await.unwrap();
    upgrade(url, Box::new(tcp), headers).await
}

pub fn bearer(token: &Secret) -> Vec<(&'static str, String)> {
    vec![("authorization", format!("Bearer {}", token.expose()))]
}

/// Opens a connection with `token` in `Authorization` and reads `runtime.ready`.
pub async fn open_with(url: &str, token: &Secret) -> Ws {
    let mut ws = open(url, &bearer(token))
        .await
        .unwrap_or_else(|e| panic!("refused: {e:?}"));
    let ready = ws.envelope().await;
    assert_eq!(ready.type_name(), "runtime.ready");
    ws
}

impl Ws {
    pub async fn send_text(&mut self, text: String) {
        self.sink.send(Message::text(text)).await.unwrap();
    }

    pub async fn send_message(&mut self, m: Message) {
        self.sink.send(m).await.unwrap();
    }

    /// Sends a command; returns its requestId.
    pub async fn command(
        &mut self,
        ty: &str,
        session: Option<&str>,
        payload: serde_json::Value,
    ) -> String {
        self.counter += 1;
        let rid = format!("ws_{}", self.counter);
        let mut v =
            serde_json::json!({"version": "1.0", "type": ty, "requestId": rid, "payload": payload});
        if let Some(s) = session {
            v["sessionId"] = s.into();
        }
        self.send_text(v.to_string()).await;
        rid
    }

    /// The next frame that is not a ping or pong.
    pub async fn frame(&mut self) -> Frame {
        loop {
            let next = tokio::time::timeout(HANG, self.frames.next())
                .await
                .expect("no frame in time");
            return match next {
                None | Some(Err(_)) => Frame::Gone,
                Some(Ok(Message::Text(t))) => Frame::Envelope(Box::new(decode(t.as_str()))),
                Some(Ok(Message::Close(c))) => {
                    Frame::Close(c.map(|c| (u16::from(c.code), c.reason.as_str().to_owned())))
                }
                Some(Ok(_)) => continue,
            };
        }
    }

    /// The next envelope; fails on a close.
    pub async fn envelope(&mut self) -> Envelope {
        match self.frame().await {
            Frame::Envelope(e) => *e,
            other => panic!("expected an envelope, got {other:?}"),
        }
    }

    /// Envelopes until `pred` holds (inclusive).
    pub async fn until(&mut self, what: &str, pred: impl Fn(&Envelope) -> bool) -> Vec<Envelope> {
        let mut out = Vec::new();
        loop {
            let e = match self.frame().await {
                Frame::Envelope(e) => *e,
                other => panic!("waiting for {what}: {other:?} after {:?}", types(&out)),
            };
            let done = pred(&e);
            out.push(e);
            if done {
                return out;
            }
        }
    }

    /// Sends a command and returns its answer (the first envelope carrying its
    /// requestId or answering it).
    pub async fn ask(
        &mut self,
        ty: &str,
        session: Option<&str>,
        payload: serde_json::Value,
    ) -> Envelope {
        let rid = self.command(ty, session, payload).await;
        self.until(ty, |e| {
            e.request_id == rid || e.reply_to() == Some(rid.as_str())
        })
        .await
        .pop()
        .unwrap()
    }

    /// Reads everything until the connection closes; returns the envelopes and the close.
    pub async fn rest(&mut self) -> (Vec<Envelope>, Option<(u16, String)>) {
        let mut out = Vec::new();
        loop {
            match self.frame().await {
                Frame::Envelope(e) => out.push(*e),
                Frame::Close(c) => return (out, c),
                Frame::Gone => return (out, None),
            }
        }
    }
}

pub fn error_of(e: &Envelope) -> &ErrorPayload {
    match &e.event {
        Event::Error(p) | Event::RequestRejected(p) => p,
        _ => panic!("not an error: {}", e.type_name()),
    }
}

pub fn reason_of(p: &ErrorPayload) -> &str {
    p.details
        .get("reason")
        .and_then(|r| r.as_str())
        .unwrap_or("")
}
