//! One client connection: the bridge's protocol (first line `runtime.ready`, then
//! commands in and envelopes out) over any reader and writer, with a watcher of the
//! shared kernel instead of the whole event stream, an idle timeout, and a last line
//! saying why the connection ends.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_bridge::{Incoming, LineReader, Minter};
use keel_envelope::commands::CommandPayload;
use keel_envelope::events::RuntimeStopped;
use keel_envelope::types::ModelInfo;
use keel_envelope::{codec, Envelope, Event, Source};
use keel_kernel::{Kernel, WatchEnd};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long a connection may stay silent both ways before it is closed (seed 000).
pub const CONNECTION_IDLE: Duration = Duration::from_secs(90);

/// Live events a connection may have waiting unread before it is cut off.
pub const QUEUE_CAPACITY: usize = 4096;

/// How long the last lines of a closing connection may take to write.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Settings of every connection of a daemon.
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    /// Silence (no line in, no line out) after which a connection is closed.
    pub idle: Duration,
    /// Live events waiting unread after which a connection is cut off.
    pub queue_capacity: usize,
    /// Maximum bytes per input line (default: the codec's).
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
        }
    }
}

/// When the connection last read or wrote a line.
#[derive(Debug, Clone)]
struct Activity(Arc<Mutex<Instant>>);

impl Activity {
    fn new() -> Self {
        Self(Arc::new(Mutex::new(Instant::now())))
    }
    fn touch(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
    fn last(&self) -> Instant {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn stopped(minter: &mut Minter, request_id: Option<String>, end: ConnectionEnd) -> Envelope {
    minter.envelope(
        None,
        request_id,
        Event::RuntimeStopped(RuntimeStopped {
            reason: end.reason().to_owned(),
            resume_from: None,
        }),
    )
}

fn is_own_stop(env: &Envelope) -> bool {
    env.source == Source::Bridge && matches!(env.event, Event::RuntimeStopped(_))
}

/// Serves one connection until its input ends, it sends `runtime.shutdown`, it stays
/// idle, it falls too far behind, its output breaks, or `stop` is cancelled (the
/// daemon is stopping; its sessions have been closed already). Never stops anything
/// the kernel runs.
pub async fn serve_connection<R, W>(
    kernel: Kernel,
    input: R,
    mut output: W,
    options: &ConnectionOptions,
    stop: CancellationToken,
) -> ConnectionEnd
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (watcher, mut events) = kernel.watcher(options.queue_capacity);
    let mut minter = Minter::new();
    let activity = Activity::new();

    let ready = minter.envelope(
        None,
        None,
        keel_bridge::runtime_ready(options.workspace.clone(), options.available_models.clone()),
    );
    let first = codec::encode_line(&ready);
    let wrote = tokio::time::timeout(CLOSE_GRACE, async {
        output.write_all(&first).await?;
        output.flush().await
    })
    .await;
    if !matches!(wrote, Ok(Ok(()))) {
        return ConnectionEnd::OutputClosed;
    }

    // The writer: one line per envelope, until this connection's own `runtime.stopped`.
    let writer_done = CancellationToken::new();
    let writer = {
        let activity = activity.clone();
        let done = writer_done.clone();
        tokio::spawn(async move {
            let _done = done.drop_guard();
            let mut output = tokio::io::BufWriter::with_capacity(64 * 1024, output);
            let mut line = Vec::with_capacity(1024);
            while let Some(env) = events.recv().await {
                line.clear();
                codec::encode_into(&env, &mut line);
                if output.write_all(&line).await.is_err() {
                    return Some(ConnectionEnd::OutputClosed);
                }
                if events.is_empty() && output.flush().await.is_err() {
                    return Some(ConnectionEnd::OutputClosed);
                }
                activity.touch();
                if is_own_stop(&env) {
                    let _ = output.flush().await;
                    return None;
                }
            }
            if let Some(WatchEnd::Overflow { capacity }) = events.end() {
                tracing::warn!(capacity, "a client fell behind and was disconnected");
                let last = stopped(&mut Minter::new(), None, ConnectionEnd::TooSlow);
                let _ = tokio::time::timeout(CLOSE_GRACE, async {
                    output.write_all(&codec::encode_line(&last)).await?;
                    output.flush().await
                })
                .await;
                return Some(ConnectionEnd::TooSlow);
            }
            let _ = tokio::time::timeout(CLOSE_GRACE, output.flush()).await;
            None
        })
    };

    // The reader runs on its own so that a line is never cut by a timer.
    let (line_tx, mut line_rx) = mpsc::channel::<Incoming>(1);
    let max_line = options.max_line_bytes;
    let reader = tokio::spawn(async move {
        let mut lines = LineReader::new(input, max_line);
        loop {
            let inc = lines.next().await;
            let last = matches!(inc, Incoming::Eof | Incoming::Failed(_));
            if line_tx.send(inc).await.is_err() || last {
                return;
            }
        }
    });

    let mut answer_to = None;
    let cut_off = watcher.ended();
    let end = loop {
        let deadline = activity.last() + options.idle;
        let inc = tokio::select! {
            biased;
            _ = stop.cancelled() => break ConnectionEnd::Shutdown,
            _ = writer_done.cancelled() => break ConnectionEnd::OutputClosed,
            _ = cut_off.cancelled() => break ConnectionEnd::TooSlow,
            inc = line_rx.recv() => inc,
            _ = tokio::time::sleep_until(deadline) => {
                if activity.last() + options.idle <= Instant::now() {
                    break ConnectionEnd::Idle;
                }
                continue;
            }
        };
        activity.touch();
        match inc {
            None | Some(Incoming::Eof) => break ConnectionEnd::Eof,
            Some(Incoming::Failed(e)) => {
                tracing::warn!(error = %e, "client input failed");
                break ConnectionEnd::Eof;
            }
            Some(Incoming::Refused {
                session_id,
                request_id,
                error,
            }) => {
                watcher.publish(&minter.envelope(session_id, request_id, Event::Error(error)));
            }
            Some(Incoming::Command(cmd)) => {
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
                // Errors are answered on this watcher's stream by the kernel.
                let _ = watcher.execute(*cmd).await;
            }
        }
    };
    reader.abort();
    tracing::info!(reason = end.reason(), watching = ?watcher.watching(), "client connection closing");

    if !matches!(end, ConnectionEnd::OutputClosed | ConnectionEnd::TooSlow) {
        watcher.publish(&stopped(&mut minter, answer_to, end));
    }
    // Nothing more is queued; what is queued is written while the client reads it: a
    // client that stopped reading has the idle time to start again (a stopping daemon
    // gives a short grace).
    watcher.close();
    activity.touch();
    let mut writer = writer;
    let patience = if end == ConnectionEnd::Shutdown {
        CLOSE_GRACE
    } else {
        options.idle
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
