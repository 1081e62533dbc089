//! One client connection, whatever carries it (a Unix socket's lines, a WebSocket's
//! text frames): first `runtime.ready`, then commands in and envelopes out, through a
//! watcher of the shared kernel instead of the whole event stream, with an idle
//! timeout and a last `runtime.stopped` saying why the connection ends.
//!
//! A transport gives [`run`] its input as [`Input`]s (a reader task of its own) and its
//! output as an [`Output`]; a remote connection adds its [`Remote`] part: the token's
//! [`Access`] (checked before each command, applied to each envelope sent, and ending
//! the connection when the token is revoked or expires) and keep-alive pings.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_bridge::{Incoming, LineReader, Minter};
use keel_envelope::commands::CommandPayload;
use keel_envelope::events::RuntimeStopped;
use keel_envelope::types::{Cursor, ModelInfo, SessionCursor};
use keel_envelope::{codec, Envelope, Event, Source};
use keel_kernel::{Kernel, WatchEnd};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::access::Access;

/// How long a connection may stay silent both ways before it is closed (seed 000).
pub const CONNECTION_IDLE: Duration = Duration::from_secs(90);

/// Live events a connection may have waiting unread before it is cut off.
pub const QUEUE_CAPACITY: usize = 4096;

/// How long the last lines of a closing connection may take to write.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// How long the last line of a connection whose token was revoked or expired may take:
/// the connection is closed within a second of the revocation.
const REVOKED_GRACE: Duration = Duration::from_millis(500);

/// Settings of every connection of a daemon.
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    /// Silence (no line in, no line out) after which a connection is closed.
    pub idle: Duration,
    /// Live events waiting unread after which a connection is cut off.
    pub queue_capacity: usize,
    /// Maximum bytes per input line or message (default: the codec's).
    pub max_line_bytes: Option<usize>,
    /// The workspace shown in `runtime.ready`.
    pub workspace: Option<String>,
    /// Models shown in `runtime.ready`.
    pub available_models: Vec<ModelInfo>,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        Self {
            idle: CONNECTION_IDLE,
            queue_capacity: QUEUE_CAPACITY,
            max_line_bytes: None,
            workspace: None,
            available_models: Vec::new(),
        }
    }
}

/// Why a connection ended; the `reason` of its last line, `runtime.stopped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionEnd {
    /// The client's input ended (`eof`).
    Eof,
    /// The client sent `runtime.shutdown` (`disconnect`): this connection ends, the
    /// daemon and its sessions go on.
    Disconnect,
    /// Nothing was read or written for the idle time (`idle`).
    Idle,
    /// The client did not read its events and its queue filled up (`too_slow`).
    TooSlow,
    /// The daemon is stopping (`shutdown`).
    Shutdown,
    /// Writing failed: the client went away.
    OutputClosed,
    /// A WebSocket message or frame was over the size limit (`message_too_big`).
    TooBig,
    /// The connection's token was revoked (`token_revoked`).
    Revoked,
    /// The connection's token expired (`token_expired`).
    Expired,
}

impl ConnectionEnd {
    /// The `reason` written in `runtime.stopped`.
    pub fn reason(self) -> &'static str {
        match self {
            ConnectionEnd::Eof => "eof",
            ConnectionEnd::Disconnect => "disconnect",
            ConnectionEnd::Idle => "idle",
            ConnectionEnd::TooSlow => "too_slow",
            ConnectionEnd::Shutdown => "shutdown",
            ConnectionEnd::OutputClosed => "output_closed",
            ConnectionEnd::TooBig => "message_too_big",
            ConnectionEnd::Revoked => "token_revoked",
            ConnectionEnd::Expired => "token_expired",
        }
    }
}

/// When something last happened (a line read or written; for a remote connection's
/// peer, any frame heard).
#[derive(Debug, Clone)]
pub(crate) struct Activity(Arc<Mutex<Instant>>);

