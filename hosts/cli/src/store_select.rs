//! Which store a command uses: `--store`, else `KEEL_STORE`, else `store` in
//! `$KEEL_HOME/config.toml`, else files under `KEEL_HOME`; and opening a PostgreSQL
//! store with a message that says what is wrong and how to fix it.

use std::sync::Arc;

use keel_config::{parse_store, Config, EnvMap, StoreSetting};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_kernel::store::Store;

/// The selected store and where the selection came from (`--store`, `KEEL_STORE`,
/// `config.toml`); `None`: the default, files under `KEEL_HOME`.
pub fn selected(
    flag: Option<&str>,
    env: &EnvMap,
    config: &Config,
) -> Result<Option<(StoreSetting, &'static str)>, ErrorPayload> {
    let bad = |source: &str, why: String| {
        ErrorPayload::new(
            ErrorCode::RequestInvalid,
            format!("{source}: the store {why}"),
        )
        .with_detail("field", source.to_owned())
    };
    if let Some(f) = flag {
        return parse_store(f)
            .map(|s| Some((s, "--store")))
            .map_err(|why| bad("--store", why));
    }
    if let Some(v) = env.get("KEEL_STORE").filter(|v| !v.trim().is_empty()) {
        return parse_store(v)
            .map(|s| Some((s, "KEEL_STORE")))
            .map_err(|why| bad("KEEL_STORE", why));
    }
    Ok(config.store.clone().map(|s| (s, "config.toml")))
}

/// What to do about a store that could not be opened, by its `details.reason`.
pub fn fix_for(e: &ErrorPayload) -> &'static str {
    match e.details.get("reason").and_then(|r| r.as_str()) {
        Some("invalid_url") => "write the URL as postgres://USER:PASSWORD@HOST:5432/DATABASE (a Unix socket: postgres:///DATABASE?host=/var/run/postgresql) in --store, KEEL_STORE or `store` in $KEEL_HOME/config.toml",
        Some("auth_failed") => "check the user and password of the store URL (and the server's pg_hba.conf)",
        Some("unreachable") => "start PostgreSQL, or fix the host and port of the store URL",
        Some("database_missing") => "create the database (createdb NAME), or name an existing one in the store URL",
        Some("foreign_database") => "give Keel a database of its own (createdb keel): this one holds tables that are not Keel's",
        Some("database_newer") => "upgrade this keel binary: the database was migrated by a newer one",
        _ => "check the store setting (--store, KEEL_STORE or `store` in $KEEL_HOME/config.toml) and that the database can be reached",
    }
}

/// Opens a PostgreSQL store (waits for the connection and the migrations).
pub fn open_postgres(url: &str) -> Result<Arc<dyn Store>, ErrorPayload> {
    match keel_store_pg::PgKernelStore::open(url) {
        Ok(s) => {
            tracing::info!(store = %s.pg().options().describe(), "PostgreSQL store opened");
            Ok(Arc::new(s))
        }
        Err(mut e) => {
            let fix = fix_for(&e);
            e.message = format!("cannot open the session store: {} ({fix})", e.message);
            Err(e)
        }
    }
}
