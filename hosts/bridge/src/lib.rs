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

use keel_envelope::codec::{self, Limits};
use keel_envelope::commands::CommandPayload;
use keel_envelope::events::{RuntimeReady, RuntimeStopped};
use keel_envelope::ids::{Clock, IdGen, IdKind, SystemClock, UlidGen};
use keel_envelope::types::{Cursor, ModelInfo, PermissionMode};
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

struct Own {
    seq: Sequencer,
    ids: UlidGen,
    clock: SystemClock,
}

impl Own {
    fn envelope(
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
    let mut own = Own {
        seq: Sequencer::new(),
        ids: UlidGen::default(),
        clock: SystemClock,
    };
    let limits = Limits {
        max_line_bytes: options
            .max_line_bytes
            .unwrap_or(codec::DEFAULT_MAX_LINE_BYTES),
    };
    // One ordered stream: the bridge's own envelopes are published through the kernel,
    // so an error for line N is written before anything caused by line N+1.
    let mut events = kernel.subscribe();

    let ready = own.envelope(
        None,
        None,
        Event::RuntimeReady(RuntimeReady {
            protocol_version: keel_envelope::PROTOCOL_VERSION.to_owned(),
            keel_version: env!("CARGO_PKG_VERSION").to_owned(),
            pid: std::process::id(),
            workspace: options.workspace.clone(),
            available_models: options.available_models.clone(),
            permission_modes: PermissionMode::ALL.to_vec(),
            capabilities: CAPABILITIES.iter().map(|s| (*s).to_owned()).collect(),
        }),
    );
    let first = codec::encode_line(&ready);
    if output.write_all(&first).await.is_err() || output.flush().await.is_err() {
        tracing::warn!("bridge output closed before runtime.ready was written");
        return StopReason::OutputClosed;
    }
    tracing::info!(
        max_line_bytes = limits.max_line_bytes,
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
            own.ids.next_id(IdKind::Request),
            None,
            CommandPayload::SessionResume(keel_envelope::commands::SessionResume {
                session_id: id.clone(),
                after_sequence: None::<Cursor>,
                mcp_servers: None,
            }),
        );
        let _ = kernel.execute(cmd).await;
    }

    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut buf = Vec::with_capacity(4096);
    // The requestId of a `runtime.shutdown` command: `runtime.stopped` answers it.
    let mut shutdown_request = None;
    let reason = loop {
        let line = match read_line(&mut reader, limits.max_line_bytes, &mut buf).await {
            Ok(None) => break StopReason::Eof,
            Err(e) => {
                tracing::error!(error = %e, "bridge input failed");
                eprintln!("keel bridge: input failed: {e}");
                break StopReason::Eof;
            }
            Ok(Some(Err((prefix, size)))) => {
                let error = ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!(
                        "line of {size} bytes exceeds the limit of {} bytes",
                        limits.max_line_bytes
                    ),
                )
                .category(keel_envelope::error::ErrorCategory::Bridge)
                .with_detail("reason", "line_too_long")
                .with_detail("limit", limits.max_line_bytes as u64)
                .with_detail("size", size as u64);
                tracing::warn!(size, limit = limits.max_line_bytes, "bridge line too long");
                let rid = codec::scan_request_id(&prefix);
                kernel
                    .publish(own.envelope(None, rid, Event::Error(error)))
                    .await;
                continue;
            }
            Ok(Some(Ok(()))) => &buf,
        };
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        match codec::decode_command(line, limits) {
            Err(e) => {
                tracing::warn!(
                    code = e.error.code.as_str(),
                    reason = e.error.details.get("reason").and_then(|r| r.as_str()).unwrap_or(""),
                    message = %e.error.message,
                    "bridge line refused"
                );
                kernel
                    .publish(own.envelope(e.session_id, e.request_id, Event::Error(e.error)))
                    .await;
            }
            Ok(cmd) => {
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
                let _ = kernel.execute(cmd).await;
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
        Event::RuntimeStopped(RuntimeStopped {
            reason: match reason {
                StopReason::Eof => "eof",
                StopReason::Shutdown => "shutdown",
                StopReason::OutputClosed => "output_closed",
            }
            .to_owned(),
        }),
    );
    kernel.publish(stopped).await;
    match writer.await {
        Ok(true) => reason,
        _ => StopReason::OutputClosed,
    }
}
