//! A real PostgreSQL server for tests: Debian's `postgresql` package, a cluster made
//! with `initdb` in a temporary directory, started with `pg_ctl` on a Unix socket in
//! that directory only (`listen_addresses = ''`), with a random port number naming
//! the socket.
//!
//! PostgreSQL refuses to run as root; as root (CI), the directory is given to the
//! `postgres` user and every server command runs through `runuser -u postgres --`.
//! The binaries are looked for under `/usr/lib/postgresql/*/bin` (the newest version
//! first), or in `KEEL_TEST_PG_BIN` when set.
//!
//! Users: `postgres` (trust over the socket) and [`PASSWORD_USER`], who must give
//! [`PASSWORD`] (`scram-sha-256`), for tests of a wrong password.
//!
//! A server stops when its [`PgServer`] is dropped (`pg_ctl stop -m immediate`). A
//! watchdog shell started beside it stops it and removes its directory should the
//! test process die without dropping it (a `static` shared server, a `SIGKILL`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use tempfile::TempDir;

/// The user whose password is checked.
pub const PASSWORD_USER: &str = "keel_pw";
/// [`PASSWORD_USER`]'s password.
pub const PASSWORD: &str = "right-horse-battery";

/// Numbers the databases [`PgServer::create_database`] makes.
static DATABASES: AtomicU64 = AtomicU64::new(0);

/// A running PostgreSQL server of its own.
#[derive(Debug)]
pub struct PgServer {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    watchdog: Mutex<Option<Child>>,
}

