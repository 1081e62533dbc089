//! `keel serve`: one per-user daemon that several clients attach to (seed 000's socket
//! transport).
//!
//! The daemon runs one [`Kernel`](keel_kernel::Kernel) and listens on a Unix socket
//! (mode 0600, in a directory only its user may write to; the file permission is the
//! authentication). Every connection speaks the bridge's protocol, framed and decoded
//! by `keel-bridge`'s pieces: first line `runtime.ready`, then commands in and
//! envelopes out, one JSON object per line. A connection receives the answers to its
//! own commands and the events of the sessions it watches (`session.watch`, and those
//! it starts, resumes or forks), through a kernel [`Watcher`](keel_kernel::Watcher) that never
//! holds a session back: a connection that does not read is cut off. A connection
//! closing never stops anything the kernel runs.
//!
//! With `--listen`, the same connections are also served over WebSocket (`ws.rs`,
//! `wss://` through `tls.rs`) to remote clients holding a token (`tokens.rs`) whose
//! role (`roles.rs`, one table) and session binding (`access.rs`) decide what they may
//! send and receive; `settings.rs` reads the `[serve]` configuration.
//!
//! It owns the socket (path, directory checks, lock, stale files, bind), connections
//! (idle timeout, last line) and the daemon's life (idle exit, signals), plus a
//! [`Client`] of either transport. It knows nothing of agents, models or terminals.

mod access;
mod client;
mod conn;
mod daemon;
mod link;
pub mod roles;
mod settings;
mod socket;
pub mod tls;
pub mod tokens;
mod ws;

use std::path::PathBuf;

pub use access::Access;
pub use client::{Client, ConnectError, Connected};
pub use conn::{
    serve_connection, ConnectionEnd, ConnectionOptions, CONNECTION_IDLE, QUEUE_CAPACITY,
};
pub use daemon::{
    run, run_with, serve, stop_on_signals, ServeOptions, ServeOutcome, StopCause, EXIT_WHEN_IDLE,
};
pub use settings::{ListenAddr, RemoteOptions, ServeConfig, AUTH_TIMEOUT, PING_INTERVAL};
pub use socket::{
    answers, bind, check_directory, default_socket_path, lock_path, resolve_socket_path, Bind,
    Listener,
};
pub use ws::{bind_remote, RemoteListener, CLOSE_UNAUTHORIZED};

/// Why a daemon could not start.
#[derive(Debug)]
pub enum ServeError {
    /// The socket's directory could be written by others, or is not this user's.
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Something that is not a socket sits at the socket path.
    NotASocket(PathBuf),
    /// Another process holds the start-up lock but nothing answers on the socket.
    LockedButSilent {
        /// The lock file.
        lock: PathBuf,
        /// The socket path.
        socket: PathBuf,
    },
    /// The remote listener's address cannot be bound.
    Listen {
        /// The address.
        addr: String,
        /// The error.
        source: std::io::Error,
    },
    /// The remote listener's certificate or key cannot be used.
    Tls(String),
    /// A file operation failed.
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::UnsafeDirectory { path, why } => write!(
                f,
                "refusing to put the socket in {}: {why}; use a directory only you can write to (--socket)",
                path.display()
            ),
            ServeError::NotASocket(p) => write!(
                f,
                "{} exists and is not a socket; remove it or choose another --socket",
                p.display()
            ),
            ServeError::LockedButSilent { lock, socket } => write!(
                f,
                "another keel serve holds {} but does not answer on {}",
                lock.display(),
                socket.display()
            ),
            ServeError::Listen { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            ServeError::Tls(why) => write!(f, "cannot serve wss://: {why}"),
            ServeError::Io { what, path, source } => {
                write!(f, "cannot {what} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for ServeError {}