impl Activity {
    pub(crate) fn new() -> Self {
        Self(Arc::new(Mutex::new(Instant::now())))
    }
    pub(crate) fn touch(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
    fn last(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How a transport writes envelopes.
pub(crate) trait Output: Send + 'static {
    /// Writes one encoded envelope (a JSON line ending in `\n`).
    fn send(&mut self, line: &[u8]) -> impl Future<Output = std::io::Result<()>> + Send;
    /// Pushes what was written to the client.
    fn flush(&mut self) -> impl Future<Output = std::io::Result<()>> + Send;
    /// A keep-alive probe (a WebSocket ping).
    fn ping(&mut self) -> impl Future<Output = std::io::Result<()>> + Send;
    /// Ends the output; `reason` is the last line's, when one was written.
    fn finish(&mut self, reason: Option<&str>) -> impl Future<Output = ()> + Send;
}

/// What a transport's reader hands the connection.
#[derive(Debug)]
pub(crate) enum Input {
    /// A line or message, decoded.
    Line(Incoming),
    /// The input cannot go on (a WebSocket message over the limit).
    End(ConnectionEnd),
}

/// A transport's reader: its queue and its task (stopped when the connection ends).
#[derive(Debug)]
pub(crate) struct Reader {
    pub(crate) rx: mpsc::Receiver<Input>,
    pub(crate) task: tokio::task::JoinHandle<()>,
}

/// The remote part of a connection.
#[derive(Debug)]
pub(crate) struct Remote {
    /// What the token allows.
    pub(crate) access: Arc<Access>,
    /// How often to ping.
    pub(crate) ping: Duration,
    /// When the peer last sent anything (a pong included).
    pub(crate) heard: Activity,
}

/// The output of a byte stream: one line per envelope.
struct LineOutput<W: AsyncWrite>(tokio::io::BufWriter<W>);

impl<W: AsyncWrite + Unpin + Send + 'static> Output for LineOutput<W> {
    async fn send(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.0.write_all(line).await
    }
    async fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().await
    }
    async fn ping(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    async fn finish(&mut self, _reason: Option<&str>) {
        let _ = self.0.flush().await;
    }
}

/// Per watched session, the last logged event written to the client: where it
/// resumes from after being cut off.
#[derive(Debug, Default)]
struct Cursors(BTreeMap<String, Option<Cursor>>);

impl Cursors {
    fn note(&mut self, env: &Envelope) {
        let Some(sid) = &env.session_id else { return };
        let replay = env.meta.as_ref().and_then(|m| m.replay) == Some(true);
        if env.source == Source::Bridge || replay {
            return;
        }
        let here = || Some(Cursor::new(env.request_id.clone(), env.sequence));
        match &env.event {
            // Not logged; the events logged before it are the client's (or replayed
            // right after it).
            Event::SessionWatched(w) => {
                self.0.insert(sid.clone(), w.last_cursor.clone());
            }
            Event::SessionUnwatched(_) | Event::SessionClosed(_) => {
                self.0.remove(sid);
            }
            Event::SessionStarted(_) | Event::SessionResumed(_) | Event::SessionForked(_) => {
                self.0.insert(sid.clone(), here());
            }
            _ => {
                if let Some(c) = self.0.get_mut(sid) {
                    *c = here();
                }
            }
        }
    }

    fn resume_from(&self) -> Vec<SessionCursor> {
        self.0
            .iter()
            .map(|(s, c)| SessionCursor::new(s.clone()).cursor(c.clone()))
            .collect()
    }
}

fn stopped(
    minter: &mut Minter,
    request_id: Option<String>,
    end: ConnectionEnd,
    resume_from: Option<Vec<SessionCursor>>,
) -> Envelope {
    minter.envelope(
        None,
        request_id,
        Event::RuntimeStopped(
            RuntimeStopped::new(end.reason().to_owned()).resume_from(resume_from),
        ),
    )
}

fn is_own_stop(env: &Envelope) -> bool {
    env.source == Source::Bridge && matches!(env.event, Event::RuntimeStopped(_))
}

/// Serves one connection of a byte stream (the Unix socket) until its input ends, it
/// sends `runtime.shutdown`, it stays idle, it falls too far behind, its output
/// breaks, or `stop` is cancelled (the daemon is stopping; its sessions have been
/// closed already). Never stops anything the kernel runs.
pub async fn serve_connection<R, W>(
    kernel: Kernel,
    input: R,
    output: W,
    options: &ConnectionOptions,
    stop: CancellationToken,
) -> ConnectionEnd
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    // The reader runs on its own so that a line is never cut by a timer.
    let (tx, rx) = mpsc::channel::<Input>(1);
    let max_line = options.max_line_bytes;
    let task = tokio::spawn(async move {
        let mut lines = LineReader::new(input, max_line);
        loop {
            let inc = lines.next().await;
            let last = matches!(inc, Incoming::Eof | Incoming::Failed(_));
            if tx.send(Input::Line(inc)).await.is_err() || last {
                return;
            }
        }
    });
    let output = LineOutput(tokio::io::BufWriter::with_capacity(64 * 1024, output));
    run(kernel, Reader { rx, task }, output, options, stop, None).await
}

