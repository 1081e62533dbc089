//! `keel doctor`'s `store` check: which store is selected (`--store`, `KEEL_STORE`,
//! `store` in config.toml, else files under `KEEL_HOME`) and, for PostgreSQL, whether
//! it opens: the URL parses, the server answers, the password is right, the database
//! is Keel's and not newer than this binary. A store that does not open is a failure
//! (no session could be kept), with the fix.

use std::time::Duration;

use keel_config::{redact, Config, EnvMap, StoreSetting};

use crate::doctor_cmd::Check;

/// The `store` check.
pub(crate) async fn store_check(
    flag: Option<&str>,
    env: &EnvMap,
    config: &Config,
    limit: Duration,
) -> Check {
    let selected = match crate::store_select::selected(flag, env, config) {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(
                "store",
                e.message,
                "give a directory or postgres://USER:PASSWORD@HOST:5432/DATABASE",
            )
        }
    };
    let (url, source) = match selected {
        None => return Check::ok("store", "files under KEEL_HOME (the default)"),
        Some((StoreSetting::Dir(d), source)) => {
            return Check::ok("store", format!("files under {} ({source})", d.display()))
        }
        Some((StoreSetting::Postgres(url), source)) => (url, source),
    };
    let shown = redact(&url);
    let open = tokio::task::spawn_blocking(move || keel_store_pg::PgKernelStore::open(&url));
    // The store's own connect timeout bounds the wait; this one is a backstop.
    match tokio::time::timeout(limit + Duration::from_secs(10), open).await {
        Ok(Ok(Ok(store))) => {
            let m = store.pg().migrated();
            Check::ok(
                "store",
                format!(
                    "PostgreSQL {} ({source}): schema version {}",
                    store.pg().options().describe(),
                    m.to
                ),
            )
        }
        Ok(Ok(Err(e))) => Check::fail(
            "store",
            format!(
                "PostgreSQL {shown} ({source}) cannot be used: {}",
                e.message
            ),
            crate::store_select::fix_for(&e),
        ),
        Ok(Err(e)) => Check::fail("store", format!("opening {shown} failed: {e}"), "report it"),
        Err(_) => Check::fail(
            "store",
            format!("PostgreSQL {shown} ({source}) did not answer"),
            "start PostgreSQL, or fix the host and port of the store URL",
        ),
    }
}
