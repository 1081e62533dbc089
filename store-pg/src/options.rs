//! [`PgOptions`]: a store URL (`postgres://USER:PASSWORD@HOST:PORT/DATABASE?…`, the
//! libpq URL form, query parameters as libpq's) and the store's own limits.

use std::str::FromStr;
use std::time::Duration;

use keel_envelope::ErrorPayload;
use tokio_postgres::config::{Host, SslMode};

use crate::error::{store_error, StoreErrorKind};

/// Default of [`PgOptions::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 16;
/// Default of [`PgOptions::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default of [`PgOptions::poll_interval`].
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Default of [`PgOptions::retry_window`].
pub const DEFAULT_RETRY_WINDOW: Duration = Duration::from_secs(3);
/// Where a URL without a host looks for the server's socket (libpq's default on
/// Debian).
pub const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";

/// The example a bad URL's message shows.
const EXAMPLE: &str = "postgres://USER:PASSWORD@HOST:5432/DATABASE \
                       (a Unix socket: postgres:///DATABASE?host=/var/run/postgresql)";

/// How to reach the database, and the store's limits.
#[derive(Clone)]
pub struct PgOptions {
    config: tokio_postgres::Config,
    /// Connections in the pool (at least 1).
    pub max_connections: usize,
    /// How long connecting may take, TCP and start-up together (the URL's
    /// `connect_timeout`, in seconds, when it has one).
    pub connect_timeout: Duration,
    /// How often a tail reads the log when no notification came (a notification lost
    /// while the listening connection was down costs at most this much latency).
    pub poll_interval: Duration,
    /// How long an operation is tried again when the database went away (a restart,
    /// a failover) before it fails with `unavailable`.
    pub retry_window: Duration,
}

impl std::fmt::Debug for PgOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgOptions")
            .field("url", &self.describe())
            .field("max_connections", &self.max_connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("poll_interval", &self.poll_interval)
            .field("retry_window", &self.retry_window)
            .finish()
    }
}

/// Whether `s` is a PostgreSQL store URL (`postgres://` or `postgresql://`), as
/// opposed to a directory for the file store.
pub fn is_postgres_url(s: &str) -> bool {
    let s = s.trim_start();
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

impl PgOptions {
    /// Parses a store URL; a malformed one is `invalid_url`, saying what a good one
    /// looks like.
    pub fn from_url(url: &str) -> Result<Self, ErrorPayload> {
        if !is_postgres_url(url) {
            return Err(store_error(
                StoreErrorKind::InvalidUrl,
                format!("a PostgreSQL store URL starts with postgres:// or postgresql://, e.g. {EXAMPLE}"),
            ));
        }
        let mut config = tokio_postgres::Config::from_str(url.trim()).map_err(|e| {
            store_error(
                StoreErrorKind::InvalidUrl,
                format!(
                    "the store URL is not a valid PostgreSQL URL ({e}); it looks like {EXAMPLE}"
                ),
            )
        })?;
        if config.get_ssl_mode() == SslMode::Require {
            return Err(store_error(
                StoreErrorKind::InvalidUrl,
                "the store URL asks for TLS (sslmode=require), which this build of Keel does not \
                 offer: reach the database over a Unix socket or a trusted network and drop \
                 sslmode or set it to disable (postgres://USER@HOST/DATABASE?sslmode=disable)",
            ));
        }
        if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
            config.host_path(DEFAULT_SOCKET_DIR);
        }
        if config.get_application_name().is_none() {
            config.application_name("keel");
        }
        let connect_timeout = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
        Ok(Self {
            config,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connect_timeout,
            poll_interval: DEFAULT_POLL_INTERVAL,
            retry_window: DEFAULT_RETRY_WINDOW,
        })
    }

    /// The parsed connection settings.
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The user, as the server will see it.
    pub fn user(&self) -> String {
        self.config.get_user().map_or_else(
            || std::env::var("USER").unwrap_or_else(|_| "(the system user)".into()),
            str::to_owned,
        )
    }

    /// The database, as the server will see it (the user's name when the URL names
    /// none).
    pub fn dbname(&self) -> String {
        self.config
            .get_dbname()
            .map_or_else(|| self.user(), str::to_owned)
    }

    /// The URL without its password, for messages and logs:
    /// `postgres://USER@HOST:PORT/DATABASE`.
    pub fn describe(&self) -> String {
        let ports = self.config.get_ports();
        let port_of = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| match h {
                Host::Tcp(name) => format!("{name}:{}", port_of(i)),
                Host::Unix(dir) => format!("{}:{}", dir.display(), port_of(i)),
            })
            .chain(
                self.config
                    .get_hostaddrs()
                    .iter()
                    .enumerate()
                    .map(|(i, a)| format!("{a}:{}", port_of(i))),
            )
            .collect();
        format!(
            "postgres://{}@{}/{}",
            self.user(),
            hosts.join(","),
            self.dbname()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_describe_without_the_password() {
        let o =
            PgOptions::from_url("postgres://keel:s3cret@db.example:6543/sessions").expect("parses");
        let d = o.describe();
        assert_eq!(d, "postgres://keel@db.example:6543/sessions");
        assert!(!format!("{o:?}").contains("s3cret"));
        let o = PgOptions::from_url("postgresql:///keel?host=/run/pg&port=7000&connect_timeout=2")
            .expect("parses");
        assert_eq!(o.connect_timeout, Duration::from_secs(2));
        assert!(
            o.describe().contains("/run/pg:7000/keel"),
            "{}",
            o.describe()
        );
        let o = PgOptions::from_url("postgres://u@/keel").expect("parses");
        assert!(
            o.describe().contains(DEFAULT_SOCKET_DIR),
            "{}",
            o.describe()
        );
    }

    #[test]
    fn malformed_urls_are_invalid_url_errors() {
        for bad in [
            "",
            "/var/lib/keel",
            "mysql://u@h/db",
            "postgres://u@h:notaport/db",
            "postgres://u@h/db?sslmode=sometimes",
            "postgres://u@h/db?sslmode=require",
            "postgres://u@h/db?connect_timeout=soon",
            "postgres://u@h:99999/db",
            "postgres://u@[::1/db",
        ] {
            let e = PgOptions::from_url(bad).err();
            let kind = e.as_ref().and_then(crate::error::kind_of);
            assert_eq!(kind, Some(StoreErrorKind::InvalidUrl), "{bad:?}: {e:?}");
            let message = e.map(|e| e.message).unwrap_or_default();
            assert!(message.contains("postgres://"), "{message}");
        }
        assert!(is_postgres_url("postgres://x"));
        assert!(is_postgres_url("postgresql://x"));
        assert!(!is_postgres_url("./sessions"));
    }
}