/// Serves one connection of any transport; see [`serve_connection`].
pub(crate) async fn run<O: Output>(
    kernel: Kernel,
    reader: Reader,
    mut output: O,
    options: &ConnectionOptions,
    stop: CancellationToken,
    remote: Option<Remote>,
) -> ConnectionEnd {
    let (watcher, mut events) = kernel.watcher(options.queue_capacity);
    let mut minter = Minter::new();
    let activity = Activity::new();
    let Reader {
        rx: mut input,
        task: reader,
    } = reader;

    let ready = minter.envelope(
        None,
        None,
        keel_bridge::runtime_ready(options.workspace.clone(), options.available_models.clone()),
    );
    let first = codec::encode_line(&ready);
    let wrote = tokio::time::timeout(CLOSE_GRACE, async {
        output.send(&first).await?;
        output.flush().await
    })
    .await;
    if !matches!(wrote, Ok(Ok(()))) {
        reader.abort();
        return ConnectionEnd::OutputClosed;
    }

    // The writer: one line per envelope, until this connection's own `runtime.stopped`.
    let writer_done = CancellationToken::new();
    let discard = Arc::new(AtomicBool::new(false));
    let access = remote.as_ref().map(|r| r.access.clone());
    let writer = {
        let activity = activity.clone();
        let done = writer_done.clone();
        let discard = discard.clone();
        let ping = remote.as_ref().map(|r| r.ping);
        tokio::spawn(async move {
            let _done = done.drop_guard();
            let mut cursors = Cursors::default();
            let mut ticks = ping.map(|p| tokio::time::interval_at(Instant::now() + p, p));
            let mut line = Vec::with_capacity(1024);
            loop {
                let env = tokio::select! {
                    biased;
                    env = events.recv() => match env {
                        Some(env) => env,
                        None => break,
                    },
                    _ = next_tick(&mut ticks) => {
                        if output.ping().await.is_err() {
                            return Some(ConnectionEnd::OutputClosed);
                        }
                        continue;
                    }
                };
                let own_stop = is_own_stop(&env);
                if !own_stop && discard.load(Ordering::Acquire) {
                    continue;
                }
                let env = match &access {
                    Some(a) => match a.filter(&env) {
                        Some(e) => e,
                        None => continue,
                    },
                    None => std::borrow::Cow::Borrowed(&env),
                };
                line.clear();
                codec::encode_into(&env, &mut line);
                if output.send(&line).await.is_err() {
                    return Some(ConnectionEnd::OutputClosed);
                }
                if events.is_empty() && output.flush().await.is_err() {
                    return Some(ConnectionEnd::OutputClosed);
                }
                activity.touch();
                cursors.note(&env);
                if own_stop {
                    let reason = match &env.event {
                        Event::RuntimeStopped(s) => s.reason.clone(),
                        _ => String::new(),
                    };
                    let _ = output.flush().await;
                    output.finish(Some(&reason)).await;
                    return None;
                }
            }
            if let Some(WatchEnd::Overflow { capacity }) = events.end() {
                tracing::warn!(capacity, "a client fell behind and was disconnected");
                let last = stopped(
                    &mut Minter::new(),
                    None,
                    ConnectionEnd::TooSlow,
                    Some(cursors.resume_from()),
                );
                let _ = tokio::time::timeout(CLOSE_GRACE, async {
                    output.send(&codec::encode_line(&last)).await?;
                    output.flush().await
                })
                .await;
                let _ = tokio::time::timeout(
                    CLOSE_GRACE,
                    output.finish(Some(ConnectionEnd::TooSlow.reason())),
                )
                .await;
                return Some(ConnectionEnd::TooSlow);
            }
            let _ = tokio::time::timeout(CLOSE_GRACE, output.finish(None)).await;
            None
        })
    };

    let mut answer_to = None;
    let cut_off = watcher.ended();
    let lost = async {
        match &remote {
            Some(r) => r.access.lost().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(lost);
    // Idle: nothing read or written for the idle time; a remote connection that
    // watches a session only when its peer answers nothing, pings included.
    let idle_since = || match &remote {
        Some(r) if !watcher.watching().is_empty() => r.heard.last(),
        _ => activity.last(),
    };
    let end = loop {
        let deadline = idle_since() + options.idle;
        let inc = tokio::select! {
            biased;
            _ = stop.cancelled() => break ConnectionEnd::Shutdown,
            _ = writer_done.cancelled() => break ConnectionEnd::OutputClosed,
            _ = cut_off.cancelled() => break ConnectionEnd::TooSlow,
            end = &mut lost => break end,
            inc = input.recv() => inc,
            _ = tokio::time::sleep_until(deadline) => {
                if idle_since() + options.idle <= Instant::now() {
                    break ConnectionEnd::Idle;
                }
                continue;
            }
        };
        activity.touch();
        match inc {
            None | Some(Input::Line(Incoming::Eof)) => break ConnectionEnd::Eof,
            Some(Input::End(end)) => break end,
            Some(Input::Line(Incoming::Failed(e))) => {
                tracing::warn!(error = %e, "client input failed");
                break ConnectionEnd::Eof;
            }
            Some(Input::Line(Incoming::Refused {
                session_id,
                request_id,
                error,
            })) => {
                watcher.publish(&minter.envelope(session_id, request_id, Event::Error(*error)));
            }
            Some(Input::Line(Incoming::Command(cmd))) => {
                tracing::info!(
                    command = cmd.command_type().as_str(),
                    request_id = %cmd.request_id,
                    session_id = cmd.session_id.as_deref().unwrap_or(""),
                    "client command received"
                );
                if matches!(cmd.payload, CommandPayload::RuntimeShutdown(_)) {
                    answer_to = Some(cmd.request_id);
                    break ConnectionEnd::Disconnect;
                }
                if let Some(r) = &remote {
                    if let Err(error) = r.access.check(&cmd) {
                        tracing::info!(
                            command = cmd.command_type().as_str(),
                            token = r.access.token_id(),
                            code = error.code.as_str(),
                            "client command refused"
                        );
                        // Answered as the kernel answers a command it cannot carry out.
                        let event = if matches!(cmd.payload, CommandPayload::RequestSend(_)) {
                            Event::RequestRejected(error)
                        } else {
                            Event::Error(error)
                        };
                        let env = minter.envelope(
                            cmd.session_id.clone(),
                            Some(cmd.request_id.clone()),
                            event,
                        );
                        watcher.publish(&env);
                        continue;
                    }
                }
                // Errors are answered on this watcher's stream by the kernel.
                let _ = watcher.execute(*cmd).await;
            }
        }
    };
    reader.abort();
    tracing::info!(reason = end.reason(), watching = ?watcher.watching(), "client connection closing");

    // A revoked or expired token gets nothing more but the reason.
    if matches!(end, ConnectionEnd::Revoked | ConnectionEnd::Expired) {
        discard.store(true, Ordering::Release);
    }
    if !matches!(end, ConnectionEnd::OutputClosed | ConnectionEnd::TooSlow) {
        watcher.publish(&stopped(&mut minter, answer_to, end, None));
    }
    // Nothing more is queued; what is queued is written while the client reads it: a
    // client that stopped reading has the idle time to start again (a stopping daemon
    // gives a short grace, a revoked token a shorter one).
    watcher.close();
    activity.touch();
    let mut writer = writer;
    let patience = match end {
        ConnectionEnd::Shutdown => CLOSE_GRACE,
        ConnectionEnd::Revoked | ConnectionEnd::Expired => REVOKED_GRACE,
        _ => options.idle,
    };
    let written = tokio::select! {
        w = &mut writer => w.unwrap_or(Some(ConnectionEnd::OutputClosed)),
        _ = stop.cancelled(), if end != ConnectionEnd::Shutdown => {
            writer.abort();
            Some(ConnectionEnd::OutputClosed)
        }
        _ = async {
            loop {
                let deadline = activity.last() + patience;
                tokio::time::sleep_until(deadline).await;
                if activity.last() + patience <= Instant::now() {
                    break;
                }
            }
        } => {
            writer.abort();
            Some(ConnectionEnd::OutputClosed)
        }
    };
    if written == Some(ConnectionEnd::TooSlow)
        || matches!(watcher.end(), Some(WatchEnd::Overflow { .. }))
    {
        return ConnectionEnd::TooSlow;
    }
    end
}

/// The next keep-alive tick; never, for a connection without keep-alive.
async fn next_tick(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}