/// Where the PostgreSQL binaries are.
pub fn find_bin() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("KEEL_TEST_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| {
            format!("no PostgreSQL under /usr/lib/postgresql ({e}): apt-get install postgresql")
        })?
        .flatten()
        .filter_map(|d| {
            let version = d.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = d.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "no initdb under /usr/lib/postgresql/*/bin: apt-get install postgresql".into()
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .is_some_and(|s| s.trim() == "0")
}

fn id_of(flag: &str) -> Result<u32, String> {
    let out = Command::new("id")
        .args([flag, "postgres"])
        .output()
        .map_err(|e| format!("id {flag} postgres: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|_| "there is no postgres user (apt-get install postgresql creates it)".into())
}

/// A port number for the socket's name (no TCP port is opened).
fn random_port() -> u16 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mix = u64::from(nanos)
        ^ (u64::from(std::process::id()) << 16)
        ^ DATABASES
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9);
    20_000 + (mix % 40_000) as u16
}

/// Percent-encodes a socket directory for the host part of a URL.
fn encode_host(path: &Path) -> String {
    let mut out = String::new();
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl PgServer {
    /// Makes a cluster and starts it (about a second), with `fsync = off`: tests
    /// need no protection from a power loss.
    pub fn start() -> Result<Self, String> {
        Self::start_with_fsync(false)
    }

    /// Makes a cluster and starts it; `fsync` on makes every commit reach the disk,
    /// as in production (benchmarks).
    pub fn start_with_fsync(fsync: bool) -> Result<Self, String> {
        let bin = find_bin()?;
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("keel-pg-")
            .tempdir()
            .map_err(|e| format!("cannot make a temporary directory: {e}"))?;
        if as_postgres {
            std::os::unix::fs::chown(dir.path(), Some(id_of("-u")?), Some(id_of("-g")?))
                .map_err(|e| format!("cannot give {} to postgres: {e}", dir.path().display()))?;
        }
        let server = Self {
            dir,
            bin,
            port: random_port(),
            as_postgres,
            watchdog: Mutex::new(None),
        };
        let data = server.data_dir();
        server.run(
            "initdb",
            &[
                "-D",
                &data.to_string_lossy(),
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
        )?;
        let conf = format!(
            "\nlisten_addresses = ''\nunix_socket_directories = '{}'\nport = {}\nfsync = {}\n\
             synchronous_commit = on\nmax_connections = 200\nshared_buffers = 32MB\n",
            server.socket_dir().display(),
            server.port,
            if fsync { "on" } else { "off" },
        );
        append(&data.join("postgresql.conf"), &conf)?;
        let hba = format!("local all {PASSWORD_USER} scram-sha-256\nlocal all all trust\n");
        std::fs::write(data.join("pg_hba.conf"), hba).map_err(|e| format!("pg_hba.conf: {e}"))?;
        server.pg_ctl(&["start"])?;
        server.start_watchdog()?;
        server.psql(
            "postgres",
            &format!("CREATE ROLE {PASSWORD_USER} LOGIN SUPERUSER PASSWORD '{PASSWORD}'"),
        )?;
        Ok(server)
    }

    /// A server shared by the tests of one process (started on first use); give each
    /// test a database of its own ([`PgServer::create_database`]). Tests that stop or
    /// restart a server start their own.
    pub fn shared() -> &'static PgServer {
        static SHARED: OnceLock<Result<PgServer, String>> = OnceLock::new();
        match SHARED.get_or_init(PgServer::start) {
            Ok(s) => s,
            Err(e) => panic!("cannot start PostgreSQL for the tests: {e}"),
        }
    }

    /// The cluster's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The directory of the socket.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The port number naming the socket.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The URL of `database` as the superuser `postgres`.
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@{}:{}/{database}",
            encode_host(self.socket_dir()),
            self.port
        )
    }

    /// The URL of `database` as `user` with `password`.
    pub fn url_as(&self, user: &str, password: &str, database: &str) -> String {
        format!(
            "postgres://{user}:{password}@{}:{}/{database}",
            encode_host(self.socket_dir()),
            self.port
        )
    }

    /// Creates an empty database of its own for a test; answers its URL.
    pub fn create_database(&self) -> String {
        let name = format!(
            "keel_test_{}_{}",
            std::process::id(),
            DATABASES.fetch_add(1, Ordering::Relaxed)
        );
        if let Err(e) = self.psql("postgres", &format!("CREATE DATABASE {name}")) {
            panic!("cannot create a test database: {e}");
        }
        self.url(&name)
    }

    /// Runs SQL with `psql` as `postgres` (the test's own statements, not the store's).
    pub fn psql(&self, database: &str, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.socket_dir())
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                database,
                "-c",
                sql,
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "psql {sql:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Restarts the server at once (`pg_ctl restart -m immediate`): every connection
    /// drops; committed data stays.
    pub fn restart(&self) -> Result<(), String> {
        self.pg_ctl(&["-m", "immediate", "restart"])
    }

    /// Stops the server (`-m immediate`); [`PgServer::resume`] starts it again.
    pub fn stop(&self) -> Result<(), String> {
        self.pg_ctl(&["-m", "immediate", "stop"])
    }

    /// Starts a server stopped with [`PgServer::stop`].
    pub fn resume(&self) -> Result<(), String> {
        self.pg_ctl(&["start"])
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let out = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        Err(format!(
            "{program} {args:?} failed: {}{}\n{}",
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ))
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        let data = self.data_dir().to_string_lossy().into_owned();
        let log = self.log_path().to_string_lossy().into_owned();
        let mut all = vec!["-D", &data, "-l", &log, "-w", "-t", "60"];
        all.extend_from_slice(args);
        self.run("pg_ctl", &all)
    }

    /// A shell that waits for this process to end, then stops the server and removes
    /// its directory.
    fn start_watchdog(&self) -> Result<(), String> {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(
                "pid=$1; dir=$2; shift 2; \
                 while kill -0 \"$pid\" 2>/dev/null; do sleep 1; done; \
                 \"$@\" >/dev/null 2>&1; rm -rf \"$dir\"",
            )
            .arg("keel-pg-watchdog")
            .arg(std::process::id().to_string())
            .arg(self.dir.path());
        if self.as_postgres {
            c.args(["runuser", "-u", "postgres", "--"]);
        }
        c.arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "immediate", "stop"]);
        let child = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the watchdog: {e}"))?;
        *self.watchdog.lock().unwrap_or_else(|p| p.into_inner()) = Some(child);
        Ok(())
    }
}

fn append(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("{}: {e}", path.display()))
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self.stop();
        if let Some(mut w) = self
            .watchdog
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// Busy threads that keep the CPUs loaded while they live (races that show only under
/// load show here).
#[derive(Debug)]
pub struct CpuLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl CpuLoad {
    /// `n` spinning threads.
    pub fn start(n: usize) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
