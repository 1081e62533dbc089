//! Keel's JSON-lines protocol server: commands in, envelopes out.
//!
//! The server is transport-agnostic: [`serve`] takes any async reader and writer, so
//! the same code serves stdio (`keel bridge`) and could serve a Unix socket. It holds
//! no agent logic: every command goes to [`Kernel::execute`] unchanged, and every
//! envelope the kernel emits is written as one line.
//!
//! Guarantees:
//! - the first line is `runtime.ready`;
//! - every output line is one envelope, nothing else;
//! - a bad line (malformed, oversized, unknown) is answered with an `error` envelope
//!   (`REQUEST_INVALID` / `VERSION_MISMATCH`, echoing the requestId when readable) and
//!   reading goes on;
//! - stdin EOF or `runtime.shutdown` interrupts running requests, flushes the store,
//!   emits `session.closed` for open sessions and `runtime.stopped`, and returns;
//! - output is bounded: a slow reader slows the kernel down (backpressure) instead of
//!   growing memory.
//!
//! Its pieces serve other transports of the same protocol (the `keel serve` daemon):
//! [`LineReader`] (framing, size limit, decoding into [`Incoming`]), [`Minter`] (the
//! transport's own envelopes) and [`runtime_ready`].

use keel_envelope::codec::{self, Limits};
use keel_envelope::commands::CommandPayload;
use keel_envelope::events::{RuntimeReady, RuntimeStopped};
use keel_envelope::ids::{Clock, IdGen, IdKind, SystemClock, UlidGen};
use keel_envelope::types::{ModelInfo, PermissionMode};
use keel_envelope::{Envelope, ErrorCode, ErrorPayload, Event, Sequencer, Source};
use keel_kernel::Kernel;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Capabilities announced in `runtime.ready`.
pub const CAPABILITIES: &[&str] = &[
    "approvals",
    "plan",
    "ask",
    "interrupt",
    "queue",
    "steer",
    "resume",
    "replay",
    "compaction",
    "rules",
    "history",
    "watch",
    "mcp",
    "host_tools",
];

/// Options of a bridge.
#[derive(Debug, Clone, Default)]
pub struct BridgeOptions {
    /// The workspace shown in `runtime.ready`.
    pub workspace: Option<String>,
    /// Models offered to the host.
    pub available_models: Vec<ModelInfo>,
    /// A session to resume right after `runtime.ready`.
    pub resume_session: Option<String>,
    /// Maximum bytes per input line.
    pub max_line_bytes: Option<usize>,
}

/// How the server ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The input ended.
    Eof,
    /// A `runtime.shutdown` command.
    Shutdown,
    /// Writing failed (the host went away).
    OutputClosed,
}

/// Makes a transport's own envelopes (`runtime.ready`, decode errors,
/// `runtime.stopped`): source `bridge`, runtime-minted ids, its own sequence counter.
#[derive(Debug, Default)]
pub struct Minter {
    seq: Sequencer,
    ids: UlidGen,
    clock: SystemClock,
}

impl Minter {
    /// A minter with fresh counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fresh runtime-minted request id.
    pub fn request_id(&mut self) -> String {
        self.ids.next_id(IdKind::Request)
    }

    /// An envelope of `event` on `request_id`'s stream (a fresh one when `None`).
    pub fn envelope(
        &mut self,
        session_id: Option<String>,
        request_id: Option<String>,
        event: Event,
    ) -> Envelope {
        let request_id = request_id.unwrap_or_else(|| self.ids.next_id(IdKind::Request));
        Envelope {
            version: keel_envelope::PROTOCOL_VERSION.to_owned(),
            session_id,
            sequence: self.seq.next(&request_id),
            request_id,
            event_id: self.ids.next_id(IdKind::Event),
            timestamp: self.clock.now_ms(),
            source: Source::Bridge,
            event,
            meta: None,
        }
    }
}

/// The `runtime.ready` event of a transport.
pub fn runtime_ready(workspace: Option<String>, available_models: Vec<ModelInfo>) -> Event {
    Event::RuntimeReady(
        RuntimeReady::new(
            keel_envelope::PROTOCOL_VERSION.to_owned(),
            env!("CARGO_PKG_VERSION").to_owned(),
            std::process::id(),
            available_models,
            PermissionMode::ALL.to_vec(),
            CAPABILITIES
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<_>>(),
        )
        .workspace(workspace),
    )
}

