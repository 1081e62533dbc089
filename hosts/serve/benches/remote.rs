//! Delivery of one session's events to daemon clients over the Unix socket and over
//! WebSocket, in the same run: events per second each client receives, with 1 and 16
//! clients watching the session. The events go through the kernel's hub
//! (`Kernel::publish`, without the store), the daemon's connections (watcher, encoder,
//! writer), the transport, and a client that reads every line or message.
//!
//! Run: `cargo bench -p keel-serve --bench remote`. Figures go to docs/performance.md.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{stream, SinkExt, StreamExt};
use keel_envelope::events::AssistantDelta;
use keel_envelope::{Envelope, Event, Source};
use keel_kernel::model::{FinishReason, Model, ModelEvent, ModelRequest, ModelStream};
use keel_kernel::{Kernel, SessionOptions};
use keel_serve::roles::Role;
use keel_serve::tokens::{NewToken, TokenStore};
use keel_serve::{Bind, ConnectionOptions, ListenAddr, ServeConfig, ServeOptions};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
struct Quiet;

impl Model for Quiet {
    fn id(&self) -> String {
        "bench:quiet".into()
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    fn stream(&self, _r: ModelRequest, _c: CancellationToken) -> ModelStream {
        Box::pin(stream::iter(vec![Ok(ModelEvent::Finished(
            FinishReason::EndTurn,
        ))]))
    }
}

const EVENTS: usize = 50_000;
const ROUNDS: usize = 3;

fn envelope(session: &str) -> Envelope {
    Envelope::new(
        Some(session.to_owned()),
        "req_bench".into(),
        "evt_bench".into(),
        1_775_600_000_000,
        Source::Runtime,
        1,
        Event::AssistantDelta(AssistantDelta::new("a piece of streamed text ")),
    )
}

fn watch_line(sid: &str) -> String {
    format!(
        r#"{{"version":"1.0","type":"session.watch","requestId":"w","payload":{{"sessionId":"{sid}"}}}}"#
    )
}

/// A client that has watched the session and counts the deltas it reads; it reports
/// on `done` once it has `EVENTS × ROUNDS` of them.
async fn unix_client(path: std::path::PathBuf, sid: String, done: tokio::sync::mpsc::Sender<()>) {
    let s = tokio::net::UnixStream::connect(&path).await.unwrap();
    let (r, mut w) = s.into_split();
    let mut lines = BufReader::with_capacity(64 * 1024, r).lines();
    lines.next_line().await.unwrap().unwrap();
    w.write_all(format!("{}\n", watch_line(&sid)).as_bytes())
        .await
        .unwrap();
    let _watched = lines.next_line().await.unwrap().unwrap();
    done.send(()).await.unwrap();
    let mut n = 0;
    while let Some(l) = lines.next_line().await.unwrap() {
        if l.contains("assistant.delta") {
            n += 1;
            if n % EVENTS == 0 {
                done.send(()).await.unwrap();
            }
        }
    }
}

async fn ws_client(url: String, token: String, sid: String, done: tokio::sync::mpsc::Sender<()>) {
    let tcp = tokio::net::TcpStream::connect(url.trim_start_matches("ws://"))
        .await
        .unwrap();
    tcp.set_nodelay(true).unwrap();
    let mut req = url.as_str().into_client_request().unwrap();
    req.headers_mut().insert(
        "authorization",
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    let (ws, _) = tokio_tungstenite::client_async(req, tcp).await.unwrap();
    let (mut sink, mut frames) = ws.split();
    frames.next().await.unwrap().unwrap();
    sink.send(Message::text(watch_line(&sid))).await.unwrap();
    frames.next().await.unwrap().unwrap();
    done.send(()).await.unwrap();
    let mut n = 0;
    while let Some(Ok(m)) = frames.next().await {
        if let Message::Text(t) = m {
            if t.as_str().contains("assistant.delta") {
                n += 1;
                if n % EVENTS == 0 {
                    done.send(()).await.unwrap();
                }
            }
        }
    }
}

struct Daemon {
    kernel: Kernel,
    sid: String,
    socket: std::path::PathBuf,
    url: String,
    token: String,
    stop: CancellationToken,
    _dirs: Vec<tempfile::TempDir>,
}

async fn daemon() -> Daemon {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let run = tempfile::tempdir().unwrap();
    let kernel = Kernel::builder()
        .workspace(ws.path())
        .model(Arc::new(Quiet))
        .memory_store()
        .builtin_tools(false)
        .build()
        .unwrap();
    let (handle, _events) = kernel
        .start_session(SessionOptions::default())
        .await
        .unwrap();
    let sid = handle.id().to_owned();
    let store = TokenStore::in_home(home.path());
    let (secret, _) = store
        .create(NewToken {
            role: Role::Observer,
            session: None,
            expires_in: None,
            name: None,
        })
        .unwrap();
    let socket = run.path().join("keel.sock");
    let Bind::Listening(listener) = keel_serve::bind(&socket).await.unwrap() else {
        panic!("a daemon already listens")
    };
    let remote = ServeConfig::default()
        .remote(ListenAddr::parse("ws://127.0.0.1:0").unwrap(), store)
        .unwrap();
    let remote = keel_serve::bind_remote(remote).await.unwrap();
    let url = remote.url();
    let stop = CancellationToken::new();
    let options = ServeOptions {
        socket: socket.clone(),
        connection: ConnectionOptions {
            // Every event of every round may wait: the figure is throughput, not the cut-off.
            queue_capacity: EVENTS * ROUNDS * 2,
            ..ConnectionOptions::default()
        },
        exit_when_idle: None,
    };
    let (k, s) = (kernel.clone(), stop.clone());
    tokio::spawn(async move { keel_serve::run_with(k, listener, Some(remote), &options, s).await });
    Daemon {
        kernel,
        sid,
        socket,
        url,
        token: secret.expose().to_owned(),
        stop,
        _dirs: vec![ws, home, run],
    }
}

/// Events per second each of `clients` clients of one transport received, best round.
async fn run(d: &Daemon, clients: usize, websocket: bool) -> f64 {
    let (tx, mut rx) = tokio::sync::mpsc::channel(clients * 4);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (sid, done) = (d.sid.clone(), tx.clone());
        tasks.push(if websocket {
            tokio::spawn(ws_client(d.url.clone(), d.token.clone(), sid, done))
        } else {
            tokio::spawn(unix_client(d.socket.clone(), sid, done))
        });
    }
    for _ in 0..clients {
        rx.recv().await.unwrap();
    }
    let env = envelope(&d.sid);
    let mut best = Duration::MAX;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for _ in 0..EVENTS {
            d.kernel.publish(env.clone()).await;
        }
        for _ in 0..clients {
            rx.recv().await.unwrap();
        }
        best = best.min(start.elapsed());
    }
    for t in tasks {
        t.abort();
    }
    EVENTS as f64 / best.as_secs_f64()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let d = daemon().await;
        let unix1 = run(&d, 1, false).await;
        let ws1 = run(&d, 1, true).await;
        let unix16 = run(&d, 16, false).await;
        let ws16 = run(&d, 16, true).await;
        println!("| clients | Unix socket, events/s per client | WebSocket, events/s per client | WebSocket / Unix socket |");
        println!("|---:|---:|---:|---:|");
        println!("| 1 | {unix1:.0} | {ws1:.0} | {:.2} |", ws1 / unix1);
        println!("| 16 | {unix16:.0} | {ws16:.0} | {:.2} |", ws16 / unix16);
        d.stop.cancel();
    });
}
