//! Where the socket lives, whether its directory is safe, and binding it exactly once.
//!
//! Start-up follows seed 000's three cases under a lock, so two daemons started at the
//! same moment end with exactly one listening:
//! 1. take an exclusive `flock` on `<socket>.lock` (held for the daemon's life; the
//!    system drops it when the process dies, even by SIGKILL). Held by another process:
//!    that process is the daemon (or about to be); wait until it answers and report it;
//! 2. with the lock: a socket that answers belongs to a live daemon → report it; a
//!    socket file that refuses connections is stale (its daemon died) → unlink it;
//! 3. bind, then set the file's mode to 0600.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};

use crate::ServeError;

/// How long a starting daemon waits for the holder of the lock to answer.
const HOLDER_WAIT: Duration = Duration::from_secs(10);

/// The socket path for this user: `--socket`, else `KEEL_SOCKET`, else
/// `$XDG_RUNTIME_DIR/keel-$UID.sock`, else `${TMPDIR:-/tmp}/keel-$UID/keel.sock` (a
/// private directory, since the temporary directory itself is world-writable).
pub fn resolve_socket_path(flag: Option<&Path>) -> PathBuf {
    if let Some(p) = flag {
        return p.to_owned();
    }
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(p) = var("KEEL_SOCKET") {
        return PathBuf::from(p);
    }
    default_socket_path(var("XDG_RUNTIME_DIR"), var("TMPDIR"))
}

/// The default path from the two environment variables.
pub fn default_socket_path(
    xdg_runtime_dir: Option<std::ffi::OsString>,
    tmpdir: Option<std::ffi::OsString>,
) -> PathBuf {
    let uid = nix::unistd::getuid().as_raw();
    match xdg_runtime_dir {
        Some(dir) => PathBuf::from(dir).join(format!("keel-{uid}.sock")),
        None => {
            let tmp = tmpdir.map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
            tmp.join(format!("keel-{uid}")).join("keel.sock")
        }
    }
}

/// The lock file next to a socket.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.file_name().map(|n| n.to_owned()).unwrap_or_default();
    name.push(".lock");
    socket.with_file_name(name)
}

fn unsafe_dir(dir: &Path, why: String) -> ServeError {
    ServeError::UnsafeDirectory {
        path: dir.to_owned(),
        why,
    }
}

/// Checks the socket's directory, creating it (mode 0700) when it does not exist: it
/// must be a directory (a symbolic link is followed) owned by this user that neither
/// the group nor others may write to.
pub fn check_directory(dir: &Path) -> Result<(), ServeError> {
    let uid = nix::unistd::getuid().as_raw();
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            match std::fs::DirBuilder::new().mode(0o700).create(dir) {
                Ok(()) => {}
                // Another daemon created it in between: check it as any other.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(ServeError::Io {
                        what: "create the socket directory",
                        path: dir.to_owned(),
                        source: e,
                    })
                }
            }
            std::fs::metadata(dir).map_err(|e| ServeError::Io {
                what: "inspect the socket directory",
                path: dir.to_owned(),
                source: e,
            })?
        }
        Err(e) => {
            return Err(ServeError::Io {
                what: "inspect the socket directory",
                path: dir.to_owned(),
                source: e,
            })
        }
    };
    if !meta.is_dir() {
        return Err(unsafe_dir(dir, "it is not a directory".into()));
    }
    if meta.uid() != uid {
        return Err(unsafe_dir(
            dir,
            format!("it belongs to user {} (this is user {uid})", meta.uid()),
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(unsafe_dir(
            dir,
            format!(
                "its mode {mode:04o} lets {} write to it",
                if mode & 0o002 != 0 {
                    "everyone"
                } else {
                    "the group"
                }
            ),
        ));
    }
    Ok(())
}

/// Whether a daemon answers on `path`.
pub async fn answers(path: &Path) -> bool {
    tokio::net::UnixStream::connect(path).await.is_ok()
}

/// A bound, listening socket and the lock that makes it ours. Dropping it removes the
/// socket file (when it is still ours) and releases the lock.
#[derive(Debug)]
pub struct Listener {
    pub(crate) listener: tokio::net::UnixListener,
    path: PathBuf,
    ino: (u64, u64),
    _lock: Flock<File>,
}

impl Listener {
    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Ok(meta) = std::fs::symlink_metadata(&self.path) {
            if (meta.dev(), meta.ino()) == self.ino {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// The result of [`bind`].
#[derive(Debug)]
pub enum Bind {
    /// This process now listens.
    Listening(Listener),
    /// A daemon already answers on this path.
    AlreadyRunning(PathBuf),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ServeError + 'a {
    move |source| ServeError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Binds the socket at `path` following the start-up rules above.
pub async fn bind(path: &Path) -> Result<Bind, ServeError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    check_directory(&dir)?;
    let lock_file = lock_path(path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&lock_file)
        .map_err(io_err("open the lock file", &lock_file))?;
    let lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            // Another process holds it: it is the daemon, or is becoming it.
            let waited = tokio::time::Instant::now();
            while waited.elapsed() < HOLDER_WAIT {
                if answers(path).await {
                    return Ok(Bind::AlreadyRunning(path.to_owned()));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            return Err(ServeError::LockedButSilent {
                lock: lock_file,
                socket: path.to_owned(),
            });
        }
        Err((_, errno)) => {
            return Err(ServeError::Io {
                what: "lock",
                path: lock_file,
                source: io::Error::from(errno),
            })
        }
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(ServeError::NotASocket(path.to_owned()));
        }
        Ok(_) => {
            if answers(path).await {
                return Ok(Bind::AlreadyRunning(path.to_owned()));
            }
            tracing::info!(path = %path.display(), "removing a stale socket file");
            std::fs::remove_file(path).map_err(io_err("remove the stale socket", path))?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("inspect the socket", path)(e)),
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(io_err("bind", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err("set the mode of", path))?;
    let meta = std::fs::symlink_metadata(path).map_err(io_err("inspect the socket", path))?;
    Ok(Bind::Listening(Listener {
        listener,
        path: path.to_owned(),
        ino: (meta.dev(), meta.ino()),
        _lock: lock,
    }))
}
