//! Connections: the pool (deadpool-postgres over tokio-postgres, no TLS), the first
//! connection at start-up with its errors told apart (wrong password, unreachable
//! host, missing database), and the retry of operations while the database is away.

use std::future::Future;
use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Runtime};
use keel_envelope::ErrorPayload;
use tokio_postgres::error::SqlState;
use tokio_postgres::NoTls;

use crate::error::{kind_of, store_error, StoreErrorKind};
use crate::options::PgOptions;

/// A pool for `options`; no connection is made yet.
pub(crate) fn pool(options: &PgOptions) -> Result<Pool, ErrorPayload> {
    let mut config = options.config().clone();
    config.connect_timeout(options.connect_timeout);
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(options.max_connections.max(1))
        .runtime(Runtime::Tokio1)
        // Start-up included: a server that accepts and never answers counts as
        // unreachable after the connect timeout.
        .create_timeout(Some(options.connect_timeout))
        .wait_timeout(Some(options.connect_timeout.saturating_mul(2)))
        .recycle_timeout(Some(options.connect_timeout))
        .build()
        .map_err(|e| {
            store_error(
                StoreErrorKind::Database,
                format!("cannot set up the connection pool: {e}"),
            )
        })
}

/// When an error happened: connecting at start-up (configuration errors are told
/// apart) or later (a lost connection is `unavailable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Connect,
    Operate,
}

/// A pool error, explained.
pub(crate) fn pool_error(e: PoolError, options: &PgOptions, phase: Phase) -> ErrorPayload {
    let place = options.describe();
    match e {
        PoolError::Backend(e) => db_error(&e, options, phase),
        PoolError::Timeout(_) => {
            let t = options.connect_timeout.as_secs_f64();
            match phase {
                Phase::Connect => store_error(
                    StoreErrorKind::Unreachable,
                    format!(
                        "PostgreSQL at {place} did not answer within {t} s: check that the server \
                         runs and that the host and port of the store URL are right (a firewall \
                         that drops packets looks like this too)"
                    ),
                ),
                Phase::Operate => store_error(
                    StoreErrorKind::Unavailable,
                    format!("no connection to PostgreSQL at {place} within {t} s"),
                ),
            }
            .with_detail("target", place)
        }
        other => store_error(
            StoreErrorKind::Database,
            format!("connection pool of {place}: {other}"),
        )
        .with_detail("target", place),
    }
}

/// A tokio-postgres error, explained.
pub(crate) fn db_error(
    e: &tokio_postgres::Error,
    options: &PgOptions,
    phase: Phase,
) -> ErrorPayload {
    let place = options.describe();
    let user = options.user();
    let db = options.dbname();
    let (kind, message) = if let Some(db_err) = e.as_db_error() {
        let code = db_err.code();
        let server = db_err.message();
        if *code == SqlState::INVALID_PASSWORD {
            (
                StoreErrorKind::AuthFailed,
                format!(
                    "PostgreSQL at {place} refused the password of user {user:?} ({server}): check \
                     the user and password in the store URL"
                ),
            )
        } else if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION {
            (
                StoreErrorKind::AuthFailed,
                format!(
                    "PostgreSQL at {place} refused user {user:?} ({server}): check the user in the \
                     store URL and the server's pg_hba.conf"
                ),
            )
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            (
                StoreErrorKind::DatabaseMissing,
                format!(
                    "database {db:?} does not exist on {place}: create it (createdb {db}, or CREATE \
                     DATABASE {db}) or name another one in the store URL"
                ),
            )
        } else if is_transient_state(code) {
            (
                StoreErrorKind::Unavailable,
                format!("PostgreSQL at {place} is not available ({server})"),
            )
        } else {
            (
                StoreErrorKind::Database,
                format!("PostgreSQL at {place}: {server} ({})", code.code()),
            )
        }
    } else if chain(e).contains("password missing") {
        (
            StoreErrorKind::AuthFailed,
            format!(
                "PostgreSQL at {place} asks user {user:?} for a password and the store URL has \
                 none: add it (postgres://USER:PASSWORD@HOST/DATABASE)"
            ),
        )
    } else if phase == Phase::Connect && (has_io_source(e) || e.is_closed()) {
        (
            StoreErrorKind::Unreachable,
            format!(
                "cannot reach PostgreSQL at {place} ({}): check that the server runs and that \
                 the host and port of the store URL are right",
                chain(e)
            ),
        )
    } else if has_io_source(e) || e.is_closed() {
        (
            StoreErrorKind::Unavailable,
            format!(
                "lost the connection to PostgreSQL at {place} ({})",
                chain(e)
            ),
        )
    } else {
        (
            StoreErrorKind::Database,
            format!("PostgreSQL at {place}: {}", chain(e)),
        )
    };
    store_error(kind, message).with_detail("target", place)
}

/// The server says it is going away or not ready yet: worth trying again.
fn is_transient_state(code: &SqlState) -> bool {
    code.code().starts_with("08")
        || *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
        || *code == SqlState::TOO_MANY_CONNECTIONS
}

fn has_io_source(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// An error and its causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        source = s.source();
    }
    out
}

/// Whether an operation that failed with `e` may succeed if tried again.
pub(crate) fn is_transient(e: &ErrorPayload) -> bool {
    matches!(
        kind_of(e),
        Some(StoreErrorKind::Unavailable | StoreErrorKind::Unreachable)
    )
}

/// Runs `op` until it succeeds, fails with an error that is not transient, or the
/// retry window is over (backing off from 20 ms to 500 ms between tries).
pub(crate) async fn retrying<T, F, Fut>(
    options: &PgOptions,
    what: &str,
    mut op: F,
) -> Result<T, ErrorPayload>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ErrorPayload>>,
{
    let deadline = Instant::now() + options.retry_window;
    let mut delay = Duration::from_millis(20);
    loop {
        match op().await {
            Err(e) if is_transient(&e) && Instant::now() + delay < deadline => {
                tracing::warn!(target: "keel_store_pg", what, error = %e.message, "retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_millis(500));
            }
            other => return other,
        }
    }
}