/// What one input line turned out to be.
#[derive(Debug)]
pub enum Incoming {
    /// A decoded command.
    Command(Box<keel_envelope::Command>),
    /// A line that was refused (malformed, oversized, unknown type, …): answer it
    /// with an `error` event carrying this payload and ids.
    Refused {
        /// The line's `sessionId`, when it could be read.
        session_id: Option<String>,
        /// The line's `requestId`, when it could be read.
        request_id: Option<String>,
        /// Why.
        error: Box<ErrorPayload>,
    },
    /// The input ended.
    Eof,
    /// Reading failed.
    Failed(std::io::Error),
}

/// Reads command lines: newline framing with a size limit, blank lines skipped, each
/// line decoded with the envelope codec.
#[derive(Debug)]
pub struct LineReader<R> {
    reader: BufReader<R>,
    buf: Vec<u8>,
    limits: Limits,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of lines of at most `max_line_bytes` (default
    /// [`codec::DEFAULT_MAX_LINE_BYTES`]).
    pub fn new(input: R, max_line_bytes: Option<usize>) -> Self {
        Self {
            reader: BufReader::with_capacity(64 * 1024, input),
            buf: Vec::with_capacity(4096),
            limits: Limits {
                max_line_bytes: max_line_bytes.unwrap_or(codec::DEFAULT_MAX_LINE_BYTES),
            },
        }
    }

    /// The line size limit.
    pub fn max_line_bytes(&self) -> usize {
        self.limits.max_line_bytes
    }

    /// The next command or refused line. Cancel-safe only between lines: dropping the
    /// future in the middle of a line loses that line's beginning.
    pub async fn next(&mut self) -> Incoming {
        loop {
            let limit = self.limits.max_line_bytes;
            match read_line(&mut self.reader, limit, &mut self.buf).await {
                Ok(None) => return Incoming::Eof,
                Err(e) => return Incoming::Failed(e),
                Ok(Some(Err((prefix, size)))) => {
                    let error = ErrorPayload::new(
                        ErrorCode::RequestInvalid,
                        format!("line of {size} bytes exceeds the limit of {limit} bytes"),
                    )
                    .category(keel_envelope::error::ErrorCategory::Bridge)
                    .with_detail("reason", "line_too_long")
                    .with_detail("limit", limit as u64)
                    .with_detail("size", size as u64);
                    tracing::warn!(size, limit, "bridge line too long");
                    return Incoming::Refused {
                        session_id: None,
                        request_id: codec::scan_request_id(&prefix),
                        error: Box::new(error),
                    };
                }
                Ok(Some(Ok(()))) => {}
            }
            if self.buf.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            return match codec::decode_command(&self.buf, self.limits) {
                Err(e) => {
                    tracing::warn!(
                        code = e.error.code.as_str(),
                        reason = e.error.details.get("reason").and_then(|r| r.as_str()).unwrap_or(""),
                        message = %e.error.message,
                        "bridge line refused"
                    );
                    Incoming::Refused {
                        session_id: e.session_id,
                        request_id: e.request_id,
                        error: Box::new(e.error),
                    }
                }
                Ok(cmd) => Incoming::Command(Box::new(cmd)),
            };
        }
    }
}

/// Reads one line of at most `limit` bytes. Returns `Ok(None)` at EOF; an oversized
/// line is consumed to its end and returned as `Err(prefix)` holding its first bytes.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    limit: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Result<(), (Vec<u8>, usize)>>> {
    buf.clear();
    let mut total = 0usize;
    let mut oversized = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if total == 0 {
                None
            } else if oversized {
                Some(Err((std::mem::take(buf), total)))
            } else {
                Some(Ok(()))
            });
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let n = chunk.len();
        total += n;
        if !oversized {
            if total > limit + 1 {
                oversized = true;
                let keep = (64 * 1024usize).saturating_sub(buf.len()).min(n);
                buf.extend_from_slice(&chunk[..keep]);
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        reader.consume(n);
        if done {
            return Ok(Some(if oversized {
                Err((std::mem::take(buf), total))
            } else {
                Ok(())
            }));
        }
    }
}

