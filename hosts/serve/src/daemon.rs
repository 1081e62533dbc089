//! The daemon: one kernel, a listening socket, one task per connection, and an exit
//! once nothing has happened for a while.

use std::path::PathBuf;
use std::time::Duration;

use keel_kernel::Kernel;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::conn::{serve_connection, ConnectionEnd, ConnectionOptions};
use crate::socket::{self, Bind, Listener};
use crate::ws::RemoteListener;
use crate::ServeError;

/// How long a daemon with no connection and nothing running waits before it exits.
pub const EXIT_WHEN_IDLE: Duration = Duration::from_secs(600);

/// Options of a daemon.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The socket path (see [`crate::resolve_socket_path`]).
    pub socket: PathBuf,
    /// Settings of every connection.
    pub connection: ConnectionOptions,
    /// Exit after this long without a connection and with nothing running (a request,
    /// also one waiting for an answer, or a background task); `None`: never.
    pub exit_when_idle: Option<Duration>,
}

/// How a daemon ended.
#[derive(Debug)]
pub enum ServeOutcome {
    /// Another daemon already answers on the socket; this one never listened.
    AlreadyRunning(PathBuf),
    /// This daemon listened, then stopped.
    Stopped(StopCause),
}

/// Why a listening daemon stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// No connection and nothing running for the idle time.
    Idle,
    /// Its stop token was cancelled (a signal).
    Stopped,
}

/// Binds the socket and serves until `stop` is cancelled or the daemon has been idle
/// long enough. Another daemon answering on the socket is not an error.
pub async fn serve(
    kernel: Kernel,
    options: ServeOptions,
    stop: CancellationToken,
) -> Result<ServeOutcome, ServeError> {
    match socket::bind(&options.socket).await? {
        Bind::AlreadyRunning(p) => Ok(ServeOutcome::AlreadyRunning(p)),
        Bind::Listening(listener) => {
            tracing::info!(socket = %listener.path().display(), "daemon listening");
            Ok(ServeOutcome::Stopped(
                run(kernel, listener, &options, stop).await,
            ))
        }
    }
}

/// Serves on a bound listener. On the way out every session is closed (watchers see
/// `session.closed`), every connection gets `runtime.stopped {reason: "shutdown"}`,
/// and the socket file is removed.
pub async fn run(
    kernel: Kernel,
    listener: Listener,
    options: &ServeOptions,
    stop: CancellationToken,
) -> StopCause {
    run_with(kernel, listener, None, options, stop).await
}

/// The next connection of the remote listener; never, without one.
async fn accept_remote(
    remote: Option<&RemoteListener>,
) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
    match remote {
        Some(r) => r.accept().await,
        None => std::future::pending().await,
    }
}

/// As [`run`], also serving the remote listener's connections (`keel serve --listen`).
pub async fn run_with(
    kernel: Kernel,
    listener: Listener,
    remote: Option<RemoteListener>,
    options: &ServeOptions,
    stop: CancellationToken,
) -> StopCause {
    let conn_stop = CancellationToken::new();
    let mut conns: JoinSet<ConnectionEnd> = JoinSet::new();
    let tick = options
        .exit_when_idle
        .map_or(Duration::from_secs(3600), |d| {
            d.clamp(Duration::from_millis(10), Duration::from_secs(1))
        });
    let mut idle_since = Some(Instant::now());
    let cause = loop {
        tokio::select! {
            _ = stop.cancelled() => break StopCause::Stopped,
            accepted = listener.listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let (r, w) = stream.into_split();
                    let k = kernel.clone();
                    let opts = options.connection.clone();
                    let token = conn_stop.child_token();
                    conns.spawn(async move { serve_connection(k, r, w, &opts, token).await });
                    tracing::info!(connections = conns.len(), "client connected");
                }
                Err(e) => {
                    // Out of descriptors and the like: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            accepted = accept_remote(remote.as_ref()) => match accepted {
                Ok((tcp, peer)) => {
                    if let Some(r) = &remote {
                        let serve = r.serve(
                            kernel.clone(),
                            tcp,
                            peer,
                            options.connection.clone(),
                            conn_stop.child_token(),
                        );
                        conns.spawn(serve);
                        tracing::info!(%peer, connections = conns.len(), "remote client connected");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "remote accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(done) = conns.join_next(), if !conns.is_empty() => {
                tracing::info!(
                    reason = done.map(ConnectionEnd::reason).unwrap_or("panicked"),
                    connections = conns.len(),
                    "client disconnected"
                );
            }
            _ = tokio::time::sleep(tick) => {}
        }
        if conns.is_empty() && !kernel.is_busy() {
            let since = *idle_since.get_or_insert_with(Instant::now);
            if options
                .exit_when_idle
                .is_some_and(|limit| since.elapsed() >= limit)
            {
                break StopCause::Idle;
            }
        } else {
            idle_since = None;
        }
    };
    tracing::info!(cause = ?cause, "daemon stopping");
    kernel.shutdown("shutdown").await;
    conn_stop.cancel();
    while conns.join_next().await.is_some() {}
    drop(listener);
    drop(remote);
    cause
}

/// A token cancelled by SIGTERM or SIGINT; SIGHUP is ignored (the daemon outlives the
/// terminal that started it).
pub fn stop_on_signals() -> std::io::Result<CancellationToken> {
    use tokio::signal::unix::{signal, SignalKind};
    let token = CancellationToken::new();
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let t = token.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = int.recv() => break,
                _ = hup.recv() => continue,
            }
        }
        t.cancel();
    });
    Ok(token)
}
