//! Framing: newline-delimited JSON-RPC on any async reader and writer, handed to the
//! protocol crate as a line transport ([`Lines`]).
//!
//! The reader keeps what the protocol crate cannot see: blank lines are skipped, a
//! line over the size limit is consumed and answered `-32600` here (never buffered
//! whole), and a line that is not UTF-8 is answered `-32700`. Everything else goes to
//! the protocol crate, which answers malformed JSON and invalid messages itself. The
//! writer is the only code that touches the output: one message per line, flushed
//! whenever nothing else is waiting.

use agent_client_protocol::{ErrorCode, Lines};
use futures::{Sink, Stream};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Lines waiting for the writer (backpressure on a slow client).
const OUTPUT_QUEUE: usize = 1024;
/// Lines read ahead of the protocol's dispatch.
const INPUT_QUEUE: usize = 64;

/// The running framing tasks of one connection.
#[derive(Debug)]
pub(crate) struct Framing {
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
    finish: oneshot::Sender<()>,
}

impl Framing {
    /// Ends the connection's output: whatever was queued is written and flushed.
    pub(crate) async fn finish(self) {
        self.reader.abort();
        let _ = self.finish.send(());
        let _ = self.writer.await;
    }
}

/// The transport handed to the protocol crate: its outgoing lines and incoming lines.
pub(crate) type Transport = Lines<
    std::pin::Pin<Box<dyn Sink<String, Error = std::io::Error> + Send>>,
    std::pin::Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>,
>;

/// Starts the reader and writer over `input` and `output`.
pub(crate) fn start<R, W>(input: R, output: W, limit: usize) -> (Transport, Framing)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = mpsc::channel::<String>(OUTPUT_QUEUE);
    let (in_tx, in_rx) = mpsc::channel::<std::io::Result<String>>(INPUT_QUEUE);
    let (finish_tx, finish_rx) = oneshot::channel();
    let writer = tokio::spawn(write_lines(output, out_rx, finish_rx));
    let reader = tokio::spawn(read_lines(input, limit, in_tx, out_tx.clone()));
    let sink = futures::sink::unfold(out_tx, |tx, line: String| async move {
        tx.send(line)
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok::<_, std::io::Error>(tx)
    });
    let incoming = futures::stream::unfold(in_rx, |mut rx| async move {
        rx.recv().await.map(|line| (line, rx))
    });
    let transport = Lines::new(
        Box::pin(sink) as std::pin::Pin<Box<dyn Sink<String, Error = std::io::Error> + Send>>,
        Box::pin(incoming) as std::pin::Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>,
    );
    (
        transport,
        Framing {
            reader,
            writer,
            finish: finish_tx,
        },
    )
}

/// A JSON-RPC error response with a null id (the request could not be read).
pub(crate) fn uncorrelated_error(code: ErrorCode, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code.value(), "message": message}})
        .to_string()
}

async fn write_lines<W: AsyncWrite + Unpin>(
    output: W,
    mut lines: mpsc::Receiver<String>,
    mut finish: oneshot::Receiver<()>,
) {
    let mut output = tokio::io::BufWriter::with_capacity(64 * 1024, output);
    loop {
        let line = tokio::select! {
            biased;
            line = lines.recv() => match line {
                Some(line) => line,
                None => break,
            },
            _ = &mut finish => {
                // The connection is over: write what is queued, then stop.
                while let Ok(line) = lines.try_recv() {
                    if output.write_all(line.as_bytes()).await.is_err()
                        || output.write_all(b"\n").await.is_err()
                    {
                        return;
                    }
                }
                break;
            }
        };
        if output.write_all(line.as_bytes()).await.is_err()
            || output.write_all(b"\n").await.is_err()
        {
            return;
        }
        if lines.is_empty() && output.flush().await.is_err() {
            return;
        }
    }
    let _ = output.flush().await;
}

async fn read_lines<R: AsyncRead + Unpin>(
    input: R,
    limit: usize,
    lines: mpsc::Sender<std::io::Result<String>>,
    errors: mpsc::Sender<String>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut buf = Vec::with_capacity(4096);
    loop {
        let line = match read_line(&mut reader, limit, &mut buf).await {
            Ok(None) => break,
            Err(e) => {
                tracing::warn!("keel acp: input failed: {e}");
                break;
            }
            Ok(Some(Err(size))) => {
                let message = format!("message of {size} bytes exceeds the limit of {limit} bytes");
                let _ = errors
                    .send(uncorrelated_error(ErrorCode::INVALID_REQUEST, &message))
                    .await;
                continue;
            }
            Ok(Some(Ok(()))) => &buf,
        };
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let text = match std::str::from_utf8(line) {
            Ok(t) => t.trim_end_matches(['\n', '\r']).to_owned(),
            Err(e) => {
                let message = format!("parse error: the message is not UTF-8 ({e})");
                let _ = errors
                    .send(uncorrelated_error(ErrorCode::PARSE_ERROR, &message))
                    .await;
                continue;
            }
        };
        if lines.send(Ok(text)).await.is_err() {
            break;
        }
    }
}

/// Reads one line of at most `limit` bytes: `Ok(None)` at EOF, `Ok(Some(Err(n)))`
/// for an oversized line of `n` bytes (consumed to its end, never buffered whole).
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    limit: usize,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<Result<(), usize>>> {
    buf.clear();
    let mut total = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match total {
                0 => None,
                n if n > limit => Some(Err(n)),
                _ => Some(Ok(())),
            });
        }
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let n = chunk.len();
        total += n;
        if total <= limit + 1 {
            buf.extend_from_slice(chunk);
        }
        reader.consume(n);
        if done {
            return Ok(Some(if total > limit + 1 {
                Err(total)
            } else {
                Ok(())
            }));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn oversized_lines_are_consumed_and_the_next_one_is_read() {
        let input = format!("{}\nsmall\n", "x".repeat(100));
        let mut reader = BufReader::with_capacity(16, input.as_bytes());
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut reader, 10, &mut buf).await.unwrap(),
            Some(Err(101))
        );
        assert_eq!(
            read_line(&mut reader, 10, &mut buf).await.unwrap(),
            Some(Ok(()))
        );
        assert_eq!(buf, b"small\n");
        assert_eq!(read_line(&mut reader, 10, &mut buf).await.unwrap(), None);
    }
}