/// Serves one connection until EOF, shutdown or a broken output.
pub async fn serve<R, W>(
    kernel: Kernel,
    input: R,
    mut output: W,
    options: BridgeOptions,
) -> StopReason
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut own = Minter::new();
    let mut lines = LineReader::new(input, options.max_line_bytes);
    // One ordered stream: the bridge's own envelopes are published through the kernel,
    // so an error for line N is written before anything caused by line N+1.
    let mut events = kernel.subscribe();

    let ready = own.envelope(
        None,
        None,
        runtime_ready(options.workspace.clone(), options.available_models.clone()),
    );
    let first = codec::encode_line(&ready);
    if output.write_all(&first).await.is_err() || output.flush().await.is_err() {
        tracing::warn!("bridge output closed before runtime.ready was written");
        return StopReason::OutputClosed;
    }
    tracing::info!(
        max_line_bytes = lines.max_line_bytes(),
        resume = options.resume_session.as_deref().unwrap_or(""),
        "bridge ready"
    );

    // The writer: one line per envelope; `runtime.stopped` is the last.
    let mut output = tokio::io::BufWriter::with_capacity(64 * 1024, output);
    let writer = tokio::spawn(async move {
        let mut line = Vec::with_capacity(1024);
        while let Some(env) = events.recv().await {
            line.clear();
            codec::encode_into(&env, &mut line);
            tracing::trace!(
                event = env.type_name(),
                request_id = %env.request_id,
                bytes = line.len(),
                "bridge envelope written"
            );
            if output.write_all(&line).await.is_err() {
                return false;
            }
            // Flush when nothing else is waiting, so hosts see events promptly.
            if events.is_empty() && output.flush().await.is_err() {
                return false;
            }
            if matches!(env.event, Event::RuntimeStopped(_)) {
                break;
            }
        }
        output.flush().await.is_ok()
    });

    if let Some(id) = &options.resume_session {
        let cmd = keel_envelope::Command::new(
            own.request_id(),
            None,
            CommandPayload::SessionResume(keel_envelope::commands::SessionResume::new(id.clone())),
        );
        let _ = kernel.execute(cmd).await;
    }

    // The requestId of a `runtime.shutdown` command: `runtime.stopped` answers it.
    let mut shutdown_request = None;
    let reason = loop {
        match lines.next().await {
            Incoming::Eof => break StopReason::Eof,
            Incoming::Failed(e) => {
                tracing::error!(error = %e, "bridge input failed");
                eprintln!("keel bridge: input failed: {e}");
                break StopReason::Eof;
            }
            Incoming::Refused {
                session_id,
                request_id,
                error,
            } => {
                kernel
                    .publish(own.envelope(session_id, request_id, Event::Error(*error)))
                    .await;
            }
            Incoming::Command(cmd) => {
                tracing::info!(
                    command = cmd.command_type().as_str(),
                    request_id = %cmd.request_id,
                    session_id = cmd.session_id.as_deref().unwrap_or(""),
                    "bridge command received"
                );
                if matches!(cmd.payload, CommandPayload::RuntimeShutdown(_)) {
                    shutdown_request = Some(cmd.request_id);
                    break StopReason::Shutdown;
                }
                // Errors are answered on the event stream by the kernel.
                let _ = kernel.execute(*cmd).await;
            }
        }
        if writer.is_finished() {
            tracing::warn!("bridge output closed");
            break StopReason::OutputClosed;
        }
    };
    tracing::info!(reason = ?reason, "bridge stopping");

    kernel
        .shutdown(if reason == StopReason::Shutdown {
            "shutdown"
        } else {
            "eof"
        })
        .await;
    let stopped = own.envelope(
        None,
        shutdown_request,
        Event::RuntimeStopped(RuntimeStopped::new(
            match reason {
                StopReason::Eof => "eof",
                StopReason::Shutdown => "shutdown",
                StopReason::OutputClosed => "output_closed",
            }
            .to_owned(),
        )),
    );
    kernel.publish(stopped).await;
    match writer.await {
        Ok(true) => reason,
        _ => StopReason::OutputClosed,
    }
}
